// Matrix-vector / matrix-matrix products with weights used in place from the
// GGUF mapping (F32, F16, BF16, Q8_0 and the types of matmul_kquant.h), for both prefill and decode.
//
//   y[t][r] = sum_k W[r][k] * x[t][k]     t in [0, n_tokens), r in [row_begin, row_end)
//
// W is a WeightView: ne[0] = K (row length), ne[1] = rows. x: [n_tokens][K]
// f32 (row stride K). y: [n_tokens][y_stride] f32.
//
// Determinism: every y[t][r] is computed by the same sequence of operations
// whatever n_tokens, the row range or the tile it falls in (16-lane partial
// sums along k in increasing order, one fused multiply-add per chunk, a
// masked last chunk, then a fixed horizontal reduction). So a row of the
// output never depends on the other rows of x: prefill of any split, decode
// of one or many sequences give bit-identical results. OpenBLAS sgemm does
// not have this property (its result rows change with M on this machine for
// every core type tried), which is why prefill does not use it.
//
// Q8_0 has two paths:
//   kDequantFma: each block's int8 weights are scaled by d (exact in f32) and
//                multiplied with the f32 activations.
//   kVnni:       llama.cpp ggml_vec_dot_q8_0_q8_0: the activations are first
//                quantized to Q8_0 blocks (quantize_rows_q8_0) and each block
//                pair is an int8 dot product (AVX-512 VNNI vpdpbusd) scaled by
//                d_w * d_x. Rounds the activations to 8 bits. One-token calls
//                (decode) use a tile that forms the same int32 sums with fewer
//                instructions and prefetches the next rows; same bits.
#pragma once

#include <cstdint>

#include "engine/gguf/ggml_types.h"
#include "engine/model/model.h"

namespace larder {

enum class Q8Path { kDequantFma, kVnni };

// The Q8_0 path the forward pass uses (chosen by measurement, see matmul.cpp).
Q8Path default_q8_path();

// True when the weight type has a kernel here (every type ggml_type_supported() accepts).
bool matmul_type_supported(GgmlType t);

// y[t][r] for r in [row_begin, row_end), t in [0, n_tokens). x: [n_tokens][K].
// For a Q8_0 weight with Q8Path::kVnni, xq must hold x quantized by
// quantize_rows_q8_0 ([n_tokens][K/32] blocks); otherwise xq is ignored.
void matmul_rows(const WeightView& w, const float* x, const BlockQ8_0* xq, int n_tokens,
                 float* y, int y_stride, int64_t row_begin, int64_t row_end,
                 Q8Path q8_path = default_q8_path());

// Quantizes n_rows rows of k floats (k a multiple of 32) to Q8_0 blocks as
// llama.cpp quantize_row_q8_0_ref: d = max|x| / 127, q = round(x / d).
// out: [n_rows][k/32].
void quantize_rows_q8_0(const float* x, int n_rows, int k, BlockQ8_0* out);

}  // namespace larder
