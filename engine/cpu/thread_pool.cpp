#include "engine/cpu/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define LARDER_CPU_RELAX() _mm_pause()
#else
#define LARDER_CPU_RELAX() std::this_thread::yield()
#endif

namespace larder {

namespace {
// Pause iterations a worker spins for the next job before it blocks: about
// 30-60 us on current x86 (a pause is ~40-140 cycles), long enough to bridge
// the gap between the matmuls of one forward call.
constexpr int kSpinIterations = 1000;
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(n_threads_ - 1);
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    gen_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::range_of(int index, int64_t* begin, int64_t* end) const {
  *begin = std::min(n_items_, int64_t(index) * chunk_);
  *end = std::min(n_items_, *begin + chunk_);
}

void ThreadPool::run(int64_t n_items, int64_t grain, RangeFn fn, void* ctx) {
  if (n_items <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (n_threads_ == 1 || n_items <= grain) {
    fn(ctx, 0, n_items, 0);
    return;
  }
  // chunk: ceil(n_items / n_threads) rounded up to a multiple of grain.
  int64_t chunk = (n_items + n_threads_ - 1) / n_threads_;
  chunk = (chunk + grain - 1) / grain * grain;
  fn_ = fn;
  ctx_ = ctx;
  n_items_ = n_items;
  chunk_ = chunk;
  n_done_.store(0, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    gen_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();

  int64_t b, e;
  range_of(0, &b, &e);
  if (b < e) fn(ctx, b, e, 0);

  const int n_workers = n_threads_ - 1;
  int spins = 0;
  while (n_done_.load(std::memory_order_acquire) < n_workers) {
    if (++spins < kSpinIterations) {
      LARDER_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::worker_main(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Wait for a new generation: spin first, then block.
    uint64_t g = gen_.load(std::memory_order_acquire);
    for (int i = 0; g == seen && i < kSpinIterations; ++i) {
      LARDER_CPU_RELAX();
      g = gen_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return gen_.load(std::memory_order_acquire) != seen; });
      g = gen_.load(std::memory_order_acquire);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = g;
    int64_t b, e;
    range_of(index, &b, &e);
    if (b < e) fn_(ctx_, b, e, index);
    n_done_.fetch_add(1, std::memory_order_acq_rel);
  }
}

}  // namespace larder
