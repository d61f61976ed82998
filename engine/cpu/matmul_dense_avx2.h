// Row-major F32 / F16 / BF16 tiles of AVX2 builds without AVX-512
// (matmul_dense_avx2.cpp; matmul_rows calls them).
#pragma once

#include <cstdint>

#include "engine/model/model.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && !defined(__AVX512F__)
#define LARDER_MATMUL_DENSE_AVX2 1

namespace larder {

// y[t][r] = W[r] . x[t] for t < n_tokens, r in [row_begin, row_end) (shapes
// as matmul_rows); x: [n_tokens][K] f32. Returns false (nothing written) for
// a type other than F32, F16, BF16.
bool matmul_dense_rows_avx2(const WeightView& w, const float* x, int n_tokens, float* y, int y_stride,
                            int64_t row_begin, int64_t row_end);

}  // namespace larder
#endif
