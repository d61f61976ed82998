// Device memory sizing and page-copy scheduling for the CUDA backend, in
// plain C++ (no CUDA headers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/cuda/plan/weight_plan.h"
#include "engine/model/model.h"
#include "storage/status.h"

namespace larder::cuda_plan {

// The output head runs on at most this many rows at once; the logits buffer
// holds kMaxLogitRows x n_vocab f32 (a prefill chunk of 512 tokens wanting
// every row would otherwise need 512 x n_vocab x 4 bytes).
constexpr int kMaxLogitRows = 64;

// Activation scratch of one forward step of up to max_tokens tokens, bytes:
//   x        f32     [n][n_embd]        residual stream
//   xb       compute [n][max(n_embd, q_dim)]  rmsnorm / attention output (matmul input)
//   q        f32     [n][q_dim]
//   k, v     f32     [n][kv_dim] each
//   gate, up f32     [n][n_ff] each
//   hb       compute [n][n_ff]          swiglu output (ffn_down input)
//   logits   f32     [kMaxLogitRows][n_vocab]
// each part rounded up to 256 bytes.
size_t activation_scratch_bytes(const LlamaHparams& hp, int max_tokens, DeviceType compute);

struct DeviceMemoryRequest {
  size_t weight_bytes = 0;
  size_t scratch_bytes = 0;
  size_t page_bytes = 0;
  int64_t n_pages = 0;
  size_t reserve_bytes = size_t(512) << 20;  // CUDA context, cuBLAS workspace, fragmentation
  size_t free_bytes = 0;                     // cudaMemGetInfo
  size_t total_bytes = 0;
};

// OK when weights + scratch + n_pages * page_bytes + reserve fit in
// free_bytes; else kResourceExhausted naming every term in bytes and GiB and
// the largest KV pool (cache.device.budget) that would fit.
Status check_device_memory(const DeviceMemoryRequest& r);

// A contiguous device range to copy: pages [first_page, first_page + n_pages)
// of the device pool <-> host bytes at host_offset (index in the caller's
// page list times page_bytes).
struct PageCopyRun {
  int32_t first_page = 0;
  int32_t n_pages = 0;
  size_t host_offset = 0;
};

// Merges consecutive entries of `pages` whose ids increase by one into runs
// of at most max_run_pages pages, in list order (one cudaMemcpyAsync each;
// a restored prefix usually gets consecutive page ids from the free list).
std::vector<PageCopyRun> plan_page_copies(std::span<const int32_t> pages, size_t page_bytes,
                                          int max_run_pages);

// "1.50 GiB" style rendering for messages.
std::string format_bytes(size_t bytes);

}  // namespace larder::cuda_plan
