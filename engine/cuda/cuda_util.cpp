#include "engine/cuda/cuda_util.h"

#include <spdlog/spdlog.h>

#include "engine/cuda/plan/memory_plan.h"

namespace larder::cuda {

namespace {

const char* cublas_status_name(cublasStatus_t st) {
  switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_?";
}

std::string where(const char* file, int line) {
  std::string f(file);
  const size_t at = f.rfind("engine/cuda/");
  if (at != std::string::npos) f = f.substr(at);
  return f + ":" + std::to_string(line);
}

}  // namespace

Status cuda_status(cudaError_t err, const char* call, const char* file, int line) {
  std::string msg = std::string(call) + " failed: " + cudaGetErrorName(err) + " (" +
                    cudaGetErrorString(err) + ") at " + where(file, line);
  if (err == cudaErrorMemoryAllocation) return Status::resource_exhausted(std::move(msg));
  return Status::io_error(std::move(msg));
}

Status cublas_status(cublasStatus_t st, const char* call, const char* file, int line) {
  std::string msg = std::string(call) + " failed: " + cublas_status_name(st) + " at " + where(file, line);
  if (st == CUBLAS_STATUS_ALLOC_FAILED) return Status::resource_exhausted(std::move(msg));
  return Status::io_error(std::move(msg));
}

void warn_release_failed(const char* call, cudaError_t err) {
  spdlog::warn("{}: {}", call, cudaGetErrorString(err));
}

Status DeviceAlloc::failure(size_t bytes, const char* what, cudaError_t err) {
  size_t free_b = 0, total_b = 0;
  (void)cudaMemGetInfo(&free_b, &total_b);
  return Status::resource_exhausted(std::string("GPU memory for ") + what + ": cudaMalloc of " +
                                    std::to_string(bytes) + " bytes (" + cuda_plan::format_bytes(bytes) +
                                    ") failed: " + cudaGetErrorString(err) + "; free " +
                                    cuda_plan::format_bytes(free_b) + " of " + cuda_plan::format_bytes(total_b));
}

Status PinnedAlloc::failure(size_t bytes, const char* what, cudaError_t err) {
  return Status::resource_exhausted(std::string("pinned host memory for ") + what + ": " +
                                    std::to_string(bytes) + " bytes: " + cudaGetErrorString(err));
}

Stream::~Stream() {
  if (s_ != nullptr) (void)cudaStreamDestroy(s_);
}
Status Stream::create() {
  LARDER_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
  return Status::ok();
}

Event::~Event() {
  if (e_ != nullptr) (void)cudaEventDestroy(e_);
}
Status Event::create(bool timing) {
  LARDER_CUDA_CHECK(cudaEventCreateWithFlags(&e_, timing ? cudaEventDefault : cudaEventDisableTiming));
  return Status::ok();
}

CublasHandle::~CublasHandle() {
  if (h_ != nullptr) (void)cublasDestroy(h_);
}
Status CublasHandle::create(cudaStream_t stream) {
  LARDER_CUBLAS_CHECK(cublasCreate(&h_));
  LARDER_CUBLAS_CHECK(cublasSetStream(h_, stream));
  return Status::ok();
}

}  // namespace larder::cuda
