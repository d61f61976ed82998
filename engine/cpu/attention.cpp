// attend_tokens' dispatch to the vector passes (attention_avx512.cpp,
// attention_avx2.cpp) or the one-token fallback (attention_one.cpp),
// kv_write, and the split-K API of attention.h.
#include "engine/cpu/attention.h"

#include <algorithm>
#include <cassert>

#include "engine/cpu/attention_detail.h"
#include "engine/cpu/matmul.h"
#include "engine/gguf/ggml_types.h"

namespace larder {

using attention_detail::kMaxHeadDim;
using attention_detail::kPartialHeader;

namespace {

// Floats of one query head's scores for positions up to max_pos: whole pages,
// plus 16 for the last 16-lane block's overhang, rounded up to 16.
size_t scores_stride(int max_pos, int page_size) {
  return size_t((max_pos / page_size + 1) * page_size + 16) / 16 * 16;
}

}  // namespace

size_t attention_scratch_floats(int max_pos, int page_size, int n_tokens) {
  (void)n_tokens;  // a one-token call may take kAttentionDecodeHeads heads, as many rows as a full tile
  // attend_tile16's V sums (rows x head_dim, for the current chunk and the
  // folded ones; the 8-lane tiles keep the current chunk's in out), or
  // attend_one's one row of scores. No pass stores a score row per head.
  return std::max(2 * size_t(kAttentionDecodeHeads) * kMaxHeadDim, scores_stride(max_pos, page_size));
}

namespace {

#if defined(__AVX512F__)
// attend_tile16 for the one token at pos over query heads [head_begin,
// head_end), whole kv heads: into out (q_stride apart per token, one token
// here) or, with partial set, chunk `chunk`'s states into partial.
void tile16_whole_kv_heads(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos,
                           const AttentionShape& shape, const float* q, size_t q_stride, float* out,
                           float* scratch, int head_begin, int head_end, int chunk, float* partial) {
  const int hd = shape.head_dim, group = shape.n_head / shape.n_head_kv;
  const size_t at = size_t(head_begin) * hd;
  attention_detail::tile16(pool, layer, pages, pos, 1, hd, size_t(head_begin / group) * hd,
                           (head_end - head_begin) / group, q + at, q_stride, out ? out + at : nullptr, group,
                           scratch, chunk, partial);
}
#endif

}  // namespace

namespace {

// Which pass attend_tokens takes for heads of hd dims over pages of dtype:
// the 16-position one, the 8-position one, or the one-token fallback.
enum class Pass { k16, k8, kOne };

Pass pass_for(int hd, KvDtype dtype) {
  if (attention_detail::tile16_supported(hd, dtype)) return Pass::k16;
#if defined(LARDER_ATTENTION_AVX2)
  if (attention_detail::heads8_supported(hd)) return Pass::k8;
#endif
  return Pass::kOne;
}

}  // namespace

bool attention_splits(const AttentionShape& shape, KvDtype dtype) {
  return pass_for(shape.head_dim, dtype) != Pass::kOne && shape.n_head / shape.n_head_kv <= kAttentionDecodeHeads;
}

size_t attention_partial_floats(const AttentionShape& shape, int n_heads) {
  return size_t(n_heads) * (kPartialHeader + size_t(shape.head_dim));
}

void attend_token_chunk(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos, int chunk,
                        const AttentionShape& shape, const float* q, float* partial, float* scratch,
                        int head_begin, int head_end) {
  const int hd = shape.head_dim;
  [[maybe_unused]] const int group = shape.n_head / shape.n_head_kv;
  assert(attention_splits(shape, pool.layout().dtype));
  assert(head_begin % group == 0 && head_end % group == 0 && head_end - head_begin <= kAttentionDecodeHeads);
  assert(chunk >= 0 && chunk < attention_chunks(pos));
  const Pass pass = pass_for(hd, pool.layout().dtype);
#if defined(__AVX512F__)
  if (pass == Pass::k16) {
    tile16_whole_kv_heads(pool, layer, pages, pos, shape, q, 0, nullptr, scratch, head_begin, head_end, chunk,
                          partial);
    return;
  }
#endif
#if defined(LARDER_ATTENTION_AVX2)
  if (pass == Pass::k8) {  // one kv head a pass, its query heads in groups of up to kMaxHeads
    const size_t row = kPartialHeader + size_t(hd);
    for (int h = head_begin; h < head_end;) {
      const int kv = h / group, nh = std::min({(kv + 1) * group - h, attention_detail::kMaxHeads});
      attention_detail::attend_tile8(pool, layer, pages, pos, 1, hd, size_t(kv) * hd, q + size_t(h) * hd, 0,
                                     nullptr, nh, scratch, chunk, partial + size_t(h - head_begin) * row);
      h += nh;
    }
    return;
  }
#endif
  (void)pool, (void)layer, (void)pages, (void)pos, (void)chunk, (void)q, (void)partial, (void)scratch, (void)pass;
}

void attend_token_merge(const float* partials, int n_chunks, const AttentionShape& shape, KvDtype dtype, float* out,
                        float* scratch, int head_begin, int head_end) {
  assert(n_chunks >= 1 && attention_splits(shape, dtype));
  const int hd = shape.head_dim;
  const Pass pass = pass_for(hd, dtype);
#if defined(__AVX512F__)
  if (pass == Pass::k16) {
    attention_detail::merge16(partials, n_chunks, head_end - head_begin, hd, out + size_t(head_begin) * hd, scratch);
    return;
  }
#endif
#if defined(LARDER_ATTENTION_AVX2)
  if (pass == Pass::k8) {
    attention_detail::merge8(partials, n_chunks, head_end - head_begin, hd, out + size_t(head_begin) * hd, scratch);
    return;
  }
#endif
  (void)partials, (void)out, (void)scratch, (void)head_begin, (void)head_end, (void)pass;
}

void kv_write(PagePool& pool, int layer, std::span<const int32_t> pages, int pos,
              const float* k, const float* v) {
  const KvLayout& lay = pool.layout();
  const int page = pages[pos / lay.page_size];
  const size_t slot = size_t(pos % lay.page_size) * lay.kv_dim;
  if (lay.dtype == KvDtype::kQ8_0) {
    const size_t at = size_t(pos % lay.page_size) * lay.row_bytes();
    quantize_rows_q8_0(k, 1, lay.kv_dim, reinterpret_cast<BlockQ8_0*>(static_cast<uint8_t*>(pool.k_block(page, layer)) + at));
    quantize_rows_q8_0(v, 1, lay.kv_dim, reinterpret_cast<BlockQ8_0*>(static_cast<uint8_t*>(pool.v_block(page, layer)) + at));
  } else if (lay.dtype == KvDtype::kF32) {
    float* kd = static_cast<float*>(pool.k_block(page, layer)) + slot;
    float* vd = static_cast<float*>(pool.v_block(page, layer)) + slot;
    for (int i = 0; i < lay.kv_dim; ++i) kd[i] = k[i];
    for (int i = 0; i < lay.kv_dim; ++i) vd[i] = v[i];
  } else {
    uint16_t* kd = static_cast<uint16_t*>(pool.k_block(page, layer)) + slot;
    uint16_t* vd = static_cast<uint16_t*>(pool.v_block(page, layer)) + slot;
    for (int i = 0; i < lay.kv_dim; ++i) kd[i] = fp32_to_fp16(k[i]);
    for (int i = 0; i < lay.kv_dim; ++i) vd[i] = fp32_to_fp16(v[i]);
  }
}

void attend_tokens(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos0, int n_tokens,
                   const AttentionShape& shape, const float* q, float* out, float* scratch, int head_begin,
                   int head_end) {
  const int hd = shape.head_dim, group = shape.n_head / shape.n_head_kv;
  const size_t q_stride = size_t(shape.n_head) * hd;
  // fn(t0, nt, kv, nh, at) per tile of up to kAttentionTileTokens tokens x up
  // to kAttentionGroupHeads heads of one kv head (at: their offset in q, out).
  [[maybe_unused]] auto for_each_tile = [&](auto&& fn) {
    for (int t0 = 0; t0 < n_tokens; t0 += kAttentionTileTokens) {
      const int nt = std::min(kAttentionTileTokens, n_tokens - t0);
      for (int h = head_begin; h < head_end;) {
        const int kv = h / group;
        const int nh = std::min({head_end - h, (kv + 1) * group - h, kAttentionGroupHeads});
        fn(t0, nt, kv, nh, size_t(t0) * q_stride + size_t(h) * hd);
        h += nh;
      }
    }
  };
  // The vector pass for this head size and page dtype, if any: one tile of
  // up to kAttentionTileTokens tokens x the heads of one kv head per call; a
  // decode step (one token) over whole kv heads takes them all in one pass.
  [[maybe_unused]] const Pass pass = pass_for(hd, pool.layout().dtype);
#if defined(__AVX512F__)
  if (pass == Pass::k16) {
    const bool whole_kv_heads = head_begin % group == 0 && head_end % group == 0;
    if (n_tokens == 1 && whole_kv_heads && head_end - head_begin <= kAttentionDecodeHeads) {
      tile16_whole_kv_heads(pool, layer, pages, pos0, shape, q, q_stride, out, scratch, head_begin, head_end, 0,
                            nullptr);
      return;
    }
    for_each_tile([&](int t0, int nt, int kv, int nh, size_t at) {
      attention_detail::tile16(pool, layer, pages, pos0 + t0, nt, hd, size_t(kv) * hd, 1, q + at, q_stride,
                               out + at, nh, scratch, 0, nullptr);
    });
    return;
  }
#endif
#if defined(LARDER_ATTENTION_AVX2)
  static_assert(attention_detail::kMaxHeads == kAttentionGroupHeads);
  static_assert(attention_detail::kMaxTileTokens == kAttentionTileTokens);
  if (pass == Pass::k8) {
    for_each_tile([&](int t0, int nt, int kv, int nh, size_t at) {
      attention_detail::attend_tile8(pool, layer, pages, pos0 + t0, nt, hd, size_t(kv) * hd, q + at, q_stride,
                                     out + at, nh, scratch, 0, nullptr);
    });
    return;
  }
#endif
  for (int t = 0; t < n_tokens; ++t)
    attention_detail::attend_one(pool, layer, pages, pos0 + t, shape, q + size_t(t) * q_stride,
                                 out + size_t(t) * q_stride, scratch, head_begin, head_end);
}

}  // namespace larder
