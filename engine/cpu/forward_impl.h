// CpuForward's state (forward.cpp: the forward pass, forward_attention.cpp:
// its attention over the threads). Private to engine/cpu.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/cpu/cache_line_vector.h"
#include "engine/cpu/forward.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/matmul_packed.h"
#include "engine/cpu/thread_pool.h"

namespace larder {

// Below this many multiply-adds the attention of a batch runs on the calling
// thread (as matmul_parallel does for a matmul).
inline constexpr int64_t kParallelMinMacs = kMatmulParallelMinMacs;

// Grows v to at least n elements (never shrinks it).
template <class Vec>
inline void grow(Vec& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

struct CpuForward::Impl {
  Impl(const Model& m, PagePool& p, int n_threads)
      : model(m), pool(p), hp(m.hparams()), threads(n_threads) {}

  const Model& model;
  PagePool& pool;
  const LlamaHparams& hp;
  ThreadPool threads;
  Q8Path q8_path = default_q8_path();
  // A reference pass (CpuForwardOptions::reference): reference_matmul.
  CpuForwardOptions::Reference reference = CpuForwardOptions::Reference::kNone;
  std::vector<float> ref_x;                     // (n, K) the activations rounded (kInt8)
  std::vector<std::vector<float>> ref_rows;     // per thread: kRefRows weight rows in f32

  // Scratch, grown on demand to the largest batch seen (n = tokens in batch).
  CacheLineVector<float> x;      // (n, n_embd) residual stream
  CacheLineVector<float> xb;     // (n, n_embd) rmsnorm output, matmul input
  CacheLineVector<float> xb2;    // (n, n_embd) matmul output before the residual add
  CacheLineVector<float> q;      // (n, q_dim)
  CacheLineVector<float> k;      // (n, kv_dim)
  CacheLineVector<float> v;      // (n, kv_dim)
  CacheLineVector<float> att;    // (n, q_dim) attention output
  CacheLineVector<float> hb;     // (n, n_ff) gate, then silu(gate) * up
  CacheLineVector<float> hb2;    // (n, n_ff) up
  std::vector<float> rope_cos;   // (n, n_rot / 2)
  std::vector<float> rope_sin;   // (n, n_rot / 2)
  MatmulInput act;               // the current matmul's activations, prepared once
  MatmulInput act2;              // a fused job's second kind of activations (matmuls)
  // Q8_0, Q4_0 .. Q5_1, IQ4_NL, IQ4_XS, Q2_K .. Q6_K and F16 matrices repacked (matmul_packed.h), by
  // their data pointer in the model; empty when the build has no such kernels.
  std::unordered_map<const uint8_t*, PackedMatrix> packed;
  // The weights the forward pass reads, as the model's views but with every
  // tensor that is not repacked copied out of the file mapping (create()):
  // once loaded, nothing reads the mapping, so a model file truncated or
  // rewritten in place while serving cannot fault the process (SIGBUS).
  // A packed matrix keeps the mapping's address, the key of `packed`. A
  // token_embd over CpuForwardOptions::embd_copy_bytes is not copied: its
  // rows are read with pread (GgufFile::read_at) into embd_row, and a file
  // that shrank fails the forward call with an error. (A tied output
  // matrix that is not packed and the embedding share one copy.)
  WeightView token_embd, output_norm, output, rope_freqs;
  std::vector<LayerWeights> layers;
  bool embd_by_read = false;
  std::vector<uint8_t> embd_row;
  struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<void, FreeDeleter>> owned;  // the copies
  CacheLineVector<float> scores; // (n_threads, attention_scratch_floats)
  size_t scores_stride = 0;
  struct Tile { int first, n; };  // batch[first, first + n): one sequence, consecutive positions
  std::vector<Tile> tiles;
  std::vector<int> want;         // batch indices of the tokens with want_logits
  // A split decode step's attention (attention_split): per item (tile, run
  // of whole kv heads, chunk of positions) its first partial state's offset
  // in `partials`, and the states themselves.
  struct SplitItem { int tile, h0, h1, chunk; size_t at; };
  std::vector<SplitItem> split_items;
  std::vector<float> partials;
  int64_t split_calls = 0;       // attention_split calls that split (CpuForward::split_attention_calls)

  // y[t][r] = W x[t] for all rows of W, t in [0, n): y is (n, rows).
  void matmul(const WeightView& w, const float* in, int n, float* y);
  // The activations w's packed kernel reads: `in` itself for F16 (those
  // kernels take the f32 rows), else `into` prepared for w's type.
  const void* packed_input(const WeightView& w, MatmulInput& into, const float* in, int n) const;
  // y_i = W_i in for products that share their input (a layer's q, k and v;
  // gate and up), each as matmul() computes it: one fused parallel job
  // (matmul_packed.h) when every W_i is packed, with one row length, and
  // they need at most two kinds of prepared activations (Q4_K_M files mix
  // Q4_K and Q6_K); else one matmul() each.
  struct Product {
    const WeightView* w;
    float* y;
  };
  void matmuls(std::initializer_list<Product> products, const float* in, int n);
  void attention(std::span<const BatchToken> batch, std::span<const SeqBlockTable> seqs,
                 int layer);
  // A decode step's attention split by chunks of positions over the threads,
  // when that applies (returns false, having done nothing, where not). macs:
  // the step's attention multiply-adds.
  bool attention_split(std::span<const BatchToken> batch, std::span<const SeqBlockTable> seqs, int layer,
                       int64_t macs);
  Status validate(std::span<const BatchToken> batch, std::span<const SeqBlockTable> seqs) const;
  // Fills token_embd .. layers from the model, copying what is not packed
  // out of the mapping (after the packing). kResourceExhausted when a copy
  // cannot be allocated.
  // Embeddings up to embd_copy_bytes are copied; larger ones (128k-token
  // vocabularies: 280 MB for the 1B-shaped Q8_0 file) are read a row at a
  // time, a pread of a few KB per token instead of their bytes in memory.
  Status own_weights(size_t embd_copy_bytes);
  // Fills token_embd .. layers with the model's views of the mapping, as
  // they are (a reference pass).
  void weights_in_place();
  // y = w . in for a reference pass (CpuForwardOptions::reference).
  void reference_matmul(const WeightView& w, const float* in, int n, float* y);
  // Token `token`'s embedding row, dequantized into out [n_embd].
  Status embed(int32_t token, float* out);
};

}  // namespace larder
