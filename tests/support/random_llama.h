// write_random_llama_gguf: a random llama model with a working SPM vocabulary
// (or a given byte-level BPE one and a chat template) that the whole daemon
// can run on, written with gguf_writer.h; the synthetic 1B-shaped files of
// bench/make_synthetic come from here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/gguf_writer.h"

namespace larder::testing {

// How write_random_llama_gguf picks each matrix's storage type
// (random_llama_matrix_type has the rule).
enum class WeightMix {
  kUniform,  // every matrix weight_type, as `llama-quantize --pure`
  kQ4_K_M,   // llama.cpp's Q4_K_M (LLAMA_FTYPE_MOSTLY_Q4_K_M); weight_type unused
  kQ5_K_M,   // llama.cpp's Q5_K_M; weight_type unused
};

// A byte-level BPE vocabulary (tokenizer.ggml.model "gpt2") for
// write_random_llama_gguf, written with the keys llama.cpp's
// convert_hf_to_gguf.py writes. tests/support/chat_models.h builds real ones
// (Llama 3.2, Qwen 2.5 ids) from the tokenizer fixtures.
struct BpeVocabSpec {
  std::string pre;                  // tokenizer.ggml.pre: "llama-bpe", "qwen2", ...
  std::vector<std::string> tokens;  // byte-level token texts, one per id (n_vocab of them)
  std::vector<int32_t> types;       // llama.cpp token types: 1 normal, 3 control, 4 user-defined, 5 unused
  std::vector<std::string> merges;  // "left right", by rank
  int32_t bos_id = -1;              // each < 0: the key is not written
  int32_t eos_id = -1;
  int32_t eot_id = -1;
  int32_t padding_id = -1;
  bool add_bos = false;             // tokenizer.ggml.add_bos_token
};

// A random model of the llama family. Matrices are stored as
// random_llama_matrix_type says (weight_type, or a llama.cpp mix); norms,
// biases and rope factors are F32.
struct RandomLlamaSpec {
  int n_vocab = 512;      // >= 259 (3 specials + 256 byte tokens)
  int n_embd = 64;
  int n_layer = 2;
  int n_head = 4;
  int n_head_kv = 2;
  int n_ff = 128;
  int n_ctx = 512;
  GgmlType weight_type = GgmlType::kF32;  // any type encode_row takes
  WeightMix mix = WeightMix::kUniform;
  uint64_t seed = 42;
  bool tied_output = true;  // false: writes a separate output.weight

  // Family options; the defaults write the plain llama file described below.
  std::string architecture = "llama";  // also the metadata prefix ("qwen2.*")
  int head_dim = 0;            // 0: n_embd / n_head; else also writes key_length/value_length
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  float weight_stddev = 0.02f; // of every matrix
  bool qkv_bias = false;       // blk.N.attn_{q,k,v}.bias, F32 ~ N(0, bias_stddev^2) (qwen2)
  float bias_stddev = 0.5f;
  bool qk_norm = false;        // blk.N.attn_{q,k}_norm.weight [head_dim], F32 ~ 1 + N(0, 0.2^2) (qwen3)
  std::vector<float> rope_freq_factors;  // non-empty: rope_freqs.weight [head_dim / 2] (Llama 3)
  std::string rope_scaling_type;         // non-empty: <arch>.rope.scaling.type
  float rope_scaling_factor = 0.0f;      // > 0: <arch>.rope.scaling.factor

  // Vocabulary and chat template. A BPE vocabulary needs bpe->tokens.size()
  // == n_vocab; the rows of token_embd and output.weight for its ids of type
  // unused (5) are zero, as untrained rows of real models are near zero, so
  // a greedy random model picks real tokens.
  std::optional<BpeVocabSpec> bpe;     // nullopt: the synthetic SPM vocabulary
  std::string chat_template;           // non-empty: tokenizer.chat_template
  // Rows of token_embd and output.weight (token ids) multiplied by a factor
  // after drawing (every other value stays as drawn): e.g. a larger
  // end-of-turn output row makes a short greedy run of a random model end
  // its turn.
  std::vector<std::pair<int32_t, float>> embd_row_scales;
};

// The storage type of matrix `name` ("token_embd.weight", "output.weight",
// "blk.N.attn_v.weight", ...; `layer` N, -1 outside the blocks) with rows of
// ne0 values in a model written from `spec`. Mirrors llama.cpp's
// llama_tensor_get_type (src/llama-quant.cpp):
//   kUniform: weight_type (llama-quantize --pure).
//   kQ4_K_M / kQ5_K_M: Q4_K / Q5_K, except
//     output.weight (token_embd.weight when the output is tied): Q6_K (Q8_0
//       when ne0 is not a multiple of 256);
//     attn_v and ffn_down of layer i: Q6_K where use_more_bits(i, n_layer):
//       i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2  (integer division), e.g.
//       layers 0 1 4 7 10 13 14 15 of 16, layer 1 of 2.
// Then rows that do not fill whole blocks fall back as llama.cpp does: Q4_K ->
// Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL, Q2_K / Q3_K -> Q4_0
// (llama.cpp uses IQ4_NL there: the test models that predate larder's IQ4_NL
// keep Q4_0); anything still not fitting -> F16 (llama.cpp
// refuses such legacy-type tensors; the writer always stored them as F16).
GgmlType random_llama_matrix_type(const RandomLlamaSpec& spec, const std::string& name, int layer,
                                  int64_t ne0);

// Llama 3 RoPE frequency factors ("rope_type": "llama3" in HF config.json),
// one per rotated pair i in [0, n_rot/2), from Meta's published rule: with
// freq = base^(-2i/n_rot) and wavelen = 2 pi / freq, the factor is 1 where
// wavelen < original_context / high_freq_factor, `factor` where wavelen >
// original_context / low_freq_factor, and in between 1 / ((1 - t) / factor + t)
// with t = (original_context / wavelen - low_freq_factor) / (high_freq_factor -
// low_freq_factor). (llama.cpp's converter stores these as rope_freqs.weight.)
std::vector<float> llama3_rope_freq_factors(int n_rot, float freq_base, float factor,
                                            float low_freq_factor, float high_freq_factor,
                                            int original_context);

// Writes a GGUF with the spec's hparams (<arch>.* keys, rms eps and rope base
// from the spec, rope dims = head dim), weights ~ N(0, stddev^2) (approximated
// by a scaled sum of four uniforms; deterministic in seed), and an SPM
// vocabulary: <unk>, <s>, </s>, byte tokens <0x00>..<0xFF> (type 6), "▁",
// printable ASCII, then "▁"-prefixed and plain lowercase words up to n_vocab;
// scores 0 for the first 259 ids and -(id-259) after; bos 1, eos 2, unk 0,
// add_bos_token true; or spec.bpe's vocabulary (see RandomLlamaSpec), and
// spec.chat_template. general.file_type is llama.cpp's llama_ftype of the
// mix (uniform Q3_K / Q4_K / Q5_K as the _S files: 11, 14, 16). Streams
// tensors: a Llama-3.2-1B shape in Q8_0 takes seconds. Errors:
// kInvalidArgument (bad spec), kIOError.
Status write_random_llama_gguf(const std::string& path, const RandomLlamaSpec& spec);

}  // namespace larder::testing
