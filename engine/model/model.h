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

struct LlamaHparams {
  std::string architecture;    // "llama"
  std::string name;            // general.name (may be empty)
  int n_vocab = 0;
  int n_ctx_train = 0;         // llama.context_length
  int n_embd = 0;              // llama.embedding_length
  int n_layer = 0;             // llama.block_count
  int n_head = 0;              // llama.attention.head_count
  int n_head_kv = 0;           // llama.attention.head_count_kv (default n_head)
  int head_dim = 0;            // n_embd / n_head (llama.attention.key_length if present)
  int n_ff = 0;                // llama.feed_forward_length
  int n_rot = 0;               // llama.rope.dimension_count (default head_dim)
  float rms_eps = 1e-5f;       // llama.attention.layer_norm_rms_epsilon
  float rope_freq_base = 10000.0f;  // llama.rope.freq_base
  bool rope_neox = false;      // false: rotate adjacent pairs (x[2i], x[2i+1]) as
                               // llama.cpp LLAMA_ROPE_TYPE_NORM; true: NEOX halves
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
};

class Model {
 public:
  // Opens and validates a llama-architecture GGUF: architecture name (other
  // architectures are refused by name: Status::unsupported("... 'qwen2' ...")),
  // every required tensor present with the expected shape and a supported
  // type, norm vectors F32. The output head is `output.weight` or, when absent,
  // tied to `token_embd.weight`.
  static Result<std::unique_ptr<Model>> load(const std::string& path);

  const LlamaHparams& hparams() const { return hp_; }
  const GgufFile& gguf() const { return *gguf_; }
  const WeightView& token_embd() const { return token_embd_; }   // [n_embd, n_vocab]
  const WeightView& output_norm() const { return output_norm_; } // [n_embd] f32
  const WeightView& output() const { return output_; }           // [n_embd, n_vocab]
  const std::vector<LayerWeights>& layers() const { return layers_; }

  // XXH3-128 over everything that changes K/V or logits: architecture,
  // hparams, and the bytes of every tensor (type + shape + data). 16 bytes.
  const std::array<uint8_t, 16>& fingerprint() const { return fingerprint_; }

 private:
  Model() = default;
  std::unique_ptr<GgufFile> gguf_;
  LlamaHparams hp_;
  WeightView token_embd_, output_norm_, output_;
  std::vector<LayerWeights> layers_;
  std::array<uint8_t, 16> fingerprint_{};
};

}  // namespace larder
