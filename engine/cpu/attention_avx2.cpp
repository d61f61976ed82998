// Attention of query heads sharing one kv head, 8 lanes wide (head_dim a
// multiple of 8): in AVX2 builds for every such head size, in AVX-512 builds
// for those the 16-lane pass of attention.cpp does not take (not a multiple
// of 16). A tile of consecutive tokens (as attend_tile16), each K/V block
// widened once for all of the tile's rows.
//
// Arithmetic per query head h and position p (fixed, whatever the batch, the
// head range or the thread, so a token's output depends only on its q and the
// pages):
//   score_p = hsum8(sum_c q_c * k_{p,c}) * scale   (c: 8-lane chunks of the
//             head dims in order, one FMA each; hsum8: the fixed tree of
//             hsum8x8 below)
//   e_p     = exp_avx2(score_p - max_p score_p)   (simd_avx2.h)
//   sum     = hsum8(8-lane sums of e over p in blocks of 8, in order)
//   out_h   = (sum_p e_p v_p, one FMA per p in increasing p) * (1 / sum)
// K/V are read in the page dtype (F16 widened exactly to f32, Q8_0 as d * q).
#include "engine/cpu/attention_detail.h"

#ifdef LARDER_ATTENTION_AVX2

#include <algorithm>
#include <cmath>

#include "engine/cpu/simd_avx2.h"
#include "engine/gguf/ggml_types.h"
#include "engine/gguf/quant_blocks.h"

namespace larder::attention_detail {

namespace {

// v[0..7] -> lane i = the sum of the 8 lanes of v[i] (horizontal adds, then
// the two 128-bit halves; every input goes through the same tree).
inline __m256 hsum8x8(const __m256 v[8]) {
  const __m256 a0 = _mm256_hadd_ps(v[0], v[1]), a1 = _mm256_hadd_ps(v[2], v[3]);
  const __m256 a2 = _mm256_hadd_ps(v[4], v[5]), a3 = _mm256_hadd_ps(v[6], v[7]);
  const __m256 b0 = _mm256_hadd_ps(a0, a1), b1 = _mm256_hadd_ps(a2, a3);
  return _mm256_add_ps(_mm256_permute2f128_ps(b0, b1, 0x20), _mm256_permute2f128_ps(b0, b1, 0x31));
}

inline float hsum8(__m256 v) {
  __m256 in[8] = {v, v, v, v, v, v, v, v};
  return _mm_cvtss_f32(_mm256_castps256_ps128(hsum8x8(in)));
}

// n rows (values off .. off + hd of each) of a K or V block as f32: F32 read
// in place (*stride = kv_dim), F16 and Q8_0 widened exactly into dst ([n][hd]).
const float* rows_f32(const void* block, const KvLayout& lay, size_t off, int n, int hd, float* dst,
                      size_t* stride) {
  if (lay.dtype == KvDtype::kF32) {
    *stride = size_t(lay.kv_dim);
    return static_cast<const float*>(block) + off;
  }
  *stride = size_t(hd);
  for (int j = 0; j < n; ++j) {
    const uint8_t* row = static_cast<const uint8_t*>(block) + size_t(j) * lay.row_bytes();
    float* o = dst + size_t(j) * hd;
    if (lay.dtype == KvDtype::kF16) {
      const uint16_t* src = reinterpret_cast<const uint16_t*>(row) + off;
      for (int c = 0; c < hd; c += 8)
        _mm256_storeu_ps(o + c, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + c))));
      continue;
    }
    const auto* blocks = reinterpret_cast<const BlockQ8_0*>(row);
    for (int c = 0; c < hd; c += 8) {  // off % 8 == 0: 8 values never straddle a block
      const size_t at = off + size_t(c);
      const BlockQ8_0& b = blocks[at / 32];
      const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + at % 32))));
      _mm256_storeu_ps(o + c, _mm256_mul_ps(_mm256_set1_ps(fp16_to_fp32(b.d)), q));
    }
  }
  return dst;
}


constexpr int kBlock = 8;

}  // namespace

bool heads8_supported(int hd) {
  return hd % 8 == 0 && hd <= 256;
}

void attend_tile8(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos0, int nt, int hd,
                  size_t off, const float* q, size_t q_stride, float* out, int nh, float* scores, size_t stride) {
  const KvLayout& lay = pool.layout();
  const int ps = lay.page_size, last = pos0 + nt - 1, n_pages = last / ps + 1, nc = hd / 8;
  const int rows = nt * nh;  // row r = t * nh + h
  const float scale = float(1.0 / std::sqrt(double(hd)));
  alignas(32) float conv[kBlock * 256];  // 8 rows of up to 256 head dims, widened
  float mx[kMaxTileRows];
  for (int r = 0; r < rows; ++r) mx[r] = -INFINITY;
  for (int pi = 0; pi < n_pages; ++pi) {
    const int n_slots = pi + 1 < n_pages ? ps : last - pi * ps + 1;
    const void* kb = pool.k_block(pages[pi], layer);
    if (pi + 1 < n_pages) attention_detail::prefetch_rows(pool.k_block(pages[pi + 1], layer), lay, off, hd);
    for (int j0 = 0; j0 < n_slots; j0 += kBlock) {
      const int p0 = pi * ps + j0;  // its 8 lanes may run past the page, into slots the next block rewrites
      const int nk = std::min(kBlock, n_slots - j0);
      size_t kstride = 0;
      const float* k = rows_f32(static_cast<const uint8_t*>(kb) + size_t(j0) * lay.row_bytes(), lay, off, nk, hd,
                                conv, &kstride);
      for (int t = std::max(0, p0 - pos0); t < nt; ++t) {  // tokens before p0 see none of the block
        const int nkt = std::min(nk, pos0 + t - p0 + 1);
        for (int h = 0; h < nh; ++h) {
          const int r = t * nh + h;
          const float* qh = q + size_t(t) * q_stride + size_t(h) * hd;
          __m256 part[kBlock];
          for (int j = 0; j < kBlock; ++j) {
            if (j >= nkt) { part[j] = _mm256_setzero_ps(); continue; }
            const float* kj = k + size_t(j) * kstride;
            __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(qh), _mm256_loadu_ps(kj));
            for (int c = 1; c < nc; ++c)
              acc = _mm256_fmadd_ps(_mm256_loadu_ps(qh + 8 * c), _mm256_loadu_ps(kj + 8 * c), acc);
            part[j] = acc;
          }
          const __m256 sc = _mm256_mul_ps(hsum8x8(part), _mm256_set1_ps(scale));
          float* s = scores + size_t(r) * stride + p0;
          _mm256_storeu_ps(s, sc);
          for (int j = 0; j < nkt; ++j) mx[r] = s[j] > mx[r] ? s[j] : mx[r];
        }
      }
    }
  }
  float inv[kMaxTileRows];
  for (int r = 0; r < rows; ++r) {
    const int n_pos = pos0 + r / nh + 1;
    float* s = scores + size_t(r) * stride;
    const __m256 mxv = _mm256_set1_ps(mx[r]);
    __m256 sum = _mm256_setzero_ps();
    for (int p = 0; p < n_pos; p += kBlock) {
      const int left = n_pos - p;
      const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      const __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(left), lane));
      const __m256 e = _mm256_and_ps(keep, exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + p), mxv)));
      _mm256_storeu_ps(s + p, e);
      sum = _mm256_add_ps(sum, e);
    }
    inv[r] = 1.0f / hsum8(sum);
    float* o = out + size_t(r / nh) * q_stride + size_t(r % nh) * hd;
    for (int c = 0; c < nc; ++c) _mm256_storeu_ps(o + 8 * c, _mm256_setzero_ps());
  }
  for (int pi = 0; pi < n_pages; ++pi) {
    const int n_slots = pi + 1 < n_pages ? ps : last - pi * ps + 1;
    const void* vb = pool.v_block(pages[pi], layer);
    if (pi + 1 < n_pages) attention_detail::prefetch_rows(pool.v_block(pages[pi + 1], layer), lay, off, hd);
    for (int j0 = 0; j0 < n_slots; j0 += kBlock) {
      const int p0 = pi * ps + j0;
      const int nk = std::min(kBlock, n_slots - j0);
      size_t vstride = 0;
      const float* v = rows_f32(static_cast<const uint8_t*>(vb) + size_t(j0) * lay.row_bytes(), lay, off, nk, hd,
                                conv, &vstride);
      for (int t = std::max(0, p0 - pos0); t < nt; ++t) {
        const int nkt = std::min(nk, pos0 + t - p0 + 1);
        for (int h = 0; h < nh; ++h) {
          const float* e = scores + size_t(t * nh + h) * stride + p0;
          float* oh = out + size_t(t) * q_stride + size_t(h) * hd;
          for (int c0 = 0; c0 < nc; c0 += 8) {  // up to 8 accumulators in registers
            const int cn = std::min(8, nc - c0);
            __m256 acc[8];
            for (int c = 0; c < cn; ++c) acc[c] = _mm256_loadu_ps(oh + 8 * (c0 + c));
            for (int j = 0; j < nkt; ++j) {
              const __m256 ej = _mm256_set1_ps(e[j]);
              const float* vj = v + size_t(j) * vstride + 8 * c0;
              for (int c = 0; c < cn; ++c) acc[c] = _mm256_fmadd_ps(ej, _mm256_loadu_ps(vj + 8 * c), acc[c]);
            }
            for (int c = 0; c < cn; ++c) _mm256_storeu_ps(oh + 8 * (c0 + c), acc[c]);
          }
        }
      }
    }
  }
  for (int r = 0; r < rows; ++r) {
    float* o = out + size_t(r / nh) * q_stride + size_t(r % nh) * hd;
    for (int c = 0; c < nc; ++c) _mm256_storeu_ps(o + 8 * c, _mm256_mul_ps(_mm256_loadu_ps(o + 8 * c), _mm256_set1_ps(inv[r])));
  }
}

}  // namespace larder::attention_detail

#endif
