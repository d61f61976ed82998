// Matrix products with quantized weights other than Q8_0, read in place from
// the GGUF mapping; matmul_rows (matmul.h) dispatches here. Block formats:
// docs/quant-formats.md.
//
//   y[t][r] = sum_k W[r][k] * x[t][k]   t in [0, n_tokens), r in [row_begin, row_end)
//
// Q4_K, Q5_K, Q6_K (the bulk of Q4_K_M / Q5_K_M / Q6_K files): by default
// (an xq argument, below) an integer kernel on int8-quantized activations
// (matmul_kquant_int.cpp); otherwise each 256-value super-block is decoded 32
// values at a time into f32 registers (exactly the values dequantize_row
// gives) and multiplied with the f32 activations. Either way the matrix is
// never dequantized as a whole. Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, IQ4_NL,
// IQ4_XS: one weight row at a time is dequantized into a thread-local
// scratch row.
//
// Determinism: every y[t][r] is the same chain of operations whatever
// n_tokens, the row range, the tile or the thread (16-lane FMAs along k in
// increasing order, then a fixed horizontal sum), as for the other types.
#pragma once

#include <cstdint>

#include "engine/gguf/ggml_types.h"
#include "engine/model/model.h"

namespace larder {

// True for Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS.
bool matmul_quant_type(GgmlType t);

// Activations quantized per 256 values: x ~= d * qs; bsums[j] = sum of qs
// 16j .. 16j + 15. d = max|x| / 127, qs = round(x / d) rounded half away
// from zero (lround) and clamped to [-127, 127] (0 when all x are 0).
struct BlockQ8K {
  float d;
  int16_t bsums[16];
  int8_t qs[256];
};

// y[t][r] for r in [row_begin, row_end), t in [0, n_tokens). x: [n_tokens][K]
// f32, y: [n_tokens][y_stride]. w.type must satisfy matmul_quant_type and
// K = w.ne[0] must be a multiple of its block size.
//
// xq (Q4_K, Q5_K, Q6_K; null for the f32 path): x quantized by
// quantize_rows_q8k ([n_tokens][K / 256]), used where kquant_int_supported:
// like llama.cpp's ggml_vec_dot_q4_K_q8_K / q6_K_q8_K, each super-block is an
// exact integer dot product (vpdpbusd, then the sub-block scales with
// vpdpwssd) scaled once by d_w * d_x; the Q4_K / Q5_K mins and Q6_K's +32
// offset go through the activations' 16-value sums. Rounds the activations
// to 8 bits; 3-5x faster for decode and prefill (docs/cpu-kernels.md,
// docs/quant-formats.md). Ignored for other types.
void matmul_rows_quant(const WeightView& w, const float* x, const BlockQ8K* xq, int n_tokens,
                       float* y, int y_stride, int64_t row_begin, int64_t row_end);

// Quantizes x: [n_rows][k], k a multiple of 256, to out: [n_rows][k / 256].
void quantize_rows_q8k(const float* x, int n_rows, int k, BlockQ8K* out);

// True for Q4_K, Q5_K, Q6_K on builds with the integer kernels (AVX-512).
bool kquant_int_supported(GgmlType t);

// The integer path itself (used by matmul_rows_quant): Q4_K, Q5_K, Q6_K with
// AVX-512 (VNNI where the CPU has it; the same bits without); returns false
// (computing nothing) for other types or builds. xq: [n_tokens][K / 256].
bool matmul_rows_kquant_int(const WeightView& w, const BlockQ8K* xq, int n_tokens, float* y,
                            int y_stride, int64_t row_begin, int64_t row_end);

}  // namespace larder
