// Element-wise and matrix-vector kernels of the CUDA forward pass. Shapes and
// formulas: engine/cuda/kernels.h.
#include "engine/cuda/kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace larder::cuda {

namespace {

constexpr int kWarp = 32;

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Calls f.template operator()<T>() with T the CUDA type of `t`.
template <typename F>
cudaError_t dispatch(DeviceType t, F&& f) {
  switch (t) {
    case DeviceType::kF16: return f(__half{});
    case DeviceType::kBF16: return f(__nv_bfloat16{});
    case DeviceType::kF32: return f(float{});
  }
  return cudaErrorInvalidValue;
}

unsigned blocks_for(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

// ---- embedding -------------------------------------------------------------

template <typename T>
__global__ void embed_kernel(const T* __restrict__ table, int n_embd, const int32_t* __restrict__ tokens,
                             float* __restrict__ x) {
  const int i = blockIdx.x;
  const T* row = table + size_t(tokens[i]) * n_embd;
  for (int d = threadIdx.x; d < n_embd; d += blockDim.x) x[size_t(i) * n_embd + d] = to_f32(row[d]);
}

// ---- rmsnorm -----------------------------------------------------------------

template <typename T>
__global__ void rmsnorm_kernel(const float* __restrict__ x, const int32_t* __restrict__ rows, int d,
                               const float* __restrict__ w, float eps, T* __restrict__ out) {
  __shared__ float partial[32];
  const int j = blockIdx.x;
  const int r = rows != nullptr ? rows[j] : j;
  const float* xr = x + size_t(r) * d;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < d; i += blockDim.x) ss += xr[i] * xr[i];
  ss = warp_sum(ss);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (lane == 0) partial[warp] = ss;
  __syncthreads();
  if (warp == 0) {
    float v = lane < int(blockDim.x / kWarp) ? partial[lane] : 0.0f;
    v = warp_sum(v);
    if (lane == 0) partial[0] = v;
  }
  __syncthreads();
  const float scale = rsqrtf(partial[0] / float(d) + eps);
  T* o = out + size_t(j) * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) o[i] = from_f32<T>(xr[i] * scale * w[i]);
}

// ---- rope --------------------------------------------------------------------

__global__ void rope_kernel(float* __restrict__ q, int n_head, float* __restrict__ k, int n_head_kv,
                            int head_dim, int n_rot, bool neox, float freq_base,
                            const int32_t* __restrict__ pos) {
  const int i = blockIdx.x;
  const int half = n_rot / 2;
  const int n_items = (n_head + n_head_kv) * half;
  for (int it = threadIdx.x; it < n_items; it += blockDim.x) {
    const int head = it / half, p = it % half;
    const double theta = double(pos[i]) * pow(double(freq_base), -2.0 * p / double(n_rot));
    double s, c;
    sincos(theta, &s, &c);
    const float cf = float(c), sf = float(s);
    float* v = head < n_head ? q + (size_t(i) * n_head + head) * head_dim
                             : k + (size_t(i) * n_head_kv + (head - n_head)) * head_dim;
    const int ia = neox ? p : 2 * p;
    const int ib = neox ? p + half : 2 * p + 1;
    const float a = v[ia], b = v[ib];
    v[ia] = a * cf - b * sf;
    v[ib] = a * sf + b * cf;
  }
}

// ---- kv write ----------------------------------------------------------------

__global__ void kv_write_kernel(KvPoolView pool, int layer, const float* __restrict__ k,
                                const float* __restrict__ v, const int32_t* __restrict__ pos,
                                const int32_t* __restrict__ table_start,
                                const int32_t* __restrict__ block_tables) {
  const int i = blockIdx.x;
  const int p = pos[i];
  const int page = block_tables[table_start[i] + p / pool.page_size];
  const size_t slot = size_t(p % pool.page_size) * pool.kv_dim;
  uint8_t* base = static_cast<uint8_t*>(pool.base) + size_t(page) * pool.page_bytes;
  uint8_t* kb = base + size_t(2 * layer) * pool.block_bytes;
  uint8_t* vb = kb + pool.block_bytes;
  for (int d = threadIdx.x; d < pool.kv_dim; d += blockDim.x) {
    const float kv = k[size_t(i) * pool.kv_dim + d], vv = v[size_t(i) * pool.kv_dim + d];
    if (pool.f16) {
      reinterpret_cast<__half*>(kb)[slot + d] = __float2half_rn(kv);
      reinterpret_cast<__half*>(vb)[slot + d] = __float2half_rn(vv);
    } else {
      reinterpret_cast<float*>(kb)[slot + d] = kv;
      reinterpret_cast<float*>(vb)[slot + d] = vv;
    }
  }
}

// ---- swiglu ------------------------------------------------------------------

template <typename T>
__global__ void swiglu_kernel(const float* __restrict__ gate, const float* __restrict__ up, int64_t n,
                              T* __restrict__ out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    out[i] = from_f32<T>(g / (1.0f + expf(-g)) * up[i]);
  }
}

// ---- gemv --------------------------------------------------------------------

constexpr int kGemvWarps = 8;
constexpr int kGemvMaxN = 8;

// One warp per weight row; each lane reads VEC consecutive elements per step
// (VEC * sizeof(T) = 16 bytes when vectorised, else VEC = 1).
template <typename T, int VEC>
__global__ void gemv_kernel(const T* __restrict__ w, int rows, int K, const T* __restrict__ x, int n,
                            float* __restrict__ y, bool accumulate) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int r = blockIdx.x * kGemvWarps + warp;
  if (r >= rows) return;
  const T* wr = w + size_t(r) * K;
  float acc[kGemvMaxN];
#pragma unroll
  for (int t = 0; t < kGemvMaxN; ++t) acc[t] = 0.0f;
  for (int c = lane * VEC; c < K; c += kWarp * VEC) {
    T wv[VEC];
    if constexpr (VEC * sizeof(T) == 16) {
      *reinterpret_cast<uint4*>(wv) = *reinterpret_cast<const uint4*>(wr + c);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) wv[e] = wr[c + e];
    }
#pragma unroll
    for (int t = 0; t < kGemvMaxN; ++t) {
      if (t < n) {
        T xv[VEC];
        const T* xr = x + size_t(t) * K + c;
        if constexpr (VEC * sizeof(T) == 16) {
          *reinterpret_cast<uint4*>(xv) = *reinterpret_cast<const uint4*>(xr);
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e) xv[e] = xr[e];
        }
#pragma unroll
        for (int e = 0; e < VEC; ++e) acc[t] = fmaf(to_f32(wv[e]), to_f32(xv[e]), acc[t]);
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kGemvMaxN; ++t) {
    if (t < n) {
      const float s = warp_sum(acc[t]);
      if (lane == 0) {
        float* o = y + size_t(t) * rows + r;
        *o = accumulate ? *o + s : s;
      }
    }
  }
}

}  // namespace

cudaError_t launch_embed(DeviceType t, const void* table, int n_embd, const int32_t* tokens, int n,
                         float* x, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    embed_kernel<T><<<n, 256, 0, stream>>>(static_cast<const T*>(table), n_embd, tokens, x);
    return cudaGetLastError();
  });
}

cudaError_t launch_rmsnorm(DeviceType t, const float* x, const int32_t* rows, int n, int d,
                           const float* w, float eps, void* out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    rmsnorm_kernel<T><<<n, 256, 0, stream>>>(x, rows, d, w, eps, static_cast<T*>(out));
    return cudaGetLastError();
  });
}

cudaError_t launch_rope(float* q, int n_head, float* k, int n_head_kv, int head_dim, int n_rot,
                        bool neox, float freq_base, const int32_t* pos, int n, cudaStream_t stream) {
  if (n == 0 || n_rot == 0) return cudaSuccess;
  rope_kernel<<<n, 256, 0, stream>>>(q, n_head, k, n_head_kv, head_dim, n_rot, neox, freq_base, pos);
  return cudaGetLastError();
}

cudaError_t launch_kv_write(const KvPoolView& pool, int layer, const float* k, const float* v, int n,
                            const int32_t* pos, const int32_t* table_start,
                            const int32_t* block_tables, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  kv_write_kernel<<<n, 256, 0, stream>>>(pool, layer, k, v, pos, table_start, block_tables);
  return cudaGetLastError();
}

cudaError_t launch_swiglu(DeviceType t, const float* gate, const float* up, int64_t n_elems, void* out,
                          cudaStream_t stream) {
  if (n_elems == 0) return cudaSuccess;
  const unsigned blocks = blocks_for(n_elems, 256) < 65535u ? blocks_for(n_elems, 256) : 65535u;
  return dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    swiglu_kernel<T><<<blocks, 256, 0, stream>>>(gate, up, n_elems, static_cast<T*>(out));
    return cudaGetLastError();
  });
}

cudaError_t launch_gemv(DeviceType t, const void* w, int rows, int K, const void* x, int n, float* y,
                        bool accumulate, cudaStream_t stream) {
  if (n == 0 || rows == 0) return cudaSuccess;
  if (n > kGemvMaxN) return cudaErrorInvalidValue;
  const unsigned blocks = blocks_for(rows, kGemvWarps);
  return dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = int(16 / sizeof(T));
    const bool aligned = (size_t(K) * sizeof(T)) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(w) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(x) % 16 == 0;
    if (aligned) {
      gemv_kernel<T, kVec><<<blocks, kGemvWarps * kWarp, 0, stream>>>(
          static_cast<const T*>(w), rows, K, static_cast<const T*>(x), n, y, accumulate);
    } else {
      gemv_kernel<T, 1><<<blocks, kGemvWarps * kWarp, 0, stream>>>(
          static_cast<const T*>(w), rows, K, static_cast<const T*>(x), n, y, accumulate);
    }
    return cudaGetLastError();
  });
}

}  // namespace larder::cuda
