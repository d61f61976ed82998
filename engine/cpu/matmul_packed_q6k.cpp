// The packed Q6_K, Q3_K and Q2_K layouts and kernels (layout and arithmetic:
// matmul_packed.h). Q3_K and Q2_K run on Q6_K's tiles with their own planes.
#include <algorithm>
#include <cassert>
#include <cstring>

#include "engine/cpu/matmul_kquant.h"
#include "engine/cpu/matmul_packed.h"
#include "engine/cpu/matmul_packed_amx.h"
#include "engine/cpu/matmul_packed_tiles.h"
#include "engine/gguf/quant_blocks.h"

#ifdef LARDER_PACKED_AVX512
#define LARDER_Q6K_PACKED 1
#include "engine/cpu/simd.h"
#endif

namespace larder {

namespace {

constexpr size_t kHiOff = 2048, kScOff = 3072, kDOff = 3328;
static_assert(kDOff + 32 <= PackedMatrix::kQ6KBlockBytes);
// Q3_K (matmul_packed.h): two-bit planes at 0, high bits, scales, d.
constexpr size_t kQ3KHbOff = 1024, kQ3KScOff = 1536, kQ3KDOff = 1792;
static_assert(kQ3KDOff + 32 <= PackedMatrix::kQ3KBlockBytes);
// Q2_K: two-bit planes at 0, scales, mins, d, dmin.
constexpr size_t kQ2KScOff = 1024, kQ2KMinOff = 1280, kQ2KDOff = 1536, kQ2KDminOff = 1568;
static_assert(kQ2KDminOff + 32 <= PackedMatrix::kQ2KBlockBytes);
// Q2_K's scales and mins of sub-blocks 2 i2 and 2 i2 + 1 sit side by side
// for each row: byte 32 i2 + 2 r + (i % 2) holds row r's of sub-block i
// (matmul_packed.h), as Q4_K's mins.
inline size_t pair_index(int i, int r) { return size_t(32 * (i / 2) + 2 * r + i % 2); }

// The 256 values of a Q6_K super-block in order, 0..63 (ggml's layout: per
// half n of 128 values, ql holds the low 4 bits of 4 runs g of 32 in two
// nibble planes, qh their high 2 bits in four 2-bit planes).
void q6k_values(const BlockQ6_K& b, uint8_t (&q)[256]) {
  for (int n = 0; n < 2; ++n)
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo = b.ql[64 * n + l + (g % 2) * 32];
        q[128 * n + 32 * g + l] = uint8_t((g < 2 ? (lo & 15) : (lo >> 4)) | (((b.qh[32 * n + l] >> (2 * g)) & 3) << 4));
      }
}

// A Q3_K super-block's values as q = w + 4 in 0..7 (ggml's layout: qs holds
// the low 2 bits of 4 runs g of 32 per half h of 128 values, hmask bit 4h + g
// of byte l the high bit of value 128 h + 32 g + l).
void q3k_values(const BlockQ3_K& b, uint8_t (&q)[256]) {
  for (int h = 0; h < 2; ++h)
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l)
        q[128 * h + 32 * g + l] =
            uint8_t(((b.qs[32 * h + l] >> (2 * g)) & 3) | (((b.hmask[l] >> (4 * h + g)) & 1) << 2));
}

// A Q2_K super-block's values, 0..3 (qs as Q3_K's).
void q2k_values(const BlockQ2_K& b, uint8_t (&q)[256]) {
  for (int h = 0; h < 2; ++h)
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l) q[128 * h + 32 * g + l] = uint8_t((b.qs[32 * h + l] >> (2 * g)) & 3);
}

// Row r's two-bit planes (16 vectors: vector (i2, half) holds, at byte
// 4r + k, in bits 2c, 2c + 1, bits shift, shift + 1 of value
// 32 i2 + 16 half + 4c + k); Q6_K's high bits (shift 4), Q3_K's and Q2_K's
// low bits (shift 0).
void pack_two_bit_planes(uint8_t* o, int r, const uint8_t (&q)[256], int shift) {
  for (int i2 = 0; i2 < 8; ++i2)
    for (int half = 0; half < 2; ++half)
      for (int k = 0; k < 4; ++k) {
        const uint8_t* v = q + 32 * i2 + 16 * half + k;
        o[i2 * 128 + half * 64 + 4 * r + k] = uint8_t(((v[0] >> shift) & 3) | ((v[4] >> shift) & 3) << 2 |
                                                      ((v[8] >> shift) & 3) << 4 | ((v[12] >> shift) & 3) << 6);
      }
}

// offset: what the packed quants add to w (neg_oxs = -offset xs); min_pairs:
// Q2_K, whose mins read -xs in neg_xs_pairs. The field a type does not read
// is zero.
void prepare_packed_act(const BlockQ8K* xq, int n_tokens, int k, Q6KPackedAct* out, int32_t offset,
                        bool min_pairs) {
  const size_t n = size_t(n_tokens) * size_t(k / kQK_K);
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(out[i].qs, xq[i].qs, sizeof(out[i].qs));
    for (int s = 0; s < 16; ++s) out[i].neg_oxs[s] = -offset * int32_t(xq[i].bsums[s]);
    for (int j = 0; j < 8; ++j)
      out[i].neg_xs_pairs[j] = min_pairs ? int32_t(uint32_t(uint16_t(-xq[i].bsums[2 * j])) |
                                                   uint32_t(uint16_t(-xq[i].bsums[2 * j + 1])) << 16)
                                         : 0;
    out[i].d = xq[i].d;
    std::memset(out[i].pad, 0, sizeof(out[i].pad));
  }
}
}  // namespace

void prepare_q6k_packed_act(const BlockQ8K* xq, int n_tokens, int k, Q6KPackedAct* out) {
  prepare_packed_act(xq, n_tokens, k, out, 32, false);
}
void prepare_q3k_packed_act(const BlockQ8K* xq, int n_tokens, int k, Q6KPackedAct* out) {
  prepare_packed_act(xq, n_tokens, k, out, 4, false);
}
void prepare_q2k_packed_act(const BlockQ8K* xq, int n_tokens, int k, Q6KPackedAct* out) {
  prepare_packed_act(xq, n_tokens, k, out, 0, true);
}

namespace packed_detail {

void pack_q6k_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin,
                     int64_t g_end) {
  pack_kquant_groups<BlockQ6_K>(w, data, group_stride, PackedMatrix::kQ6KBlockBytes, g_begin, g_end,
                                [](uint8_t* o, int r, const BlockQ6_K& b) {
    uint8_t q[256];
    q6k_values(b, q);
    for (int i2 = 0; i2 < 8; ++i2)  // nibble planes: low 4 bits of sub-block 2 i2 | 2 i2 + 1 << 4
      for (int c = 0; c < 4; ++c)
        for (int k = 0; k < 4; ++k)
          o[i2 * 256 + c * 64 + 4 * r + k] =
              uint8_t((q[32 * i2 + 4 * c + k] & 15) | (q[32 * i2 + 16 + 4 * c + k] & 15) << 4);
    pack_two_bit_planes(o + kHiOff, r, q, 4);
    for (int i = 0; i < 16; ++i) o[kScOff + i * 16 + r] = uint8_t(b.scales[i]);
    std::memcpy(o + kDOff + 2 * r, &b.d, 2);
  });
}

void pack_q3k_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin,
                     int64_t g_end) {
  pack_kquant_groups<BlockQ3_K>(w, data, group_stride, PackedMatrix::kQ3KBlockBytes, g_begin, g_end,
                                [](uint8_t* o, int r, const BlockQ3_K& b) {
    uint8_t q[256];
    q3k_values(b, q);
    pack_two_bit_planes(o, r, q, 0);
    for (int i2 = 0; i2 < 8; ++i2)  // high bits: bit 4 half + c of byte 4r + k
      for (int k = 0; k < 4; ++k) {
        int hb = 0;
        for (int half = 0; half < 2; ++half)
          for (int c = 0; c < 4; ++c) hb |= (q[32 * i2 + 16 * half + 4 * c + k] >> 2) << (4 * half + c);
        o[kQ3KHbOff + i2 * 64 + 4 * r + k] = uint8_t(hb);
      }
    int sc[16];
    q3k_scales(b.scales, sc);
    for (int i = 0; i < 16; ++i) o[kQ3KScOff + i * 16 + r] = uint8_t(int8_t(sc[i]));
    std::memcpy(o + kQ3KDOff + 2 * r, &b.d, 2);
  });
}

void pack_q2k_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin,
                     int64_t g_end) {
  pack_kquant_groups<BlockQ2_K>(w, data, group_stride, PackedMatrix::kQ2KBlockBytes, g_begin, g_end,
                                [](uint8_t* o, int r, const BlockQ2_K& b) {
    uint8_t q[256];
    q2k_values(b, q);
    pack_two_bit_planes(o, r, q, 0);
    for (int i = 0; i < 16; ++i) {
      o[kQ2KScOff + pair_index(i, r)] = uint8_t(b.scales[i] & 15);
      o[kQ2KMinOff + pair_index(i, r)] = uint8_t(b.scales[i] >> 4);
    }
    std::memcpy(o + kQ2KDOff + 2 * r, &b.d, 2);
    std::memcpy(o + kQ2KDminOff + 2 * r, &b.dmin, 2);
  });
}

#ifdef LARDER_Q6K_PACKED
namespace {

inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Bits 2c, 2c + 1 of every byte moved to bits 4, 5 (the rest is masked).
template <int C>
inline __m512i hi_bits(__m512i h) {
  if constexpr (C == 0) return _mm512_slli_epi32(h, 4);
  if constexpr (C == 1) return _mm512_slli_epi32(h, 2);
  if constexpr (C == 2) return h;
  return _mm512_srli_epi32(h, 2);
}

// The three formats of the tile below. For step i2 (sub-blocks 2 i2 and
// 2 i2 + 1), Planes loads what chunk C of both needs besides their own
// vector, and quants<C> gives the u8 quants (w + offset) of values
// 32 i2 + 4C + k (qa) and 32 i2 + 16 + 4C + k (qb) at byte 4r + k.
struct Q6KFormat {
  static constexpr size_t kBlockBytes = PackedMatrix::kQ6KBlockBytes;
  static constexpr size_t kScOff = 3072, kDOff = 3328;
  static constexpr bool kMins = false;  // the offset starts each sub-block's sum
  static constexpr bool kPairs = false;  // sc_i * A_i in int32 (A_i need not fit int16)
  static __m512i scales(const uint8_t* p) {  // int8
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static constexpr int kLinesPerStep = 7;  // of a super-block's 53, 8 steps
  struct Planes {
    __m512i h0, h1;
    Planes(const uint8_t* b, int i2)
        : h0(_mm512_load_si512(b + kHiOff + i2 * 128)), h1(_mm512_load_si512(b + kHiOff + i2 * 128 + 64)) {}
  };
  template <int C>
  static void quants(const uint8_t* b, int i2, const Planes& p, __m512i* qa, __m512i* qb) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    const __m512i v = _mm512_load_si512(b + i2 * 256 + C * 64);
#ifdef __GFNI__
    if constexpr (C != 2) {  // the high bits to bits 4, 5 of clean bytes; m4 ? A : B (0xE4) adds the nibble
      *qa = _mm512_ternarylogic_epi32(v, gf_move<move_bits(2 * C, 4, 2)>(p.h0), m4, 0xE4);
      *qb = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), gf_move<move_bits(2 * C, 4, 2)>(p.h1), m4, 0xE4);
      return;
    }
#endif
    // A | (B & C): 0xF8
    *qa = _mm512_ternarylogic_epi32(_mm512_and_si512(v, m4), hi_bits<C>(p.h0), m30, 0xF8);
    *qb = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), hi_bits<C>(p.h1), m30, 0xF8);
  }
};

// Bit n of every byte moved to bit 2 (the rest is masked).
template <int N>
inline __m512i bit_to_2(__m512i h) {
  if constexpr (N < 2) return _mm512_slli_epi32(h, 2 - N);
  if constexpr (N == 2) return h;
  return _mm512_srli_epi32(h, N - 2);
}

struct Q3KFormat {  // q = w + 4 in 0..7: two low bits and the high bit (matmul_packed.h)
  static constexpr size_t kBlockBytes = PackedMatrix::kQ3KBlockBytes;
  static constexpr size_t kScOff = kQ3KScOff, kDOff = kQ3KDOff;
  static constexpr bool kMins = false;
  // Pairs as Q2_K's measured no faster here (2026-12-07, Zen 5): the quants' planes cost the most.
  static constexpr bool kPairs = false;
  static __m512i scales(const uint8_t* p) { return Q6KFormat::scales(p); }
  static constexpr int kLinesPerStep = 4;  // of 29
  struct Planes {
    __m512i l0, l1, hb;
    Planes(const uint8_t* b, int i2)
        : l0(_mm512_load_si512(b + i2 * 128)), l1(_mm512_load_si512(b + i2 * 128 + 64)),
          hb(_mm512_load_si512(b + kQ3KHbOff + i2 * 64)) {}
  };
  template <int C>
  static void quants(const uint8_t*, int, const Planes& p, __m512i* qa, __m512i* qb) {
    const __m512i m3 = _mm512_set1_epi8(0x03);
#ifdef __GFNI__
    // The high bit to bit 2 of a clean byte; m3 ? A : B (0xE4) adds the low bits.
    *qa = _mm512_ternarylogic_epi32(C == 0 ? p.l0 : _mm512_srli_epi32(p.l0, 2 * C), gf_move<move_bits(C, 2, 1)>(p.hb),
                                    m3, 0xE4);
    *qb = _mm512_ternarylogic_epi32(C == 0 ? p.l1 : _mm512_srli_epi32(p.l1, 2 * C),
                                    gf_move<move_bits(4 + C, 2, 1)>(p.hb), m3, 0xE4);
#else
    const __m512i m4 = _mm512_set1_epi8(0x04);
    *qa = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi32(p.l0, 2 * C), m3), bit_to_2<C>(p.hb), m4, 0xF8);
    *qb = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi32(p.l1, 2 * C), m3), bit_to_2<4 + C>(p.hb), m4,
                                    0xF8);
#endif
  }
};

struct Q2KFormat {  // q in 0..3 (matmul_packed.h); the mins are a second sum
  static constexpr size_t kBlockBytes = PackedMatrix::kQ2KBlockBytes;
  static constexpr size_t kScOff = kQ2KScOff, kMinOff = kQ2KMinOff, kDOff = kQ2KDOff, kDminOff = kQ2KDminOff;
  static constexpr int kLinesPerStep = 4;  // of 25
  static constexpr bool kMins = true;
  static constexpr bool kPairs = true;
  static __m512i scale_pairs(const uint8_t* p) {  // u8
    return _mm512_cvtepu8_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
  }
  struct Planes {
    __m512i l0, l1;
    Planes(const uint8_t* b, int i2) : l0(_mm512_load_si512(b + i2 * 128)), l1(_mm512_load_si512(b + i2 * 128 + 64)) {}
  };
  template <int C>
  static void quants(const uint8_t*, int, const Planes& p, __m512i* qa, __m512i* qb) {
#ifdef __GFNI__
    if constexpr (C != 0) {  // bits 2C, 2C + 1 to bits 0, 1 of clean bytes: one instruction
      *qa = gf_move<move_bits(2 * C, 0, 2)>(p.l0);
      *qb = gf_move<move_bits(2 * C, 0, 2)>(p.l1);
      return;
    }
#endif
    const __m512i m3 = _mm512_set1_epi8(0x03);
    *qa = _mm512_and_si512(_mm512_srli_epi32(p.l0, 2 * C), m3);
    *qb = _mm512_and_si512(_mm512_srli_epi32(p.l1, 2 * C), m3);
  }
};

template <class F, int T, int C>
inline void chunk(const uint8_t* b, int i2, const typename F::Planes& p, const Q6KPackedAct* x, int nb, int s,
                  __m512i (&A)[T], __m512i (&B)[T]) {
  __m512i qa, qb;
  F::template quants<C>(b, i2, p, &qa, &qb);
  for (int t = 0; t < T; ++t) {
    const int8_t* q = x[size_t(t) * nb + s].qs + 32 * i2 + 4 * C;
    A[t] = _mm512_dpbusd_epi32(A[t], qa, bcast4(q));
    B[t] = _mm512_dpbusd_epi32(B[t], qb, bcast4(q + 16));
  }
}

// T tokens x G groups of 16 rows (group g at grp + g * group_stride) over all
// nb super-blocks of format F; y: token 0, the first group's first row; the
// last group writes last_rows rows. Several groups in flight are for decode:
// more independent streams of weights.
template <class F, int T, int G>
void tile_q6k_groups(const uint8_t* grp, size_t group_stride, const Q6KPackedAct* x, int nb, float* y,
                     int y_stride, int last_rows) {
  __m512 acc[G][T];
  for (int g = 0; g < G; ++g)
    for (int t = 0; t < T; ++t) acc[g][t] = _mm512_setzero_ps();
  for (int s = 0; s < nb; ++s) {
    const uint8_t* bg[G];
    for (int g = 0; g < G; ++g) bg[g] = grp + size_t(g) * group_stride + size_t(s) * F::kBlockBytes;
    __m512i S[G][T], Mn[G][T];  // Mn: Q2_K's sum of m_i * -xs_i
    for (int g = 0; g < G; ++g)
      for (int t = 0; t < T; ++t) S[g][t] = Mn[g][t] = _mm512_setzero_si512();
    for (int i2 = 0; i2 < 8; ++i2) {
      if constexpr (T <= 4) {  // decode, verification: kSuperBlocksAhead ahead
        for (int g = 0; g < G; ++g) {
          const char* pf = reinterpret_cast<const char*>(bg[g] + kSuperBlocksAhead * F::kBlockBytes +
                                                         i2 * 64 * F::kLinesPerStep);
          for (int l = 0; l < F::kLinesPerStep; ++l) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
        }
      }
      for (int g = 0; g < G; ++g) {
        const uint8_t* b = bg[g];
        // Sub-blocks 2 i2 (A) and 2 i2 + 1 (B), from -offset * their
        // activation sums (Q2_K: from 0; -xs goes to Mn with the mins).
        __m512i A[T], B[T];
        for (int t = 0; t < T; ++t) {
          if constexpr (F::kMins) {
            A[t] = B[t] = _mm512_setzero_si512();
          } else {
            A[t] = _mm512_set1_epi32(x[size_t(t) * nb + s].neg_oxs[2 * i2]);
            B[t] = _mm512_set1_epi32(x[size_t(t) * nb + s].neg_oxs[2 * i2 + 1]);
          }
        }
        const typename F::Planes p(b, i2);
        chunk<F, T, 0>(b, i2, p, x, nb, s, A, B);
        chunk<F, T, 1>(b, i2, p, x, nb, s, A, B);
        chunk<F, T, 2>(b, i2, p, x, nb, s, A, B);
        chunk<F, T, 3>(b, i2, p, x, nb, s, A, B);
        static_assert(!F::kMins || F::kPairs, "the mins are added with the pairs");
        if constexpr (F::kPairs) {
          // Q2_K: A and B fit int16 (|A| <= 16 * 3 * 128), so one vpdpwssd
          // adds sc_a * A + sc_b * B, and one more m_a * -xs_a + m_b * -xs_b.
          const __m512i sab = F::scale_pairs(b + F::kScOff + 32 * i2);
          for (int t = 0; t < T; ++t)
            S[g][t] = _mm512_dpwssd_epi32(S[g][t], _mm512_mask_blend_epi16(0xAAAAAAAA, A[t], _mm512_slli_epi32(B[t], 16)),
                                          sab);
          if constexpr (F::kMins) {
            const __m512i mab = F::scale_pairs(b + F::kMinOff + 32 * i2);
            for (int t = 0; t < T; ++t)
              Mn[g][t] = _mm512_dpwssd_epi32(Mn[g][t], mab, _mm512_set1_epi32(x[size_t(t) * nb + s].neg_xs_pairs[i2]));
          }
        } else {
          const __m512i sa = F::scales(b + F::kScOff + 2 * i2 * 16);
          const __m512i sb = F::scales(b + F::kScOff + (2 * i2 + 1) * 16);
          for (int t = 0; t < T; ++t)
            S[g][t] = _mm512_add_epi32(S[g][t], _mm512_add_epi32(_mm512_mullo_epi32(A[t], sa), _mm512_mullo_epi32(B[t], sb)));
        }
      }
    }
    for (int g = 0; g < G; ++g) {
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bg[g] + F::kDOff)));
      for (int t = 0; t < T; ++t) {
        const __m512 dx = _mm512_set1_ps(x[size_t(t) * nb + s].d);
        acc[g][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[g][t]), _mm512_mul_ps(dw, dx), acc[g][t]);
      }
      if constexpr (F::kMins) {
        const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bg[g] + F::kDminOff)));
        for (int t = 0; t < T; ++t) {
          const __m512 dx = _mm512_set1_ps(x[size_t(t) * nb + s].d);
          acc[g][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(Mn[g][t]), _mm512_mul_ps(dm, dx), acc[g][t]);
        }
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    const __mmask16 m = g + 1 < G ? __mmask16(0xffff) : __mmask16((1u << last_rows) - 1u);
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + size_t(t) * y_stride + 16 * g, m, acc[g][t]);
  }
}

// T tokens x one group of 16 rows (run_group_tiles' tiles).
template <class F, int T>
void tile_q6k(const uint8_t* grp, const Q6KPackedAct* x, int nb, float* y, int y_stride, int last_rows) {
  tile_q6k_groups<F, T, 1>(grp, 0, x, nb, y, y_stride, last_rows);
}

constexpr int kGDecode = 4;  // decode tiles: groups in flight, at most (kquant_decode_groups)
constexpr int kT = 4;        // 4 T + 9 zmm live
template <class F>
struct Tiles {
  static constexpr DecodeGroupsFn<Q6KPackedAct> kDecode[kGDecode] = {
      &tile_q6k_groups<F, 1, 1>, &tile_q6k_groups<F, 1, 2>, &tile_q6k_groups<F, 1, 3>, &tile_q6k_groups<F, 1, 4>};
  static constexpr GroupTileFn<Q6KPackedAct> kPrefill[kT] = {&tile_q6k<F, 1>, &tile_q6k<F, 2>, &tile_q6k<F, 3>,
                                                             &tile_q6k<F, 4>};
};

#ifdef LARDER_KQUANT_AMX
// Bits 2c, 2c + 1 of every byte moved to bits 4, 5 (hi_bits<c>, c at run time).
inline __m512i hi_bits_at(__m512i h, int c) {
  switch (c) {
    case 0: return hi_bits<0>(h);
    case 1: return hi_bits<1>(h);
    case 2: return hi_bits<2>(h);
    default: return hi_bits<3>(h);
  }
}

// One group's super-block sb in the unpacked form of matmul_packed_amx.h:
// p = sc_i * (q - 32) (-4064..4096) as hi / lo planes.
void unpack_q6k_amx(const uint8_t* sb, uint8_t* out) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30), k32 = _mm512_set1_epi8(32);
  const __m512i mword = _mm512_set1_epi32(0xFFFF);
  for (int i2 = 0; i2 < 8; ++i2) {
    uint8_t* o = out + (i2 / 2) * 2048;  // K-step of values 32 i2 ..
    for (int half = 0; half < 2; ++half) {  // sub-block 2 i2 + half: values 32 i2 + 16 half + 4 c + k
      const __m512i h = _mm512_load_si512(sb + kHiOff + i2 * 128 + half * 64);
      // sc of row r (int8, sign-extended) in both int16 words of the row's 4-byte lane.
      const __m512i sc32 = _mm512_cvtepi8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + kScOff + (2 * i2 + half) * 16)));
      const __m512i sc16 = _mm512_or_si512(_mm512_and_si512(sc32, mword), _mm512_slli_epi32(sc32, 16));
      for (int c = 0; c < 4; ++c) {
        const __m512i v = _mm512_load_si512(sb + i2 * 256 + c * 64);
        const __m512i low4 = _mm512_and_si512(half == 0 ? v : _mm512_srli_epi16(v, 4), m4);
        // A | (B & C): 0xF8; then q - 32 as int8.
        const __m512i q = _mm512_sub_epi8(_mm512_ternarylogic_epi32(low4, hi_bits_at(h, c), m30, 0xF8), k32);
        const __m512i pe = _mm512_mullo_epi16(_mm512_srai_epi16(_mm512_slli_epi16(q, 8), 8), sc16);
        const __m512i po = _mm512_mullo_epi16(_mm512_srai_epi16(q, 8), sc16);
        const int j = 8 * (i2 % 2) + 4 * half + c;
        amx_split_store(pe, po, o + 64 * j, o + 1024 + 64 * j);
      }
    }
  }
}

void finish_q6k_amx(__m512 (&acc)[16], const int32_t (&hi)[16][16], const int32_t (&lo)[16][16], const uint8_t* sb,
                    const Q6KPackedAct* a, int nb) {
  const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + kDOff)));
  for (int t = 0; t < 16; ++t)
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(amx_sum(hi, lo, t)), _mm512_mul_ps(dw, _mm512_set1_ps(a[size_t(t) * nb].d)),
                             acc[t]);
}
#endif  // LARDER_KQUANT_AMX

}  // namespace
#endif  // LARDER_Q6K_PACKED

void matmul_q6k_rows(const PackedMatrix& w, const Q6KPackedAct* x, int n_tokens, float* y,
                     int y_stride, int64_t row_begin, int64_t row_end) {
#ifdef LARDER_Q6K_PACKED
  if (w.type() == GgmlType::kQ3_K || w.type() == GgmlType::kQ2_K) {
    const bool q3 = w.type() == GgmlType::kQ3_K;
    if (n_tokens == 1) {
      run_decode_groups(q3 ? Tiles<Q3KFormat>::kDecode : Tiles<Q2KFormat>::kDecode, w, x, y, y_stride, row_begin,
                        row_end, kquant_decode_groups(w.type()));
    } else {
      run_group_tiles(q3 ? Tiles<Q3KFormat>::kPrefill : Tiles<Q2KFormat>::kPrefill, w, x, n_tokens, y, y_stride,
                      row_begin, row_end);
    }
    return;
  }
  if (n_tokens == 1) {  // decode: kGDecode groups' streams in flight
    run_decode_groups(Tiles<Q6KFormat>::kDecode, w, x, y, y_stride, row_begin, row_end, kquant_decode_groups(w.type()));
    return;
  }
#ifdef LARDER_KQUANT_AMX
  run_kquant_prefill(Tiles<Q6KFormat>::kPrefill, w, x, n_tokens, y, y_stride, row_begin, row_end, &unpack_q6k_amx,
                     &finish_q6k_amx);
#else
  run_group_tiles(Tiles<Q6KFormat>::kPrefill, w, x, n_tokens, y, y_stride, row_begin, row_end);
#endif
#elif defined(LARDER_PACKED_AVX2)
  matmul_q6k_rows_avx2(w, x, n_tokens, y, y_stride, row_begin, row_end);  // Q6_K, Q3_K, Q2_K
#else
  (void)w; (void)x; (void)n_tokens; (void)y; (void)y_stride; (void)row_begin; (void)row_end;
  assert(false && "the packed kernels need an AVX-512 VNNI or AVX2 build");
#endif
}

}  // namespace packed_detail
}  // namespace larder
