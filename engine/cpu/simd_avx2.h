// AVX2 (+ FMA) helpers shared by larder's 256-bit kernels, each the same
// arithmetic as its AVX-512 twin in simd.h / the quantizers, hence the same
// bits. Include it inside the file's own feature check (#ifdef __AVX2__ ...).
#pragma once

#include <immintrin.h>

namespace larder {

// exp(x): the bits of exp_avx512 (simd.h) for every x <= 4.7e7 and NaN:
// Cephes expf's range reduction x = n ln2 + r (ln2 in two parts) and
// degree-5 polynomial, inputs below -104 (and NaN) taken as -104 (2^n then
// underflows to 0 or a denormal). 2^n is applied as two exact powers of two,
// 2^(n >> 1) then 2^(n - (n >> 1)), each a normal float for n in [-150,
// 128]: the first product is exact, the second rounds once, as scalef does.
// Inputs above 89 (whose exp is +inf in float) are taken as 89: +inf, as
// libm gives; exp_avx512, which has no upper clamp, loses the reduction
// past ~4.7e7 (r leaves the polynomial's range: -inf for some x, NaN for
// x >= 2.4e38 or +inf), so there the two differ (swiglu then gives -0 * u
// here and +0 * u or NaN there, for gates below -4.7e7). |relative error|
// ~2 ulp.
inline __m256 exp_avx2(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(y, p1), p2);
}

// q rounded half away from zero to int32, as std::lround (for |q| < 2^31):
// t = trunc(|q|), and |q| - t is exact, so t + (|q| - t >= 0.5) is lround.
inline __m256i lround_avx2(__m256 q) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 aq = _mm256_andnot_ps(sign, q);
  __m256 t = _mm256_round_ps(aq, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 up = _mm256_cmp_ps(_mm256_sub_ps(aq, t), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  t = _mm256_add_ps(t, _mm256_and_ps(up, _mm256_set1_ps(1.0f)));
  const __m256i ti = _mm256_cvttps_epi32(t);
  const __m256i neg = _mm256_castps_si256(_mm256_cmp_ps(q, _mm256_setzero_ps(), _CMP_LT_OQ));
  return _mm256_sub_epi32(_mm256_xor_si256(ti, neg), neg);  // -t where q < 0
}

// The mask of lanes [0, n) (all 8 for n >= 8) for maskload / maskstore.
inline __m256i first_lanes_avx2(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Four vectors of int32 in [-128, 127] to 32 int8, in order (a, b, c, d).
inline __m256i pack_i32x4_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// The largest of the 8 lanes (max is exact: the order does not matter).
inline float hmax_avx2(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 0x55));
  return _mm_cvtss_f32(m);
}

// The sum of the 8 int32 lanes.
inline int hsum_epi32_avx2(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

}  // namespace larder
