// Row-major F32 / F16 / BF16 matmul tiles for AVX2 builds (FMA, F16C, no
// AVX-512): matmul.cpp's AVX-512 dense tiles at 8 lanes. Per output y[t][r]
// (fixed, whatever the batch, the row range or the tile):
//   lane i of acc = fma chain of w[r][k] * x[t][k] over k = i, i + 8, ... in
//                   increasing k (a last partial chunk zero-filled);
//   y[t][r]       = the 8 lanes summed by one fixed tree (halves, quarters,
//                   pairs).
// F16 / BF16 widen exactly to f32. (F16 matrices that the forward pass
// repacks run in matmul_packed_f16.cpp instead; these tiles serve F32 and
// BF16 ones, and F16 ones that were not repacked.)
#include "engine/cpu/matmul_dense_avx2.h"

#ifdef LARDER_MATMUL_DENSE_AVX2

#include <cstring>

#include "engine/cpu/row_tiles.h"
#include "engine/cpu/simd_avx2.h"

namespace larder {

namespace {

constexpr int kLanes = 8;

inline float hsum8(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 0x55)));
}

// The first n (< 8) values at p, the rest zero.
inline __m256 load_f32_tail(const float* p, int n) { return _mm256_maskload_ps(p, first_lanes_avx2(n)); }
inline __m128i load_u16_tail(const uint16_t* p, int n) {
  alignas(16) uint16_t tmp[kLanes] = {};
  std::memcpy(tmp, p, sizeof(uint16_t) * size_t(n));
  return _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
}

struct LoadF32 {
  static constexpr int kBytes = 4;
  static __m256 load(const uint8_t* row, int k) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k); }
  static __m256 load_tail(const uint8_t* row, int k, int n) {
    return load_f32_tail(reinterpret_cast<const float*>(row) + k, n);
  }
};
struct LoadF16 {
  static constexpr int kBytes = 2;
  static __m256 load(const uint8_t* row, int k) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + k)));
  }
  static __m256 load_tail(const uint8_t* row, int k, int n) {
    return _mm256_cvtph_ps(load_u16_tail(reinterpret_cast<const uint16_t*>(row) + k, n));
  }
};
struct LoadBF16 {
  static constexpr int kBytes = 2;
  static __m256 widen(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
  static __m256 load(const uint8_t* row, int k) {
    return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + k)));
  }
  static __m256 load_tail(const uint8_t* row, int k, int n) {
    return widen(load_u16_tail(reinterpret_cast<const uint16_t*>(row) + k, n));
  }
};

// T tokens x R rows from row w (rows row_bytes apart); x: [T][K]; y: [T][y_stride].
template <class L, int T, int R>
void tile_dense(const uint8_t* w, size_t row_bytes, const float* x, int K, float* y, int y_stride) {
  __m256 acc[T][R];
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) acc[t][r] = _mm256_setzero_ps();
  int k = 0;
  for (; k + kLanes <= K; k += kLanes) {
    if constexpr (T == 1) {  // decode: the next tile's rows, at this offset
      if ((size_t(k) * L::kBytes) % 64 == 0)
        for (int r = 0; r < R; ++r)
          _mm_prefetch(reinterpret_cast<const char*>(w + (R + r) * row_bytes + size_t(k) * L::kBytes), _MM_HINT_T0);
    }
    __m256 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = L::load(w + r * row_bytes, k);
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + size_t(t) * K + k);
      for (int r = 0; r < R; ++r) acc[t][r] = _mm256_fmadd_ps(wv[r], xv, acc[t][r]);
    }
  }
  if (k < K) {
    __m256 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = L::load_tail(w + r * row_bytes, k, K - k);
    for (int t = 0; t < T; ++t) {
      const __m256 xv = load_f32_tail(x + size_t(t) * K + k, K - k);
      for (int r = 0; r < R; ++r) acc[t][r] = _mm256_fmadd_ps(wv[r], xv, acc[t][r]);
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) y[size_t(t) * y_stride + r] = hsum8(acc[t][r]);
}

// Up to 4 tokens x 3 rows: 12 accumulators, 3 weight vectors and the
// activation in the 16 ymm registers.
constexpr int kTileT = 4, kTileR = 3;
using TileFn = void (*)(const uint8_t*, size_t, const float*, int, float*, int);
template <class L>
struct Tiles {
  static constexpr TileFn kTab[kTileT][kTileR] = {
      {&tile_dense<L, 1, 1>, &tile_dense<L, 1, 2>, &tile_dense<L, 1, 3>},
      {&tile_dense<L, 2, 1>, &tile_dense<L, 2, 2>, &tile_dense<L, 2, 3>},
      {&tile_dense<L, 3, 1>, &tile_dense<L, 3, 2>, &tile_dense<L, 3, 3>},
      {&tile_dense<L, 4, 1>, &tile_dense<L, 4, 2>, &tile_dense<L, 4, 3>}};
};

}  // namespace

bool matmul_dense_rows_avx2(const WeightView& w, const float* x, int n_tokens, float* y, int y_stride,
                            int64_t row_begin, int64_t row_end) {
  switch (w.type) {
    case GgmlType::kF32:
      row_tiles::run(Tiles<LoadF32>::kTab, w, x, size_t(w.ne[0]), n_tokens, y, y_stride, row_begin, row_end);
      return true;
    case GgmlType::kF16:
      row_tiles::run(Tiles<LoadF16>::kTab, w, x, size_t(w.ne[0]), n_tokens, y, y_stride, row_begin, row_end);
      return true;
    case GgmlType::kBF16:
      row_tiles::run(Tiles<LoadBF16>::kTab, w, x, size_t(w.ne[0]), n_tokens, y, y_stride, row_begin, row_end);
      return true;
    default: return false;
  }
}

}  // namespace larder

#endif  // LARDER_MATMUL_DENSE_AVX2
