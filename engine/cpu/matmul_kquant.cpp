#include "engine/cpu/matmul_kquant.h"

#include <algorithm>
#include <vector>

#include "engine/cpu/row_tiles.h"
#include "engine/gguf/quant_blocks.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define LARDER_KQUANT_AVX512 1
#include "engine/cpu/simd.h"
#endif

namespace larder {

bool matmul_quant_type(GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_0: case GgmlType::kQ4_1: case GgmlType::kQ5_0: case GgmlType::kQ5_1:
    case GgmlType::kQ2_K: case GgmlType::kQ3_K: case GgmlType::kQ4_K: case GgmlType::kQ5_K:
    case GgmlType::kQ6_K: case GgmlType::kIQ4_NL: case GgmlType::kIQ4_XS:
      return true;
    default:
      return false;
  }
}

namespace {

// One weight row dequantized into scratch, reused for every token.
std::vector<float>& scratch_row(int K) {
  thread_local std::vector<float> row;
  if (row.size() < size_t(K)) row.resize(size_t(K));
  return row;
}

#ifdef LARDER_KQUANT_AVX512
// Horizontal sum of 16 lanes in a fixed order (as matmul.cpp's hsum).
inline float hsum(__m512 v) {
  const __m512 hi8 = _mm512_shuffle_f32x4(v, v, 0xEE);
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_castps512_ps256(hi8));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 0x55));
  return _mm_cvtss_f32(s1);
}

// 16-lane dot product of w[0..K) and x[0..K) (K a multiple of 32), k increasing.
inline float dot_f32(const float* w, const float* x, int K) {
  __m512 acc = _mm512_setzero_ps();
  for (int k = 0; k < K; k += 16)
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(w + k), _mm512_loadu_ps(x + k), acc);
  return hsum(acc);
}

inline float half(uint16_t h) { return _cvtsh_ss(h); }
inline __m512 lo16_u8(__m256i v) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(v))); }
inline __m512 hi16_u8(__m256i v) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(v, 1))); }
inline __m512 lo16_i8(__m256i v) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(v))); }
inline __m512 hi16_i8(__m256i v) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(v, 1))); }
inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// A decoder turns one super-block into 8 chunks of 32 f32 weights:
//   prep(block)            per-block scales as floats
//   chunk(block, prep, c)  weights 32c .. 32c + 31 in two zmm (lo, hi)
// The weights equal dequantize_row's: (d*sc)*q - dmin*m with exact products
// and one rounding (fmsub), or (d*sc)*q exact.
struct DecodeQ4K {
  using Block = BlockQ4_K;
  struct Prep { float dl[8], ml[8]; };
  static void prep(const Block* b, Prep* p) {
    const float d = half(b->d), dmin = half(b->dmin);
    for (int s = 0; s < 8; ++s) {
      int sc, m;
      k4_scale_min(b->scales, s, &sc, &m);
      p->dl[s] = d * float(sc);
      p->ml[s] = dmin * float(m);
    }
  }
  static __m256i nibbles(const uint8_t* qs, int c) {
    __m256i v = load32(qs + 32 * (c / 2));
    if (c & 1) v = _mm256_srli_epi16(v, 4);
    return _mm256_and_si256(v, _mm256_set1_epi8(15));
  }
  static void chunk(const Block* b, const Prep& p, int c, __m512* lo, __m512* hi) {
    const __m256i q = nibbles(b->qs, c);
    const __m512 dl = _mm512_set1_ps(p.dl[c]), ml = _mm512_set1_ps(p.ml[c]);
    *lo = _mm512_fmsub_ps(lo16_u8(q), dl, ml);
    *hi = _mm512_fmsub_ps(hi16_u8(q), dl, ml);
  }
};

struct DecodeQ5K {
  using Block = BlockQ5_K;
  using Prep = DecodeQ4K::Prep;
  static void prep(const Block* b, Prep* p) {
    const float d = half(b->d), dmin = half(b->dmin);
    for (int s = 0; s < 8; ++s) {
      int sc, m;
      k4_scale_min(b->scales, s, &sc, &m);
      p->dl[s] = d * float(sc);
      p->ml[s] = dmin * float(m);
    }
  }
  static void chunk(const Block* b, const Prep& p, int c, __m512* lo, __m512* hi) {
    __m256i q = DecodeQ4K::nibbles(b->qs, c);
    // Fifth bit: bit c of qh[l] for lane l.
    const __mmask32 high = _mm256_test_epi8_mask(load32(b->qh), _mm256_set1_epi8(char(1 << c)));
    q = _mm256_mask_add_epi8(q, high, q, _mm256_set1_epi8(16));
    const __m512 dl = _mm512_set1_ps(p.dl[c]), ml = _mm512_set1_ps(p.ml[c]);
    *lo = _mm512_fmsub_ps(lo16_u8(q), dl, ml);
    *hi = _mm512_fmsub_ps(hi16_u8(q), dl, ml);
  }
};

struct DecodeQ6K {
  using Block = BlockQ6_K;
  struct Prep { float dl[16]; };
  static void prep(const Block* b, Prep* p) {
    const float d = half(b->d);
    for (int s = 0; s < 16; ++s) p->dl[s] = d * float(b->scales[s]);
  }
  static void chunk(const Block* b, const Prep& p, int c, __m512* lo, __m512* hi) {
    const int h = c / 4, g = c % 4;
    __m256i l4 = load32(b->ql + 64 * h + ((g & 1) ? 32 : 0));
    if (g >= 2) l4 = _mm256_srli_epi16(l4, 4);
    l4 = _mm256_and_si256(l4, _mm256_set1_epi8(15));
    __m256i h2 = _mm256_srli_epi16(load32(b->qh + 32 * h), 2 * g);
    h2 = _mm256_slli_epi16(_mm256_and_si256(h2, _mm256_set1_epi8(3)), 4);
    const __m256i q = _mm256_sub_epi8(_mm256_or_si256(l4, h2), _mm256_set1_epi8(32));
    *lo = _mm512_mul_ps(lo16_i8(q), _mm512_set1_ps(p.dl[2 * c]));
    *hi = _mm512_mul_ps(hi16_i8(q), _mm512_set1_ps(p.dl[2 * c + 1]));
  }
};

// T tokens x R rows starting at w (rows row_bytes apart); x: [T][K]; y: [T][y_stride].
template <class D, int T, int R>
void tile_kquant(const uint8_t* w, size_t row_bytes, const float* x, int K, float* y,
                 int y_stride) {
  using Block = typename D::Block;
  __m512 acc[T][R];
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
  const int nb = K / kQK_K;
  for (int b = 0; b < nb; ++b) {
    const Block* blk[R];
    typename D::Prep prep[R];
    for (int r = 0; r < R; ++r) {
      blk[r] = reinterpret_cast<const Block*>(w + r * row_bytes) + b;
      D::prep(blk[r], &prep[r]);
    }
    for (int c = 0; c < 8; ++c) {
      __m512 lo[R], hi[R];
      for (int r = 0; r < R; ++r) D::chunk(blk[r], prep[r], c, &lo[r], &hi[r]);
      for (int t = 0; t < T; ++t) {
        const float* xc = x + size_t(t) * K + size_t(b) * kQK_K + 32 * c;
        const __m512 xlo = _mm512_loadu_ps(xc), xhi = _mm512_loadu_ps(xc + 16);
        for (int r = 0; r < R; ++r) {
          acc[t][r] = _mm512_fmadd_ps(lo[r], xlo, acc[t][r]);
          acc[t][r] = _mm512_fmadd_ps(hi[r], xhi, acc[t][r]);
        }
      }
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) y[size_t(t) * y_stride + r] = hsum(acc[t][r]);
}

constexpr int kTileT = 4;
constexpr int kTileR = 4;
using TileFn = void (*)(const uint8_t*, size_t, const float*, int, float*, int);

#define LARDER_KQ_ROW(D, T) {&tile_kquant<D, T, 1>, &tile_kquant<D, T, 2>, &tile_kquant<D, T, 3>, &tile_kquant<D, T, 4>}
#define LARDER_KQ_TABLE(D) {LARDER_KQ_ROW(D, 1), LARDER_KQ_ROW(D, 2), LARDER_KQ_ROW(D, 3), LARDER_KQ_ROW(D, 4)}
constexpr TileFn kQ4KTiles[kTileT][kTileR] = LARDER_KQ_TABLE(DecodeQ4K);
constexpr TileFn kQ5KTiles[kTileT][kTileR] = LARDER_KQ_TABLE(DecodeQ5K);
constexpr TileFn kQ6KTiles[kTileT][kTileR] = LARDER_KQ_TABLE(DecodeQ6K);
#undef LARDER_KQ_TABLE
#undef LARDER_KQ_ROW

#else
// Portable path: one float accumulator per output, k in increasing order.
inline float dot_f32(const float* w, const float* x, int K) {
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += w[k] * x[k];
  return acc;
}
#endif  // LARDER_KQUANT_AVX512

// Dequantize-a-row path (any quantized type; the only one without AVX-512).
void run_scratch_rows(const WeightView& w, const float* x, int n_tokens, float* y, int y_stride,
                      int64_t row_begin, int64_t row_end) {
  const int K = int(w.ne[0]);
  float* row = scratch_row(K).data();
  const int64_t n_blocks = K / ggml_block_size(w.type);
  for (int64_t r = row_begin; r < row_end; ++r) {
    dequantize_blocks(w.type, w.row(r), n_blocks, row);
    for (int t = 0; t < n_tokens; ++t)
      y[size_t(t) * y_stride + r] = dot_f32(row, x + size_t(t) * K, K);
  }
}

}  // namespace

void matmul_rows_quant(const WeightView& w, const float* x, const BlockQ8K* xq, int n_tokens,
                       float* y, int y_stride, int64_t row_begin, int64_t row_end) {
  if (n_tokens <= 0 || row_begin >= row_end) return;
  if (xq != nullptr &&
      matmul_rows_kquant_int(w, xq, n_tokens, y, y_stride, row_begin, row_end))
    return;
#ifdef LARDER_KQUANT_AVX512
  switch (w.type) {
    case GgmlType::kQ4_K: row_tiles::run(kQ4KTiles, w, x, size_t(w.ne[0]), n_tokens, y, y_stride, row_begin, row_end); return;
    case GgmlType::kQ5_K: row_tiles::run(kQ5KTiles, w, x, size_t(w.ne[0]), n_tokens, y, y_stride, row_begin, row_end); return;
    case GgmlType::kQ6_K: row_tiles::run(kQ6KTiles, w, x, size_t(w.ne[0]), n_tokens, y, y_stride, row_begin, row_end); return;
    default: break;
  }
#endif
  run_scratch_rows(w, x, n_tokens, y, y_stride, row_begin, row_end);
}

}  // namespace larder
