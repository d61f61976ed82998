// The half-tile helpers the AVX2 packed tiles share (matmul_packed_avx2.cpp,
// matmul_packed_avx2_kquant.cpp): a 64-byte group vector read as two 32-byte
// halves of 8 rows each, the loads and stores of a half, and the loop over
// token blocks x halves. Private to engine/cpu; include only where AVX2 is on.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/cpu/matmul_packed.h"

#ifndef LARDER_PACKED_AVX2
#error "matmul_packed_avx2_tiles.h is for builds with the AVX2 tiles (LARDER_PACKED_AVX2)"
#endif

namespace larder::packed_detail::avx2 {

inline constexpr int kHalfRows = 8;

// Decode's software prefetch distance, measured on an AMD EPYC Zen 3 (2
// cores, 2026-12-03, test_cpu "[.bench-decode]" with LARDER_BENCH_MB=1024,
// matmul / plain read of the same bytes, 1 and 2 threads): Q8_0 blocks
// ahead 4 -> 1: 0.81-0.85 -> 0.88-0.96 (0, no prefetch: the same within
// noise); K-quant super-blocks ahead 2 -> 1: Q4_K 0.74-0.80 -> 0.82-0.89,
// Q6_K 0.73-0.81 -> 0.77-0.90 (0: Q4_K 0.56-0.61, Q6_K 0.30-0.41).
inline constexpr int kQ8PrefetchBlocks = 1, kKQuantPrefetchBlocks = 1;

inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline __m256i load32(const uint8_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256 load_f16x8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// Lanes [0, n) of v to y (n <= 8).
inline void store_rows(float* y, __m256 v, int n) {
  if (n >= kHalfRows) {
    _mm256_storeu_ps(y, v);
    return;
  }
  alignas(32) float tmp[kHalfRows];
  _mm256_store_ps(tmp, v);
  std::memcpy(y, tmp, sizeof(float) * size_t(std::max(n, 0)));
}

template <int T, int H>
inline void store_tile(const __m256 (&acc)[T][H], float* y, int y_stride, int rows) {
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h)
      if (rows > kHalfRows * h) store_rows(y + size_t(t) * y_stride + kHalfRows * h, acc[t][h], rows - kHalfRows * h);
}

// A tile: T tokens x H consecutive halves from half `half0` of the group at
// `grp` (halves may run into the next groups, group_stride apart); x: token
// 0's blocks; y: token 0 at the tile's first row; writes `rows` rows.
template <class Act>
using HalfTileFn = void (*)(const uint8_t* grp, size_t group_stride, int half0, const Act* x, int nb,
                            float* y, int y_stride, int rows);

// A token block's activations: at most this many bytes, which stay in L2
// while the weights stream past.
inline constexpr size_t kActBlockBytes = 512 * 1024;

// Rows [row_begin, row_end) in tiles of up to kT tokens x kH halves, tokens
// in blocks of kActBlockBytes.
template <class Act, int kT, int kH>
void run_half_tiles(const HalfTileFn<Act> (&tiles)[kT][kH], const PackedMatrix& w, const Act* x, int n_tokens,
                    float* y, int y_stride, int64_t row_begin, int64_t row_end) {
  assert(row_begin % PackedMatrix::kGroupRows == 0);
  const int nb = w.n_blocks();
  const int64_t h_begin = row_begin / kHalfRows, h_end = (row_end + kHalfRows - 1) / kHalfRows;
  int block = int(kActBlockBytes / (size_t(nb) * sizeof(Act)));
  block = std::max(kT, block / kT * kT);
  for (int tb = 0; tb < n_tokens; tb += block) {
    const int te = std::min(n_tokens, tb + block);
    for (int64_t h0 = h_begin; h0 < h_end; h0 += kH) {
      const int H = int(std::min<int64_t>(kH, h_end - h0));
      const int rows = int(std::min<int64_t>(kHalfRows * H, row_end - kHalfRows * h0));
      const uint8_t* grp = w.group(h0 / 2);
      for (int t0 = tb; t0 < te; t0 += kT) {
        const int T = std::min(kT, te - t0);
        tiles[T - 1][H - 1](grp, w.group_stride(), int(h0 % 2), x + size_t(t0) * nb, nb,
                            y + size_t(t0) * y_stride + kHalfRows * h0, y_stride, rows);
      }
    }
  }
}

}  // namespace larder::packed_detail::avx2
