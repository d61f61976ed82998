// One serial matmul for the CPU tests and microbenchmarks: what the forward
// pass does per matmul, without the thread pool.
#pragma once

#include <cmath>
#include <cstdint>

#include "engine/cpu/matmul.h"

namespace larder::testing {

// IEEE binary16 -> double, written out here so that references do not use
// the code under test.
inline double half_to_double(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(double(man), -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(double(man | 0x400), exp - 25);
  return sign ? -v : v;
}

// matmul_rows with x ([n][w.ne[0]]) prepared for w on path.
inline void multiply(const WeightView& w, const float* x, int n, float* y, int y_stride, int64_t row_begin,
                     int64_t row_end, Q8Path path) {
  MatmulInput in;
  in.prepare(w.type, x, n, int(w.ne[0]), path);
  matmul_rows(w, in, y, y_stride, row_begin, row_end);
}

}  // namespace larder::testing
