// Paged causal attention with an online softmax (engine/cuda/kernels.h).
//
// Block = 8 warps; grid = (n_tiles, n_head_kv). The block's rows are the
// tile's tokens x the query heads of KV head blockIdx.y (row r: token
// first + r / group, head kvh * group + r % group); warp w owns rows w,
// w + 8, w + 16, w + 24. Per chunk of 32 positions the block loads K and V
// (converted to f32) into shared memory; lane j scores key j for each of
// its warp's rows, then the running max m, sum l and output accumulator
// (lane owns head dims lane, lane + 32, ...) are rescaled:
//   m' = max(m, max_j s_j);  l' = l e^(m - m') + sum_j e^(s_j - m')
//   acc' = acc e^(m - m') + sum_j e^(s_j - m') v_j;   out = acc / l
// Keys after a row's own position are masked (causal).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "engine/cuda/kernels.h"

namespace larder::cuda {

namespace {

constexpr int kWarp = 32;
constexpr int kWarps = 8;
constexpr int kChunk = 32;
constexpr int kRowsPerWarp = kAttnMaxRows / kWarps;  // 4
constexpr int kDimsPerLane = kAttnMaxHeadDim / kWarp;           // 4

__device__ __forceinline__ float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

size_t shared_bytes(int head_dim) {
  // q rows [32][hd], K chunk [32][hd + 1] (padded: lane j reads row j), V chunk [32][hd].
  return sizeof(float) * (size_t(kAttnMaxRows) * head_dim + size_t(kChunk) * (head_dim + 1) +
                          size_t(kChunk) * head_dim);
}

template <typename OutT, bool kF16Kv>
__global__ void __launch_bounds__(kWarps * kWarp)
attention_kernel(AttentionArgs a) {
  extern __shared__ float smem[];
  const int hd = a.head_dim;
  float* q_s = smem;                                      // [32][hd]
  float* k_s = q_s + kAttnMaxRows * hd;        // [32][hd + 1]
  float* v_s = k_s + kChunk * (hd + 1);                   // [32][hd]

  const int* tile = a.tiles + 4 * blockIdx.x;
  const int first = tile[0], n_tok = tile[1], max_pos = tile[3];
  const int kvh = blockIdx.y;
  const int group = a.n_head / a.n_head_kv;
  const int n_rows = n_tok * group;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int q_dim = a.n_head * hd;
  const int table = a.table_start[first];  // every token of a tile has the same sequence
  const float scale = rsqrtf(float(hd));

  for (int idx = threadIdx.x; idx < n_rows * hd; idx += blockDim.x) {
    const int r = idx / hd, d = idx % hd;
    const int tok = first + r / group, head = kvh * group + r % group;
    q_s[r * hd + d] = a.q[size_t(tok) * q_dim + size_t(head) * hd + d] * scale;
  }

  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kDimsPerLane];
  int my_pos[kRowsPerWarp];
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    m[rr] = -INFINITY;
    l[rr] = 0.0f;
    const int r = warp + kWarps * rr;
    my_pos[rr] = r < n_rows ? a.pos[first + r / group] : -1;
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) acc[rr][i] = 0.0f;
  }

  const uint8_t* pool = static_cast<const uint8_t*>(a.pool.base);
  const size_t k_off = size_t(2 * a.layer) * a.pool.block_bytes;
  const size_t v_off = k_off + a.pool.block_bytes;
  for (int c0 = 0; c0 <= max_pos; c0 += kChunk) {
    __syncthreads();  // previous chunk consumed; q_s written
    for (int idx = threadIdx.x; idx < kChunk * hd; idx += blockDim.x) {
      const int j = idx / hd, d = idx % hd;
      const int p = c0 + j;
      float kv = 0.0f, vv = 0.0f;
      if (p <= max_pos) {
        const int page = a.block_tables[table + p / a.pool.page_size];
        const size_t e = size_t(p % a.pool.page_size) * a.pool.kv_dim + size_t(kvh) * hd + d;
        const uint8_t* base = pool + size_t(page) * a.pool.page_bytes;
        if constexpr (kF16Kv) {
          kv = __half2float(reinterpret_cast<const __half*>(base + k_off)[e]);
          vv = __half2float(reinterpret_cast<const __half*>(base + v_off)[e]);
        } else {
          kv = reinterpret_cast<const float*>(base + k_off)[e];
          vv = reinterpret_cast<const float*>(base + v_off)[e];
        }
      }
      k_s[j * (hd + 1) + d] = kv;
      v_s[j * hd + d] = vv;
    }
    __syncthreads();

#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int r = warp + kWarps * rr;
      if (r >= n_rows || c0 > my_pos[rr]) continue;  // warp-uniform
      const float* qr = q_s + r * hd;
      const float* kr = k_s + lane * (hd + 1);
      float s = 0.0f;
      for (int d = 0; d < hd; ++d) s = fmaf(qr[d], kr[d], s);
      if (c0 + lane > my_pos[rr]) s = -INFINITY;
      const float m_new = fmaxf(m[rr], warp_max(s));
      const float corr = __expf(m[rr] - m_new);
      const float p = __expf(s - m_new);
      l[rr] = l[rr] * corr + warp_sum(p);
      m[rr] = m_new;
#pragma unroll
      for (int i = 0; i < kDimsPerLane; ++i) acc[rr][i] *= corr;
      for (int j = 0; j < kChunk; ++j) {
        const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
        for (int i = 0; i < kDimsPerLane; ++i) {
          const int d = lane + kWarp * i;
          if (d < hd) acc[rr][i] = fmaf(pj, v_s[j * hd + d], acc[rr][i]);
        }
      }
    }
  }

  OutT* out = static_cast<OutT*>(a.out);
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int r = warp + kWarps * rr;
    if (r >= n_rows) continue;
    const int tok = first + r / group, head = kvh * group + r % group;
    const float inv = 1.0f / l[rr];
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) {
      const int d = lane + kWarp * i;
      if (d < hd) out[size_t(tok) * q_dim + size_t(head) * hd + d] = from_f32<OutT>(acc[rr][i] * inv);
    }
  }
}

template <typename OutT>
cudaError_t launch_typed(const AttentionArgs& a, cudaStream_t stream) {
  const dim3 grid(unsigned(a.n_tiles), unsigned(a.n_head_kv));
  const size_t smem = shared_bytes(a.head_dim);
  if (a.pool.f16) {
    attention_kernel<OutT, true><<<grid, kWarps * kWarp, smem, stream>>>(a);
  } else {
    attention_kernel<OutT, false><<<grid, kWarps * kWarp, smem, stream>>>(a);
  }
  return cudaGetLastError();
}

template <typename OutT>
cudaError_t set_smem(int bytes) {
  cudaError_t e = cudaFuncSetAttribute(attention_kernel<OutT, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess) return e;
  return cudaFuncSetAttribute(attention_kernel<OutT, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

}  // namespace

cudaError_t prepare_attention(int head_dim) {
  if (head_dim <= 0 || head_dim > kAttnMaxHeadDim) return cudaErrorInvalidValue;
  const int bytes = int(shared_bytes(head_dim));
  cudaError_t e = set_smem<__half>(bytes);
  if (e == cudaSuccess) e = set_smem<__nv_bfloat16>(bytes);
  if (e == cudaSuccess) e = set_smem<float>(bytes);
  return e;
}

cudaError_t launch_attention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.n_tiles == 0) return cudaSuccess;
  switch (a.out_type) {
    case DeviceType::kF16: return launch_typed<__half>(a, stream);
    case DeviceType::kBF16: return launch_typed<__nv_bfloat16>(a, stream);
    case DeviceType::kF32: return launch_typed<float>(a, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace larder::cuda
