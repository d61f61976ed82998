// The packed Q4_K and Q5_K layouts and kernels (layout and arithmetic:
// matmul_packed.h). Q5_K is Q4_K with a plane of fifth bits.
#include <algorithm>
#include <cassert>
#include <cstring>
#include <type_traits>

#include "engine/cpu/matmul_kquant.h"
#include "engine/cpu/matmul_packed.h"
#include "engine/cpu/matmul_packed_amx.h"
#include "engine/cpu/matmul_packed_tiles.h"
#include "engine/gguf/quant_blocks.h"

#ifdef LARDER_PACKED_AVX512
#define LARDER_Q4K_PACKED 1
#include "engine/cpu/simd.h"
#endif

namespace larder {

namespace {

constexpr size_t kScOff = 2048, kMinOff = 2176, kDOff = 2304, kDminOff = 2336;
static_assert(kDminOff + 32 == PackedMatrix::kQ4KBlockBytes);
constexpr size_t kQ5HiOff = PackedMatrix::kQ4KBlockBytes;  // Q5_K's fifth bits
static_assert(kQ5HiOff + 512 == PackedMatrix::kQ5KBlockBytes);

// The 256 values of a Q4_K super-block in order: qs[32j + l] holds value
// 64j + l in its low nibble and 64j + 32 + l in its high nibble. Q5_K: plus
// bit 2j (first 32 of the 64) or 2j + 1 (last 32) of qh[l] as the fifth bit.
template <class Block>
void q45k_values(const Block& b, uint8_t (&q)[256]) {
  for (int j = 0; j < 4; ++j)
    for (int l = 0; l < 32; ++l) {
      q[64 * j + l] = uint8_t(b.qs[32 * j + l] & 15);
      q[64 * j + 32 + l] = uint8_t(b.qs[32 * j + l] >> 4);
      if constexpr (std::is_same_v<Block, BlockQ5_K>) {
        q[64 * j + l] |= uint8_t(((b.qh[l] >> (2 * j)) & 1) << 4);
        q[64 * j + 32 + l] |= uint8_t(((b.qh[l] >> (2 * j + 1)) & 1) << 4);
      }
    }
}

}  // namespace

void prepare_q4k_packed_act(const BlockQ8K* xq, int n_tokens, int k, Q4KPackedAct* out) {
  const size_t n = size_t(n_tokens) * size_t(k / kQK_K);
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(out[i].qs, xq[i].qs, sizeof(out[i].qs));
    for (int p = 0; p < 4; ++p) {
      const int lo = xq[i].bsums[4 * p] + xq[i].bsums[4 * p + 1];      // sub-block 2p
      const int hi = xq[i].bsums[4 * p + 2] + xq[i].bsums[4 * p + 3];  // sub-block 2p + 1
      out[i].xs_pairs[p] = int32_t(uint32_t(uint16_t(int16_t(lo))) | (uint32_t(uint16_t(int16_t(hi))) << 16));
    }
    out[i].d = xq[i].d;
    std::memset(out[i].pad, 0, sizeof(out[i].pad));
  }
}

namespace packed_detail {

namespace {
// One row of one super-block of Q4_K or Q5_K into a group's packed bytes o
// (row r): the nibble planes, Q5_K's fifth bits, sc, m, d, dmin.
template <class Block>
void pack_q45k_block(uint8_t* o, int r, const Block& b) {
  constexpr bool kQ5 = std::is_same_v<Block, BlockQ5_K>;
  uint8_t q[256];
  q45k_values(b, q);
  for (int i = 0; i < 8; ++i) {
    for (int c = 0; c < 4; ++c)
      for (int k = 0; k < 4; ++k)
        o[i * 256 + c * 64 + 4 * r + k] = uint8_t((q[32 * i + 4 * c + k] & 15) | (q[32 * i + 16 + 4 * c + k] & 15) << 4);
    if constexpr (kQ5) {
      for (int k = 0; k < 4; ++k) {  // fifth bits: bit c (first 16) or 4 + c (last 16) of byte 4r + k
        int hb = 0;
        for (int c = 0; c < 4; ++c)
          hb |= (q[32 * i + 4 * c + k] >> 4) << c | (q[32 * i + 16 + 4 * c + k] >> 4) << (4 + c);
        o[kQ5HiOff + i * 64 + 4 * r + k] = uint8_t(hb);
      }
    }
    int sc, m;
    k4_scale_min(b.scales, i, &sc, &m);
    o[kScOff + i * 16 + r] = uint8_t(sc);
    o[kMinOff + (i / 2) * 32 + 2 * r + (i % 2)] = uint8_t(m);
  }
  std::memcpy(o + kDOff + 2 * r, &b.d, 2);
  std::memcpy(o + kDminOff + 2 * r, &b.dmin, 2);
}
}  // namespace

void pack_q4k_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin,
                     int64_t g_end) {
  pack_kquant_groups<BlockQ4_K>(w, data, group_stride, PackedMatrix::kQ4KBlockBytes, g_begin, g_end,
                                &pack_q45k_block<BlockQ4_K>);
}

void pack_q5k_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin,
                     int64_t g_end) {
  pack_kquant_groups<BlockQ5_K>(w, data, group_stride, PackedMatrix::kQ5KBlockBytes, g_begin, g_end,
                                &pack_q45k_block<BlockQ5_K>);
}

#ifdef LARDER_Q4K_PACKED
namespace {

inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// A super-block's per-row constants for q4k_step: the m pairs as int16, d, dmin.
inline void load_q4k_step(const uint8_t* b, __m512i (&mp)[4], __m512& dw, __m512& dm) {
  for (int k = 0; k < 4; ++k)
    mp[k] = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kMinOff + 32 * k)));
  dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kDOff)));
  dm = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kDminOff)));
}

// One token's f32 step for one super-block of 16 rows (the contract in
// matmul_packed.h), S its exact sums; every Q4_K tile ends a super-block so.
inline __m512 q4k_step(__m512 acc, __m512i S, const __m512i (&mp)[4], __m512 dw, __m512 dm, const Q4KPackedAct& a) {
  __m512i mn = _mm512_setzero_si512();
  for (int k = 0; k < 4; ++k) mn = _mm512_dpwssd_epi32(mn, mp[k], _mm512_set1_epi32(a.xs_pairs[k]));
  const __m512 dx = _mm512_set1_ps(a.d);
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(dw, dx), acc);
  return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mn), _mm512_mul_ps(dm, dx), acc);
}

// Bit n of every byte moved to bit 4 (shifts within 16-bit lanes; the rest
// is masked by the caller).
template <int N>
inline __m512i bit_to_4(__m512i h) {
  if constexpr (N < 4) return _mm512_slli_epi16(h, 4 - N);
  if constexpr (N == 4) return h;
  return _mm512_srli_epi16(h, N - 4);
}

// T tokens x G groups of 16 rows (group g at grp + g * group_stride) over all
// nb super-blocks of Q4_K or (kQ5) Q5_K; y: token 0, the first group's first
// row; the last group writes last_rows rows. Several groups in flight are for
// decode: more independent streams of weights.
template <int T, int G, bool kQ5>
void tile_q4k_groups(const uint8_t* grp, size_t group_stride, const Q4KPackedAct* x, int nb, float* y,
                     int y_stride, int last_rows) {
  constexpr size_t kBlockBytes = kQ5 ? PackedMatrix::kQ5KBlockBytes : PackedMatrix::kQ4KBlockBytes;
  constexpr int kLines = kQ5 ? 6 : 5;  // prefetched per step of 8
  const __m512i m4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
  __m512 acc[G][T];
  for (int g = 0; g < G; ++g)
    for (int t = 0; t < T; ++t) acc[g][t] = _mm512_setzero_ps();
  for (int s = 0; s < nb; ++s) {
    const uint8_t* bg[G];
    for (int g = 0; g < G; ++g) bg[g] = grp + size_t(g) * group_stride + size_t(s) * kBlockBytes;
    __m512i S[G][T];
    for (int g = 0; g < G; ++g)
      for (int t = 0; t < T; ++t) S[g][t] = _mm512_setzero_si512();
    for (int i = 0; i < 8; ++i) {
      if constexpr (T <= 4) {  // decode, verification: kSuperBlocksAhead ahead
        for (int g = 0; g < G; ++g) {
          const char* pf = reinterpret_cast<const char*>(bg[g] + kSuperBlocksAhead * kBlockBytes + i * 64 * kLines);
          for (int l = 0; l < kLines; ++l) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
        }
      }
      for (int g = 0; g < G; ++g) {
        const uint8_t* b = bg[g];
        const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kScOff + i * 16)));
        const __m512i h = kQ5 ? _mm512_load_si512(b + kQ5HiOff + i * 64) : _mm512_setzero_si512();
        __m512i A[T], B[T];
        for (int t = 0; t < T; ++t) A[t] = B[t] = _mm512_setzero_si512();
        auto chunk = [&]<int C>() {
          const __m512i v = _mm512_load_si512(b + i * 256 + C * 64);
          __m512i lo, hi;
#ifdef __GFNI__
          if constexpr (kQ5) {  // the fifth bit to bit 4 of clean bytes; m4 ? A : B (0xE4) adds the nibble
            lo = _mm512_ternarylogic_epi32(v, gf_move<move_bits(C, 4, 1)>(h), m4, 0xE4);
            hi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), gf_move<move_bits(4 + C, 4, 1)>(h), m4, 0xE4);
          } else
#endif
          {
            lo = _mm512_and_si512(v, m4);
            hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            if constexpr (kQ5) {  // A | (B & C): 0xF8
              lo = _mm512_ternarylogic_epi32(lo, bit_to_4<C>(h), b4, 0xF8);
              hi = _mm512_ternarylogic_epi32(hi, bit_to_4<4 + C>(h), b4, 0xF8);
            }
          }
          for (int t = 0; t < T; ++t) {
            const int8_t* q = x[size_t(t) * nb + s].qs + 32 * i + 4 * C;
            A[t] = _mm512_dpbusd_epi32(A[t], lo, bcast4(q));
            B[t] = _mm512_dpbusd_epi32(B[t], hi, bcast4(q + 16));
          }
        };
        // S += sc * A + sc * B, exact: each lane of A and B is a sum of 16
        // (Q5_K: 8) products with |.| <= 16 * 15 * 128 (8 * 31 * 128) < 2^15,
        // so its low int16 is the value, and with (sc, 0) as the other int16
        // pair vpdpwssd adds exactly sc * it.
        auto fold = [&] {
          for (int t = 0; t < T; ++t) {
            S[g][t] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(S[g][t], A[t], sc), B[t], sc);
            A[t] = B[t] = _mm512_setzero_si512();
          }
        };
        chunk.template operator()<0>();
        chunk.template operator()<1>();
        if constexpr (kQ5) fold();
        chunk.template operator()<2>();
        chunk.template operator()<3>();
        fold();
      }
    }
    for (int g = 0; g < G; ++g) {
      const uint8_t* b = bg[g];
      __m512i mp[4];
      __m512 dw, dm;
      load_q4k_step(b, mp, dw, dm);
      for (int t = 0; t < T; ++t) acc[g][t] = q4k_step(acc[g][t], S[g][t], mp, dw, dm, x[size_t(t) * nb + s]);
    }
  }
  for (int g = 0; g < G; ++g) {
    const __mmask16 m = g + 1 < G ? __mmask16(0xffff) : __mmask16((1u << last_rows) - 1u);
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + size_t(t) * y_stride + 16 * g, m, acc[g][t]);
  }
}

// T tokens x one group of 16 rows (run_group_tiles' tiles).
template <int T, bool kQ5>
void tile_q4k(const uint8_t* grp, const Q4KPackedAct* x, int nb, float* y, int y_stride, int last_rows) {
  tile_q4k_groups<T, 1, kQ5>(grp, 0, x, nb, y, y_stride, last_rows);
}

constexpr int kGDecode = 4;  // decode tiles: groups in flight, at most (kquant_decode_groups)
constexpr int kT = 6;        // 4 T + 5 zmm live (Q5_K: + 2)
template <bool kQ5>
struct Tiles {
  static constexpr DecodeGroupsFn<Q4KPackedAct> kDecode[kGDecode] = {
      &tile_q4k_groups<1, 1, kQ5>, &tile_q4k_groups<1, 2, kQ5>, &tile_q4k_groups<1, 3, kQ5>,
      &tile_q4k_groups<1, 4, kQ5>};
  static constexpr GroupTileFn<Q4KPackedAct> kPrefill[kT] = {&tile_q4k<1, kQ5>, &tile_q4k<2, kQ5>,
                                                             &tile_q4k<3, kQ5>, &tile_q4k<4, kQ5>,
                                                             &tile_q4k<5, kQ5>, &tile_q4k<6, kQ5>};
};

#ifdef LARDER_KQUANT_AMX
// One group's super-block sb in the unpacked form of matmul_packed_amx.h:
// p = sc_i * q (0..945) as hi / lo planes.
void unpack_q4k_amx(const uint8_t* sb, uint8_t* out) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), mlow = _mm512_set1_epi16(0x00FF);
  for (int i = 0; i < 8; ++i) {
    // sc of row r in both int16 words of the row's 4-byte lane.
    const __m512i sc32 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + kScOff + i * 16)));
    const __m512i sc16 = _mm512_or_si512(sc32, _mm512_slli_epi32(sc32, 16));
    uint8_t* o = out + (i / 2) * 2048;  // K-step of sub-block i
    for (int c = 0; c < 4; ++c) {
      const __m512i v = _mm512_load_si512(sb + i * 256 + c * 64);
      for (int h = 0; h < 2; ++h) {  // low nibbles: values 32 i + 4 c + k; high: + 16
        const __m512i q = _mm512_and_si512(h == 0 ? v : _mm512_srli_epi16(v, 4), m4);
        const __m512i pe = _mm512_mullo_epi16(_mm512_and_si512(q, mlow), sc16);
        const __m512i po = _mm512_mullo_epi16(_mm512_srli_epi16(q, 8), sc16);
        const int j = 8 * (i % 2) + 4 * h + c;
        amx_split_store(pe, po, o + 64 * j, o + 1024 + 64 * j);
      }
    }
  }
}

void finish_q4k_amx(__m512 (&acc)[16], const int32_t (&hi)[16][16], const int32_t (&lo)[16][16], const uint8_t* sb,
                    const Q4KPackedAct* a, int nb) {
  __m512i mp[4];
  __m512 dw, dm;
  load_q4k_step(sb, mp, dw, dm);
  for (int t = 0; t < 16; ++t) acc[t] = q4k_step(acc[t], amx_sum(hi, lo, t), mp, dw, dm, a[size_t(t) * nb]);
}
#endif  // LARDER_KQUANT_AMX

}  // namespace
#endif  // LARDER_Q4K_PACKED

void matmul_q4k_rows(const PackedMatrix& w, const Q4KPackedAct* x, int n_tokens, float* y,
                     int y_stride, int64_t row_begin, int64_t row_end) {
#ifdef LARDER_Q4K_PACKED
  if (w.type() == GgmlType::kQ5_K) {  // the vector tiles only (no AMX unpacking for it)
    if (n_tokens == 1) {
      run_decode_groups(Tiles<true>::kDecode, w, x, y, y_stride, row_begin, row_end, kquant_decode_groups(w.type()));
    } else {
      run_group_tiles(Tiles<true>::kPrefill, w, x, n_tokens, y, y_stride, row_begin, row_end);
    }
    return;
  }
  if (n_tokens == 1) {  // decode: kGDecode groups' streams in flight
    run_decode_groups(Tiles<false>::kDecode, w, x, y, y_stride, row_begin, row_end, kquant_decode_groups(w.type()));
    return;
  }
#ifdef LARDER_KQUANT_AMX
  run_kquant_prefill(Tiles<false>::kPrefill, w, x, n_tokens, y, y_stride, row_begin, row_end, &unpack_q4k_amx,
                     &finish_q4k_amx);
#else
  run_group_tiles(Tiles<false>::kPrefill, w, x, n_tokens, y, y_stride, row_begin, row_end);
#endif
#elif defined(LARDER_PACKED_AVX2)
  matmul_q4k_rows_avx2(w, x, n_tokens, y, y_stride, row_begin, row_end);  // Q4_K and Q5_K
#else
  (void)w; (void)x; (void)n_tokens; (void)y; (void)y_stride; (void)row_begin; (void)row_end;
  assert(false && "the packed kernels need an AVX-512 VNNI or AVX2 build");
#endif
}

}  // namespace packed_detail
}  // namespace larder
