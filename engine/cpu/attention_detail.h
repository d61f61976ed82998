// What attend_token's vector passes share (attention.cpp: AVX-512,
// attention_avx2.cpp: AVX2 with FMA and F16C). Private to engine/cpu.
#pragma once

#include <xmmintrin.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/kv/page_pool.h"

// The AVX2 pass: the attention of AVX2 builds, and in AVX-512 builds that of
// head sizes a multiple of 8 but not of 16 (stories260K's 8), which the
// 16-lane pass does not take.
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define LARDER_ATTENTION_AVX2 1
#endif

namespace larder::attention_detail {

// Prefetches one kv head's rows (values off .. off + hd) of a whole page into
// L1 while the page before is computed: a page is page_size short strided
// runs (one per position) that the hardware prefetcher does not run ahead on.
inline void prefetch_rows(const void* block, const KvLayout& lay, size_t off, int hd) {
  const size_t row = lay.row_bytes();
  const bool q8 = lay.dtype == KvDtype::kQ8_0;
  const size_t elem = lay.dtype == KvDtype::kF16 ? 2 : 4;
  const size_t elem_off = q8 ? off / 32 * 34 : off * elem;
  const size_t bytes = q8 ? (size_t(hd) + 31) / 32 * 34 : size_t(hd) * elem;
  const char* b = static_cast<const char*>(block) + elem_off;
  for (int j = 0; j < lay.page_size; ++j)
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(b + size_t(j) * row + o, _MM_HINT_T0);
}

// A block's K or V rows of one kv head as a vector pass reads them: F16 in
// the page (h, h_stride halves apart, widened as they are used) or f32 (f,
// f_stride floats apart: F32 pages in place, Q8_0 ones widened into a
// buffer).
struct KvRows {
  const uint16_t* h = nullptr;
  size_t h_stride = 0;
  const float* f = nullptr;
  size_t f_stride = 0;
};

// n rows of a block (its first row at `block`), values off .. off + hd of
// each: F16 in place, other dtypes through the pass's widen (its rows_f32:
// (block, lay, off, n, hd, conv, &stride) -> rows) into conv.
template <class Widen>
inline KvRows block_rows(const uint8_t* block, const KvLayout& lay, size_t off, int n, int hd, float* conv,
                         Widen&& widen) {
  KvRows r;
  if (lay.dtype == KvDtype::kF16) {
    r.h = reinterpret_cast<const uint16_t*>(block) + off;
    r.h_stride = lay.row_bytes() / 2;
  } else {
    r.f = widen(block, lay, off, n, hd, conv, &r.f_stride);
  }
  return r;
}

// The AVX2 pass (attention_avx2.cpp).

// Query heads sharing one pass over their kv head's K/V.
constexpr int kMaxHeads = 4;

// True when attend_tile8 takes heads of this size (a multiple of 8, <= 256).
bool heads8_supported(int hd);

// Tokens of a tile (attention.h's kAttentionTileTokens) and their rows.
constexpr int kMaxTileTokens = 16;
constexpr int kMaxTileRows = kMaxHeads * kMaxTileTokens;

// Heads [0, nh) (nh <= kMaxHeads, all of one kv head at offset `off` of a K/V
// row) of nt <= kMaxTileTokens consecutive tokens at positions pos0 .. pos0 +
// nt - 1: token t's heads at q + t * q_stride, out likewise. Each (token,
// head) row gets the arithmetic of attention_avx2.cpp whatever nt; no
// scratch (out holds the V sums until the end).
void attend_tile8(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos0, int nt, int hd,
                  size_t off, const float* q, size_t q_stride, float* out, int nh);

}  // namespace larder::attention_detail
