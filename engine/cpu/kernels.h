// Elementwise and per-row kernels of the llama forward pass (llama2.c run.c
// rmsnorm/softmax, llama.cpp ggml_rms_norm / ggml_rope_ext / ggml_swiglu).
// All are deterministic: each output depends only on its own row's inputs and
// the summation order is fixed.
#pragma once

#include <cstdint>

namespace larder {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i], i in [0, n).
// The sum of squares is accumulated in double. out may alias x.
void rmsnorm(float* out, const float* x, const float* weight, int n, float eps);

// Rotary embedding tables for one position: for i in [0, n_rot/2),
// theta_i = pos * freq_base^(-2i/n_rot) (RoFormer, arXiv:2104.09864),
// cos_out[i] = cos(theta_i), sin_out[i] = sin(theta_i), computed in double and
// rounded to float.
void rope_tables(int pos, int n_rot, float freq_base, float* cos_out, float* sin_out);

// Rotates the first n_rot dims of each of n_heads heads of x ([n_heads][head_dim]
// floats) in place with the tables of rope_tables:
//   neox == false (llama.cpp LLAMA_ROPE_TYPE_NORM, llama2.c): pairs (x[2i], x[2i+1]);
//   neox == true  (LLAMA_ROPE_TYPE_NEOX): pairs (x[i], x[i + n_rot/2]).
// Each pair (a, b) becomes (a cos - b sin, a sin + b cos). Dims >= n_rot are kept.
void rope_apply(float* x, int n_heads, int head_dim, int n_rot, bool neox, const float* cos_t,
                const float* sin_t);

// gate[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)).  n values.
void swiglu(float* gate, const float* up, int n);

// x[i] += y[i], n values.
void add_inplace(float* x, const float* y, int n);

// In-place softmax of x[0, n) (max subtracted; sum in float, fixed order).
void softmax(float* x, int n);

}  // namespace larder
