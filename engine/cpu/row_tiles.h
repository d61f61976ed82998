// The loop that runs row-major matmul tiles over a range of rows and all
// tokens: matmul.cpp's (F32 / F16 / BF16 / Q8_0, AVX-512), matmul_kquant.cpp's
// (K-quants decoded to f32, AVX-512) and matmul_dense_avx2.cpp's tiles.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "engine/model/model.h"

namespace larder::row_tiles {

// Activations of one token block stay in L2 while the rows stream past:
// tokens per block such that block * (bytes of an activation row) <= this
// (Q8_0 activation rows are 3.8x smaller than f32 ones, so their blocks hold
// more tokens and the weights are streamed fewer times).
constexpr size_t kTokenBlockBytes = 512 * 1024;

// tab[T - 1][R - 1] computes T tokens x R rows as
//   fn(w.row(r0), w.row_bytes, x + t0 * x_row, K, y + t0 * y_stride + r0, y_stride)
// x: n_tokens activation rows of x_row elements of X each (f32 values, or
// the bytes of prepared blocks); y: [n_tokens][y_stride]; rows [row_begin,
// row_end) in tiles of up to kR rows, tokens in blocks of whole kT tiles.
template <class Fn, int kT, int kR, class X>
void run(const Fn (&tab)[kT][kR], const WeightView& w, const X* x, size_t x_row, int n_tokens, float* y,
         int y_stride, int64_t row_begin, int64_t row_end) {
  const int K = int(w.ne[0]);
  int block = int(kTokenBlockBytes / (x_row * sizeof(X)));
  block = std::max(kT, block / kT * kT);
  for (int tb = 0; tb < n_tokens; tb += block) {
    const int te = std::min(n_tokens, tb + block);
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kR) {
      const int R = int(std::min<int64_t>(kR, row_end - r0));
      for (int t0 = tb; t0 < te; t0 += kT) {
        const int T = std::min(kT, te - t0);
        tab[T - 1][R - 1](w.row(r0), w.row_bytes, x + size_t(t0) * x_row, K, y + size_t(t0) * y_stride + r0,
                          y_stride);
      }
    }
  }
}

}  // namespace larder::row_tiles
