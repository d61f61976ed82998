// Attention over the paged KV cache (engine/kv/page_pool.h layout): writing a
// token's K/V into its page, and causal grouped-query attention of one token
// over positions 0..pos of its sequence, reading K/V in the page dtype.
//
// Math (llama2.c run.c, "Attention Is All You Need" eq. 1, GQA: Ainslie et
// al. 2023): for query head h, kv head g = h / (n_head / n_head_kv),
//   s_p = dot(q_h, k_{p,g}) / sqrt(head_dim)   p in [0, pos]
//   out_h = sum_p softmax(s)_p * v_{p,g}
// The summation order is fixed (p increasing), so a token's output depends
// only on its own q and the pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/kv/page_pool.h"

namespace larder {

struct AttentionShape {
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int kv_dim() const { return n_head_kv * head_dim; }
};

// Stores k and v ([kv_dim] f32 each) of position `pos` into
// pages[pos / page_size], slot pos % page_size, of `layer`, converting to the
// pool's dtype (F16: round to nearest even). pages must cover pos.
void kv_write(PagePool& pool, int layer, std::span<const int32_t> pages, int pos,
              const float* k, const float* v);

// Query heads attended in one pass over their kv head's K/V.
constexpr int kAttentionGroupHeads = 4;
// Tokens of one sequence attended in one pass over K/V (a prefill tile). A
// tile's scores (tokens x kAttentionGroupHeads rows of ~pos floats) leave L2
// past a few thousand positions, but reading K/V once per 16 tokens still
// wins: at 16k positions 16-token tiles prefilled 31 tok/s against 26.5 for
// tiles cut to 4 tokens to keep the scores within 1 MiB (1B-shaped Q8_0, 2
// threads, docs/cpu-kernels.md).
constexpr int kAttentionTileTokens = 16;
// Query heads attend_tokens takes in one pass for a single token (a decode
// step) when they are whole kv heads.
constexpr int kAttentionDecodeHeads = kAttentionGroupHeads * kAttentionTileTokens;

// Floats of scratch attend_tokens needs at positions up to max_pos: the V
// sums of kAttentionDecodeHeads rows of up to 256 head dims, twice (the
// current chunk's and the folded earlier chunks', kAttentionChunk below;
// rows: a tile of kAttentionTileTokens tokens x kAttentionGroupHeads heads,
// or one token's whole kv heads), or the one-token fallback's row of
// max_pos + 1 scores (whole pages), whichever is more, whatever n_tokens is.
size_t attention_scratch_floats(int max_pos, int page_size, int n_tokens);

// Attention of n_tokens consecutive tokens of one sequence, at positions
// pos0 .. pos0 + n_tokens - 1 (their K/V already written), for query heads
// [head_begin, head_end). q: [n_tokens][n_head][head_dim] (after RoPE); out:
// the same shape, only the given heads written. scratch:
// attention_scratch_floats(pos0 + n_tokens - 1, page_size, n_tokens) floats.
// With AVX-512 and head_dim a multiple of 16 (at most 256) the query heads of
// one kv head and up to kAttentionTileTokens tokens share a pass over its K/V,
// 16 positions at a time, each 16-position block widened from the page dtype
// once for all of them; this reads K/V once per tile instead of once per
// token, which is what prefill at a long context is bound by. Every (token,
// head) keeps its own fixed arithmetic, so the result has the same bits
// whatever n_tokens, the head range or the thread. AVX2 builds do the same at
// 8 lanes for head_dim a multiple of 8 (attention_avx2.cpp), and so do
// AVX-512 builds for the multiples of 8 that are not of 16 (the same
// intrinsics); other heads take one token at a time.
void attend_tokens(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos0, int n_tokens,
                   const AttentionShape& shape, const float* q, float* out, float* scratch, int head_begin,
                   int head_end);

// Positions per chunk of the vector passes (the 16-position pass of AVX-512
// builds, head_dim a multiple of 16 up to 256, of 32 over Q8_0 pages; the
// 8-position pass of AVX2 builds and of AVX-512 builds' other multiples of
// 8): each (token, head) row runs its online softmax afresh over positions
// [c * kAttentionChunk, (c + 1) * kAttentionChunk) of each chunk c it
// reaches, and the chunks' states (max, sums, V sums) are folded in chunk
// order, the smaller max's state scaled by exp(its max - the larger). A row
// within the first chunk (positions below kAttentionChunk) keeps the
// arithmetic of one pass. The fold is what lets a decode step give a long
// context's chunks to different threads and merge them after (split-K
// attention, "Flash-Decoding": Dao, Haziza, Massa and Sizov 2023) with the
// bits one pass gives: each thread then streams K/V rows of its own pages
// (whole rows in the 16-position pass, which takes several kv heads at once)
// instead of every thread a slice of every row, and more threads than kv
// heads find work (docs/cpu-kernels.md). Which chunks a row folds goes by
// its position alone, whatever its scores, so non-finite K/V fold alike in
// both. A multiple of every page size CpuForward takes (a power of two up to
// 1024; it rejects longer pages).
constexpr int kAttentionChunk = 1024;

// Chunks a token at position pos reaches.
inline int attention_chunks(int pos) { return pos / kAttentionChunk + 1; }

// True when attend_token_chunk / attend_token_merge take this shape over
// pages of dtype: a vector pass (16- or 8-position) takes the head size, and
// a kv group has at most kAttentionDecodeHeads query heads.
bool attention_splits(const AttentionShape& shape, KvDtype dtype);

// Floats of one chunk's partial state of n_heads query heads: per head 32
// (its max and up to 16 lanes of sums) + head_dim (its V sums).
size_t attention_partial_floats(const AttentionShape& shape, int n_heads);

// The token at pos, query heads [head_begin, head_end) (whole kv heads, at
// most kAttentionDecodeHeads), over chunk `chunk` (< attention_chunks(pos))
// of its positions only: writes their states, unnormalized, to partial
// (attention_partial_floats(shape, head_end - head_begin) floats). q: the
// token's [n_head][head_dim]. scratch: attention_scratch_floats(pos, ...).
// Requires attention_splits(shape, the pool's dtype).
void attend_token_chunk(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos, int chunk,
                        const AttentionShape& shape, const float* q, float* partial, float* scratch,
                        int head_begin, int head_end);

// Folds n_chunks partial states of heads [head_begin, head_end) (chunk c's
// at partials + c * attention_partial_floats(shape, head_end - head_begin),
// from attend_token_chunk over pages of dtype) in chunk order and writes
// those heads of out ([n_head][head_dim]): the bits attend_token gives.
// scratch: head_dim floats. Requires attention_splits(shape, dtype).
void attend_token_merge(const float* partials, int n_chunks, const AttentionShape& shape, KvDtype dtype, float* out,
                        float* scratch, int head_begin, int head_end);

// attend_tokens of the one token at pos (a decode step).
inline void attend_token(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos,
                         const AttentionShape& shape, const float* q, float* out, float* scratch, int head_begin,
                         int head_end) {
  attend_tokens(pool, layer, pages, pos, 1, shape, q, out, scratch, head_begin, head_end);
}

}  // namespace larder
