#include "engine/cpu/kernels.h"

#include <cmath>

#if defined(__AVX512F__)
#include "engine/cpu/simd.h"
#elif defined(__AVX2__) && defined(__FMA__)
#include "engine/cpu/simd_avx2.h"
#endif

namespace larder {

void rmsnorm(float* out, const float* x, const float* weight, int n, float eps) {
  double ss = 0.0;
  for (int i = 0; i < n; ++i) ss += double(x[i]) * double(x[i]);
  const float scale = float(1.0 / std::sqrt(ss / n + double(eps)));
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void rope_tables(int pos, int n_rot, float freq_base, float* cos_out, float* sin_out) {
  for (int i = 0; i < n_rot / 2; ++i) {
    const double theta = double(pos) * std::pow(double(freq_base), -2.0 * i / double(n_rot));
    cos_out[i] = float(std::cos(theta));
    sin_out[i] = float(std::sin(theta));
  }
}

void rope_apply(float* x, int n_heads, int head_dim, int n_rot, bool neox, const float* cos_t,
                const float* sin_t) {
  const int half = n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + size_t(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const int ia = neox ? i : 2 * i;
      const int ib = neox ? i + half : 2 * i + 1;
      const float a = v[ia], b = v[ib];
      v[ia] = a * cos_t[i] - b * sin_t[i];
      v[ib] = a * sin_t[i] + b * cos_t[i];
    }
  }
}

void swiglu(float* gate, const float* up, int n) {
#if defined(__AVX512F__)
  // 16 at a time, the tail masked, so every element gets the same arithmetic:
  // g / (1 + exp_avx512(-g)) * u (exp within ~2 ulp of libm's).
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1u);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 s = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(gate + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, up + i)));
  }
#elif defined(__AVX2__) && defined(__FMA__)
  // The same arithmetic 8 at a time (exp_avx2 gives exp_avx512's bits).
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int i = 0; i < n; i += 8) {
    const __m256i m = first_lanes_avx2(n - i);
    const __m256 g = _mm256_maskload_ps(gate + i, m);
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g));
    const __m256 s = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_maskstore_ps(gate + i, m, _mm256_mul_ps(s, _mm256_maskload_ps(up + i, m)));
  }
#else
  for (int i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
#endif
}

void add_inplace(float* x, const float* y, int n) {
  for (int i = 0; i < n; ++i) x[i] += y[i];
}

void softmax(float* x, int n) {
  float mx = x[0];
  for (int i = 1; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace larder
