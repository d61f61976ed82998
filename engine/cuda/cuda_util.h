// Checked CUDA / cuBLAS calls and RAII handles for every CUDA resource the
// backend owns. Private to engine/cuda/ (includes the CUDA headers).
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "storage/status.h"

namespace larder::cuda {

Status cuda_status(cudaError_t err, const char* call, const char* file, int line);
Status cublas_status(cublasStatus_t st, const char* call, const char* file, int line);

}  // namespace larder::cuda

// Evaluates a CUDA runtime call; on error returns a Status naming the call,
// the error name and string (kResourceExhausted for cudaErrorMemoryAllocation,
// kIOError otherwise) from the enclosing function.
#define LARDER_CUDA_CHECK(call)                                                       \
  do {                                                                                \
    const cudaError_t larder_cuda_err_ = (call);                                      \
    if (larder_cuda_err_ != cudaSuccess)                                              \
      return ::larder::cuda::cuda_status(larder_cuda_err_, #call, __FILE__, __LINE__); \
  } while (0)

#define LARDER_CUBLAS_CHECK(call)                                                        \
  do {                                                                                   \
    const cublasStatus_t larder_cublas_st_ = (call);                                     \
    if (larder_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                      \
      return ::larder::cuda::cublas_status(larder_cublas_st_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: the launch error (bad configuration), if any.
#define LARDER_CUDA_CHECK_LAUNCH(what) LARDER_CUDA_CHECK((static_cast<void>(what), cudaGetLastError()))

namespace larder::cuda {

// Logs a failed cudaFree / cudaFreeHost (nothing else can be done about it).
void warn_release_failed(const char* call, cudaError_t err);

// Memory from one CUDA allocator, freed on destruction; move-only.
// Alloc: static cudaError_t allocate(void**, size_t), static cudaError_t
// release(void*), static Status failure(size_t bytes, const char* what,
// cudaError_t) and kReleaseCall (for the log line of a failed release).
template <typename Alloc>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  CudaBuffer(CudaBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  CudaBuffer& operator=(CudaBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  ~CudaBuffer() { reset(); }
  // Errors: kResourceExhausted naming `what` and the size.
  Status allocate(size_t bytes, const char* what) {
    reset();
    if (bytes == 0) return Status::ok();
    const cudaError_t err = Alloc::allocate(&ptr_, bytes);
    if (err != cudaSuccess) {
      ptr_ = nullptr;
      (void)cudaGetLastError();  // clear the (non-sticky) allocation error
      return Alloc::failure(bytes, what, err);
    }
    bytes_ = bytes;
    return Status::ok();
  }
  void reset() {
    if (ptr_ != nullptr) {
      const cudaError_t err = Alloc::release(ptr_);
      if (err != cudaSuccess) warn_release_failed(Alloc::kReleaseCall, err);
    }
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* get() const { return ptr_; }
  template <typename T> T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Device memory (cudaMalloc / cudaFree).
struct DeviceAlloc {
  static cudaError_t allocate(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
  static cudaError_t release(void* p) { return cudaFree(p); }
  static Status failure(size_t bytes, const char* what, cudaError_t err);  // with free/total GPU memory
  static constexpr const char* kReleaseCall = "cudaFree";
};
using DeviceBuffer = CudaBuffer<DeviceAlloc>;

// Page-locked host memory (cudaMallocHost / cudaFreeHost).
struct PinnedAlloc {
  static cudaError_t allocate(void** p, size_t bytes) { return cudaMallocHost(p, bytes); }
  static cudaError_t release(void* p) { return cudaFreeHost(p); }
  static Status failure(size_t bytes, const char* what, cudaError_t err);
  static constexpr const char* kReleaseCall = "cudaFreeHost";
};
using PinnedBuffer = CudaBuffer<PinnedAlloc>;

class Stream {
 public:
  Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();
  Status create();  // non-blocking with respect to the legacy default stream
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();
  Status create(bool timing = false);
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

class CublasHandle {
 public:
  CublasHandle() = default;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle();
  Status create(cudaStream_t stream);
  cublasHandle_t get() const { return h_; }

 private:
  cublasHandle_t h_ = nullptr;
};

}  // namespace larder::cuda
