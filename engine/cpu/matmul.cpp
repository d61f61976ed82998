#include "engine/cpu/matmul.h"

#include "engine/cpu/matmul_dense_avx2.h"
#include "engine/cpu/matmul_kquant.h"
#include "engine/cpu/row_tiles.h"
#include "engine/cpu/thread_pool.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/gguf/quant_blocks.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define LARDER_MATMUL_AVX512 1
#include "engine/cpu/simd.h"
#elif defined(__AVX2__) && defined(__FMA__)
#define LARDER_MATMUL_AVX2 1
#include "engine/cpu/simd_avx2.h"
#endif

namespace larder {

// Q8_0 path choice, measured on the 2-core AVX-512 (VNNI) build machine with
// `test_cpu "[.bench]"` (4096 x 4096 Q8_0 matrix, one thread, best of 5):
//   1 token:   vnni  90 GFLOP/s, dequant-fma 47 GFLOP/s
//   4 tokens:  vnni 174 GFLOP/s, dequant-fma 157 GFLOP/s
//   64 tokens: vnni 169 GFLOP/s, dequant-fma 151 GFLOP/s
// so VNNI is the default where the CPU has it.
// On AVX2 builds (no VNNI) the int8 path runs in the packed kernels only,
// which the forward pass uses for every Q8_0 matrix.
Q8Path default_q8_path() {
#if (defined(LARDER_MATMUL_AVX512) && defined(__AVX512VNNI__)) || defined(LARDER_PACKED_AVX2)
  return Q8Path::kInt8;
#else
  return Q8Path::kDequantFma;
#endif
}

bool matmul_type_supported(GgmlType t) {
  return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16 ||
         t == GgmlType::kQ8_0 || matmul_quant_type(t);
}

void quantize_rows_q8_0(const float* x, int n_rows, int k, BlockQ8_0* out) {
  const int nb = k / kQ8_0BlockSize;
  for (int r = 0; r < n_rows; ++r) {
    for (int b = 0; b < nb; ++b) {
      const float* v = x + size_t(r) * k + size_t(b) * kQ8_0BlockSize;
      BlockQ8_0& blk = out[size_t(r) * nb + b];
#ifdef LARDER_MATMUL_AVX512
      // Same arithmetic as the scalar loop below: amax, d = amax / 127,
      // id = 1 / d, q = v * id rounded half away from zero (lround): with
      // t = trunc(|q|), |q| - t is exact, so t + (|q| - t >= 0.5) is lround.
      const __m512 lo = _mm512_loadu_ps(v), hi = _mm512_loadu_ps(v + 16);
      const __m512 alo = _mm512_abs_ps(lo), ahi = _mm512_abs_ps(hi);
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(alo, ahi));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      blk.d = fp32_to_fp16(d);
      const __m512 vid = _mm512_set1_ps(id);
      for (int h = 0; h < 2; ++h) {
        const __m512 q = _mm512_mul_ps(h == 0 ? lo : hi, vid);
        const __m512 aq = _mm512_abs_ps(q);
        __m512 t = _mm512_roundscale_ps(aq, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __mmask16 up = _mm512_cmp_ps_mask(_mm512_sub_ps(aq, t), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
        t = _mm512_mask_add_ps(t, up, t, _mm512_set1_ps(1.0f));
        __m512i qi = _mm512_cvttps_epi32(t);
        const __mmask16 neg = _mm512_cmp_ps_mask(q, _mm512_setzero_ps(), _CMP_LT_OQ);
        qi = _mm512_mask_sub_epi32(qi, neg, _mm512_setzero_si512(), qi);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(blk.qs + 16 * h), _mm512_cvtepi32_epi8(qi));
      }
#elif defined(LARDER_MATMUL_AVX2)
      // The same arithmetic, 8 lanes at a time (lround_avx2).
      __m256 x[4];
      __m256 amax = _mm256_setzero_ps();
      for (int j = 0; j < 4; ++j) {
        x[j] = _mm256_loadu_ps(v + 8 * j);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x[j]));
      }
      const float d = hmax_avx2(amax) / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      blk.d = fp32_to_fp16(d);
      const __m256 vid = _mm256_set1_ps(id);
      __m256i q[4];
      for (int j = 0; j < 4; ++j) q[j] = lround_avx2(_mm256_mul_ps(x[j], vid));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(blk.qs), pack_i32x4_i8(q[0], q[1], q[2], q[3]));
#else
      float amax = 0.0f;
      for (int i = 0; i < kQ8_0BlockSize; ++i) amax = std::max(amax, std::fabs(v[i]));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      blk.d = fp32_to_fp16(d);
      for (int i = 0; i < kQ8_0BlockSize; ++i) blk.qs[i] = int8_t(std::lround(v[i] * id));
#endif
    }
  }
}

#ifdef LARDER_MATMUL_AVX512
namespace {

// Horizontal sum of 16 lanes in a fixed order: halves, quarters, pairs.
// (GCC 12's _mm512_reduce_add_ps trips -Wuninitialized in its own header.)
inline float hsum(__m512 v) {
  const __m512 hi8 = _mm512_shuffle_f32x4(v, v, 0xEE);  // lanes 8..15 to 0..7
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_castps512_ps256(hi8));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 0x55));
  return _mm_cvtss_f32(s1);
}

// ---- F32 / F16 / BF16: 16 weights per chunk --------------------------------
struct LoadF32 {
  static constexpr int kBytes = 4;  // per weight
  static __m512 load(const uint8_t* row, int k) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k);
  }
  static __m512 load_tail(const uint8_t* row, int k, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + k);
  }
};
struct LoadF16 {
  static constexpr int kBytes = 2;  // per weight
  static __m512 load(const uint8_t* row, int k) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + k)));
  }
  static __m512 load_tail(const uint8_t* row, int k, __mmask16 m) {
    return _mm512_cvtph_ps(
        _mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + k));
  }
};
struct LoadBF16 {
  static constexpr int kBytes = 2;  // per weight
  static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 load(const uint8_t* row, int k) {
    return widen(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + k)));
  }
  static __m512 load_tail(const uint8_t* row, int k, __mmask16 m) {
    return widen(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + k));
  }
};

// T tokens x R rows. rows: R row pointers; x: [T][K]; y: [T][y_stride].
template <class L, int T, int R>
void tile_dense(const uint8_t* w, size_t row_bytes, const float* x, int K, float* y,
                int y_stride) {
  __m512 acc[T][R];
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
  int k = 0;
  for (; k + 16 <= K; k += 16) {
    if constexpr (T <= 4) {  // decode: the next tile's rows, at this offset (as tile_q8_vnni)
      if ((size_t(k) * L::kBytes) % 64 == 0) {
        for (int r = 0; r < R; ++r)
          _mm_prefetch(reinterpret_cast<const char*>(w + (R + r) * row_bytes + size_t(k) * L::kBytes), _MM_HINT_T0);
      }
    }
    __m512 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = L::load(w + r * row_bytes, k);
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_loadu_ps(x + size_t(t) * K + k);
      for (int r = 0; r < R; ++r) acc[t][r] = _mm512_fmadd_ps(wv[r], xv, acc[t][r]);
    }
  }
  if (k < K) {
    const __mmask16 m = __mmask16((1u << (K - k)) - 1);
    __m512 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = L::load_tail(w + r * row_bytes, k, m);
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + size_t(t) * K + k);
      for (int r = 0; r < R; ++r) acc[t][r] = _mm512_fmadd_ps(wv[r], xv, acc[t][r]);
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) y[size_t(t) * y_stride + r] = hsum(acc[t][r]);
}

// f16 scale -> f32 with the F16C instruction (inline; exact).
inline float scale_f32(uint16_t h) { return _cvtsh_ss(h); }

// ---- Q8_0, dequantize on the fly ---------------------------------------------
inline __m512 q8_chunk(const int8_t* q, __m512 d) {
  return _mm512_mul_ps(
      _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)))), d);
}

template <int T, int R>
void tile_q8_fma(const uint8_t* w, size_t row_bytes, const float* x, int K, float* y,
                 int y_stride) {
  __m512 acc[T][R];
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
  const int nb = K / kQ8_0BlockSize;
  for (int b = 0; b < nb; ++b) {
    __m512 lo[R], hi[R];
    for (int r = 0; r < R; ++r) {
      const BlockQ8_0* blk = reinterpret_cast<const BlockQ8_0*>(w + r * row_bytes) + b;
      const __m512 d = _mm512_set1_ps(scale_f32(blk->d));
      lo[r] = q8_chunk(blk->qs, d);   // d * q is exact in f32 (11 x 8 bits)
      hi[r] = q8_chunk(blk->qs + 16, d);
    }
    for (int t = 0; t < T; ++t) {
      const float* xb = x + size_t(t) * K + size_t(b) * kQ8_0BlockSize;
      const __m512 xlo = _mm512_loadu_ps(xb), xhi = _mm512_loadu_ps(xb + 16);
      for (int r = 0; r < R; ++r) {
        acc[t][r] = _mm512_fmadd_ps(lo[r], xlo, acc[t][r]);
        acc[t][r] = _mm512_fmadd_ps(hi[r], xhi, acc[t][r]);
      }
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) y[size_t(t) * y_stride + r] = hsum(acc[t][r]);
}

// ---- Q8_0 x Q8_0 with VNNI ----------------------------------------------------
#ifdef __AVX512VNNI__
// Blocks are taken in pairs (b, b+1): one zmm holds the 64 quants of a pair,
// lane j of vpdpbusd sums the 4 products of bytes 4j..4j+3, so lanes 0-7
// belong to block b and 8-15 to block b+1. Per pair and output:
//   acc = fma(float(lanes), [d_w,b x8 | d_w,b+1 x8] * [d_x,b x8 | d_x,b+1 x8], acc)
// (a missing b+1 contributes lanes 0 and scale 0). The lanes are the exact
// int32 sums of w * x, so how they are formed does not matter for the bits:
// vpdpbusd needs an unsigned operand, and w ^ 0x80 = w + 128 is one, with
//   sum (w + 128) x = sum w x + 128 sum x,
// so the accumulator starts at -128 * (sum of the lane's 4 x), precomputed
// once per token (prepare_q8 below, from MatmulInput::prepare). The products
// d_w d_x are exact in f32
// (two 11-bit significands). Per pair and row that is a load, an xor, a
// vpdpbusd, a convert, a permute (scales), a multiply and an fma.

// Activations of one token prepared for the kernel: PreparedQ8Pair (matmul.h).
using PreparedPair = PreparedQ8Pair;
static_assert(sizeof(PreparedPair) == 192);

inline int n_pairs_of(int K) { return (K / kQ8_0BlockSize + 1) / 2; }

// The quants of blocks b and b+1 (or b and zeros when b+1 == nb) in one zmm.
inline __m512i q8_pair(const BlockQ8_0* blk, int b, int nb) {
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[b].qs));
  const __m256i c = b + 1 < nb ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[b + 1].qs))
                               : _mm256_setzero_si256();
  return _mm512_inserti64x4(_mm512_castsi256_si512(a), c, 1);
}

// xq: n_tokens x nb blocks -> out: n_tokens x n_pairs_of(K) pairs.
void prepare_q8(const BlockQ8_0* xq, int n_tokens, int K, PreparedPair* out) {
  const int nb = K / kQ8_0BlockSize, np = n_pairs_of(K);
  const __m512i k128 = _mm512_set1_epi8(char(0x80));
  for (int t = 0; t < n_tokens; ++t) {
    const BlockQ8_0* x = xq + size_t(t) * nb;
    for (int p = 0; p < np; ++p) {
      PreparedPair& o = out[size_t(t) * np + p];
      const int b = 2 * p;
      const __m512i q = q8_pair(x, b, nb);
      _mm512_storeu_si512(o.qx, q);
      const __m512i c = _mm512_dpbusd_epi32(_mm512_setzero_si512(), k128, q);
      _mm512_storeu_si512(o.neg_c, _mm512_sub_epi32(_mm512_setzero_si512(), c));
      const float d0 = scale_f32(x[b].d);
      const float d1 = b + 1 < nb ? scale_f32(x[b + 1].d) : 0.0f;
      _mm512_storeu_ps(o.dx, _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(d0)),
                                               _mm256_set1_ps(d1), 1));
    }
  }
}

// [d_b x 8 | d_{b+1} x 8] (0 for a missing b+1).
inline __m512 d_pair(const BlockQ8_0* blk, int b, int nb) {
  const float d0 = scale_f32(blk[b].d);
  const float d1 = b + 1 < nb ? scale_f32(blk[b + 1].d) : 0.0f;
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(d0)), _mm256_set1_ps(d1), 1);
}

// Prefill tiles (T > 1): the same lanes formed as |w| * (x * sign(w)) from
// the Q8_0 activation blocks directly (|x| <= 127, so x * sign(w) fits in
// int8): 5 ops per pair and output against the decode tile's 4, but the
// weights' sign and scale work is shared by the T tokens, and measured
// faster at T = 4 (188 against 124 GFLOP/s in cache).
template <int T, int R>
void tile_q8_vnni_sign(const uint8_t* w, size_t row_bytes, const BlockQ8_0* xq, int K, float* y,
                  int y_stride) {
  __m512 acc[T][R];
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
  const int nb = K / kQ8_0BlockSize;
  for (int b = 0; b < nb; b += 2) {
    __m512i aw[R];
    __mmask64 neg[R];
    __m512 dw[R];
    for (int r = 0; r < R; ++r) {
      const BlockQ8_0* blk = reinterpret_cast<const BlockQ8_0*>(w + r * row_bytes);
      const __m512i q = q8_pair(blk, b, nb);
      aw[r] = _mm512_abs_epi8(q);           // |w| as u8
      neg[r] = _mm512_movepi8_mask(q);      // w < 0
      dw[r] = d_pair(blk, b, nb);
    }
    for (int t = 0; t < T; ++t) {
      const BlockQ8_0* xb = xq + size_t(t) * nb;
      const __m512i qx = q8_pair(xb, b, nb);
      const __m512 dx = d_pair(xb, b, nb);
      for (int r = 0; r < R; ++r) {
        // x * sign(w), so that |w| * (x * sign(w)) = w * x.
        const __m512i sx = _mm512_mask_sub_epi8(qx, neg[r], _mm512_setzero_si512(), qx);
        const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), aw[r], sx);
        acc[t][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw[r], dx), acc[t][r]);
      }
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) y[size_t(t) * y_stride + r] = hsum(acc[t][r]);
}
// [d_b x8 | d_{b+1} x8] of a row as f32 (d_{b+1} = 0 when b + 1 == nb): one
// 64-byte load from block b holds both f16 scales (words 0 and 17).
inline __m512 row_scale_pair(const BlockQ8_0* blk, int b, int nb) {
  const __m512i sel = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                       17, 17, 17, 17, 17, 17, 17, 17, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i v = b + 1 < nb ? _mm512_loadu_si512(&blk[b])
                               : _mm512_maskz_loadu_epi8(__mmask64(0x3FFFFFFFFull), &blk[b]);
  return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(sel, v)));
}

// Software prefetch distance: each row of a tile is a short stream (K = 2048
// Q8_0 is 34 cache lines) that the hardware prefetcher barely ramps up on,
// so while a tile streams its rows the same offsets of the next tile's rows
// are prefetched (one tile, R rows, ahead).
template <int T, int R>
void tile_q8_vnni(const uint8_t* w, size_t row_bytes, const PreparedPair* xp, int K, float* y,
                  int y_stride) {
  __m512 acc[T][R];
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
  const int nb = K / kQ8_0BlockSize, np = n_pairs_of(K);
  const __m512i k128 = _mm512_set1_epi8(char(0x80));
  const BlockQ8_0* blk[R];
  for (int r = 0; r < R; ++r) blk[r] = reinterpret_cast<const BlockQ8_0*>(w + r * row_bytes);
  const size_t ahead = R * row_bytes;
  for (int p = 0; p < np; ++p) {
    const int b = 2 * p;
    __m512i wu[R];
    __m512 dw[R];
    for (int r = 0; r < R; ++r) {
      const uint8_t* pf = reinterpret_cast<const uint8_t*>(&blk[r][b]) + ahead;
      _mm_prefetch(reinterpret_cast<const char*>(pf), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(pf + 64), _MM_HINT_T0);
      wu[r] = _mm512_xor_si512(q8_pair(blk[r], b, nb), k128);  // w + 128 as u8
      dw[r] = row_scale_pair(blk[r], b, nb);
    }
    for (int t = 0; t < T; ++t) {
      const PreparedPair& x = xp[size_t(t) * np + p];
      const __m512i qx = _mm512_loadu_si512(x.qx);
      const __m512i c = _mm512_loadu_si512(x.neg_c);
      const __m512 dx = _mm512_loadu_ps(x.dx);
      for (int r = 0; r < R; ++r) {
        const __m512i s = _mm512_dpbusd_epi32(c, wu[r], qx);
        acc[t][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw[r], dx), acc[t][r]);
      }
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) y[size_t(t) * y_stride + r] = hsum(acc[t][r]);
}
#endif

// ---- tiling ---------------------------------------------------------------------
constexpr int kTileT = 4;
constexpr int kTileR = 4;

// Kernel signature shared by all tiles: (w rows, row_bytes, activations, K, y, y_stride);
// the activations pointer is f32 [T][K] or Q8_0 blocks [T][K/32].
using TileFn = void (*)(const uint8_t*, size_t, const void*, int, float*, int);

template <class L, int T, int R>
void dense_entry(const uint8_t* w, size_t rb, const void* x, int K, float* y, int ys) {
  tile_dense<L, T, R>(w, rb, static_cast<const float*>(x), K, y, ys);
}
template <int T, int R>
void q8fma_entry(const uint8_t* w, size_t rb, const void* x, int K, float* y, int ys) {
  tile_q8_fma<T, R>(w, rb, static_cast<const float*>(x), K, y, ys);
}
#ifdef __AVX512VNNI__
template <int T, int R>
void q8vnni_entry(const uint8_t* w, size_t rb, const void* x, int K, float* y, int ys) {
  tile_q8_vnni_sign<T, R>(w, rb, static_cast<const BlockQ8_0*>(x), K, y, ys);
}
// One token (decode): the prepared-activation tile, T = 1 only.
template <int R>
void q8vnni_decode_entry(const uint8_t* w, size_t rb, const void* x, int K, float* y, int ys) {
  tile_q8_vnni<1, R>(w, rb, static_cast<const PreparedPair*>(x), K, y, ys);
}
#endif

// Tables [T-1][R-1] of the tile kernels for T, R in 1..4.
#define LARDER_TILE_ROW(E, T) {&E<T, 1>, &E<T, 2>, &E<T, 3>, &E<T, 4>}
#define LARDER_TILE_TABLE(E) \
  {LARDER_TILE_ROW(E, 1), LARDER_TILE_ROW(E, 2), LARDER_TILE_ROW(E, 3), LARDER_TILE_ROW(E, 4)}
template <int T, int R> void f32_entry(const uint8_t* w, size_t rb, const void* x, int K, float* y, int ys) { dense_entry<LoadF32, T, R>(w, rb, x, K, y, ys); }
template <int T, int R> void f16_entry(const uint8_t* w, size_t rb, const void* x, int K, float* y, int ys) { dense_entry<LoadF16, T, R>(w, rb, x, K, y, ys); }
template <int T, int R> void bf16_entry(const uint8_t* w, size_t rb, const void* x, int K, float* y, int ys) { dense_entry<LoadBF16, T, R>(w, rb, x, K, y, ys); }

constexpr TileFn kF32Tiles[kTileT][kTileR] = LARDER_TILE_TABLE(f32_entry);
constexpr TileFn kF16Tiles[kTileT][kTileR] = LARDER_TILE_TABLE(f16_entry);
constexpr TileFn kBF16Tiles[kTileT][kTileR] = LARDER_TILE_TABLE(bf16_entry);
constexpr TileFn kQ8FmaTiles[kTileT][kTileR] = LARDER_TILE_TABLE(q8fma_entry);
#ifdef __AVX512VNNI__
constexpr TileFn kQ8VnniTiles[kTileT][kTileR] = LARDER_TILE_TABLE(q8vnni_entry);
// Only row [0] is used (n_tokens == 1).
constexpr TileFn kQ8VnniDecodeTiles[kTileT][kTileR] = {
    {&q8vnni_decode_entry<1>, &q8vnni_decode_entry<2>, &q8vnni_decode_entry<3>,
     &q8vnni_decode_entry<4>}};
#endif
#undef LARDER_TILE_TABLE
#undef LARDER_TILE_ROW

}  // namespace
#endif  // LARDER_MATMUL_AVX512

#ifndef LARDER_MATMUL_AVX512
namespace {
// Portable path: one float accumulator per output, k in increasing order.
float row_weight(const WeightView& w, int64_t r, int k) {
  const uint8_t* row = w.row(r);
  switch (w.type) {
    case GgmlType::kF32: return reinterpret_cast<const float*>(row)[k];
    case GgmlType::kF16: return fp16_to_fp32(reinterpret_cast<const uint16_t*>(row)[k]);
    case GgmlType::kBF16: return bf16_to_fp32(reinterpret_cast<const uint16_t*>(row)[k]);
    case GgmlType::kQ8_0: {
      const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(row)[k / kQ8_0BlockSize];
      return fp16_to_fp32(b.d) * float(b.qs[k % kQ8_0BlockSize]);
    }
    default: return 0.0f;
  }
}
}  // namespace
#endif

void MatmulInput::prepare(GgmlType type, const float* x, int n_tokens, int k, Q8Path q8_path, bool packed) {
  type_ = type;
  x_ = x;
  n_tokens_ = n_tokens;
  k_ = k;
  q8_path_ = q8_path;
  has_q8_0_ = has_pairs_ = has_packed_ = has_q8k_ = false;
  if (n_tokens <= 0 || q8_path != Q8Path::kInt8) return;
  // Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL and IQ4_XS take Q8_0 activations on their packed kernels
  // only; elsewhere they multiply x as it is (matmul_kquant.cpp).
  if (type == GgmlType::kQ8_0 || (packed_q8_act_type(type) && packed && packed_type_supported(type))) {
    const size_t need = size_t(n_tokens) * (k / kQ8_0BlockSize);
    if (q8_0_.size() < need) q8_0_.resize(need);
    quantize_rows_q8_0(x, n_tokens, k, q8_0_.data());
    has_q8_0_ = true;
    if (packed && packed_type_supported(type)) {
      if (packed_.size() < need) packed_.resize(need);
      prepare_q8_packed_act(q8_0_.data(), n_tokens, k, packed_.data(), type);
      has_packed_ = true;
      return;
    }
#if defined(LARDER_MATMUL_AVX512) && defined(__AVX512VNNI__)
    if (n_tokens == 1) {
      const size_t np = size_t(n_pairs_of(k));
      if (pairs_.size() < np) pairs_.resize(np);
      prepare_q8(q8_0_.data(), 1, k, pairs_.data());
      has_pairs_ = true;
    }
#endif
  } else if (kquant_int_supported(type) ||
             (packed && packed_type_supported(type) &&
              (type == GgmlType::kQ2_K || type == GgmlType::kQ3_K || type == GgmlType::kQ4_K ||
               type == GgmlType::kQ5_K || type == GgmlType::kQ6_K))) {
    const size_t need = size_t(n_tokens) * (k / kQK_K);
    if (q8k_.size() < need) q8k_.resize(need);
    quantize_rows_q8k(x, n_tokens, k, q8k_.data());
    has_q8k_ = true;
    if (!packed || !packed_type_supported(type)) return;
    if (type == GgmlType::kQ4_K || type == GgmlType::kQ5_K) {
      if (packed_q4k_.size() < need) packed_q4k_.resize(need);
      prepare_q4k_packed_act(q8k_.data(), n_tokens, k, packed_q4k_.data());
      has_packed_ = true;
    } else if (type == GgmlType::kQ6_K || type == GgmlType::kQ3_K || type == GgmlType::kQ2_K) {
      if (packed_q6k_.size() < need) packed_q6k_.resize(need);
      auto* prepare = type == GgmlType::kQ3_K   ? prepare_q3k_packed_act
                      : type == GgmlType::kQ2_K ? prepare_q2k_packed_act
                                                : prepare_q6k_packed_act;
      prepare(q8k_.data(), n_tokens, k, packed_q6k_.data());
      has_packed_ = true;
    }
  }
}

void matmul_rows(const WeightView& w, const MatmulInput& in, float* y, int y_stride,
                 int64_t row_begin, int64_t row_end) {
  const int n_tokens = in.n_tokens();
  const float* x = in.x();
  if (n_tokens <= 0 || row_begin >= row_end) return;
  assert(in.type() == w.type && in.k() == int(w.ne[0]));
  if (matmul_quant_type(w.type)) {  // Q4_0 .. Q6_K, IQ4_NL, IQ4_XS: matmul_kquant.cpp
    matmul_rows_quant(w, x, in.q8k(), n_tokens, y, y_stride, row_begin, row_end);
    return;
  }
  const int K = int(w.ne[0]);
#ifdef LARDER_MATMUL_AVX512
  const auto* xb = reinterpret_cast<const uint8_t*>(x);
  const size_t x_row = size_t(K) * sizeof(float);
  switch (w.type) {
    case GgmlType::kF32: row_tiles::run(kF32Tiles, w, xb, x_row, n_tokens, y, y_stride, row_begin, row_end); return;
    case GgmlType::kF16: row_tiles::run(kF16Tiles, w, xb, x_row, n_tokens, y, y_stride, row_begin, row_end); return;
    case GgmlType::kBF16: row_tiles::run(kBF16Tiles, w, xb, x_row, n_tokens, y, y_stride, row_begin, row_end); return;
    case GgmlType::kQ8_0:
#ifdef __AVX512VNNI__
      if (const BlockQ8_0* xq = in.q8_0()) {
        if (const PreparedPair* xp = in.q8_0_pairs()) {  // decode
          row_tiles::run(kQ8VnniDecodeTiles, w, reinterpret_cast<const uint8_t*>(xp),
                    size_t(n_pairs_of(K)) * sizeof(PreparedPair), 1, y, y_stride, row_begin,
                    row_end);
          return;
        }
        row_tiles::run(kQ8VnniTiles, w, reinterpret_cast<const uint8_t*>(xq),
                  size_t(K / kQ8_0BlockSize) * sizeof(BlockQ8_0), n_tokens, y, y_stride,
                  row_begin, row_end);
        return;
      }
#endif
      row_tiles::run(kQ8FmaTiles, w, xb, x_row, n_tokens, y, y_stride, row_begin, row_end);
      return;
    default: return;  // callers check matmul_type_supported
  }
#else
#ifdef LARDER_MATMUL_DENSE_AVX2
  if (matmul_dense_rows_avx2(w, x, n_tokens, y, y_stride, row_begin, row_end)) return;
#endif
  for (int t = 0; t < n_tokens; ++t)
    for (int64_t r = row_begin; r < row_end; ++r) {
      float acc = 0.0f;
      for (int k = 0; k < K; ++k) acc += row_weight(w, r, k) * x[size_t(t) * K + k];
      y[size_t(t) * y_stride + r] = acc;
    }
#endif
}

void matmul_parallel(ThreadPool& pool, const WeightView& w, const MatmulInput& in, float* y,
                     int y_stride, int64_t chunk_rows) {
  const int64_t rows = w.ne[1];
  const int64_t macs = int64_t(in.n_tokens()) * rows * in.k();
  if (macs < kMatmulParallelMinMacs || pool.n_threads() == 1) {
    matmul_rows(w, in, y, y_stride, 0, rows);
    return;
  }
  // Chunks in multiples of 4 rows keep the row tiles where a single call puts
  // them (the tile does not change the bits either: see the header).
  assert(chunk_rows % 4 == 0);
  if (chunk_rows <= 0) chunk_rows = pool.chunk_size(rows, 4);
  pool.parallel_chunks(rows, chunk_rows, [&](int64_t b, int64_t e, int) {
    matmul_rows(w, in, y, y_stride, b, e);
  });
}

}  // namespace larder
