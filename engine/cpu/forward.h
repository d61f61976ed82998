// CPU forward pass of the llama architecture over the paged KV cache.
//
// One call runs a batch of tokens through the model, llama_batch style: each
// token has its sequence and position; tokens of one sequence appear in
// increasing position order. For every token the K and V it produces are
// written into its sequence's page (block_table[pos / page_size], slot
// pos % page_size) before attention; attention for a token at `pos` reads
// positions 0..pos of its sequence from the pages, in the pages' stored
// dtype (DESIGN.md "Correctness contract": a prefill never attends over
// unrounded K/V that a restore would not have).
//
// Determinism: the logits row of a token depends only on the token, its
// position and the K/V in its sequence's pages, never on which other tokens
// share the batch or how a prefill was split (so a prompt whose first pages
// were restored gives bit-identical logits to a cold prefill).
//
// Math (llama2.c run.c, llama.cpp llm_build_llama):
//   x = token_embd[token]
//   per layer: h = x + Wo * attn(rope(Wq * rmsnorm(x)), rope(Wk * rmsnorm(x)), Wv * rmsnorm(x))
//              x = h + Wdown * (silu(Wgate * rmsnorm(h)) * (Wup * rmsnorm(h)))
//   logits = Woutput * rmsnorm(x)
//   rmsnorm(x) = x / sqrt(mean(x^2) + eps) * weight
//   rope: theta_i = pos * base^(-2i/n_rot); adjacent pairs (x[2i], x[2i+1])
//         or NEOX halves (x[i], x[i + n_rot/2]).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/kv/page_pool.h"
#include "engine/model/model.h"
#include "storage/status.h"

namespace larder {

struct BatchToken {
  int32_t token = 0;
  int32_t pos = 0;        // position in its sequence, 0-based
  int32_t seq = 0;        // index into the `seqs` span of forward()
  bool want_logits = false;
};

// A sequence's block table: page ids in position order. Must cover every
// position of the batch's tokens for this sequence.
struct SeqBlockTable {
  std::span<const int32_t> pages;
};

// The CPU arithmetic's identity for the cache's root hash
// (Backend::numerics_id): "cpu-<version>-<isa>", isa "avx512vnni", "avx512", "avx2"
// or "scalar" (the build's kernels; their sums differ in the last bits). The version is
// kCpuArithmeticVersion in forward.cpp: bump it with every change to a
// kernel's arithmetic (not to its speed alone), so that pages written by
// older builds are recomputed rather than restored.
std::string cpu_numerics_id();

struct CpuForwardOptions {
  int n_threads = 0;       // 0: all cores
  // A token_embd of at most this many bytes is copied out of the file
  // mapping at load; a larger one is read a row at a time with pread (see
  // CpuForward::Impl::own_weights). Tests set 0 to take the read path.
  size_t embd_copy_bytes = size_t(64) << 20;
  // A reference pass for the start-up check of another backend
  // (engine/backend_check.h), not for serving: the weights are neither
  // repacked nor copied but read in place from the file mapping (its pages
  // are faulted in as page cache, nothing is allocated for them), and every
  // product dequantizes a few weight rows at a time to f32 and runs the f32
  // kernels on them, on every build. kF32: on the f32 activations; kInt8:
  // on the activations rounded as this build's serving kernels quantize them
  // (Q8_0 blocks of 32 for Q8_0 weights, Q8_K blocks of 256 for the K-quants
  // the integer kernels take; as they are elsewhere), so that the two
  // differ by the serving arithmetic's activation rounding alone. Its bits
  // are not the ones cpu_numerics_id() names: never let it write pages the
  // cache keeps.
  enum class Reference { kNone, kF32, kInt8 };
  Reference reference = Reference::kNone;
};

class CpuForward {
 public:
  // The pool's layout must match the model (n_layer, kv_dim).
  static Result<std::unique_ptr<CpuForward>> create(const Model& model, PagePool& pool,
                                                    const CpuForwardOptions& options);
  ~CpuForward();

  // Runs the batch. logits_out: [n_want][n_vocab] f32, rows in batch order of
  // the tokens with want_logits. `prefill` selects the GEMM path (true) or the
  // one-token-per-sequence decode path (false); both give the same tokens,
  // and logits equal to float tolerance.
  // Errors: kInvalidArgument (token id out of range, pos beyond the block
  // table, bad seq index).
  Status forward(std::span<const BatchToken> batch, std::span<const SeqBlockTable> seqs,
                 bool prefill, float* logits_out);

  int n_threads() const;
  // True when token_embd rows are read from the file at each use (larger
  // than CpuForwardOptions::embd_copy_bytes, and not shared with an output
  // matrix that was copied); false when the embedding was copied at load.
  bool reads_embedding_rows() const;
  // Layer attentions so far that a decode step split by chunks of positions
  // over the threads (attention.h, kAttentionChunk); for tests.
  int64_t split_attention_calls() const;

 private:
  CpuForward() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace larder
