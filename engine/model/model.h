// The llama-architecture model as larder computes it: hyperparameters read
// from GGUF metadata and weight tensors used in place from the GGUF mapping.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "storage/status.h"

namespace larder {

// Architectures: "llama" (also Llama 3 with rope_freqs.weight frequency
// factors, and Mistral-style models, which are "llama" in GGUF), "qwen2"
// (Q/K/V biases, NEOX rope) and "qwen3" (per-head RMSNorm of Q and K before
// RoPE, NEOX rope, head_dim from key_length). Key names are "<arch>.*", as in
// llama.cpp's llama-arch.cpp LLM_KV_*.
struct LlamaHparams {
  std::string architecture;    // "llama", "qwen2" or "qwen3"
  std::string name;            // general.name (may be empty)
  int n_vocab = 0;
  int n_ctx_train = 0;         // <arch>.context_length
  int n_embd = 0;              // <arch>.embedding_length
  int n_layer = 0;             // <arch>.block_count
  int n_head = 0;              // <arch>.attention.head_count
  int n_head_kv = 0;           // <arch>.attention.head_count_kv (default n_head)
  int head_dim = 0;            // n_embd / n_head (<arch>.attention.key_length if present)
  int n_ff = 0;                // <arch>.feed_forward_length
  int n_rot = 0;               // <arch>.rope.dimension_count (default head_dim)
  float rms_eps = 1e-5f;       // <arch>.attention.layer_norm_rms_epsilon
  float rope_freq_base = 10000.0f;  // <arch>.rope.freq_base
  // Linear RoPE scaling: theta is multiplied by this (1 / <arch>.rope.scaling.factor,
  // or the older <arch>.rope.scale_linear), as llama.cpp's rope_freq_scale.
  // <arch>.rope.scaling.type must be absent, "none" or "linear" (yarn and
  // longrope are refused by name).
  float rope_freq_scale = 1.0f;
  bool rope_neox = false;      // false: rotate adjacent pairs (x[2i], x[2i+1]) as
                               // llama.cpp LLAMA_ROPE_TYPE_NORM; true: NEOX halves
  // Optional parts, set from the tensors the file has (required ones per
  // architecture: qwen2 the Q/K/V biases, qwen3 the Q/K norms).
  bool has_qkv_bias = false;       // blk.N.attn_{q,k,v}.bias: added after the projections
  bool has_out_bias = false;       // blk.N.attn_output.bias: added after Wo
  bool has_qk_norm = false;        // blk.N.attn_{q,k}_norm.weight: per-head RMSNorm before RoPE
  bool has_rope_freq_factors = false;  // rope_freqs.weight: theta_i /= factor[i] (Llama 3)
  int kv_dim() const { return n_head_kv * head_dim; }
  int q_dim() const { return n_head * head_dim; }
};

// A view of one weight tensor inside the mapping. For a matrix,
// ne[0] = input features (row length, contiguous) and ne[1] = output rows,
// so y = W x computes y[r] = dot(row r, x).
struct WeightView {
  GgmlType type = GgmlType::kF32;
  int64_t ne[2] = {0, 0};
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;        // ggml_row_size(type, ne[0])
  const uint8_t* row(int64_t r) const { return data + size_t(r) * row_bytes; }
};

struct LayerWeights {
  WeightView attn_norm;   // [n_embd] f32
  WeightView wq;          // [n_embd, q_dim]
  WeightView wk;          // [n_embd, kv_dim]
  WeightView wv;          // [n_embd, kv_dim]
  WeightView wo;          // [q_dim, n_embd]
  WeightView ffn_norm;    // [n_embd] f32
  WeightView ffn_gate;    // [n_embd, n_ff]
  WeightView ffn_up;      // [n_embd, n_ff]
  WeightView ffn_down;    // [n_ff, n_embd]
  // Optional (data == nullptr when absent), all F32 vectors:
  WeightView bq, bk, bv;  // [q_dim], [kv_dim], [kv_dim]  (qwen2; llama optional)
  WeightView bo;          // [n_embd]
  WeightView attn_q_norm; // [head_dim] (qwen3), shared by all heads
  WeightView attn_k_norm; // [head_dim]
};

class Model {
 public:
  // Opens and validates a GGUF of a supported architecture (llama, qwen2,
  // qwen3; any other is refused by name: Status::unsupported("... 'gemma2' ...")),
  // every required tensor present with the expected shape and a supported
  // type, norm vectors F32. The output head is `output.weight` or, when absent,
  // tied to `token_embd.weight`. kSkip leaves fingerprint() zero and reads
  // no weights (but rope_freqs.weight): for checking a file without
  // serving it (a config reload); never serve or cache with such a model.
  enum class Fingerprint { kCompute, kSkip };
  static Result<std::unique_ptr<Model>> load(const std::string& path, Fingerprint fingerprint = Fingerprint::kCompute);

  const LlamaHparams& hparams() const { return hp_; }
  const GgufFile& gguf() const { return *gguf_; }
  const WeightView& token_embd() const { return token_embd_; }   // [n_embd, n_vocab]
  const WeightView& output_norm() const { return output_norm_; } // [n_embd] f32
  const WeightView& output() const { return output_; }           // [n_embd, n_vocab]
  const std::vector<LayerWeights>& layers() const { return layers_; }
  // rope_freqs.weight: [n_rot / 2] f32 frequency factors; data == nullptr
  // when the file has none. llama.cpp ggml_rope_ext: theta_i / factor[i].
  const WeightView& rope_freq_factors() const { return rope_freqs_; }

  // XXH3-128 over everything that changes K/V or logits: architecture,
  // hparams (the newer ones only where they differ from their defaults, so a
  // plain llama file keeps the fingerprint it had), and the bytes of every
  // tensor (type + shape + data: biases, Q/K norms, rope factors included).
  const std::array<uint8_t, 16>& fingerprint() const { return fingerprint_; }

 private:
  Model() = default;
  std::unique_ptr<GgufFile> gguf_;
  LlamaHparams hp_;
  WeightView token_embd_, output_norm_, output_, rope_freqs_;
  std::vector<LayerWeights> layers_;
  std::array<uint8_t, 16> fingerprint_{};
};

}  // namespace larder
