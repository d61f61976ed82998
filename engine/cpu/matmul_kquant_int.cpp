// Q4_K / Q5_K / Q6_K x int8 activations (see matmul_kquant.h).
//
// Per super-block and (token, row), the quant products are an exact integer
// computation:
//   P     = sum of 4 products q_w * q_x per int32 lane   (vpdpbusd, u8 x s8)
//   isum  = sum over sub-blocks of sc * P                (packed to int16, vpdpwssd)
//   acc  += float(isum) * (d_w * d_x)                    (16 lanes, one FMA)
// plus, for Q4_K / Q5_K, the mins in f32 through the activations' 32-value
// sums S_i (exact integers):
//   acc  -= (dmin_w * m_i) * (d_x * S_i)                 (8 lanes, one FMA)
// and, for Q6_K, whose quants are stored + 32, the offset inside isum
// (isum -= 32 * sc . bsums, exact). The integer lanes are exact (bounds
// below), so how and in which order they are formed does not change a bit;
// the f32 operations per (token, row) are the same sequence in every tile,
// so a row never depends on the batch size, the row range or the thread.
//
// Lane bounds (|q_x| <= 127): P <= 4 * 63 * 127 = 32004 fits the int16 pack
// (Q6_K's stored quants are 0..63, Q5_K's 0..31, Q4_K's 0..15); isum is at
// most 8 products of P and a scale (|sc| <= 128) per lane, well inside
// int32; it converts to f32 exactly below 2^24, which only adversarial Q6_K
// blocks can exceed (then rounded once, the same way in every tile).
//
// Why this shape (docs/cpu-kernels.md): decode streams each weight byte
// once, so a core has ~12 cycles per 144-byte Q4_K block to keep up with
// memory. Compared with the earlier vpmaddubsw / vpmaddwd version with
// scalar scale unpacking and a scalar mins loop, the scales and mins are
// decoded with a few vector shuffles, the mins cost one FMA, and the decode
// tile (1 token x 4 rows) prefetches the next tile's rows, as the Q8_0
// decode tile does. The multi-token tiles run on the integer multiply
// pipes (4 vpdpbusd + 2 vpdpwssd per block and output).
#include "engine/cpu/matmul_kquant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/gguf/quant_blocks.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define LARDER_KQUANT_INT 1
#include "engine/cpu/simd.h"
#elif defined(__AVX2__) && defined(__FMA__)
#define LARDER_KQUANT_AVX2 1  // the quantizer only (the AVX2 K-quant tiles: matmul_packed_avx2_kquant.cpp)
#include "engine/cpu/simd_avx2.h"
#endif

namespace larder {

void quantize_rows_q8k(const float* x, int n_rows, int k, BlockQ8K* out) {
  const int nb = k / kQK_K;
  for (int r = 0; r < n_rows; ++r) {
    for (int b = 0; b < nb; ++b) {
      const float* v = x + size_t(r) * k + size_t(b) * kQK_K;
      BlockQ8K& blk = out[size_t(r) * nb + b];
#ifdef LARDER_KQUANT_INT
      // The scalar loop's arithmetic, 16 lanes at a time: q = v * id rounded
      // half away from zero (lround; t = trunc(|q|), |q| - t is exact).
      __m512 amax = _mm512_setzero_ps();
      for (int i = 0; i < kQK_K; i += 16) amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(v + i)));
      const float d = _mm512_reduce_max_ps(amax) / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      blk.d = d;
      const __m512 vid = _mm512_set1_ps(id);
      for (int j = 0; j < 16; ++j) {
        const __m512 q = _mm512_mul_ps(_mm512_loadu_ps(v + 16 * j), vid);
        const __m512 aq = _mm512_abs_ps(q);
        __m512 t = _mm512_roundscale_ps(aq, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __mmask16 up = _mm512_cmp_ps_mask(_mm512_sub_ps(aq, t), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
        t = _mm512_mask_add_ps(t, up, t, _mm512_set1_ps(1.0f));
        __m512i qi = _mm512_min_epi32(_mm512_cvttps_epi32(t), _mm512_set1_epi32(127));
        const __mmask16 neg = _mm512_cmp_ps_mask(q, _mm512_setzero_ps(), _CMP_LT_OQ);
        qi = _mm512_mask_sub_epi32(qi, neg, _mm512_setzero_si512(), qi);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(blk.qs + 16 * j), _mm512_cvtepi32_epi8(qi));
        blk.bsums[j] = int16_t(_mm512_reduce_add_epi32(qi));
      }
#elif defined(LARDER_KQUANT_AVX2)
      // The same arithmetic, 8 lanes at a time (lround_avx2).
      __m256 amax = _mm256_setzero_ps();
      for (int i = 0; i < kQK_K; i += 8)
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(v + i)));
      const float d = hmax_avx2(amax) / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      blk.d = d;
      const __m256 vid = _mm256_set1_ps(id);
      for (int j = 0; j < 8; ++j) {  // 32 values: two bsums
        __m256i q[4];
        for (int h = 0; h < 4; ++h)
          q[h] = _mm256_min_epi32(lround_avx2(_mm256_mul_ps(_mm256_loadu_ps(v + 32 * j + 8 * h), vid)),
                                  _mm256_set1_epi32(127));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(blk.qs + 32 * j), pack_i32x4_i8(q[0], q[1], q[2], q[3]));
        blk.bsums[2 * j] = int16_t(hsum_epi32_avx2(_mm256_add_epi32(q[0], q[1])));
        blk.bsums[2 * j + 1] = int16_t(hsum_epi32_avx2(_mm256_add_epi32(q[2], q[3])));
      }
#else
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
#endif
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
inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m512i load64(const void* p) { return _mm512_loadu_si512(p); }
// [p[0..31] | p[off .. off + 31]]
inline __m512i load2x32(const int8_t* p, int off) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(load32(p)), load32(p + off), 1);
}

// Lane sums of 4 products u8 x s8 (exact: |sum| <= 4 * 255 * 128).
inline __m512i dot4(__m512i u, __m512i s) {
#ifdef __AVX512VNNI__
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s);
#else  // same lanes: pairs fit int16 here (|u| <= 63), so vpmaddubsw never saturates
  return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1));
#endif
}
// acc + pairwise int16 products summed to int32.
inline __m512i dot2_acc(__m512i acc, __m512i a, __m512i b) {
#ifdef __AVX512VNNI__
  return _mm512_dpwssd_epi32(acc, a, b);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
#endif
}
// int16 word indices (vpermw) of the scale vector that multiplies
// packs_epi32(P_a, P_b): in 128-bit lane k = w / 8, words 0..3 are P_a's
// int32 lanes 4k..4k+3 and words 4..7 are P_b's.
struct alignas(64) Idx16 {
  int16_t v[32];
  __m512i load() const { return _mm512_load_si512(v); }
};
template <class F>
constexpr Idx16 make_idx(F f) {
  Idx16 r{};
  for (int w = 0; w < 32; ++w) r.v[w] = int16_t(f(w));
  return r;
}

// ---- Q4_K / Q5_K ----------------------------------------------------------------
// Scales and mins of a Q4_K / Q5_K block (d, dmin, scales[12] are its first
// 16 bytes) as bytes: 0..7 sc[0..7], 8..15 m[0..7] (docs/quant-formats.md):
//   s < 4:  sc = S[s] & 63,                          m = S[s+4] & 63
//   s >= 4: sc = (S[s+4] & 15) | (S[s-4] >> 6) << 4,  m = (S[s+4] >> 4) | (S[s] >> 6) << 4
inline __m128i k4_scales_mins(const uint8_t* blk) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk));  // S[i] is byte 4 + i
  // a = [S0..3, S8..11, S4..7, S8..11], b = [0, S0..3, 0, S4..7]
  const __m128i a = _mm_shuffle_epi8(v, _mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15));
  const __m128i b = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11));
  // Bytes 12..15 take S8..11 >> 4 (word shift; the mask drops the neighbour's bits).
  const __m128i a2 = _mm_srlv_epi16(a, _mm_setr_epi16(0, 0, 0, 0, 0, 0, 4, 4));
  const __m128i lo = _mm_and_si128(a2, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15));
  // (S >> 6) << 4 = (S >> 2) & 0x30 per byte.
  return _mm_or_si128(lo, _mm_and_si128(_mm_srli_epi16(b, 2), _mm_set1_epi8(0x30)));
}

// A Q4_K / Q5_K block read 64 bytes of qs at a time: low nibbles of
// qs[64j .. 64j + 63] are sub-blocks 4j (bytes 0..31) and 4j + 2 (32..63),
// high nibbles 4j + 1 and 4j + 3. The activations are paired the same way:
// xa_j = [x 128j .. +31 | x 128j + 64 .. +95], xb_j = [+32 .. +63 | +96 .. +127].
struct RowK4 {
  __m512i q[4];   // low_0, high_0, low_1, high_1 (u8)
  __m512i s[2];   // int16 scales for packs(P(low_j), P(high_j))
  __m512 mf;      // lanes 0..7: dmin * m[i] (exact), lanes 8..15: 0
  float d;
};
struct XK4 {
  __m512i xa[2], xb[2];
  __m512 bf;      // lanes 0..7: d * (sum of the 32 quants of sub-block i), 8..15: 0
  float d;
};

// Sub-block of each word of packs(P(low_j), P(high_j)): lanes 0..7 of
// P(low_j) are sub-block 4j, lanes 8..15 are 4j + 2; P(high_j) 4j + 1, 4j + 3.
constexpr Idx16 kK4Scale[2] = {
    make_idx([](int w) { return (w / 8 >= 2 ? 2 : 0) + (w % 8 >= 4 ? 1 : 0); }),
    make_idx([](int w) { return 4 + (w / 8 >= 2 ? 2 : 0) + (w % 8 >= 4 ? 1 : 0); })};

inline void scales_k4(__m128i sm, float dmin, RowK4* r) {
  // sm16: int16 lanes 0..7 sc, 8..15 m, 16..31 zero.
  const __m512i sm16 = _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(sm));
  r->s[0] = _mm512_permutexvar_epi16(kK4Scale[0].load(), sm16);
  r->s[1] = _mm512_permutexvar_epi16(kK4Scale[1].load(), sm16);
  const __m512 m = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_srli_si128(sm, 8)));
  r->mf = _mm512_mul_ps(m, _mm512_set1_ps(dmin));
}

inline void nibbles(const uint8_t* qs, RowK4* r) {
  const __m512i m4 = _mm512_set1_epi8(15);
  for (int j = 0; j < 2; ++j) {
    const __m512i v = load64(qs + 64 * j);
    r->q[2 * j] = _mm512_and_si512(v, m4);
    r->q[2 * j + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  }
}

// What Q4_K and Q5_K blocks share: d, the 6-bit scales and mins, the low
// nibbles.
template <typename Block>
inline void load_k4_low(const uint8_t* blk, RowK4* r) {
  const auto* b = reinterpret_cast<const Block*>(blk);
  r->d = _cvtsh_ss(b->d);
  scales_k4(k4_scales_mins(blk), _cvtsh_ss(b->dmin), r);
  nibbles(b->qs, r);
}

struct IntQ4K {
  using Block = BlockQ4_K;
  using Row = RowK4;
  using X = XK4;
  static void load(const uint8_t* blk, Row* r) { load_k4_low<Block>(blk, r); }
};

struct IntQ5K {
  using Block = BlockQ5_K;
  using Row = RowK4;
  using X = XK4;
  static void load(const uint8_t* blk, Row* r) {
    load_k4_low<Block>(blk, r);
    const auto* b = reinterpret_cast<const Block*>(blk);
    // Fifth bit of value 32s + l: bit s of qh[l]; q[i] holds sub-blocks
    // (4j + i%2, 4j + 2 + i%2) in its two halves, j = i / 2.
    const __m512i qh = _mm512_broadcast_i64x4(load32(b->qh));
    const __m512i k16 = _mm512_set1_epi8(16);
    for (int i = 0; i < 4; ++i) {
      const int s = 4 * (i / 2) + i % 2;
      const __m512i sel = _mm512_inserti64x4(_mm512_set1_epi8(char(1 << s)), _mm256_set1_epi8(char(1 << (s + 2))), 1);
      r->q[i] = _mm512_mask_add_epi8(r->q[i], _mm512_test_epi8_mask(qh, sel), r->q[i], k16);
    }
  }
};

struct K4Dot {
  static void load_x(const BlockQ8K& xb, XK4* x) {
    for (int j = 0; j < 2; ++j) {
      x->xa[j] = load2x32(xb.qs + 128 * j, 64);
      x->xb[j] = load2x32(xb.qs + 128 * j + 32, 64);
    }
    // Pairs of 16-value sums -> 32-value sums (int32 lanes 0..7).
    const __m512i s32 = _mm512_madd_epi16(_mm512_zextsi256_si512(load32(xb.bsums)), _mm512_set1_epi16(1));
    x->bf = _mm512_mul_ps(_mm512_cvtepi32_ps(s32), _mm512_set1_ps(xb.d));
    x->d = xb.d;
  }
  // The mins in f32: (dmin m[i]) * (d_x * sum i), 8 lanes, one FMA.
  static __m512 dot(const RowK4& r, const XK4& x, __m512 acc) {
    __m512i isum = _mm512_setzero_si512();
    for (int j = 0; j < 2; ++j)
      isum = dot2_acc(isum, _mm512_packs_epi32(dot4(r.q[2 * j], x.xa[j]), dot4(r.q[2 * j + 1], x.xb[j])), r.s[j]);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(r.d * x.d), acc);
    return _mm512_fnmadd_ps(r.mf, x.bf, acc);
  }
};
struct DotQ4K : IntQ4K, K4Dot {};
struct DotQ5K : IntQ5K, K4Dot {};

// ---- Q6_K -----------------------------------------------------------------------
// Half h: the low nibbles of ql[64h .. 64h + 63] are values 128h + 0..63 in
// order, the high nibbles 128h + 64..127; the two high bits of value
// 128h + 32g + l are (qh[32h + l] >> 2g) & 3. So the activations are read in
// their natural order, 64 at a time.
// Sub-block of each word of packs(P(q[2h]), P(q[2h + 1])): words 0..3 of
// 128-bit lane k are lanes 4k.. of P(q[2h]) = sub-block 8h + k, words 4..7
// sub-block 8h + 4 + k.
constexpr Idx16 kQ6Scale[2] = {make_idx([](int w) { return w / 8 + (w % 8 >= 4 ? 4 : 0); }),
                               make_idx([](int w) { return 8 + w / 8 + (w % 8 >= 4 ? 4 : 0); })};

struct RowQ6K {
  __m512i q[4];   // stored quants (q + 32, 0..63) of values 64i .. 64i + 63
  __m512i s[2];   // int16 scales for packs(P(q[2h]), P(q[2h + 1]))
  __m512i sc;     // int16 sc[0..15], lanes 16..31 = 0
  float d;
};
struct XQ6K {
  __m512i x[4];
  __m512i bs;
  float d;
};
struct DotQ6K {
  using Block = BlockQ6_K;
  using Row = RowQ6K;
  using X = XQ6K;
  static void load(const uint8_t* blk, Row* r) {
    const auto* b = reinterpret_cast<const Block*>(blk);
    r->d = _cvtsh_ss(b->d);
    const __m512i m4 = _mm512_set1_epi8(15), m2 = _mm512_set1_epi8(0x30);
    // Rotating each dword left by 4 - 2g moves bits 2g, 2g + 1 of every byte
    // to bits 4, 5 of the same byte (g = 0..3: by 4, 2, 0, 30).
    const __m512i rot_lo = _mm512_inserti64x4(_mm512_set1_epi32(4), _mm256_set1_epi32(2), 1);
    const __m512i rot_hi = _mm512_inserti64x4(_mm512_set1_epi32(0), _mm256_set1_epi32(30), 1);
    for (int h = 0; h < 2; ++h) {
      const __m512i v = load64(b->ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(load32(b->qh + 32 * h));
      // A | (B & C): 0xF8
      r->q[2 * h] = _mm512_ternarylogic_epi32(_mm512_and_si512(v, m4), _mm512_rolv_epi32(qh, rot_lo), m2, 0xF8);
      r->q[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                                                  _mm512_rolv_epi32(qh, rot_hi), m2, 0xF8);
    }
    r->sc = _mm512_zextsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales))));
    r->s[0] = _mm512_permutexvar_epi16(kQ6Scale[0].load(), r->sc);
    r->s[1] = _mm512_permutexvar_epi16(kQ6Scale[1].load(), r->sc);
  }
  static void load_x(const BlockQ8K& xb, XQ6K* x) {
    for (int i = 0; i < 4; ++i) x->x[i] = load64(xb.qs + 64 * i);
    x->bs = _mm512_zextsi256_si512(load32(xb.bsums));
    x->d = xb.d;
  }
  static __m512 dot(const RowQ6K& r, const XQ6K& x, __m512 acc) {
    __m512i isum = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h)
      isum = dot2_acc(isum, _mm512_packs_epi32(dot4(r.q[2 * h], x.x[2 * h]), dot4(r.q[2 * h + 1], x.x[2 * h + 1])), r.s[h]);
    // Stored quants are q + 32: subtract 32 * sum_s sc[s] * (16-value sum s).
    isum = _mm512_sub_epi32(isum, _mm512_slli_epi32(_mm512_madd_epi16(r.sc, x.bs), 5));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(r.d * x.d), acc);
  }
};

// T tokens x R rows. Every (token, row) accumulator sees D::dot once per
// block, blocks in increasing order, then hsum: the same f32 sequence in
// every tile. One-token tiles prefetch the next tile's rows (R rows ahead)
// at the offsets they are reading: a row is a short stream (K = 2048 Q4_K is
// 18 lines) that the hardware prefetcher barely ramps up on.
template <class D, int T, int R>
void tile_int(const uint8_t* w, size_t row_bytes, const BlockQ8K* xq, int nb, float* y,
              int y_stride) {
  using Block = typename D::Block;
  __m512 acc[T][R];
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
  const size_t ahead = R * row_bytes;
  for (int b = 0; b < nb; ++b) {
    typename D::Row row[R];
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w + r * row_bytes + size_t(b) * sizeof(Block);
      if constexpr (T == 1) {
        for (size_t o = 0; o < sizeof(Block); o += 64)
          _mm_prefetch(reinterpret_cast<const char*>(blk + ahead + o), _MM_HINT_T0);
      }
      D::load(blk, &row[r]);
    }
    for (int t = 0; t < T; ++t) {
      typename D::X x;
      D::load_x(xq[size_t(t) * nb + b], &x);
      for (int r = 0; r < R; ++r) acc[t][r] = D::dot(row[r], x, acc[t][r]);
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) y[size_t(t) * y_stride + r] = hsum(acc[t][r]);
}

constexpr int kTileT = 4;
constexpr int kTileR = 4;
// Rows per tile for decode (1 token) and prefill, chosen by measurement
// (docs/cpu-kernels.md). Any choice gives the same bits.
constexpr int kDecodeR = 4;
constexpr int kPrefillR = 4;
using TileFn = void (*)(const uint8_t*, size_t, const BlockQ8K*, int, float*, int);
#define LARDER_INT_ROW(D, T) {&tile_int<D, T, 1>, &tile_int<D, T, 2>, &tile_int<D, T, 3>, &tile_int<D, T, 4>}
#define LARDER_INT_TABLE(D) {LARDER_INT_ROW(D, 1), LARDER_INT_ROW(D, 2), LARDER_INT_ROW(D, 3), LARDER_INT_ROW(D, 4)}
constexpr TileFn kQ4KTiles[kTileT][kTileR] = LARDER_INT_TABLE(DotQ4K);
constexpr TileFn kQ5KTiles[kTileT][kTileR] = LARDER_INT_TABLE(DotQ5K);
constexpr TileFn kQ6KTiles[kTileT][kTileR] = LARDER_INT_TABLE(DotQ6K);
#undef LARDER_INT_TABLE
#undef LARDER_INT_ROW

constexpr size_t kTokenBlockBytes = 256 * 1024;  // int8 activations kept in L2

}  // namespace
#endif  // LARDER_KQUANT_INT

bool kquant_int_supported(GgmlType t) {
#ifdef LARDER_KQUANT_INT
  return t == GgmlType::kQ4_K || t == GgmlType::kQ5_K || t == GgmlType::kQ6_K;
#else
  (void)t;
  return false;
#endif
}

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
  const int rows_per_tile = n_tokens == 1 ? kDecodeR : kPrefillR;
  int block = int(kTokenBlockBytes / (size_t(nb) * sizeof(BlockQ8K)));
  block = std::max(kTileT, block / kTileT * kTileT);
  for (int tb = 0; tb < n_tokens; tb += block) {
    const int te = std::min(n_tokens, tb + block);
    for (int64_t r0 = row_begin; r0 < row_end; r0 += rows_per_tile) {
      const int R = int(std::min<int64_t>(rows_per_tile, row_end - r0));
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
