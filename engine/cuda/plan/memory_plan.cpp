#include "engine/cuda/plan/memory_plan.h"

#include <algorithm>
#include <cstdio>

namespace larder::cuda_plan {

namespace {
size_t round256(size_t b) { return (b + 255) / 256 * 256; }
}  // namespace

size_t activation_scratch_bytes(const LlamaHparams& hp, int max_tokens, DeviceType compute) {
  const size_t n = size_t(std::max(1, max_tokens));
  const size_t c = device_type_bytes(compute);
  size_t b = 0;
  b += round256(n * size_t(hp.n_embd) * 4);                                  // x
  b += round256(n * size_t(std::max(hp.n_embd, hp.q_dim())) * c);            // xb
  b += round256(n * size_t(hp.q_dim()) * 4);                                 // q
  b += 2 * round256(n * size_t(hp.kv_dim()) * 4);                            // k, v
  b += 2 * round256(n * size_t(hp.n_ff) * 4);                                // gate, up
  b += round256(n * size_t(hp.n_ff) * c);                                    // hb
  b += round256(size_t(kMaxLogitRows) * size_t(hp.n_vocab) * 4);            // logits
  return b;
}

std::string format_bytes(size_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(size_t(1) << 30));
  return buf;
}

Status check_device_memory(const DeviceMemoryRequest& r) {
  const size_t pool = r.page_bytes * size_t(std::max<int64_t>(0, r.n_pages));
  const size_t need = r.weight_bytes + r.scratch_bytes + pool + r.reserve_bytes;
  if (need <= r.free_bytes) return Status::ok();
  const size_t fixed = r.weight_bytes + r.scratch_bytes + r.reserve_bytes;
  const size_t max_pool = r.free_bytes > fixed ? r.free_bytes - fixed : 0;
  const size_t max_pages = r.page_bytes > 0 ? max_pool / r.page_bytes : 0;
  auto term = [](const char* what, size_t b) {
    return std::string(what) + " " + std::to_string(b) + " bytes (" + format_bytes(b) + ")";
  };
  return Status::resource_exhausted(
      "GPU memory: need " + term("", need).substr(1) + " = " + term("weights", r.weight_bytes) +
      " + " + term("activations", r.scratch_bytes) + " + " + term("KV pool", pool) + " (" +
      std::to_string(r.n_pages) + " pages x " + std::to_string(r.page_bytes) + " bytes) + " +
      term("reserve", r.reserve_bytes) + "; the device has " + term("free", r.free_bytes) + " of " +
      std::to_string(r.total_bytes) + " bytes; the largest KV pool that fits is " +
      std::to_string(max_pages) + " pages (cache.device.budget <= " +
      std::to_string(max_pages * r.page_bytes) + " bytes)");
}

std::vector<PageCopyRun> plan_page_copies(std::span<const int32_t> pages, size_t page_bytes,
                                          int max_run_pages) {
  std::vector<PageCopyRun> runs;
  const int cap = std::max(1, max_run_pages);
  for (size_t i = 0; i < pages.size(); ++i) {
    if (!runs.empty()) {
      PageCopyRun& last = runs.back();
      if (pages[i] == last.first_page + last.n_pages && last.n_pages < cap) {
        ++last.n_pages;
        continue;
      }
    }
    runs.push_back(PageCopyRun{pages[i], 1, i * page_bytes});
  }
  return runs;
}

}  // namespace larder::cuda_plan
