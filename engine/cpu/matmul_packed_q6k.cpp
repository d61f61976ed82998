// The packed Q6_K layout and kernels (layout and arithmetic: matmul_packed.h).
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

// Value v (0..255) of a Q6_K super-block, 0..63 (ggml's layout: per half of
// 128 values, ql holds the low 4 bits of 4 runs of 32 in two nibble planes,
// qh their high 2 bits in four 2-bit planes).
inline int q6k_value(const BlockQ6_K& b, int v) {
  const int n = v / 128, g = (v % 128) / 32, l = v % 32;
  const uint8_t lo = b.ql[64 * n + l + (g % 2) * 32];
  const int low4 = g < 2 ? (lo & 15) : (lo >> 4);
  return low4 | (((b.qh[32 * n + l] >> (2 * g)) & 3) << 4);
}

}  // namespace

void prepare_q6k_packed_act(const BlockQ8K* xq, int n_tokens, int k, Q6KPackedAct* out) {
  const size_t n = size_t(n_tokens) * size_t(k / kQK_K);
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(out[i].qs, xq[i].qs, sizeof(out[i].qs));
    for (int s = 0; s < 16; ++s) out[i].neg_32xs[s] = -32 * int32_t(xq[i].bsums[s]);
    out[i].d = xq[i].d;
    std::memset(out[i].pad, 0, sizeof(out[i].pad));
  }
}

namespace packed_detail {

void pack_q6k_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin,
                     int64_t g_end) {
  pack_kquant_groups<BlockQ6_K>(w, data, group_stride, PackedMatrix::kQ6KBlockBytes, g_begin, g_end,
                                [](uint8_t* o, int r, const BlockQ6_K& b) {
    for (int i2 = 0; i2 < 8; ++i2) {
      for (int half = 0; half < 2; ++half) {
        for (int c = 0; c < 4; ++c) {
          for (int k = 0; k < 4; ++k) {
            const int q = q6k_value(b, 32 * i2 + 16 * half + 4 * c + k);
            o[i2 * 256 + c * 64 + 4 * r + k] |= uint8_t((q & 15) << (4 * half));
            o[kHiOff + i2 * 128 + half * 64 + 4 * r + k] |= uint8_t((q >> 4) << (2 * c));
          }
        }
      }
    }
    for (int i = 0; i < 16; ++i) o[kScOff + i * 16 + r] = uint8_t(b.scales[i]);
    std::memcpy(o + kDOff + 2 * r, &b.d, 2);
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

template <int T, int C>
inline void chunk(const uint8_t* b, int i2, __m512i h0, __m512i h1, const Q6KPackedAct* x, int nb, int s,
                  __m512i (&A)[T], __m512i (&B)[T]) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  const __m512i v = _mm512_load_si512(b + i2 * 256 + C * 64);
  // A | (B & C): 0xF8
  const __m512i qa = _mm512_ternarylogic_epi32(_mm512_and_si512(v, m4), hi_bits<C>(h0), m30, 0xF8);
  const __m512i qb = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), hi_bits<C>(h1), m30, 0xF8);
  for (int t = 0; t < T; ++t) {
    const int8_t* q = x[size_t(t) * nb + s].qs + 32 * i2 + 4 * C;
    A[t] = _mm512_dpbusd_epi32(A[t], qa, bcast4(q));
    B[t] = _mm512_dpbusd_epi32(B[t], qb, bcast4(q + 16));
  }
}

// T tokens x G groups of 16 rows (group g at grp + g * group_stride) over all
// nb super-blocks; y: token 0, the first group's first row; the last group
// writes last_rows rows. Several groups in flight are for decode: more
// independent streams of weights.
template <int T, int G>
void tile_q6k_groups(const uint8_t* grp, size_t group_stride, const Q6KPackedAct* x, int nb, float* y,
                     int y_stride, int last_rows) {
  __m512 acc[G][T];
  for (int g = 0; g < G; ++g)
    for (int t = 0; t < T; ++t) acc[g][t] = _mm512_setzero_ps();
  for (int s = 0; s < nb; ++s) {
    const uint8_t* bg[G];
    for (int g = 0; g < G; ++g) bg[g] = grp + size_t(g) * group_stride + size_t(s) * PackedMatrix::kQ6KBlockBytes;
    __m512i S[G][T];
    for (int g = 0; g < G; ++g)
      for (int t = 0; t < T; ++t) S[g][t] = _mm512_setzero_si512();
    for (int i2 = 0; i2 < 8; ++i2) {
      if constexpr (T <= 4) {  // decode, verification: kSuperBlocksAhead ahead, 7 lines per step
        for (int g = 0; g < G; ++g) {
          const char* pf = reinterpret_cast<const char*>(bg[g] + kSuperBlocksAhead * PackedMatrix::kQ6KBlockBytes + i2 * 448);
          for (int l = 0; l < 7; ++l) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
        }
      }
      for (int g = 0; g < G; ++g) {
        const uint8_t* b = bg[g];
        // Sub-blocks 2 i2 (A) and 2 i2 + 1 (B), from -32 * their activation sums.
        __m512i A[T], B[T];
        for (int t = 0; t < T; ++t) {
          A[t] = _mm512_set1_epi32(x[size_t(t) * nb + s].neg_32xs[2 * i2]);
          B[t] = _mm512_set1_epi32(x[size_t(t) * nb + s].neg_32xs[2 * i2 + 1]);
        }
        const __m512i h0 = _mm512_load_si512(b + kHiOff + i2 * 128);
        const __m512i h1 = _mm512_load_si512(b + kHiOff + i2 * 128 + 64);
        chunk<T, 0>(b, i2, h0, h1, x, nb, s, A, B);
        chunk<T, 1>(b, i2, h0, h1, x, nb, s, A, B);
        chunk<T, 2>(b, i2, h0, h1, x, nb, s, A, B);
        chunk<T, 3>(b, i2, h0, h1, x, nb, s, A, B);
        const __m512i sa = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kScOff + 2 * i2 * 16)));
        const __m512i sb = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kScOff + (2 * i2 + 1) * 16)));
        for (int t = 0; t < T; ++t)
          S[g][t] = _mm512_add_epi32(S[g][t], _mm512_add_epi32(_mm512_mullo_epi32(A[t], sa), _mm512_mullo_epi32(B[t], sb)));
      }
    }
    for (int g = 0; g < G; ++g) {
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bg[g] + kDOff)));
      for (int t = 0; t < T; ++t) {
        const __m512 dx = _mm512_set1_ps(x[size_t(t) * nb + s].d);
        acc[g][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[g][t]), _mm512_mul_ps(dw, dx), acc[g][t]);
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    const __mmask16 m = g + 1 < G ? __mmask16(0xffff) : __mmask16((1u << last_rows) - 1u);
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + size_t(t) * y_stride + 16 * g, m, acc[g][t]);
  }
}

// T tokens x one group of 16 rows (run_group_tiles' tiles).
template <int T>
void tile_q6k(const uint8_t* grp, const Q6KPackedAct* x, int nb, float* y, int y_stride, int last_rows) {
  tile_q6k_groups<T, 1>(grp, 0, x, nb, y, y_stride, last_rows);
}

constexpr int kGDecode = 4;  // decode tiles: groups in flight, at most (kquant_decode_groups)
constexpr DecodeGroupsFn<Q6KPackedAct> kDecodeTiles[kGDecode] = {&tile_q6k_groups<1, 1>, &tile_q6k_groups<1, 2>,
                                                                   &tile_q6k_groups<1, 3>, &tile_q6k_groups<1, 4>};
constexpr int kT = 4;  // 4 T + 9 zmm live
constexpr GroupTileFn<Q6KPackedAct> kTiles[kT] = {&tile_q6k<1>, &tile_q6k<2>, &tile_q6k<3>, &tile_q6k<4>};

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
  if (n_tokens == 1) {  // decode: kGDecode groups' streams in flight
    run_decode_groups(kDecodeTiles, w, x, y, y_stride, row_begin, row_end, kquant_decode_groups());
    return;
  }
#ifdef LARDER_KQUANT_AMX
  run_kquant_prefill(kTiles, w, x, n_tokens, y, y_stride, row_begin, row_end, &unpack_q6k_amx, &finish_q6k_amx);
#else
  run_group_tiles(kTiles, w, x, n_tokens, y, y_stride, row_begin, row_end);
#endif
#elif defined(LARDER_PACKED_AVX2)
  matmul_q6k_rows_avx2(w, x, n_tokens, y, y_stride, row_begin, row_end);
#else
  (void)w; (void)x; (void)n_tokens; (void)y; (void)y_stride; (void)row_begin; (void)row_end;
  assert(false && "the packed kernels need an AVX-512 VNNI or AVX2 build");
#endif
}

}  // namespace packed_detail
}  // namespace larder
