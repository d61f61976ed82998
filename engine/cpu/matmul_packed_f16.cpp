// The packed F16 layout and kernels (AVX-512 builds; layout and arithmetic:
// matmul_packed.h).
//
// The row-major F16 tiles of matmul.cpp read 4 rows x 16 values and 4 token
// rows of f32 activations per step and reduce 16 lanes per output at the
// end: in prefill they are bound by streaming the activations from L2 (a
// 64-byte load per 4 FMAs). Here the 16 rows of a group sit in one vector per
// k, so a token's activation is one broadcast (an FMA's memory operand) and
// the f16 widening of a weight vector is shared by the tile's 6 tokens.
#include <algorithm>
#include <cassert>
#include <cstring>

#include "engine/cpu/matmul_packed.h"

#ifdef LARDER_PACKED_AVX512
#include "engine/cpu/simd.h"
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

#ifdef LARDER_PACKED_AVX512
namespace {

constexpr int kDecodeAhead = 64;  // 2 KiB of each group's stream

// T tokens x G groups: y[t][16g + r] = the fma chain over k (matmul_packed.h).
// q: group g0's bytes, group g at q + g * group_stride; x: [T][K] f32 with
// rows K apart; y: token 0, the tile's first row; the last group writes
// last_rows rows.
template <int T, int G>
void tile_f16(const uint8_t* q, size_t group_stride, const float* x, int K, float* y, int y_stride,
              int last_rows) {
  const uint16_t* w[G];
  for (int g = 0; g < G; ++g) w[g] = reinterpret_cast<const uint16_t*>(q + size_t(g) * group_stride);
  __m512 acc[T][G];
  for (int t = 0; t < T; ++t)
    for (int g = 0; g < G; ++g) acc[t][g] = _mm512_setzero_ps();
  for (int k = 0; k < K; ++k) {
    if constexpr (T == 1) {  // decode streams the weights once: fetch kDecodeAhead k ahead
      if (k % 2 == 0)
        for (int g = 0; g < G; ++g)
          _mm_prefetch(reinterpret_cast<const char*>(w[g] + size_t(k + kDecodeAhead) * 16), _MM_HINT_T0);
    }
    __m512 wv[G];
    for (int g = 0; g < G; ++g)
      wv[g] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(w[g] + size_t(k) * 16)));
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_set1_ps(x[size_t(t) * K + k]);
      for (int g = 0; g < G; ++g) acc[t][g] = _mm512_fmadd_ps(wv[g], xv, acc[t][g]);
    }
  }
  const __mmask16 last = __mmask16((1u << last_rows) - 1u);
  for (int t = 0; t < T; ++t) {
    float* yt = y + size_t(t) * y_stride;
    for (int g = 0; g + 1 < G; ++g) _mm512_storeu_ps(yt + 16 * g, acc[t][g]);
    _mm512_mask_storeu_ps(yt + 16 * (G - 1), last, acc[t][G - 1]);
  }
}

using TileFn = void (*)(const uint8_t*, size_t, const float*, int, float*, int, int);

// Prefill: up to kT tokens x kG groups (kT * kG accumulators + kG weight
// vectors <= 32 zmm); decode: up to kGDecode groups (independent fma chains
// enough to cover the fma latency).
constexpr int kT = 6;
constexpr int kG = 4;
constexpr int kGDecode = 8;

#define LARDER_G4(T) {&tile_f16<T, 1>, &tile_f16<T, 2>, &tile_f16<T, 3>, &tile_f16<T, 4>}
constexpr TileFn kPrefillTiles[kT][kG] = {LARDER_G4(1), LARDER_G4(2), LARDER_G4(3),
                                          LARDER_G4(4), LARDER_G4(5), LARDER_G4(6)};
#undef LARDER_G4
constexpr TileFn kDecodeTiles[kGDecode] = {&tile_f16<1, 1>, &tile_f16<1, 2>, &tile_f16<1, 3>, &tile_f16<1, 4>,
                                           &tile_f16<1, 5>, &tile_f16<1, 6>, &tile_f16<1, 7>, &tile_f16<1, 8>};

// A token block's activations (f32 rows) stay in L2 while the groups stream past.
constexpr size_t kActBlockBytes = 768 * 1024;

}  // namespace
#endif

void matmul_f16_rows(const PackedMatrix& w, const float* x, int n_tokens, float* y, int y_stride,
                     int64_t row_begin, int64_t row_end) {
#ifdef LARDER_PACKED_AVX512
  const int K = w.k();
  const int64_t g_begin = row_begin / PackedMatrix::kGroupRows;
  const int64_t g_end = (row_end + PackedMatrix::kGroupRows - 1) / PackedMatrix::kGroupRows;
  const int tail = int(row_end - (g_end - 1) * PackedMatrix::kGroupRows);  // rows of the last group
  if (n_tokens == 1) {
    for (int64_t g0 = g_begin; g0 < g_end; g0 += kGDecode) {
      const int G = int(std::min<int64_t>(kGDecode, g_end - g0));
      kDecodeTiles[G - 1](w.group(g0), w.group_stride(), x, K, y + g0 * PackedMatrix::kGroupRows, y_stride,
                          g0 + G == g_end ? tail : 16);
    }
    return;
  }
  int block = int(kActBlockBytes / (size_t(K) * sizeof(float)));
  block = std::max(kT, block / kT * kT);
  for (int tb = 0; tb < n_tokens; tb += block) {
    const int te = std::min(n_tokens, tb + block);
    for (int64_t g0 = g_begin; g0 < g_end; g0 += kG) {
      const int G = int(std::min<int64_t>(kG, g_end - g0));
      const int last = g0 + G == g_end ? tail : 16;
      for (int t0 = tb; t0 < te; t0 += kT) {
        const int T = std::min(kT, te - t0);
        kPrefillTiles[T - 1][G - 1](w.group(g0), w.group_stride(), x + size_t(t0) * K, K,
                                    y + size_t(t0) * y_stride + g0 * PackedMatrix::kGroupRows, y_stride, last);
      }
    }
  }
#else
  (void)w; (void)x; (void)n_tokens; (void)y; (void)y_stride; (void)row_begin; (void)row_end;
  assert(false && "packed F16 needs an AVX-512 build");
#endif
}

}  // namespace larder::packed_detail
