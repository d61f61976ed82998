// Q4_K / Q5_K / Q6_K x int8 activations (see matmul_kquant.h). Per
// super-block and (token, row): an exact int32 sum of q_w * q_x * sc over the
// 256 values, one FMA of its 16 lanes by d_w * d_x into the f32 accumulator,
// and a scalar "min" term dmin_w * d_x * sum_j m_j * bsum_j subtracted at the
// end. The order of all of it is fixed, so rows never depend on the batch.
#include "engine/cpu/matmul_kquant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/gguf/quant_blocks.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define LARDER_KQUANT_INT 1
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"   // see matmul.cpp
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace larder {

void quantize_rows_q8k(const float* x, int n_rows, int k, BlockQ8K* out) {
  const int nb = k / kQK_K;
  for (int r = 0; r < n_rows; ++r) {
    for (int b = 0; b < nb; ++b) {
      const float* v = x + size_t(r) * k + size_t(b) * kQK_K;
      BlockQ8K& blk = out[size_t(r) * nb + b];
      float amax = 0.0f;
      for (int i = 0; i < kQK_K; ++i) amax = std::max(amax, std::fabs(v[i]));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      blk.d = d;
      for (int i = 0; i < kQK_K; ++i)
        blk.qs[i] = int8_t(std::clamp<long>(std::lround(v[i] * id), -127, 127));
      for (int j = 0; j < 16; ++j) {
        int s = 0;
        for (int i = 0; i < 16; ++i) s += blk.qs[16 * j + i];
        blk.bsums[j] = int16_t(s);
      }
    }
  }
}

#ifdef LARDER_KQUANT_INT
namespace {

inline float hsum(__m512 v) {  // fixed order, as matmul.cpp
  const __m512 hi8 = _mm512_shuffle_f32x4(v, v, 0xEE);
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_castps512_ps256(hi8));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 0x55));
  return _mm_cvtss_f32(s1);
}
inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// Per-block data of one weight row: an int8 scale per 16 values, the "min"
// weights per 16 values (applied through bsums), d and dmin.
struct Prep {
  alignas(16) int8_t sc16[16];
  int32_t m16[16];
  float d, dmin;
};

// int16 lanes of the scale for madd: lanes 8j .. 8j + 7 (pairs of bytes
// 16j .. 16j + 15 of the 64-value chunk c) get sc16[4c + j].
inline __m512i scale_lanes(const Prep& p, int c) {
  int32_t four;
  std::memcpy(&four, p.sc16 + 4 * c, 4);
  const __m256i rep = _mm256_shuffle_epi8(
      _mm256_set1_epi32(four),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                       2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  return _mm512_cvtepi8_epi16(rep);
}

struct IntQ4K {
  using Block = BlockQ4_K;
  static void prep(const Block* b, Prep* p) {
    p->d = _cvtsh_ss(b->d);
    p->dmin = _cvtsh_ss(b->dmin);
    for (int s = 0; s < 8; ++s) {
      int sc, m;
      k4_scale_min(b->scales, s, &sc, &m);
      p->sc16[2 * s] = p->sc16[2 * s + 1] = int8_t(sc);
      p->m16[2 * s] = p->m16[2 * s + 1] = m;
    }
  }
  // Unsigned quants of values 64c .. 64c + 63.
  static __m512i quants(const Block* b, int c) {
    const __m256i v = load32(b->qs + 32 * c);
    const __m256i m4 = _mm256_set1_epi8(15);
    return join(_mm256_and_si256(v, m4), _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
  }
};

struct IntQ5K {
  using Block = BlockQ5_K;
  static void prep(const Block* b, Prep* p) {
    p->d = _cvtsh_ss(b->d);
    p->dmin = _cvtsh_ss(b->dmin);
    for (int s = 0; s < 8; ++s) {
      int sc, m;
      k4_scale_min(b->scales, s, &sc, &m);
      p->sc16[2 * s] = p->sc16[2 * s + 1] = int8_t(sc);
      p->m16[2 * s] = p->m16[2 * s + 1] = m;
    }
  }
  static __m512i quants(const Block* b, int c) {
    const __m256i v = load32(b->qs + 32 * c);
    const __m256i m4 = _mm256_set1_epi8(15);
    const __m512i q = join(_mm256_and_si256(v, m4), _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
    const __m256i qh = load32(b->qh);
    const __mmask64 lo = _mm256_test_epi8_mask(qh, _mm256_set1_epi8(char(1 << (2 * c))));
    const __mmask64 hi = _mm256_test_epi8_mask(qh, _mm256_set1_epi8(char(1 << (2 * c + 1))));
    return _mm512_mask_add_epi8(q, lo | (hi << 32), q, _mm512_set1_epi8(16));
  }
};

struct IntQ6K {
  using Block = BlockQ6_K;
  static void prep(const Block* b, Prep* p) {
    p->d = _cvtsh_ss(b->d);
    p->dmin = p->d;
    for (int s = 0; s < 16; ++s) {
      p->sc16[s] = b->scales[s];
      p->m16[s] = 32 * b->scales[s];  // quants are stored + 32
    }
  }
  // q + 32 (0..63) of values 128h + 32g + l for g = 2(c % 2), 2(c % 2) + 1.
  static __m512i quants(const Block* b, int c) {
    const int h = c / 2, g = 2 * (c % 2);
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
    const __m256i ql0 = load32(b->ql + 64 * h), ql1 = load32(b->ql + 64 * h + 32);
    const __m256i qh = load32(b->qh + 32 * h);
    // g even uses the low nibbles of ql0/ql1 for g = 0/1, high nibbles for 2/3.
    const __m256i a = g == 0 ? _mm256_and_si256(ql0, m4) : _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4);
    const __m256i bq = g == 0 ? _mm256_and_si256(ql1, m4) : _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4);
    const __m256i ha = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), m2), 4);
    const __m256i hb = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * g + 2), m2), 4);
    return join(_mm256_or_si256(a, ha), _mm256_or_si256(bq, hb));
  }
};

template <class D, int T, int R>
void tile_int(const uint8_t* w, size_t row_bytes, const BlockQ8K* xq, int nb, float* y,
              int y_stride) {
  using Block = typename D::Block;
  __m512 acc[T][R];
  float mins[T][R];
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps(), mins[t][r] = 0.0f;
  for (int b = 0; b < nb; ++b) {
    const Block* blk[R];
    Prep prep[R];
    for (int r = 0; r < R; ++r) {
      blk[r] = reinterpret_cast<const Block*>(w + r * row_bytes) + b;
      D::prep(blk[r], &prep[r]);
    }
    __m512i isum[T][R];
    for (int t = 0; t < T; ++t)
      for (int r = 0; r < R; ++r) isum[t][r] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      __m512i qw[R], sl[R];
      for (int r = 0; r < R; ++r) qw[r] = D::quants(blk[r], c), sl[r] = scale_lanes(prep[r], c);
      for (int t = 0; t < T; ++t) {
        const __m512i qx = _mm512_loadu_si512(xq[size_t(t) * nb + b].qs + 64 * c);
        for (int r = 0; r < R; ++r)  // |pair| <= 2*63*127 fits int16; exact
          isum[t][r] = _mm512_add_epi32(isum[t][r], _mm512_madd_epi16(_mm512_maddubs_epi16(qw[r], qx), sl[r]));
      }
    }
    for (int t = 0; t < T; ++t) {
      const BlockQ8K& xb = xq[size_t(t) * nb + b];
      for (int r = 0; r < R; ++r) {
        acc[t][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t][r]), _mm512_set1_ps(prep[r].d * xb.d), acc[t][r]);
        int32_t ms = 0;
        for (int j = 0; j < 16; ++j) ms += prep[r].m16[j] * xb.bsums[j];
        mins[t][r] += prep[r].dmin * xb.d * float(ms);
      }
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) y[size_t(t) * y_stride + r] = hsum(acc[t][r]) - mins[t][r];
}

constexpr int kTileT = 4;
constexpr int kTileR = 2;
using TileFn = void (*)(const uint8_t*, size_t, const BlockQ8K*, int, float*, int);
#define LARDER_INT_ROW(D, T) {&tile_int<D, T, 1>, &tile_int<D, T, 2>}
#define LARDER_INT_TABLE(D) {LARDER_INT_ROW(D, 1), LARDER_INT_ROW(D, 2), LARDER_INT_ROW(D, 3), LARDER_INT_ROW(D, 4)}
constexpr TileFn kQ4KTiles[kTileT][kTileR] = LARDER_INT_TABLE(IntQ4K);
constexpr TileFn kQ5KTiles[kTileT][kTileR] = LARDER_INT_TABLE(IntQ5K);
constexpr TileFn kQ6KTiles[kTileT][kTileR] = LARDER_INT_TABLE(IntQ6K);
#undef LARDER_INT_TABLE
#undef LARDER_INT_ROW

constexpr size_t kTokenBlockBytes = 256 * 1024;  // int8 activations kept in L2

}  // namespace
#endif  // LARDER_KQUANT_INT

bool matmul_rows_kquant_int(const WeightView& w, const BlockQ8K* xq, int n_tokens, float* y,
                            int y_stride, int64_t row_begin, int64_t row_end) {
#ifdef LARDER_KQUANT_INT
  const TileFn(*tab)[kTileR] = nullptr;
  switch (w.type) {
    case GgmlType::kQ4_K: tab = kQ4KTiles; break;
    case GgmlType::kQ5_K: tab = kQ5KTiles; break;
    case GgmlType::kQ6_K: tab = kQ6KTiles; break;
    default: return false;
  }
  const int nb = int(w.ne[0] / kQK_K);
  int block = int(kTokenBlockBytes / (size_t(nb) * sizeof(BlockQ8K)));
  block = std::max(kTileT, block / kTileT * kTileT);
  for (int tb = 0; tb < n_tokens; tb += block) {
    const int te = std::min(n_tokens, tb + block);
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kTileR) {
      const int R = int(std::min<int64_t>(kTileR, row_end - r0));
      for (int t0 = tb; t0 < te; t0 += kTileT) {
        const int T = std::min(kTileT, te - t0);
        tab[T - 1][R - 1](w.row(r0), w.row_bytes, xq + size_t(t0) * nb, nb,
                          y + size_t(t0) * y_stride + r0, y_stride);
      }
    }
  }
  return true;
#else
  (void)w, (void)xq, (void)n_tokens, (void)y, (void)y_stride, (void)row_begin, (void)row_end;
  return false;
#endif
}

}  // namespace larder
