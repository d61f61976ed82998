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
