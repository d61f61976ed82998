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

// Floats of attend_token's scratch for positions up to max_pos.
size_t attention_scores_floats(int max_pos, int page_size);

// Attention of one token at `pos` for query heads [head_begin, head_end).
// q: [n_head][head_dim] (after RoPE); out: [n_head][head_dim], only the given
// heads are written. scores: scratch of attention_scores_floats(pos, page_size)
// floats. With AVX-512 and head_dim a multiple of 16 (at most 256) the query
// heads of one kv head share a pass over its K/V, 16 positions at a time, with
// a vectorized exp (AVX2 builds: head_dim a multiple of 8, 8 positions at a
// time, attention_avx2.cpp); the result is the same whatever the head range.
void attend_token(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos,
                  const AttentionShape& shape, const float* q, float* out, float* scores,
                  int head_begin, int head_end);

}  // namespace larder
