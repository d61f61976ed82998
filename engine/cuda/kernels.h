// Launchers of larder's CUDA kernels (kernels.cu, attention.cu). Private to
// engine/cuda/. Every launcher enqueues on `stream` and returns the launch
// error (cudaGetLastError); shapes are row-major, rows contiguous.
// `t` is the compute type of the typed (void*) buffers (plan/weight_plan.h).
// C++17 only: nvcc compiles the .cu files that include this header.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "engine/cuda/plan/device_type.h"

namespace larder::cuda {

using cuda_plan::DeviceType;

// x[i][:] = float(table[tokens[i]][:]); table [n_vocab][n_embd] of t, x [n][n_embd] f32.
cudaError_t launch_embed(DeviceType t, const void* table, int n_embd, const int32_t* tokens, int n,
                         float* x, cudaStream_t stream);

// out[j][:] = x[r][:] / sqrt(mean(x[r]^2) + eps) * w, r = rows ? rows[j] : j, j in [0, n).
// x [*][d] f32, w [d] f32, out [n][d] of t. (llama2.c rmsnorm; mean in f32.)
cudaError_t launch_rmsnorm(DeviceType t, const float* x, const int32_t* rows, int n, int d,
                           const float* w, float eps, void* out, cudaStream_t stream);

// RoPE in place on q [n][n_head][head_dim] and k [n][n_head_kv][head_dim] f32
// at positions pos[n]: theta_i = pos * base^(-2i/n_rot) (computed in double),
// pairs (2i, 2i+1) or, when neox, (i, i + n_rot/2). As engine/cpu/kernels.cpp.
cudaError_t launch_rope(float* q, int n_head, float* k, int n_head_kv, int head_dim, int n_rot,
                        bool neox, float freq_base, const int32_t* pos, int n, cudaStream_t stream);

// Writes k, v [n][kv_dim] f32 of each token into its page (the device pool
// keeps whole pages in the record layout of engine/kv/page_pool.h), slot
// pos % page_size of page block_tables[table_start[i] + pos / page_size];
// kv_f16: round to nearest even.
struct KvPoolView {
  void* base = nullptr;
  size_t page_bytes = 0;
  size_t block_bytes = 0;   // page_size * kv_dim * dtype bytes
  int page_size = 0;
  int kv_dim = 0;
  bool f16 = false;
};
cudaError_t launch_kv_write(const KvPoolView& pool, int layer, const float* k, const float* v, int n,
                            const int32_t* pos, const int32_t* table_start,
                            const int32_t* block_tables, cudaStream_t stream);

// out [n][n_ff] of t = silu(gate) * up, gate and up [n][n_ff] f32.
cudaError_t launch_swiglu(DeviceType t, const float* gate, const float* up, int64_t n_elems, void* out,
                          cudaStream_t stream);

// y[i][r] (+)= dot(W[r][:], x[i][:]) for i < n <= 8 (cuda_plan::kGemvMaxTokens):
// W [rows][K] and x [n][K] of t, y [n][rows] f32, FP32 accumulation; one warp
// per row, 16-byte loads when K allows. accumulate: y += (residual add).
cudaError_t launch_gemv(DeviceType t, const void* w, int rows, int K, const void* x, int n, float* y,
                        bool accumulate, cudaStream_t stream);

// Causal grouped-query attention over the paged KV cache, tiled with an online
// softmax (Milakov & Gimelshein 2018; FlashAttention, Dao et al. 2022): no
// score matrix in device memory. One block per (attention tile, KV head);
// rows = tile tokens x query heads of the group; K/V read in chunks of 32
// positions through the block table, in the page dtype.
//   q [n][n_head][head_dim] f32 (after RoPE); out [n][n_head][head_dim] of t.
//   tiles: packed (first_token, n_tokens, seq, max_pos) x n_tiles.
struct AttentionArgs {
  KvPoolView pool;
  int layer = 0;
  int n_head = 0, n_head_kv = 0, head_dim = 0;
  const float* q = nullptr;
  void* out = nullptr;
  DeviceType out_type = DeviceType::kF16;
  const int32_t* tiles = nullptr;
  int n_tiles = 0;
  const int32_t* pos = nullptr;
  const int32_t* table_start = nullptr;
  const int32_t* block_tables = nullptr;
};
constexpr int kAttnMaxHeadDim = 128;
constexpr int kAttnMaxRows = 32;   // = cuda_plan::kAttnMaxRows (checked in cuda_backend.cpp)
// Raises the kernel's dynamic shared-memory limit for head_dim (call once).
cudaError_t prepare_attention(int head_dim);
cudaError_t launch_attention(const AttentionArgs& a, cudaStream_t stream);

}  // namespace larder::cuda
