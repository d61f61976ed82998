// <immintrin.h> for larder's AVX-512 kernels. Include it inside the file's
// own feature check (#if defined(__AVX512F__) ...).
//
// GCC 12's AVX-512 headers initialise their "undefined" vectors from
// themselves (`__m512 __Y = __Y;`), which -Wuninitialized reports at every
// inlined intrinsic; the values are never read. The warnings are turned off
// for the rest of the including file.
#pragma once

#include <immintrin.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cstdint>

namespace larder {

#ifdef __GFNI__
// The gf2p8affineqb matrix that moves bits from .. from + n - 1 of every byte
// to to .. to + n - 1 and clears the others: output bit i is the parity of
// the input bits that the matrix's byte 7 - i selects (Intel SDM, GF2P8AFFINEQB).
// The packed kernels take their bit planes apart with it: one instruction
// where a shift and a mask would do.
constexpr uint64_t move_bits(int from, int to, int n) {
  uint64_t m = 0;
  for (int i = 0; i < n; ++i) m |= uint64_t(1u << (from + i)) << (8 * (7 - (to + i)));
  return m;
}
template <uint64_t kMatrix>
inline __m512i gf_move(__m512i v) {
  return _mm512_gf2p8affine_epi64_epi8(v, _mm512_set1_epi64(int64_t(kMatrix)), 0);
}
#endif

// exp(x) (softmax inputs are <= 0; above ~88.7 it is +inf): Cephes expf's range
// reduction x = n ln2 + r (ln2 in two parts) and degree-5 polynomial, then
// 2^n by scalef (underflows to 0 below about -104). |relative error| ~2 ulp.
inline __m512 exp_avx512(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(y, n);
}

}  // namespace larder
