// One serial matmul for the CPU tests and microbenchmarks: what the forward
// pass does per matmul, without the thread pool.
#pragma once

#include <cstdint>

#include "engine/cpu/matmul.h"

namespace larder::testing {

// matmul_rows with x ([n][w.ne[0]]) prepared for w on path.
inline void multiply(const WeightView& w, const float* x, int n, float* y, int y_stride, int64_t row_begin,
                     int64_t row_end, Q8Path path) {
  MatmulInput in;
  in.prepare(w.type, x, n, int(w.ne[0]), path);
  matmul_rows(w, in, y, y_stride, row_begin, row_end);
}

}  // namespace larder::testing
