// The packed F16 layout and kernels (AVX-512 and AVX2 builds, same bits;
// layout and arithmetic: matmul_packed.h).
//
// The row-major F16 tiles of matmul.cpp read 4 rows x 16 values and 4 token
// rows of f32 activations per step and reduce 16 lanes per output at the
// end: in prefill they are bound by streaming the activations from L2 (a
// 64-byte load per 4 FMAs). Here the 16 rows of a group sit in one vector per
// k, so a token's activation is one broadcast (an FMA's memory operand) and
// the f16 widening of a weight vector is shared by the tile's 6 tokens.
#include <algorithm>
#include <array>
#include <cassert>
#include <cstring>
#include <utility>

#include "engine/cpu/matmul_packed.h"

#ifdef LARDER_PACKED_AVX512
#include "engine/cpu/simd.h"
#elif defined(LARDER_PACKED_AVX2)
#include <immintrin.h>
#endif

namespace larder::packed_detail {

void pack_f16_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin, int64_t g_end) {
  const int K = int(w.ne[0]);
  const int64_t rows = w.ne[1];
  for (int64_t g = g_begin; g < g_end; ++g) {
    auto* dst = reinterpret_cast<uint16_t*>(data + size_t(g) * group_stride);
    std::memset(dst, 0, group_stride);  // padding rows: w = +0
    const int64_t r_end = std::min<int64_t>(PackedMatrix::kGroupRows, rows - g * PackedMatrix::kGroupRows);
    for (int64_t r = 0; r < r_end; ++r) {
      const auto* src = reinterpret_cast<const uint16_t*>(w.row(g * PackedMatrix::kGroupRows + r));
      for (int k = 0; k < K; ++k) dst[size_t(k) * PackedMatrix::kGroupRows + size_t(r)] = src[k];
    }
  }
}

#if defined(LARDER_PACKED_AVX512) || defined(LARDER_PACKED_AVX2)
namespace {

// A tile's unit is one vector of rows: a whole group (16 rows, zmm) on
// AVX-512, half a group (8 rows, ymm: the k-th 32-byte vector of a group read
// as two 16-byte halves) on AVX2. Unit u of the matrix is rows
// [kUnitRows u, kUnitRows (u + 1)).
#ifdef LARDER_PACKED_AVX512
using VecF = __m512;
constexpr int kUnitRows = 16;
inline VecF load_w(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p))); }
inline VecF bcast(float v) { return _mm512_set1_ps(v); }
inline VecF fma(VecF a, VecF b, VecF c) { return _mm512_fmadd_ps(a, b, c); }
inline VecF zero() { return _mm512_setzero_ps(); }
inline void store(float* y, VecF v) { _mm512_storeu_ps(y, v); }
inline void store_first(float* y, VecF v, int n) { _mm512_mask_storeu_ps(y, __mmask16((1u << n) - 1u), v); }
// Prefill: up to kT tokens x kU units (kT * kU accumulators + kU weight
// vectors <= 32 zmm); decode: up to kUDecode units, each an independent fma
// chain and its own stream of weights. 4, as the AVX2 tile's 8 half-groups
// are 4 streams: on an AMD EPYC Zen 5 (2026-12-05, bench_decode on the
// 1B-shaped F16 file, alternated run by run in one process) 4 decoded 10-13 %
// faster than 8 on 1 and 2 threads; 3 matched 4, 2 was 3 % faster than 8.
constexpr int kT = 6, kU = 4, kUDecode = 4;
#else
using VecF = __m256;
constexpr int kUnitRows = 8;
inline VecF load_w(const uint16_t* p) { return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p))); }
inline VecF bcast(float v) { return _mm256_set1_ps(v); }
inline VecF fma(VecF a, VecF b, VecF c) { return _mm256_fmadd_ps(a, b, c); }
inline VecF zero() { return _mm256_setzero_ps(); }
inline void store(float* y, VecF v) { _mm256_storeu_ps(y, v); }
inline void store_first(float* y, VecF v, int n) {
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, v);
  std::memcpy(y, tmp, sizeof(float) * size_t(n));
}
// 16 ymm: kT * kU accumulators + kU weights + a broadcast.
constexpr int kT = 6, kU = 2, kUDecode = 8;
#endif
constexpr int kUnitsPerGroup = PackedMatrix::kGroupRows / kUnitRows;

constexpr int kDecodeAhead = 64;  // 2 KiB of each group's stream

// The k = 0 weights of unit u (a group's vectors are 16 f16 per k).
inline const uint16_t* unit_base(const PackedMatrix& w, int64_t u) {
  return reinterpret_cast<const uint16_t*>(w.group(u / kUnitsPerGroup)) + (u % kUnitsPerGroup) * kUnitRows;
}

// T tokens x U units: y[t][kUnitRows u + r] = the fma chain over k
// (matmul_packed.h). w: each unit's k = 0 weights (k-th vector 16 f16
// further per k); x: [T][K] f32 with rows K apart; y: token 0, the tile's
// first row; the last unit writes last_rows rows.
template <int T, int U>
void tile_f16(const uint16_t* const* wu, const float* x, int K, float* y, int y_stride, int last_rows) {
  const uint16_t* w[U];
  for (int u = 0; u < U; ++u) w[u] = wu[u];
  VecF acc[T][U];
  for (int t = 0; t < T; ++t)
    for (int u = 0; u < U; ++u) acc[t][u] = zero();
  for (int k = 0; k < K; ++k) {
    if constexpr (T == 1) {  // decode streams the weights once: fetch kDecodeAhead k ahead
      if (k % 2 == 0)
        for (int u = 0; u < U; ++u)
          if (u % kUnitsPerGroup == 0)  // (a group's other units share its lines)
            _mm_prefetch(reinterpret_cast<const char*>(w[u] + size_t(k + kDecodeAhead) * 16), _MM_HINT_T0);
    }
    VecF wv[U];
    for (int u = 0; u < U; ++u) wv[u] = load_w(w[u] + size_t(k) * 16);
    for (int t = 0; t < T; ++t) {
      const VecF xv = bcast(x[size_t(t) * K + k]);
      for (int u = 0; u < U; ++u) acc[t][u] = fma(wv[u], xv, acc[t][u]);
    }
  }
  for (int t = 0; t < T; ++t) {
    float* yt = y + size_t(t) * y_stride;
    for (int u = 0; u + 1 < U; ++u) store(yt + kUnitRows * u, acc[t][u]);
    store_first(yt + kUnitRows * (U - 1), acc[t][U - 1], last_rows);
  }
}

using TileFn = void (*)(const uint16_t* const*, const float*, int, float*, int, int);

template <int T, size_t... U>
constexpr std::array<TileFn, sizeof...(U)> tile_row(std::index_sequence<U...>) {
  return {&tile_f16<T, int(U) + 1>...};
}
template <size_t... T>
constexpr std::array<std::array<TileFn, kU>, sizeof...(T)> tile_table(std::index_sequence<T...>) {
  return {tile_row<int(T) + 1>(std::make_index_sequence<kU>())...};
}
constexpr auto kPrefillTiles = tile_table(std::make_index_sequence<kT>());
constexpr auto kDecodeTiles = tile_row<1>(std::make_index_sequence<kUDecode>());

// A token block's activations (f32 rows) stay in L2 while the groups stream past.
constexpr size_t kActBlockBytes = 768 * 1024;

}  // namespace
#endif

void matmul_f16_rows(const PackedMatrix& w, const float* x, int n_tokens, float* y, int y_stride,
                     int64_t row_begin, int64_t row_end) {
#if defined(LARDER_PACKED_AVX512) || defined(LARDER_PACKED_AVX2)
  const int K = w.k();
  const int64_t u_begin = row_begin / kUnitRows;
  const int64_t u_end = (row_end + kUnitRows - 1) / kUnitRows;
  const int tail = int(row_end - (u_end - 1) * kUnitRows);  // rows of the last unit
  auto run = [&](const TileFn fn, int64_t u0, int U, int t0) {
    const uint16_t* wu[kUDecode > kU ? kUDecode : kU];
    for (int u = 0; u < U; ++u) wu[u] = unit_base(w, u0 + u);
    fn(wu, x + size_t(t0) * K, K, y + size_t(t0) * y_stride + u0 * kUnitRows, y_stride,
       u0 + U == u_end ? tail : kUnitRows);
  };
  if (n_tokens == 1) {
    for (int64_t u0 = u_begin; u0 < u_end; u0 += kUDecode) {
      const int U = int(std::min<int64_t>(kUDecode, u_end - u0));
      run(kDecodeTiles[size_t(U - 1)], u0, U, 0);
    }
    return;
  }
  int block = int(kActBlockBytes / (size_t(K) * sizeof(float)));
  block = std::max(kT, block / kT * kT);
  for (int tb = 0; tb < n_tokens; tb += block) {
    const int te = std::min(n_tokens, tb + block);
    for (int64_t u0 = u_begin; u0 < u_end; u0 += kU) {
      const int U = int(std::min<int64_t>(kU, u_end - u0));
      for (int t0 = tb; t0 < te; t0 += kT) {
        const int T = std::min(kT, te - t0);
        run(kPrefillTiles[size_t(T - 1)][size_t(U - 1)], u0, U, t0);
      }
    }
  }
#else
  (void)w; (void)x; (void)n_tokens; (void)y; (void)y_stride; (void)row_begin; (void)row_end;
  assert(false && "packed F16 needs an AVX-512 or AVX2 build");
#endif
}

}  // namespace larder::packed_detail
