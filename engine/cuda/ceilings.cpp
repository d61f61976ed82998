// Measured ceilings of device 0 (engine/backend.h DeviceCeilings): the
// rooflines of bench/bench_gpu.cpp. Random data, never zeros (a GEMM on zeros
// runs faster than on real data); CUDA events after warm-up; median.
#include <algorithm>
#include <random>
#include <vector>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_util.h"
#include "engine/gguf/ggml_types.h"

namespace larder {

namespace {

constexpr int kWarmup = 3;
constexpr int kRepeats = 15;

// Median milliseconds of kRepeats runs of `op` on `stream`.
template <typename Op>
Result<double> time_ms(cudaStream_t stream, Op op) {
  cuda::Event a, b;
  LARDER_RETURN_IF_ERROR(a.create(true));
  LARDER_RETURN_IF_ERROR(b.create(true));
  for (int i = 0; i < kWarmup; ++i) LARDER_RETURN_IF_ERROR(op());
  std::vector<float> ms;
  for (int i = 0; i < kRepeats; ++i) {
    LARDER_CUDA_CHECK(cudaEventRecord(a.get(), stream));
    LARDER_RETURN_IF_ERROR(op());
    LARDER_CUDA_CHECK(cudaEventRecord(b.get(), stream));
    LARDER_CUDA_CHECK(cudaEventSynchronize(b.get()));
    float t = 0;
    LARDER_CUDA_CHECK(cudaEventElapsedTime(&t, a.get(), b.get()));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return double(ms[ms.size() / 2]);
}

}  // namespace

Result<DeviceCeilings> cuda_measure_ceilings() {
  DeviceCeilings c;
  LARDER_CUDA_CHECK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  LARDER_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  c.device_name = prop.name;
  cuda::Stream stream;
  LARDER_RETURN_IF_ERROR(stream.create());
  cudaStream_t s = stream.get();

  // Copies: 1 GiB device to device (read + written), 256 MiB pinned host to device.
  const size_t copy_bytes = size_t(1) << 30, h2d_bytes = size_t(256) << 20;
  cuda::DeviceBuffer src, dst;
  cuda::PinnedBuffer host;
  LARDER_RETURN_IF_ERROR(src.allocate(copy_bytes, "ceiling copy"));
  LARDER_RETURN_IF_ERROR(dst.allocate(copy_bytes, "ceiling copy"));
  LARDER_RETURN_IF_ERROR(host.allocate(h2d_bytes, "ceiling copy"));
  std::mt19937 rng(1);
  for (size_t i = 0; i < h2d_bytes / 4; ++i) host.as<uint32_t>()[i] = rng();
  for (size_t off = 0; off < copy_bytes; off += h2d_bytes)
    LARDER_CUDA_CHECK(cudaMemcpyAsync(src.as<uint8_t>() + off, host.get(), h2d_bytes, cudaMemcpyHostToDevice, s));
  LARDER_ASSIGN_OR_RETURN(double d2d_ms, time_ms(s, [&]() -> Status {
    LARDER_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), copy_bytes, cudaMemcpyDeviceToDevice, s));
    return Status::ok();
  }));
  c.d2d_gb_s = 2.0 * double(copy_bytes) / (d2d_ms * 1e-3) / 1e9;
  LARDER_ASSIGN_OR_RETURN(double h2d_ms, time_ms(s, [&]() -> Status {
    LARDER_CUDA_CHECK(cudaMemcpyAsync(dst.get(), host.get(), h2d_bytes, cudaMemcpyHostToDevice, s));
    return Status::ok();
  }));
  c.h2d_gb_s = double(h2d_bytes) / (h2d_ms * 1e-3) / 1e9;

  // GEMM 8192^3: A, B random F16 in (-1, 1), C F32.
  const int n = 8192;
  const size_t ab_bytes = size_t(n) * n * 2;
  std::vector<uint16_t> h(size_t(n) * n);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& v : h) v = fp32_to_fp16(u(rng));
  cuda::DeviceBuffer a, b, out;
  LARDER_RETURN_IF_ERROR(a.allocate(ab_bytes, "ceiling gemm"));
  LARDER_RETURN_IF_ERROR(b.allocate(ab_bytes, "ceiling gemm"));
  LARDER_RETURN_IF_ERROR(out.allocate(size_t(n) * n * 4, "ceiling gemm"));
  LARDER_CUDA_CHECK(cudaMemcpy(a.get(), h.data(), ab_bytes, cudaMemcpyHostToDevice));
  std::reverse(h.begin(), h.end());
  LARDER_CUDA_CHECK(cudaMemcpy(b.get(), h.data(), ab_bytes, cudaMemcpyHostToDevice));
  cuda::CublasHandle blas;
  LARDER_RETURN_IF_ERROR(blas.create(s));
  const float alpha = 1.0f, beta = 0.0f;
  LARDER_ASSIGN_OR_RETURN(double gemm_ms, time_ms(s, [&]() -> Status {
    LARDER_CUBLAS_CHECK(cublasGemmEx(blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &alpha, a.get(), CUDA_R_16F, n,
                                     b.get(), CUDA_R_16F, n, &beta, out.get(), CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
    return Status::ok();
  }));
  c.gemm_tflop_s = 2.0 * double(n) * n * n / (gemm_ms * 1e-3) / 1e12;
  LARDER_CUDA_CHECK(cudaStreamSynchronize(s));
  return c;
}

}  // namespace larder
