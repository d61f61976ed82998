// The packed Q8_0, Q4_0 .. Q5_1, IQ4_NL and IQ4_XS tiles for CPUs with AVX2,
// FMA and F16C but no AVX-512 VNNI (AMD Zen 2 / Zen 3, Intel Haswell ..
// Alder Lake builds); the K-quant tiles are in matmul_packed_avx2_kquant.cpp.
// Same layouts as matmul_packed.h, read as two 32-byte halves per 64-byte
// vector: half 0 holds rows 0-7 of a group, half 1 rows 8-15. Same
// arithmetic, hence the same bits as the AVX-512 tiles: the exact int32
// block sums are formed with vpmaddubsw (u8 x s8 pairs into int16) and
// vpmaddwd (int16 pairs into int32), whose bounds are stated at each use so
// that nothing saturates, then the same fmas in the same order.
#include "engine/cpu/matmul_packed.h"

#ifdef LARDER_PACKED_AVX2

#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <vector>

#include "engine/cpu/matmul_packed_avx2_tiles.h"
#include "engine/gguf/quant_blocks.h"

namespace larder::packed_detail {

using namespace avx2;

namespace {

// ---- Q8_0 ----------------------------------------------------------------
//
// The weights are stored as w + 128 (u8, for vpdpbusd); here w = stored ^ 0x80
// again, and w * x is formed as |w| (u8, 0..128) times x with w's sign
// (vpsignb; x in [-127, 127] as quantize_rows_q8_0 makes it, so the negation
// is exact): each vpmaddubsw pair is at most 2 * 128 * 127 = 32512 < 2^15.
// The 32-value block tiles' shared steps (Q8_0; Q4_0 .. Q5_1; IQ4_NL, IQ4_XS). Halves
// half0 .. half0 + H - 1: q[h] their first quant bytes, s[h] their first
// scales (kQB quant bytes per block; the scales follow nb blocks of them).
// scale_bytes: of one row's scale (2: f16; IQ4_XS's int8 ls: 1).
template <int H>
inline void block_halves(const uint8_t* grp, size_t group_stride, int half0, int nb, size_t kQB,
                         const uint8_t* (&q)[H], const uint8_t* (&s)[H], size_t scale_bytes = 2) {
  for (int h = 0; h < H; ++h) {
    const int hh = half0 + h;
    const uint8_t* g = grp + size_t(hh / 2) * group_stride;
    q[h] = g + 32 * (hh % 2);
    s[h] = g + size_t(nb) * kQB + kHalfRows * scale_bytes * (hh % 2);
  }
}

// Decode and short verification (T <= 2) stream the weights once: block
// `off` + kQ8PrefetchBlocks Q8_0 blocks ahead, kQB bytes per half's group.
template <int H>
inline void prefetch_block(const uint8_t* const (&q)[H], int half0, size_t off, size_t kQB) {
  for (int h = 0; h < H; ++h) {
    if (h > 0 && (half0 + h) % 2 == 1) continue;  // the same lines as half h - 1
    const char* pf = reinterpret_cast<const char*>(q[h] + off + kQ8PrefetchBlocks * PackedMatrix::kBlockQuantBytes);
    for (size_t l = 0; l < kQB / 64; ++l) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
  }
}

// acc += float(is) * (d_w * d_x) for block b (the contract's one fma per
// block), d_w given for the H halves.
template <int T, int H>
inline void add_scaled(__m256 (&acc)[T][H], const __m256i (&is)[T][H], const __m256 (&dw)[H],
                       const Q8PackedAct* x, int nb, int b) {
  for (int t = 0; t < T; ++t) {
    const __m256 dx = _mm256_set1_ps(x[size_t(t) * nb + b].d);
    for (int h = 0; h < H; ++h)
      acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[t][h]), _mm256_mul_ps(dw[h], dx), acc[t][h]);
  }
}

// The same with d_w the f16 scales at s (32 bytes per block).
template <int T, int H>
inline void add_block(__m256 (&acc)[T][H], const __m256i (&is)[T][H], const uint8_t* const (&s)[H],
                      const Q8PackedAct* x, int nb, int b) {
  __m256 dw[H];
  for (int h = 0; h < H; ++h) dw[h] = load_f16x8(s[h] + size_t(b) * 32);
  add_scaled(acc, is, dw, x, nb, b);
}

template <int T, int H>
void q8_tile(const uint8_t* grp, size_t group_stride, int half0, const Q8PackedAct* x, int nb, float* y,
             int y_stride, int rows) {
  const uint8_t* q[H];
  const uint8_t* s[H];
  block_halves(grp, group_stride, half0, nb, PackedMatrix::kBlockQuantBytes, q, s);
  const __m256i flip = _mm256_set1_epi8(char(0x80)), ones = _mm256_set1_epi16(1);
  __m256 acc[T][H];
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) acc[t][h] = _mm256_setzero_ps();
  for (int b = 0; b < nb; ++b) {
    const size_t off = size_t(b) * PackedMatrix::kBlockQuantBytes;
    if constexpr (T <= 2) prefetch_block(q, half0, off, PackedMatrix::kBlockQuantBytes);
    __m256i is[T][H];
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) is[t][h] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      __m256i wv[H], aw[H];
      for (int h = 0; h < H; ++h) {
        wv[h] = _mm256_xor_si256(load32(q[h] + off + size_t(j) * PackedMatrix::kChunkBytes), flip);
        aw[h] = _mm256_abs_epi8(wv[h]);
      }
      for (int t = 0; t < T; ++t) {
        const __m256i xv = bcast4(x[size_t(t) * nb + b].qs + 4 * j);
        for (int h = 0; h < H; ++h) {
          const __m256i p = _mm256_maddubs_epi16(aw[h], _mm256_sign_epi8(xv, wv[h]));
          is[t][h] = _mm256_add_epi32(is[t][h], _mm256_madd_epi16(p, ones));
        }
      }
    }
    add_block(acc, is, s, x, nb, b);
  }
  store_tile(acc, y, y_stride, rows);
}

// Prefill: up to 3 tokens x 2 halves; decode: 4 halves (two groups).
constexpr int kQ8T = 3, kQ8H = 4;
#define LARDER_H4(T) {&q8_tile<T, 1>, &q8_tile<T, 2>, &q8_tile<T, 3>, &q8_tile<T, 4>}
constexpr HalfTileFn<Q8PackedAct> kQ8Tiles[kQ8T][kQ8H] = {LARDER_H4(1), LARDER_H4(2), LARDER_H4(3)};
#undef LARDER_H4

// ---- Q4_0, Q5_0, Q4_1, Q5_1 ----------------------------------------------
//
// Quants q = w + 8 in 0..15 (Q4_0) or q = w + 16 in 0..31 (Q5_0: the fifth
// bits, bit j of each byte of the block's last vector, moved to bit 4), u8,
// times x (int8, |x| <= 127): a vpmaddubsw pair is at most 2 * 31 * 127 =
// 7874, so the pairs of values 4j.. and 16 + 4j.. add in int16 (15748)
// before vpmaddwd; the block's int32 sum starts from -offset * sum(x)
// (Q8PackedAct::neg_c), which makes it sum w * x exactly. With kMins (Q4_1,
// Q5_1: w = d q + m) it starts from 0 and m * Q8PackedAct::s is added after.
//
// The quants q of values 4j.. (*lo) and 16 + 4j.. (*hi) of the half-block at
// p (its fifth bits, kQ5, kQ40BlockQuantBytes after it), chunk j in 0..3.
template <bool kQ5>
inline void q32_quants(const uint8_t* p, int j, __m256i* lo, __m256i* hi) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i v = load32(p + size_t(j) * PackedMatrix::kChunkBytes);
  *lo = _mm256_and_si256(v, m4);
  *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
  if constexpr (kQ5) {  // bits j and j + 4 of each byte to bit 4 (shifts within 16-bit lanes)
    const __m256i fifth = load32(p + PackedMatrix::kQ40BlockQuantBytes);
    const __m256i b4 = _mm256_set1_epi8(0x10);
    *lo = _mm256_or_si256(*lo, _mm256_and_si256(_mm256_slli_epi16(fifth, 4 - j), b4));
    *hi = _mm256_or_si256(*hi, j == 0 ? _mm256_and_si256(fifth, b4)
                                      : _mm256_and_si256(_mm256_srli_epi16(fifth, j), b4));
  }
}

// Prefill of a token block on groups unpacked once (kUnp, unpack_group
// below): *lo and *hi of chunk j as stored there.
inline void unpacked_pair(const uint8_t* p, int j, __m256i* lo, __m256i* hi) {
  *lo = load32(p + size_t(2 * j) * PackedMatrix::kChunkBytes);
  *hi = load32(p + size_t(2 * j + 1) * PackedMatrix::kChunkBytes);
}

template <int T, int H, bool kQ5, bool kMins, bool kUnp>
void q4_0_tile(const uint8_t* grp, size_t group_stride, int half0, const Q8PackedAct* x, int nb, float* y,
               int y_stride, int rows) {
  constexpr size_t kQB = kUnp  ? PackedMatrix::kBlockQuantBytes
                         : kQ5 ? PackedMatrix::kQ50BlockQuantBytes
                               : PackedMatrix::kQ40BlockQuantBytes;
  const uint8_t* q[H];
  const uint8_t* s[H];
  block_halves(grp, group_stride, half0, nb, kQB, q, s);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[T][H];
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) acc[t][h] = _mm256_setzero_ps();
  for (int b = 0; b < nb; ++b) {
    const size_t off = size_t(b) * kQB;
    if constexpr (T <= 2 && !kUnp) prefetch_block(q, half0, off, kQB);  // Q8_0's distance in bytes
    __m256i is[T][H];
    for (int t = 0; t < T; ++t) {
      const __m256i c = kMins ? _mm256_setzero_si256() : _mm256_set1_epi32(x[size_t(t) * nb + b].neg_c);
      for (int h = 0; h < H; ++h) is[t][h] = c;
    }
    for (int j = 0; j < 4; ++j) {
      __m256i lo[H], hi[H];
      for (int h = 0; h < H; ++h) {
        if constexpr (kUnp) {
          unpacked_pair(q[h] + off, j, &lo[h], &hi[h]);
        } else {
          q32_quants<kQ5>(q[h] + off, j, &lo[h], &hi[h]);
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m256i xl = bcast4(x[size_t(t) * nb + b].qs + 4 * j);
        const __m256i xh = bcast4(x[size_t(t) * nb + b].qs + 16 + 4 * j);
        for (int h = 0; h < H; ++h) {
          const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], xl), _mm256_maddubs_epi16(hi[h], xh));
          is[t][h] = _mm256_add_epi32(is[t][h], _mm256_madd_epi16(p, ones));
        }
      }
    }
    add_block(acc, is, s, x, nb, b);
    if constexpr (kMins) {
      __m256 mw[H];
      for (int h = 0; h < H; ++h) mw[h] = load_f16x8(s[h] + size_t(nb + b) * 32);
      for (int t = 0; t < T; ++t) {
        const __m256 sx = _mm256_set1_ps(x[size_t(t) * nb + b].s);
        for (int h = 0; h < H; ++h) acc[t][h] = _mm256_fmadd_ps(mw[h], sx, acc[t][h]);
      }
    }
  }
  store_tile(acc, y, y_stride, rows);
}

template <bool kQ5, bool kMins>
struct Q32Tiles {
#define LARDER_H4(T) {&q4_0_tile<T, 1, kQ5, kMins, false>, &q4_0_tile<T, 2, kQ5, kMins, false>, \
                      &q4_0_tile<T, 3, kQ5, kMins, false>, &q4_0_tile<T, 4, kQ5, kMins, false>}
  static constexpr HalfTileFn<Q8PackedAct> kTiles[kQ8T][kQ8H] = {LARDER_H4(1), LARDER_H4(2), LARDER_H4(3)};
#undef LARDER_H4
  // Prefill on a group unpacked once (run_prefill_unpacked): its 1 or 2
  // halves only; Q5's fifth bits are in the unpacked quants already.
#define LARDER_H2(T) {&q4_0_tile<T, 1, false, kMins, true>, &q4_0_tile<T, 2, false, kMins, true>}
  static constexpr HalfTileFn<Q8PackedAct> kUnpacked[kQ8T][2] = {LARDER_H2(1), LARDER_H2(2), LARDER_H2(3)};
#undef LARDER_H2
};

// ---- IQ4_NL, IQ4_XS --------------------------------------------------------
//
// Q4_0's layout with 4-bit indices: w = kIQ4Values[i] (-127..113) by a byte
// shuffle, then Q8_0's |w| x sign-applied x (|w| <= 127, so a vpmaddubsw pair
// is at most 2 * 127 * 127 = 32258 < 2^15); the low and high nibbles' pairs
// go to int32 separately (their sum could pass 2^15). The block's sum starts
// from 0: Q8PackedAct::neg_c is for the AVX-512 tiles' w + 128.
// kSubScales (IQ4_XS): the block scale is d * (ls - 32) from the int8 ls
// and the f16 d per 8 blocks that follow (matmul_packed.h).
//
// The values w of 4j.. (*lo) and 16 + 4j.. (*hi) of the half-block at p.
inline void iq4_values(const uint8_t* p, int j, __m256i table, __m256i* lo, __m256i* hi) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i v = load32(p + size_t(j) * PackedMatrix::kChunkBytes);
  *lo = _mm256_shuffle_epi8(table, _mm256_and_si256(v, m4));
  *hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
}
inline __m256i iq4_table() {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Values)));
}

template <int T, int H, bool kSubScales, bool kUnp>
void iq4_tile(const uint8_t* grp, size_t group_stride, int half0, const Q8PackedAct* x, int nb, float* y,
              int y_stride, int rows) {
  constexpr size_t kQB = kUnp ? PackedMatrix::kBlockQuantBytes : PackedMatrix::kQ40BlockQuantBytes;
  const uint8_t* q[H];
  const uint8_t* s[H];
  block_halves(grp, group_stride, half0, nb, kQB, q, s, kSubScales ? 1 : 2);
  const uint8_t* sd[H];  // IQ4_XS: the d after nb blocks of 16 ls
  block_halves(grp, group_stride, half0, nb, kQB + 16, q, sd, 2);
  const __m256i ones = _mm256_set1_epi16(1), table = iq4_table();
  __m256 acc[T][H];
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) acc[t][h] = _mm256_setzero_ps();
  for (int b = 0; b < nb; ++b) {
    const size_t off = size_t(b) * kQB;
    if constexpr (T <= 2 && !kUnp) prefetch_block(q, half0, off, kQB);
    __m256i is[T][H];
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) is[t][h] = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      __m256i wl[H], wh[H];
      for (int h = 0; h < H; ++h) {
        if constexpr (kUnp) {
          unpacked_pair(q[h] + off, j, &wl[h], &wh[h]);
        } else {
          iq4_values(q[h] + off, j, table, &wl[h], &wh[h]);
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m256i xl = bcast4(x[size_t(t) * nb + b].qs + 4 * j);
        const __m256i xh = bcast4(x[size_t(t) * nb + b].qs + 16 + 4 * j);
        for (int h = 0; h < H; ++h) {
          const __m256i pl = _mm256_maddubs_epi16(_mm256_abs_epi8(wl[h]), _mm256_sign_epi8(xl, wl[h]));
          const __m256i ph = _mm256_maddubs_epi16(_mm256_abs_epi8(wh[h]), _mm256_sign_epi8(xh, wh[h]));
          is[t][h] = _mm256_add_epi32(is[t][h], _mm256_madd_epi16(pl, ones));
          is[t][h] = _mm256_add_epi32(is[t][h], _mm256_madd_epi16(ph, ones));
        }
      }
    }
    if constexpr (kSubScales) {
      __m256 dw[H];
      for (int h = 0; h < H; ++h) {
        const __m256 ls = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(
            reinterpret_cast<const __m128i*>(s[h] + size_t(b) * 16))));
        dw[h] = _mm256_mul_ps(load_f16x8(sd[h] + size_t(b / 8) * 32), ls);  // exact
      }
      add_scaled(acc, is, dw, x, nb, b);
    } else {
      add_block(acc, is, s, x, nb, b);
    }
  }
  store_tile(acc, y, y_stride, rows);
}

template <bool kSubScales>
struct IQ4Tiles {
#define LARDER_H4(T) {&iq4_tile<T, 1, kSubScales, false>, &iq4_tile<T, 2, kSubScales, false>, \
                      &iq4_tile<T, 3, kSubScales, false>, &iq4_tile<T, 4, kSubScales, false>}
  static constexpr HalfTileFn<Q8PackedAct> kTiles[kQ8T][kQ8H] = {LARDER_H4(1), LARDER_H4(2), LARDER_H4(3)};
#undef LARDER_H4
#define LARDER_H2(T) {&iq4_tile<T, 1, kSubScales, true>, &iq4_tile<T, 2, kSubScales, true>}
  static constexpr HalfTileFn<Q8PackedAct> kUnpacked[kQ8T][2] = {LARDER_H2(1), LARDER_H2(2), LARDER_H2(3)};
#undef LARDER_H2
};

// ---- Prefill on groups unpacked once --------------------------------------
//
// Each prefill tile above redid the nibbles (and Q5's fifth bits, IQ4's
// shuffle) of a group for its 3 tokens. A token block of at least
// kUnpackMinTokens tokens instead unpacks each group once into a scratch laid
// out as Q8_0's 512-byte blocks (chunk 2j: the lo vectors of both halves,
// chunk 2j + 1 the hi ones, as q32_quants / iq4_values form them), the
// scales (and mins, IQ4_XS's ls and d) copied after as they are; the kUnp
// tiles then load those vectors: the same vectors into the same
// instructions, hence the same bits.
constexpr int kUnpackMinTokens = 4 * kQ8T;
struct alignas(32) Line32 {
  uint8_t bytes[32];
};

template <class Part>
const uint8_t* unpack_group(const PackedMatrix& w, int64_t g, Part part, std::vector<Line32>* scratch) {
  const int nb = w.n_blocks();
  const size_t qb = w.block_quant_bytes(), scale_bytes = size_t(nb) * w.block_scale_bytes();
  const size_t bytes = size_t(nb) * PackedMatrix::kBlockQuantBytes + scale_bytes;
  if (scratch->size() * sizeof(Line32) < bytes) scratch->resize((bytes + sizeof(Line32) - 1) / sizeof(Line32));
  auto* out = reinterpret_cast<uint8_t*>(scratch->data());
  const uint8_t* src = w.group(g);
  for (int b = 0; b < nb; ++b)
    for (int j = 0; j < 4; ++j)
      for (int h = 0; h < 2; ++h) {
        __m256i lo, hi;
        part(src + size_t(b) * qb + 32 * h, j, &lo, &hi);
        uint8_t* o = out + size_t(b) * PackedMatrix::kBlockQuantBytes + 32 * h;
        _mm256_store_si256(reinterpret_cast<__m256i*>(o + size_t(2 * j) * PackedMatrix::kChunkBytes), lo);
        _mm256_store_si256(reinterpret_cast<__m256i*>(o + size_t(2 * j + 1) * PackedMatrix::kChunkBytes), hi);
      }
  std::memcpy(out + size_t(nb) * PackedMatrix::kBlockQuantBytes, src + size_t(nb) * qb, scale_bytes);
  return out;
}

// This thread's scratch for unpack_group, one for every format; it grows to
// the widest matrix's group (K / 32 x (512 + 64) bytes at most) and stays.
std::vector<Line32>& unpack_scratch() {
  thread_local std::vector<Line32> scratch;
  return scratch;
}

// run_half_tiles' prefill (tiles of up to 3 tokens x one group), with each
// group of a token block of kUnpackMinTokens or more unpacked once by
// `part` and run on the `unpacked` tiles. Rows wider than about 35k values
// (kActBlockBytes / 40 bytes a block < 12 tokens) never unpack.
template <class Part>
void run_prefill_unpacked(const HalfTileFn<Q8PackedAct> (&tiles)[kQ8T][2],
                          const HalfTileFn<Q8PackedAct> (&unpacked)[kQ8T][2], Part part, const PackedMatrix& w,
                          const Q8PackedAct* x, int n_tokens, float* y, int y_stride, int64_t row_begin,
                          int64_t row_end) {
  assert(row_begin % PackedMatrix::kGroupRows == 0);
  const int nb = w.n_blocks();
  int block = int(kActBlockBytes / (size_t(nb) * sizeof(Q8PackedAct)));
  block = std::max(kQ8T, block / kQ8T * kQ8T);
  std::vector<Line32>& scratch = unpack_scratch();
  for (int tb = 0; tb < n_tokens; tb += block) {
    const int te = std::min(n_tokens, tb + block);
    for (int64_t r0 = row_begin; r0 < row_end; r0 += PackedMatrix::kGroupRows) {
      const int rows = int(std::min<int64_t>(PackedMatrix::kGroupRows, row_end - r0));
      const int H = (rows + kHalfRows - 1) / kHalfRows;
      const int64_t g = r0 / PackedMatrix::kGroupRows;
      const bool unpack = te - tb >= kUnpackMinTokens;
      const uint8_t* grp = unpack ? unpack_group(w, g, part, &scratch) : w.group(g);
      const auto& t_fn = unpack ? unpacked : tiles;
      for (int t0 = tb; t0 < te; t0 += kQ8T) {
        const int T = std::min(kQ8T, te - t0);
        t_fn[T - 1][H - 1](grp, w.group_stride(), 0, x + size_t(t0) * nb, nb, y + size_t(t0) * y_stride + r0,
                           y_stride, rows);
      }
    }
  }
}

}  // namespace


void matmul_q8_rows_avx2(const PackedMatrix& w, const Q8PackedAct* x, int n_tokens, float* y, int y_stride,
                         int64_t row_begin, int64_t row_end) {
  if (n_tokens == 1) {  // decode: the widest tile
    constexpr HalfTileFn<Q8PackedAct> kDecode[1][kQ8H] = {{kQ8Tiles[0][0], kQ8Tiles[0][1], kQ8Tiles[0][2], kQ8Tiles[0][3]}};
    run_half_tiles(kDecode, w, x, 1, y, y_stride, row_begin, row_end);
    return;
  }
  constexpr HalfTileFn<Q8PackedAct> kPrefill[kQ8T][2] = {
      {kQ8Tiles[0][0], kQ8Tiles[0][1]}, {kQ8Tiles[1][0], kQ8Tiles[1][1]}, {kQ8Tiles[2][0], kQ8Tiles[2][1]}};
  run_half_tiles(kPrefill, w, x, n_tokens, y, y_stride, row_begin, row_end);
}

void matmul_q4_0_rows_avx2(const PackedMatrix& w, const Q8PackedAct* x, int n_tokens, float* y, int y_stride,
                           int64_t row_begin, int64_t row_end) {
  const GgmlType type = w.type();
  const auto& tiles = type == GgmlType::kQ5_0     ? Q32Tiles<true, false>::kTiles
                     : type == GgmlType::kQ4_1   ? Q32Tiles<false, true>::kTiles
                     : type == GgmlType::kQ5_1   ? Q32Tiles<true, true>::kTiles
                     : type == GgmlType::kIQ4_NL ? IQ4Tiles<false>::kTiles
                     : type == GgmlType::kIQ4_XS ? IQ4Tiles<true>::kTiles
                                                 : Q32Tiles<false, false>::kTiles;
  if (n_tokens == 1) {
    const HalfTileFn<Q8PackedAct> decode[1][kQ8H] = {{tiles[0][0], tiles[0][1], tiles[0][2], tiles[0][3]}};
    run_half_tiles(decode, w, x, 1, y, y_stride, row_begin, row_end);
    return;
  }
  const auto q4 = [](const uint8_t* p, int j, __m256i* lo, __m256i* hi) { q32_quants<false>(p, j, lo, hi); };
  const auto q5 = [](const uint8_t* p, int j, __m256i* lo, __m256i* hi) { q32_quants<true>(p, j, lo, hi); };
  const auto iq4 = [](const uint8_t* p, int j, __m256i* lo, __m256i* hi) {
    iq4_values(p, j, iq4_table(), lo, hi);
  };
  const HalfTileFn<Q8PackedAct> prefill[kQ8T][2] = {
      {tiles[0][0], tiles[0][1]}, {tiles[1][0], tiles[1][1]}, {tiles[2][0], tiles[2][1]}};
  const auto run = [&](const auto& unpacked, auto part) {
    run_prefill_unpacked(prefill, unpacked, part, w, x, n_tokens, y, y_stride, row_begin, row_end);
  };
  switch (type) {
    case GgmlType::kQ5_0: return run(Q32Tiles<true, false>::kUnpacked, q5);
    case GgmlType::kQ4_1: return run(Q32Tiles<false, true>::kUnpacked, q4);
    case GgmlType::kQ5_1: return run(Q32Tiles<true, true>::kUnpacked, q5);
    case GgmlType::kIQ4_NL: return run(IQ4Tiles<false>::kUnpacked, iq4);
    case GgmlType::kIQ4_XS: return run(IQ4Tiles<true>::kUnpacked, iq4);
    default: return run(Q32Tiles<false, false>::kUnpacked, q4);
  }
}

}  // namespace larder::packed_detail

#endif  // LARDER_PACKED_AVX2
