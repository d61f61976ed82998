// The packed Q4_K, Q5_K and Q6_K / Q3_K / Q2_K tiles for CPUs with AVX2,
// FMA and F16C but no AVX-512 VNNI: the K-quant half of
// matmul_packed_avx2.cpp (whose header comment states the layout and the
// contract), the same bits as the AVX-512 tiles in matmul_packed_q4k.cpp and
// matmul_packed_q6k.cpp.
#include "engine/cpu/matmul_packed.h"

#ifdef LARDER_PACKED_AVX2

#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cstring>

#include "engine/cpu/matmul_packed_avx2_tiles.h"
#include "engine/gguf/quant_blocks.h"

namespace larder::packed_detail {

using namespace avx2;

namespace {

// The 8 bytes at p widened to int32 lanes (signed or unsigned), then each
// lane's value into both of its int16 halves: vpmaddwd's (v, v) pairs.
inline __m256i pair16_u8(const uint8_t* p) {
  const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}
inline __m256i pair16_s8(const uint8_t* p) {
  const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(v, 16));
}

// 8 rows' u8 pairs (a_r, b_r) at p (Q2_K's scales and mins, side by side)
// as int16 words: (a_r, b_r) in lane r; *a gets (a_r, a_r), *b (b_r, b_r).
inline __m256i side_by_side_u8(const uint8_t* p, __m256i* a, __m256i* b) {
  const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i lo = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4, 5, 4, 5, 8, 9,
                                      8, 9, 12, 13, 12, 13);
  const __m256i hi = _mm256_setr_epi8(2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15, 2, 3, 2, 3, 6, 7, 6, 7,
                                      10, 11, 10, 11, 14, 15, 14, 15);
  if (a != nullptr) *a = _mm256_shuffle_epi8(v, lo);
  if (b != nullptr) *b = _mm256_shuffle_epi8(v, hi);
  return v;
}

// ---- Q4_K ----------------------------------------------------------------
//
// Quants 0..15 (u8) times x (any int8): a vpmaddubsw pair is at most
// 2 * 15 * 128 = 3840 in size, and the 8 of one 32-value sub-block (4
// vectors, low and high nibbles) sum to at most 30720 < 2^15 in int16; vpmaddwd with
// (sc, sc) then gives sc * (the sub-block's dot product) per row, exactly.
constexpr size_t kQ4KScOff = 2048, kQ4KMinOff = 2176, kQ4KDOff = 2304, kQ4KDminOff = 2336;

// Q5_K (kQ5): quants 0..31, the fifth bits moved to bit 4 from the plane at
// kQ5KHiOff; a pair is at most 2 * 31 * 128 = 7936, so the int16 sums go to
// S after every two chunks (4 pairs, at most 31744 < 2^15) instead of every
// sub-block.
constexpr size_t kQ5KHiOff = PackedMatrix::kQ4KBlockBytes;

template <int T, int H, bool kQ5>
void q4k_tile(const uint8_t* grp, size_t /*group_stride*/, int half0, const Q4KPackedAct* x, int nb, float* y,
              int y_stride, int rows) {
  static_assert(H <= 2, "a K-quant tile stays within one group");
  constexpr size_t kBlockBytes = kQ5 ? PackedMatrix::kQ5KBlockBytes : PackedMatrix::kQ4KBlockBytes;
  constexpr int kLines = kQ5 ? 6 : 5;  // prefetched per step of 8
  const __m256i m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
  __m256 acc[T][H];
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) acc[t][h] = _mm256_setzero_ps();
  for (int s = 0; s < nb; ++s) {
    const uint8_t* b = grp + size_t(s) * kBlockBytes;
    __m256i S[T][H];
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) S[t][h] = _mm256_setzero_si256();
    for (int i = 0; i < 8; ++i) {
      if constexpr (T <= 2) {  // decode: the next super-block
        const char* pf = reinterpret_cast<const char*>(b + kKQuantPrefetchBlocks * kBlockBytes + i * 64 * kLines);
        for (int l = 0; l < kLines; ++l) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
      }
      __m256i P[T][H], sc[H], fifth[H];
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < H; ++h) P[t][h] = _mm256_setzero_si256();
      for (int h = 0; h < H; ++h) {
        sc[h] = pair16_u8(b + kQ4KScOff + i * 16 + 8 * (half0 + h));
        fifth[h] = kQ5 ? load32(b + kQ5KHiOff + i * 64 + 32 * (half0 + h)) : _mm256_setzero_si256();
      }
      for (int c = 0; c < 4; ++c) {
        __m256i lo[H], hi[H];
        for (int h = 0; h < H; ++h) {
          const __m256i v = load32(b + i * 256 + c * 64 + 32 * (half0 + h));
          lo[h] = _mm256_and_si256(v, m4);
          hi[h] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
          if constexpr (kQ5) {  // bits c and 4 + c of each byte to bit 4 (shifts within 16-bit lanes)
            lo[h] = _mm256_or_si256(lo[h], _mm256_and_si256(_mm256_slli_epi16(fifth[h], 4 - c), b4));
            hi[h] = _mm256_or_si256(hi[h], c == 0 ? _mm256_and_si256(fifth[h], b4)
                                                  : _mm256_and_si256(_mm256_srli_epi16(fifth[h], c), b4));
          }
        }
        for (int t = 0; t < T; ++t) {
          const int8_t* q = x[size_t(t) * nb + s].qs + 32 * i + 4 * c;
          const __m256i xa = bcast4(q), xb = bcast4(q + 16);
          for (int h = 0; h < H; ++h)
            P[t][h] = _mm256_add_epi16(P[t][h], _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], xa),
                                                                 _mm256_maddubs_epi16(hi[h], xb)));
        }
        if (c == 3 || (kQ5 && c == 1)) {
          for (int h = 0; h < H; ++h)
            for (int t = 0; t < T; ++t) {
              S[t][h] = _mm256_add_epi32(S[t][h], _mm256_madd_epi16(P[t][h], sc[h]));
              P[t][h] = _mm256_setzero_si256();
            }
        }
      }
    }
    for (int h = 0; h < H; ++h) {
      const int hh = half0 + h;
      __m256i mp[4];
      for (int k = 0; k < 4; ++k)
        mp[k] = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kQ4KMinOff + 32 * k + 16 * hh)));
      const __m256 dw = load_f16x8(b + kQ4KDOff + 16 * hh), dm = load_f16x8(b + kQ4KDminOff + 16 * hh);
      for (int t = 0; t < T; ++t) {
        const Q4KPackedAct& a = x[size_t(t) * nb + s];
        __m256i mn = _mm256_setzero_si256();
        for (int k = 0; k < 4; ++k) mn = _mm256_add_epi32(mn, _mm256_madd_epi16(mp[k], _mm256_set1_epi32(a.xs_pairs[k])));
        const __m256 dx = _mm256_set1_ps(a.d);
        acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S[t][h]), _mm256_mul_ps(dw, dx), acc[t][h]);
        acc[t][h] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mn), _mm256_mul_ps(dm, dx), acc[t][h]);
      }
    }
  }
  store_tile(acc, y, y_stride, rows);
}

constexpr int kQ4KT = 2, kQ4KH = 2;
constexpr HalfTileFn<Q4KPackedAct> kQ4KTiles[kQ4KT][kQ4KH] = {{&q4k_tile<1, 1, false>, &q4k_tile<1, 2, false>},
                                                               {&q4k_tile<2, 1, false>, &q4k_tile<2, 2, false>}};
constexpr HalfTileFn<Q4KPackedAct> kQ5KTiles[kQ4KT][kQ4KH] = {{&q4k_tile<1, 1, true>, &q4k_tile<1, 2, true>},
                                                               {&q4k_tile<2, 1, true>, &q4k_tile<2, 2, true>}};

// ---- Q6_K ----------------------------------------------------------------
//
// Quants 0..63 (u8) times x (any int8): a vpmaddubsw pair is at most
// 2 * 63 * 128 = 16128 in size, two vectors of one 16-value sub-block sum to
// at most 32256 < 2^15;
// vpmaddwd with (sc, sc) (sc int8) gives sc times their dot product, and
// sc * (-32 xs) is added once per sub-block: S is the same integer as the
// AVX-512 tile's.
constexpr size_t kQ6KHiOff = 2048, kQ6KScOff = 3072, kQ6KDOff = 3328;
// Q3_K (q = w + 4 in 0..7, pairs at most 2 * 7 * 128) runs on the same tile
// with its own planes: the two low bits as Q6_K's high-bit planes at 0, the
// high bits at kQ3KHbOff, scales - 32 at kQ3KScOff, d at kQ3KDOff.
constexpr size_t kQ3KHbOff = 1024, kQ3KScOff = 1536, kQ3KDOff = 1792;
// Q2_K (q in 0..3, scales and mins u8 in 0..15): the two-bit planes at 0,
// then scales, mins (each pair of sub-blocks side by side), d, dmin; the
// mins' sum is a second integer, Mn.
constexpr size_t kQ2KScOff = 1024, kQ2KMinOff = 1280, kQ2KDOff = 1536, kQ2KDminOff = 1568;
// The three formats of q6k_tile.
constexpr int kQ6K = 0, kQ3K = 1, kQ2K = 2;

// Bit n of every byte moved to bit 2 (the rest is masked).
template <int N>
inline __m256i bit_to_2(__m256i h) {
  if constexpr (N < 2) return _mm256_slli_epi32(h, 2 - N);
  if constexpr (N == 2) return h;
  return _mm256_srli_epi32(h, N - 2);
}

// Bits 2c, 2c + 1 of every byte moved to bits 4, 5 (the rest is masked).
template <int C>
inline __m256i hi_bits(__m256i h) {
  if constexpr (C == 0) return _mm256_slli_epi32(h, 4);
  if constexpr (C == 1) return _mm256_slli_epi32(h, 2);
  if constexpr (C == 2) return h;
  return _mm256_srli_epi32(h, 2);
}

// Q6_K: h0, h1 the high-bit planes of sub-blocks 2 i2 and 2 i2 + 1; Q3_K,
// Q2_K: their low-bit planes, and (Q3_K) hb the high bits.
template <int T, int H, int C, int kKind>
inline void q6k_chunk(const uint8_t* b, int i2, int half0, const __m256i (&h0)[H], const __m256i (&h1)[H],
                      const __m256i (&hb)[H], const Q6KPackedAct* x, int nb, int s, __m256i (&A)[T][H],
                      __m256i (&B)[T][H]) {
  __m256i qa[H], qb[H];
  for (int h = 0; h < H; ++h) {
    if constexpr (kKind == kQ2K) {
      const __m256i m3 = _mm256_set1_epi8(0x03);
      qa[h] = _mm256_and_si256(_mm256_srli_epi32(h0[h], 2 * C), m3);
      qb[h] = _mm256_and_si256(_mm256_srli_epi32(h1[h], 2 * C), m3);
    } else if constexpr (kKind == kQ3K) {
      const __m256i m3 = _mm256_set1_epi8(0x03), m4 = _mm256_set1_epi8(0x04);
      qa[h] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(h0[h], 2 * C), m3), _mm256_and_si256(bit_to_2<C>(hb[h]), m4));
      qb[h] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(h1[h], 2 * C), m3),
                              _mm256_and_si256(bit_to_2<4 + C>(hb[h]), m4));
    } else {
      const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
      const __m256i v = load32(b + i2 * 256 + C * 64 + 32 * (half0 + h));
      qa[h] = _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_and_si256(hi_bits<C>(h0[h]), m30));
      qb[h] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), _mm256_and_si256(hi_bits<C>(h1[h]), m30));
    }
  }
  for (int t = 0; t < T; ++t) {
    const int8_t* q = x[size_t(t) * nb + s].qs + 32 * i2 + 4 * C;
    const __m256i xa = bcast4(q), xb = bcast4(q + 16);
    for (int h = 0; h < H; ++h) {
      A[t][h] = _mm256_add_epi16(A[t][h], _mm256_maddubs_epi16(qa[h], xa));
      B[t][h] = _mm256_add_epi16(B[t][h], _mm256_maddubs_epi16(qb[h], xb));
    }
  }
}

template <int T, int H, int kKind>
void q6k_tile(const uint8_t* grp, size_t /*group_stride*/, int half0, const Q6KPackedAct* x, int nb, float* y,
              int y_stride, int rows) {
  static_assert(H <= 2, "a K-quant tile stays within one group");
  constexpr size_t kBlockBytes = kKind == kQ2K   ? PackedMatrix::kQ2KBlockBytes
                                 : kKind == kQ3K ? PackedMatrix::kQ3KBlockBytes
                                                 : PackedMatrix::kQ6KBlockBytes;
  constexpr size_t kPlanes = kKind == kQ6K ? kQ6KHiOff : 0;
  constexpr size_t kScOff = kKind == kQ2K ? kQ2KScOff : kKind == kQ3K ? kQ3KScOff : kQ6KScOff;
  constexpr size_t kDOff = kKind == kQ2K ? kQ2KDOff : kKind == kQ3K ? kQ3KDOff : kQ6KDOff;
  constexpr int kLines = kKind == kQ6K ? 7 : 4;  // per step of 8
  __m256 acc[T][H];
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) acc[t][h] = _mm256_setzero_ps();
  for (int s = 0; s < nb; ++s) {
    const uint8_t* b = grp + size_t(s) * kBlockBytes;
    __m256i S[T][H], Mn[T][H];  // Mn: Q2_K's sum of m_i * -xs_i
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) S[t][h] = Mn[t][h] = _mm256_setzero_si256();
    for (int i2 = 0; i2 < 8; ++i2) {
      if constexpr (T <= 2) {  // decode: the next super-block
        const char* pf = reinterpret_cast<const char*>(b + kKQuantPrefetchBlocks * kBlockBytes + i2 * 64 * kLines);
        for (int l = 0; l < kLines; ++l) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
      }
      __m256i h0[H], h1[H], hb[H], sa[H], sb[H];
      for (int h = 0; h < H; ++h) {
        const int hh = half0 + h;
        h0[h] = load32(b + kPlanes + i2 * 128 + 32 * hh);
        h1[h] = load32(b + kPlanes + i2 * 128 + 64 + 32 * hh);
        hb[h] = kKind == kQ3K ? load32(b + kQ3KHbOff + i2 * 64 + 32 * hh) : _mm256_setzero_si256();
        if constexpr (kKind == kQ2K) {
          side_by_side_u8(b + kScOff + 32 * i2 + 16 * hh, &sa[h], &sb[h]);
        } else {
          sa[h] = pair16_s8(b + kScOff + 2 * i2 * 16 + 8 * hh);
          sb[h] = pair16_s8(b + kScOff + (2 * i2 + 1) * 16 + 8 * hh);
        }
      }
      // Sub-blocks 2 i2 (A) and 2 i2 + 1 (B), two vectors at a time in int16.
      __m256i A[T][H], B[T][H];
      auto fold = [&] {
        for (int t = 0; t < T; ++t)
          for (int h = 0; h < H; ++h) {
            S[t][h] = _mm256_add_epi32(S[t][h], _mm256_add_epi32(_mm256_madd_epi16(A[t][h], sa[h]),
                                                                 _mm256_madd_epi16(B[t][h], sb[h])));
            A[t][h] = B[t][h] = _mm256_setzero_si256();
          }
      };
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < H; ++h) A[t][h] = B[t][h] = _mm256_setzero_si256();
      q6k_chunk<T, H, 0, kKind>(b, i2, half0, h0, h1, hb, x, nb, s, A, B);
      q6k_chunk<T, H, 1, kKind>(b, i2, half0, h0, h1, hb, x, nb, s, A, B);
      fold();
      q6k_chunk<T, H, 2, kKind>(b, i2, half0, h0, h1, hb, x, nb, s, A, B);
      q6k_chunk<T, H, 3, kKind>(b, i2, half0, h0, h1, hb, x, nb, s, A, B);
      fold();
      for (int h = 0; h < H; ++h) {
        if constexpr (kKind == kQ2K) {  // (m_a, m_b) times (-xs_a, -xs_b) into Mn: 2 * 15 * 2048, exact
          const __m256i mab = side_by_side_u8(b + kQ2KMinOff + 32 * i2 + 16 * (half0 + h), nullptr, nullptr);
          for (int t = 0; t < T; ++t)
            Mn[t][h] = _mm256_add_epi32(Mn[t][h],
                                        _mm256_madd_epi16(mab, _mm256_set1_epi32(x[size_t(t) * nb + s].neg_xs_pairs[i2])));
          continue;
        }
        // sc (sign-extended int32 in each lane's low half) times -offset xs.
        const __m256i sa32 = _mm256_srai_epi32(_mm256_slli_epi32(sa[h], 16), 16);
        const __m256i sb32 = _mm256_srai_epi32(_mm256_slli_epi32(sb[h], 16), 16);
        for (int t = 0; t < T; ++t) {
          const Q6KPackedAct& a = x[size_t(t) * nb + s];
          S[t][h] = _mm256_add_epi32(S[t][h], _mm256_add_epi32(
              _mm256_mullo_epi32(sa32, _mm256_set1_epi32(a.neg_oxs[2 * i2])),
              _mm256_mullo_epi32(sb32, _mm256_set1_epi32(a.neg_oxs[2 * i2 + 1]))));
        }
      }
    }
    for (int h = 0; h < H; ++h) {
      const __m256 dw = load_f16x8(b + kDOff + 16 * (half0 + h));
      for (int t = 0; t < T; ++t) {
        const __m256 dx = _mm256_set1_ps(x[size_t(t) * nb + s].d);
        acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S[t][h]), _mm256_mul_ps(dw, dx), acc[t][h]);
      }
      if constexpr (kKind == kQ2K) {
        const __m256 dm = load_f16x8(b + kQ2KDminOff + 16 * (half0 + h));
        for (int t = 0; t < T; ++t) {
          const __m256 dx = _mm256_set1_ps(x[size_t(t) * nb + s].d);
          acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(Mn[t][h]), _mm256_mul_ps(dm, dx), acc[t][h]);
        }
      }
    }
  }
  store_tile(acc, y, y_stride, rows);
}

constexpr int kQ6KT = 2, kQ6KH = 2;
template <int kKind>
struct KTiles {
  static constexpr HalfTileFn<Q6KPackedAct> kTiles[kQ6KT][kQ6KH] = {
      {&q6k_tile<1, 1, kKind>, &q6k_tile<1, 2, kKind>}, {&q6k_tile<2, 1, kKind>, &q6k_tile<2, 2, kKind>}};
};

}  // namespace

void matmul_q4k_rows_avx2(const PackedMatrix& w, const Q4KPackedAct* x, int n_tokens, float* y, int y_stride,
                          int64_t row_begin, int64_t row_end) {
  run_half_tiles(w.type() == GgmlType::kQ5_K ? kQ5KTiles : kQ4KTiles, w, x, n_tokens, y, y_stride, row_begin,
                 row_end);
}

void matmul_q6k_rows_avx2(const PackedMatrix& w, const Q6KPackedAct* x, int n_tokens, float* y, int y_stride,
                          int64_t row_begin, int64_t row_end) {
  const auto& tiles = w.type() == GgmlType::kQ3_K   ? KTiles<kQ3K>::kTiles
                     : w.type() == GgmlType::kQ2_K ? KTiles<kQ2K>::kTiles
                                                   : KTiles<kQ6K>::kTiles;
  run_half_tiles(tiles, w, x, n_tokens, y, y_stride, row_begin, row_end);
}

}  // namespace larder::packed_detail

#endif  // LARDER_PACKED_AVX2
