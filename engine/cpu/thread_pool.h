// A small fixed thread pool for the CPU forward pass: the calling thread plus
// n_threads - 1 workers share one job, cut into chunks that each thread takes
// from an atomic counter as it frees up (as llama.cpp's ggml threadpool hands
// out matmul row chunks). A thread that the OS preempts holds up the job by
// at most the chunk it is in, not by a fixed share of the work.
//
// Workers spin briefly after a job (the next matmul usually follows within
// microseconds), then block on a condition variable so an idle daemon does
// not burn a core. The pool is driven by one thread at a time (the engine
// thread); parallel_for is not reentrant.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace larder {

class ThreadPool {
 public:
  // Chunks per thread that parallel_for aims for: enough that a preempted
  // thread leaves little behind, few enough that the atomic counter is cheap.
  static constexpr int64_t kChunksPerThread = 8;

  // n_threads >= 1 counts the calling thread: n_threads - 1 workers start.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Cuts [0, n_items) into chunks whose boundaries are multiples of `grain`
  // (except the end), about kChunksPerThread per thread, and calls
  // fn(begin, end, thread) once per chunk on whichever thread takes it; the
  // calling thread takes chunks too. Returns when every chunk is done. With
  // one thread, or when n_items <= grain, fn(0, n_items, 0) runs on the
  // calling thread only. thread in [0, n_threads) names the thread running
  // the chunk (for per-thread scratch); 0 is the caller. Which thread runs
  // which chunk varies from call to call.
  template <typename Fn>
  void parallel_for(int64_t n_items, int64_t grain, Fn&& fn) {
    parallel_chunks(n_items, chunk_size(n_items, grain), std::forward<Fn>(fn));
  }

  // As parallel_for with an explicit chunk size (>= 1, in items): chunks are
  // [i * chunk, min(n_items, (i + 1) * chunk)).
  template <typename Fn>
  void parallel_chunks(int64_t n_items, int64_t chunk, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run(n_items, chunk,
        [](void* ctx, int64_t b, int64_t e, int thread) { (*static_cast<F*>(ctx))(b, e, thread); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // The chunk parallel_for uses: n_items / (n_threads * kChunksPerThread)
  // rounded up to a multiple of grain (>= grain).
  int64_t chunk_size(int64_t n_items, int64_t grain) const;

 private:
  using RangeFn = void (*)(void* ctx, int64_t begin, int64_t end, int thread);
  void run(int64_t n_items, int64_t chunk, RangeFn fn, void* ctx);
  void worker_main(int index);
  // Takes chunks of the current job until none is left; thread names the caller.
  void work(int thread);

  int n_threads_ = 1;
  std::vector<std::thread> workers_;

  // The current job; written by the caller before ticket_ is published and
  // unchanged until all of its chunks are done.
  RangeFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_items_ = 0;
  int64_t chunk_ = 0;

  // (n_chunks << 32) | next chunk to take. A thread owns chunk i once its
  // compare-exchange moves the counter from i to i + 1 with i < n_chunks, so
  // a worker that wakes after the job is finished takes nothing and never
  // reads a later job's fields before that job is published.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<int64_t> n_chunks_done_{0};  // chunks of the current job finished
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace larder
