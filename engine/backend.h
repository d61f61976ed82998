// Backend: where the forward pass runs and where the bytes of the KV pages
// live (host memory for the CPU backend, one device pool for CUDA). The engine
// thread talks only to this interface; the page free list and the prefix
// index (PagePool / PrefixCache) always stay on the host.
//
// Page bytes cross the interface in the documented page layout
// (engine/kv/page_pool.h): for each layer a K block then a V block, each
// [page_size][kv_dim] values of the KV dtype. The page record on disk holds
// exactly these bytes, so a page written by one backend restores on the other
// (same KV dtype).
//
// Not thread-safe: owned and called by the engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "engine/cpu/forward.h"
#include "engine/kv/page_pool.h"
#include "engine/model/model.h"
#include "storage/status.h"

namespace larder {

struct BackendOptions {
  // "auto": CUDA when a device is present and passes the start-up check
  // (else the CPU, with the reason logged); "cuda": CUDA or an error; "cpu":
  // the CPU.
  std::string device = "auto";
  // The start-up check of the accelerator against the CPU
  // (engine/backend_check.h; config [engine] device_check). Off: the
  // accelerator serves unchecked.
  bool device_check = true;
  KvLayout layout;               // must match the model (n_layer, kv_dim)
  int n_pages = 0;               // KV pages in the pool (host or device)
  int n_threads = 0;             // CPU backend: worker threads, 0 = all cores
  int max_batch_tokens = 512;    // CUDA: scratch sized for this many tokens per step
  // CUDA: weight formats on the device (see docs/gpu.md).
  //   f32_weights: "f16" (default, tensor-core GEMMs) | "f32"
  //   q8_0_weights: "f16" (expanded at load; the only mode implemented)
  std::string f32_weights = "f16";
  std::string q8_0_weights = "f16";
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "cuda".
  virtual const char* name() const = 0;
  // One line for the log: device name, memory used.
  virtual std::string describe() const = 0;
  // The arithmetic that produces K/V (kernels and their version, the
  // instruction set used): part of the cache's root hash, so that pages
  // written by other kernels, which differ in the last bits, are never
  // restored in place of a cold prefill (engine/kv/prefix_hash.h).
  virtual std::string numerics_id() const = 0;

  const KvLayout& kv_layout() const { return pages().layout(); }
  int n_pages() const { return pages().n_pages(); }
  // The page free list (for PrefixCache). Its memory is host memory for the
  // CPU backend and absent (index only) for CUDA: use read_pages/write_pages.
  virtual PagePool& pages() = 0;
  virtual const PagePool& pages() const = 0;

  // Runs a batch (semantics of CpuForward::forward, engine/cpu/forward.h):
  // writes each token's K/V into its page, attends over its sequence's pages,
  // and writes logits_out [n_want][n_vocab] f32 on the host, rows in batch
  // order of the tokens with want_logits. Errors: kInvalidArgument (bad token,
  // pos, seq or page id), kInternal (device failure, with the call named).
  virtual Status forward(std::span<const BatchToken> batch, std::span<const SeqBlockTable> seqs,
                         bool prefill, float* logits_out) = 0;

  // Copies pages out to the host (spill, write-through): out holds
  // pages.size() * page_bytes bytes, page after page in the given order.
  // Returns once the bytes are in `out`. Errors: kInvalidArgument (size, page
  // id), kInternal (device copy failed).
  virtual Status read_pages(std::span<const int32_t> pages, std::span<uint8_t> out) = 0;
  // Copies pages in from the host (restore); `in` as for read_pages. The
  // bytes are visible to every later forward().
  virtual Status write_pages(std::span<const int32_t> pages, std::span<const uint8_t> in) = 0;

  Status read_page(int32_t page, std::span<uint8_t> out) {
    return read_pages(std::span<const int32_t>(&page, 1), out);
  }
  Status write_page(int32_t page, std::span<const uint8_t> in) {
    return write_pages(std::span<const int32_t>(&page, 1), in);
  }
};

// Number of CUDA devices usable by this process. Errors: kUnsupported when
// larder was built without CUDA; kNotFound when the driver or runtime fails
// (no driver, no device), with the CUDA error string.
Result<int> cuda_device_count();

// Ceilings of device 0 for the benchmark's rooflines, timed with CUDA events
// after warm-up, median of repeats (docs/gpu.md).
struct DeviceCeilings {
  std::string device_name;
  double d2d_gb_s = 0;      // device-to-device copy, bytes read + written per second / 1e9
  double h2d_gb_s = 0;      // pinned host -> device copy
  double gemm_tflop_s = 0;  // cublasGemmEx 8192^3, F16 in, F32 out, FP32 accumulate
};
// Errors: as cuda_device_count; kIOError when a measurement's CUDA call fails.
Result<DeviceCeilings> measure_cuda_ceilings();

// OK when the CUDA backend computes everything this model needs; otherwise
// kUnsupported naming what it lacks (QKV/output biases, Q/K norm, RoPE
// frequency factors or scaling). device = "auto" then runs on the CPU.
Status cuda_supports_model(const LlamaHparams& hp);

// The CPU passes the start-up check compares with (engine/backend_check.h,
// CpuForwardOptions::reference): the weights read in place and dequantized
// to f32 a few rows at a time, on the activations rounded as the serving CPU
// quantizes them (f32_activations false) or on f32 ones (true). Its
// numerics_id() is the CPU's with "-reference-int8" / "-reference-f32"
// appended. options.layout and n_pages as for the CPU backend. Errors: as
// CpuForward::create and PagePool::create (kInvalidArgument for a layout
// that does not match the model, kUnsupported for a weight type the CPU
// lacks).
Result<std::unique_ptr<Backend>> create_cpu_reference(const Model& model, const BackendOptions& options,
                                                      bool f32_activations);

// The accelerator that create_backend tries for "auto" and "cuda": CUDA in
// larderd (cuda_accelerator()); tests give a stand-in (a CPU backend made to
// err) to check the choices create_backend makes.
struct Accelerator {
  std::string name = "cuda";
  // Usable devices; an error when the runtime is missing (as cuda_device_count).
  std::function<Result<int>()> device_count;
  // OK when the backend computes everything the model needs; else
  // kUnsupported naming what it lacks ("auto" then runs on the CPU).
  std::function<Status(const Model&)> supports;
  // Makes the backend; its errors are create_backend's (kResourceExhausted
  // when the weights or the KV pool do not fit, kUnsupported for a setting it
  // lacks, kInternal for a device failure).
  std::function<Result<std::unique_ptr<Backend>>(const Model&, const BackendOptions&)> create;
};
// CUDA: cuda_device_count, cuda_supports_model, and the CUDA backend
// (kUnsupported from create in a build without CUDA).
Accelerator cuda_accelerator();

// Creates the backend options.device names.
//   "cpu": the CPU backend.
//   "auto": the accelerator's backend when it has a device, supports the
//     model, is created and passes its start-up check against the CPU
//     (check_backend, engine/backend_check.h; unless options.device_check is
//     false; the result is logged); at the first of these that fails, the
//     reason is logged and the CPU backend is made instead.
//   "cuda": the same without the fallback: each failure is an error.
// Errors: kInvalidArgument (a device name other than these three; a layout
// that does not match the model), and for "cuda": the device count's error,
// kNotFound (no device), kUnsupported (a model or setting it cannot
// compute; a build without CUDA), the accelerator's creation errors
// (kResourceExhausted when the weights or the pool do not fit), the check's
// own errors when it cannot run (kInvalidArgument for a pool with too few
// pages for it), and kInternal when the check fails, with its numbers. The
// CPU backend's errors in every mode.
Result<std::unique_ptr<Backend>> create_backend(const Model& model, const BackendOptions& options,
                                                const Accelerator& accelerator);
Result<std::unique_ptr<Backend>> create_backend(const Model& model, const BackendOptions& options);

}  // namespace larder
