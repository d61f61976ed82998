// Attention of query heads sharing one kv head, 8 lanes wide (head_dim a
// multiple of 8): in AVX2 builds for every such head size, in AVX-512 builds
// for those the 16-lane pass of attention.cpp does not take (not a multiple
// of 16). A tile of consecutive tokens (as attend_tile16); F16 K/V rows
// are widened in registers as they are used, Q8_0 ones once per block for
// all of the tile's rows.
//
// Arithmetic per query head h (fixed, whatever the batch, the head range or
// the thread, so a token's output depends only on its q and the pages), in
// one pass over its positions in blocks b of 8 (8 consecutive positions of a
// page from its slot 0; the token's last block masked at its own position):
//   score_p = hsum8(sum_c q_c * k_{p,c}) * scale   (c: 8-lane chunks of the
//             head dims in order, one FMA each; hsum8: the fixed tree of
//             hsum8x8 below)
//   m_b     = max(m_{b-1}, max_{p in b} score_p)   (the running max)
//   when m_b > m_{b-1}: l and acc are multiplied by exp_avx2(m_{b-1} - m_b)
//   e_p     = exp_avx2(score_p - m_b)              (simd_avx2.h)
//   l      += e_b (8 lanes)
//   acc    += sum_{p in b} e_p v_p, one FMA per p in increasing p
//   out_h   = acc * (1 / hsum8(l))
// (the online softmax of attention.cpp's 16-lane pass: no score rows are
// stored, and a block's K and V rows are read together, once).
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
      _mm256_storeu_ps(o + c, _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(b.d)), q));
    }
  }
  return dst;
}

constexpr int kBlock = 8;

// The 8 values of chunk c of row j of r, as f32.
template <bool F16>
inline __m256 load8(const KvRows& r, int j, int c) {
  if constexpr (F16)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r.h + size_t(j) * r.h_stride + 8 * c)));
  else
    return _mm256_loadu_ps(r.f + size_t(j) * r.f_stride + 8 * c);
}

}  // namespace

bool heads8_supported(int hd) {
  return hd % 8 == 0 && hd <= 256;
}

namespace {

// NC = hd / 8 as a template argument (0: a run-time count) so that the dot
// products' and V sums' registers stay registers, as in attend_tile16.
template <int NC, bool F16>
void attend_tile8_t(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos0, int nt, int hd,
                    size_t off, const float* q, size_t q_stride, float* out, int nh) {
  const KvLayout& lay = pool.layout();
  const int ps = lay.page_size, last = pos0 + nt - 1, n_pages = last / ps + 1;
  const int nc = NC > 0 ? NC : hd / 8;
  const int rows = nt * nh;  // row r = t * nh + h; its V sums accumulate in its out slice
  const float scale = float(1.0 / std::sqrt(double(hd)));
  alignas(32) float kconv[kBlock * 256];  // 8 Q8_0 K rows of up to 256 head dims, widened
  alignas(32) float vconv[kBlock * 256];  // 8 Q8_0 V rows likewise
  alignas(32) float e[kBlock];            // one block's e_p for one row
  float mx[kMaxTileRows];                 // running max m per row
  __m256 lsum[kMaxTileRows];              // l per row
  for (int r = 0; r < rows; ++r) {
    mx[r] = -INFINITY;
    lsum[r] = _mm256_setzero_ps();
    float* o = out + size_t(r / nh) * q_stride + size_t(r % nh) * hd;
    for (int c = 0; c < nc; ++c) _mm256_storeu_ps(o + 8 * c, _mm256_setzero_ps());
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int pi = 0; pi < n_pages; ++pi) {
    const int n_slots = pi + 1 < n_pages ? ps : last - pi * ps + 1;
    const uint8_t* kb = static_cast<const uint8_t*>(pool.k_block(pages[pi], layer));
    const uint8_t* vb = static_cast<const uint8_t*>(pool.v_block(pages[pi], layer));
    for (int j0 = 0; j0 < n_slots; j0 += kBlock) {
      const int p0 = pi * ps + j0;  // its 8 lanes may run past the page, into slots the next block rewrites
      const int nk = std::min(kBlock, n_slots - j0);
      const KvRows k = block_rows(kb + size_t(j0) * lay.row_bytes(), lay, off, nk, hd, kconv, rows_f32);
      const KvRows v = block_rows(vb + size_t(j0) * lay.row_bytes(), lay, off, nk, hd, vconv, rows_f32);
      // The next page's rows, prefetched as the first token's first head
      // sums this block's V rows (RowPrefetch).
      const RowPrefetch pf = pi + 1 < n_pages ? RowPrefetch(pool.k_block(pages[pi + 1], layer),
                                                            pool.v_block(pages[pi + 1], layer), lay, j0, off, hd)
                                              : RowPrefetch();
      const int t_first = std::max(0, p0 - pos0);
      for (int t = t_first; t < nt; ++t) {  // tokens before p0 see none of the block
        const int nkt = std::min(nk, pos0 + t - p0 + 1);
        const __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nkt), lane));
        for (int h = 0; h < nh; ++h) {
          const int r = t * nh + h;
          const float* qh = q + size_t(t) * q_stride + size_t(h) * hd;
          float* oh = out + size_t(t) * q_stride + size_t(h) * hd;
          __m256 part[kBlock];
#pragma GCC unroll 8
          for (int j = 0; j < kBlock; ++j) {
            if (j >= nkt) { part[j] = _mm256_setzero_ps(); continue; }
            __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(qh), load8<F16>(k, j, 0));
            for (int c = 1; c < nc; ++c) acc = _mm256_fmadd_ps(_mm256_loadu_ps(qh + 8 * c), load8<F16>(k, j, c), acc);
            part[j] = acc;
          }
          const __m256 sc = _mm256_mul_ps(hsum8x8(part), _mm256_set1_ps(scale));
          _mm256_store_ps(e, sc);
          float bmax = e[0];
          for (int j = 1; j < nkt; ++j) bmax = e[j] > bmax ? e[j] : bmax;
          if (bmax > mx[r]) {
            if (mx[r] != -INFINITY) {
              const __m256 f = exp_avx2(_mm256_set1_ps(mx[r] - bmax));
              lsum[r] = _mm256_mul_ps(lsum[r], f);
              for (int c = 0; c < nc; ++c) _mm256_storeu_ps(oh + 8 * c, _mm256_mul_ps(_mm256_loadu_ps(oh + 8 * c), f));
            }
            mx[r] = bmax;
          }
          const __m256 ev = _mm256_and_ps(keep, exp_avx2(_mm256_sub_ps(sc, _mm256_set1_ps(mx[r]))));
          lsum[r] = _mm256_add_ps(lsum[r], ev);
          _mm256_store_ps(e, ev);
          for (int c0 = 0; c0 < nc; c0 += 8) {  // up to 8 accumulators in registers
            const int cn = std::min(8, nc - c0);
            __m256 acc[8];
            for (int c = 0; c < cn; ++c) acc[c] = _mm256_loadu_ps(oh + 8 * (c0 + c));
            const bool prefetch = t == t_first && h == 0 && c0 == 0;
            for (int j = 0; j < nkt; ++j) {
              if (prefetch) pf.row_at(j);
              const __m256 ej = _mm256_set1_ps(e[j]);
              for (int c = 0; c < cn; ++c) acc[c] = _mm256_fmadd_ps(ej, load8<F16>(v, j, c0 + c), acc[c]);
            }
            for (int c = 0; c < cn; ++c) _mm256_storeu_ps(oh + 8 * (c0 + c), acc[c]);
          }
        }
      }
    }
  }
  for (int r = 0; r < rows; ++r) {
    const __m256 inv = _mm256_set1_ps(1.0f / hsum8(lsum[r]));
    float* o = out + size_t(r / nh) * q_stride + size_t(r % nh) * hd;
    for (int c = 0; c < nc; ++c) _mm256_storeu_ps(o + 8 * c, _mm256_mul_ps(_mm256_loadu_ps(o + 8 * c), inv));
  }
}

}  // namespace

void attend_tile8(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos0, int nt, int hd,
                  size_t off, const float* q, size_t q_stride, float* out, int nh) {
  const bool f16 = pool.layout().dtype == KvDtype::kF16;
  auto run = [&]<int NC>() {
    f16 ? attend_tile8_t<NC, true>(pool, layer, pages, pos0, nt, hd, off, q, q_stride, out, nh)
        : attend_tile8_t<NC, false>(pool, layer, pages, pos0, nt, hd, off, q, q_stride, out, nh);
  };
  switch (hd / 8) {  // the head sizes of the models larder runs, then any
    case 1: run.template operator()<1>(); break;
    case 8: run.template operator()<8>(); break;
    case 16: run.template operator()<16>(); break;
    default: run.template operator()<0>(); break;
  }
}

}  // namespace larder::attention_detail

#endif
