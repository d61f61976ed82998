#include "engine/cpu/thread_pool.h"

#include <algorithm>
#include <limits>

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

constexpr uint64_t kIndexMask = 0xFFFFFFFFull;

bool has_chunk(uint64_t ticket) { return (ticket & kIndexMask) < (ticket >> 32); }
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(n_threads_ - 1);
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

int64_t ThreadPool::chunk_size(int64_t n_items, int64_t grain) const {
  grain = std::max<int64_t>(1, grain);
  const int64_t n_chunks = int64_t(n_threads_) * kChunksPerThread;
  const int64_t chunk = (n_items + n_chunks - 1) / n_chunks;
  return std::max(grain, (chunk + grain - 1) / grain * grain);
}

void ThreadPool::run(int64_t n_items, int64_t chunk, RangeFn fn, void* ctx) {
  if (n_items <= 0) return;
  chunk = std::max<int64_t>(1, chunk);
  if (n_threads_ == 1 || n_items <= chunk) {
    fn(ctx, 0, n_items, 0);
    return;
  }
  // The ticket holds the chunk count in 32 bits.
  constexpr int64_t kMaxChunks = int64_t(std::numeric_limits<uint32_t>::max());
  chunk = std::max(chunk, (n_items + kMaxChunks - 1) / kMaxChunks);
  const int64_t n_chunks = (n_items + chunk - 1) / chunk;
  fn_ = fn;
  ctx_ = ctx;
  n_items_ = n_items;
  chunk_ = chunk;
  n_chunks_done_.store(0, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket_.store(uint64_t(n_chunks) << 32, std::memory_order_release);
  }
  cv_.notify_all();

  work(0);
  int spins = 0;
  while (n_chunks_done_.load(std::memory_order_acquire) < n_chunks) {
    if (++spins < kSpinIterations) {
      LARDER_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::work(int thread) {
  uint64_t t = ticket_.load(std::memory_order_acquire);
  while (has_chunk(t)) {
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel,
                                       std::memory_order_acquire))
      continue;  // t now holds the current value
    // Chunk i is ours: the job cannot finish (nor its fields change) before we count it done.
    const int64_t b = int64_t(t & kIndexMask) * chunk_;
    fn_(ctx_, b, std::min(n_items_, b + chunk_), thread);
    n_chunks_done_.fetch_add(1, std::memory_order_acq_rel);
    t = ticket_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_main(int index) {
  for (;;) {
    // Wait for a chunk to take: spin first, then block.
    bool ready = has_chunk(ticket_.load(std::memory_order_acquire));
    for (int i = 0; !ready && i < kSpinIterations; ++i) {
      LARDER_CPU_RELAX();
      ready = has_chunk(ticket_.load(std::memory_order_acquire));
    }
    if (!ready) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return stop_.load(std::memory_order_acquire) ||
               has_chunk(ticket_.load(std::memory_order_acquire));
      });
    }
    if (stop_.load(std::memory_order_acquire)) return;
    work(index);
  }
}

}  // namespace larder
