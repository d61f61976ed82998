// A small fixed thread pool for the CPU forward pass: the calling thread plus
// n_threads - 1 workers split one job into contiguous ranges.
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
  // n_threads >= 1 counts the calling thread: n_threads - 1 workers start.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Splits [0, n_items) into at most n_threads contiguous ranges whose
  // boundaries are multiples of `grain` (except the end) and calls
  // fn(begin, end) for each, one range per thread, the calling thread taking
  // the first. Returns when every range is done. With one thread, or when
  // n_items <= grain, fn(0, n_items) runs on the calling thread only.
  // fn(begin, end, thread): thread in [0, n_threads) names the thread (for
  // per-thread scratch); 0 is the caller.
  template <typename Fn>
  void parallel_for(int64_t n_items, int64_t grain, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run(n_items, grain,
        [](void* ctx, int64_t b, int64_t e, int thread) { (*static_cast<F*>(ctx))(b, e, thread); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using RangeFn = void (*)(void* ctx, int64_t begin, int64_t end, int thread);
  void run(int64_t n_items, int64_t grain, RangeFn fn, void* ctx);
  void worker_main(int index);
  // The range of thread `index` for the current job.
  void range_of(int index, int64_t* begin, int64_t* end) const;

  int n_threads_ = 1;
  std::vector<std::thread> workers_;

  // The current job; written by the caller before gen_ is bumped.
  RangeFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_items_ = 0;
  int64_t chunk_ = 0;          // items per thread, a multiple of grain

  std::atomic<uint64_t> gen_{0};   // job generation, bumped under mu_
  std::atomic<int> n_done_{0};     // workers finished with the current gen
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace larder
