// The one-token attention fallback: attend_tokens' path for heads that no
// vector pass takes (with AVX-512 a multiple of neither 16 nor 8, with AVX2
// not a multiple of 8, and every head in a build without either), scalar
// where the head size leaves no vector form. Its arithmetic per head: the
// scores of every position first (one row of scores, scaled), their max, e_p
// = exp(s_p - max) and their sum in increasing p, then out = sum_p e_p v_p /
// sum (attention.h's formula, without the online softmax of the tiles).
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/cpu/attention_detail.h"
#include "engine/gguf/ggml_types.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace larder::attention_detail {

namespace {

// dot(a, b) over n values in a fixed order (16-lane partial sums when n is a
// multiple of 16, else one sequential float sum).
inline float dot_f32(const float* a, const float* b, int n) {
#if defined(__AVX512F__)
  if (n % 16 == 0) {
    __m512 acc = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
    return _mm512_reduce_add_ps(acc);
  }
#endif
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

inline float dot_f16(const float* a, const uint16_t* b, int n) {
#if defined(__AVX512F__)
  if (n % 16 == 0) {
    __m512 acc = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
      const __m512 bv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i)));
      acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), bv, acc);
    }
    return _mm512_reduce_add_ps(acc);
  }
#endif
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * fp16_to_fp32(b[i]);
  return s;
}

// out[i] += w * v[i] (each lane independent, so vectorising keeps the order).
inline void axpy_f32(float* out, float w, const float* v, int n) {
  for (int i = 0; i < n; ++i) out[i] += w * v[i];
}
inline void axpy_f16(float* out, float w, const uint16_t* v, int n) {
#if defined(__AVX512F__)
  if (n % 16 == 0) {
    const __m512 wv = _mm512_set1_ps(w);
    for (int i = 0; i < n; i += 16) {
      const __m512 vv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + i)));
      _mm512_storeu_ps(out + i, _mm512_add_ps(_mm512_loadu_ps(out + i), _mm512_mul_ps(wv, vv)));
    }
    return;
  }
#endif
  for (int i = 0; i < n; ++i) out[i] += w * fp16_to_fp32(v[i]);
}

#if defined(__AVX512F__)
// Scores of up to 16 consecutive slots at once for a head_dim that is not a
// multiple of 16 (stories260K: 8): lane j holds dot(q, k_j), accumulated over
// the head dims in increasing order with one FMA each, so every slot gets the
// same arithmetic whichever lane or chunk it falls in. k: f32 K block at the
// kv head's offset; rows kv_dim apart.
inline void scores16_f32(const float* q, const float* k, int kv_dim, int hd, int n, float scale,
                         float* s) {
  const __mmask16 m = n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
  const __m512i idx = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(kv_dim));
  __m512 acc = _mm512_setzero_ps();
  for (int i = 0; i < hd; ++i) {
    const __m512 kv = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, k + i, 4);
    acc = _mm512_fmadd_ps(_mm512_set1_ps(q[i]), kv, acc);
  }
  _mm512_mask_storeu_ps(s, m, _mm512_mul_ps(acc, _mm512_set1_ps(scale)));
}
#endif

}  // namespace

// One token at pos: the paths for heads that are not a multiple of 16 (AVX-512)
// or 8 (AVX2) and the scalar code. scores: attention_scratch_floats(pos, page_size, 1) floats.
void attend_one(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos,
                const AttentionShape& shape, const float* q, float* out, float* scores,
                int head_begin, int head_end) {
  const KvLayout& lay = pool.layout();
  const int hd = shape.head_dim;
  const int group = shape.n_head / shape.n_head_kv;
  const float scale = float(1.0 / std::sqrt(double(hd)));
  const bool f16 = lay.dtype == KvDtype::kF16, f32 = lay.dtype == KvDtype::kF32;
  const int n_pages = pos / lay.page_size + 1;
  float q8_row[256];  // a Q8_0 row's head slice, dequantized (head_dim <= 256 checked below)
  // A page's rows of one kv head widened to f32 (F16, Q8_0 pages; small heads).
  static thread_local std::vector<float> widened;
  if (widened.size() < size_t(lay.page_size) * size_t(hd)) widened.resize(size_t(lay.page_size) * size_t(hd));
  if (!f16 && !f32 && hd > 256) return;  // CpuForward::create refuses such models

  for (int h = head_begin; h < head_end; ++h) {
    const float* qh = q + size_t(h) * hd;
    const size_t off = size_t(h / group) * hd;  // kv head's offset in a K/V row

    // scores: (pos + 1) scaled dot products.
    float mx = -INFINITY;
    for (int pi = 0; pi < n_pages; ++pi) {
      const int n_slots = pi + 1 < n_pages ? lay.page_size : pos - pi * lay.page_size + 1;
      const void* kb = pool.k_block(pages[pi], layer);
      float* s = scores + size_t(pi) * lay.page_size;
#if defined(__AVX512F__)
      if (hd % 16 != 0) {
        size_t rs = 0;
        const float* k = rows_f32_avx512(kb, lay, off, n_slots, hd, widened.data(), &rs);
        for (int j = 0; j < n_slots; j += 16)
          scores16_f32(qh, k + size_t(j) * rs, int(rs), hd, std::min(16, n_slots - j), scale, s + j);
        for (int j = 0; j < n_slots; ++j) mx = s[j] > mx ? s[j] : mx;
        continue;
      }
#endif
      for (int j = 0; j < n_slots; ++j) {
        const size_t at = size_t(j) * lay.kv_dim + off;
        const float d = f16   ? dot_f16(qh, static_cast<const uint16_t*>(kb) + at, hd)
                        : f32 ? dot_f32(qh, static_cast<const float*>(kb) + at, hd)
                              : dot_f32(qh, q8_slice(kb, lay, j, off, hd, q8_row), hd);
        s[j] = d * scale;
        mx = s[j] > mx ? s[j] : mx;
      }
    }
    float sum = 0.0f;
    for (int p = 0; p <= pos; ++p) {
      scores[p] = std::exp(scores[p] - mx);
      sum += scores[p];
    }

    // out_h = sum_p e_p v_p / sum.
    float* oh = out + size_t(h) * hd;
    const float inv = 1.0f / sum;
#if defined(__AVX512F__)
    {
      // 16 head dims per register, positions in increasing order, one FMA each.
      for (int c0 = 0; c0 < hd; c0 += 16) {
        const __mmask16 m = hd - c0 >= 16 ? __mmask16(0xffff) : __mmask16((1u << (hd - c0)) - 1);
        __m512 acc = _mm512_setzero_ps();
        for (int pi = 0; pi < n_pages; ++pi) {
          const int n_slots = pi + 1 < n_pages ? lay.page_size : pos - pi * lay.page_size + 1;
          size_t rs = 0;
          const float* vb = rows_f32_avx512(pool.v_block(pages[pi], layer), lay, off, n_slots, hd, widened.data(), &rs) + c0;
          const float* s = scores + size_t(pi) * lay.page_size;
          for (int j = 0; j < n_slots; ++j)
            acc = _mm512_fmadd_ps(_mm512_set1_ps(s[j]), _mm512_maskz_loadu_ps(m, vb + size_t(j) * rs), acc);
        }
        _mm512_mask_storeu_ps(oh + c0, m, _mm512_mul_ps(acc, _mm512_set1_ps(inv)));
      }
      continue;
    }
#endif
    for (int i = 0; i < hd; ++i) oh[i] = 0.0f;
    for (int pi = 0; pi < n_pages; ++pi) {
      const int n_slots = pi + 1 < n_pages ? lay.page_size : pos - pi * lay.page_size + 1;
      const void* vb = pool.v_block(pages[pi], layer);
      const float* s = scores + size_t(pi) * lay.page_size;
      for (int j = 0; j < n_slots; ++j) {
        const size_t at = size_t(j) * lay.kv_dim + off;
        if (f16) {
          axpy_f16(oh, s[j], static_cast<const uint16_t*>(vb) + at, hd);
        } else if (f32) {
          axpy_f32(oh, s[j], static_cast<const float*>(vb) + at, hd);
        } else {
          axpy_f32(oh, s[j], q8_slice(vb, lay, j, off, hd, q8_row), hd);
        }
      }
    }
    for (int i = 0; i < hd; ++i) oh[i] *= inv;
  }
}


}  // namespace larder::attention_detail
