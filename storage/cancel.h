// Cooperative cancellation of long work on a pool thread (a request's JSON
// schema conversion and grammar compile): whoever runs the work opens a
// CancelScope over a flag another thread may set; long loops call
// cancel_requested() where stopping is cheap and return Status::cancelled.
// Found in hostile testing: a SIGTERM during 36 heavy json_schema requests
// waited 15.7 s (past the 10 s grace) for compiles whose clients were gone.
#pragma once

#include <atomic>

namespace larder {

namespace cancel_internal {
inline thread_local const std::atomic<bool>* current_flag = nullptr;
}  // namespace cancel_internal

// Makes `flag` this thread's cancel flag until the scope ends (scopes nest:
// the outer flag comes back). `flag` must outlive the scope.
class CancelScope {
 public:
  explicit CancelScope(const std::atomic<bool>* flag) : previous_(cancel_internal::current_flag) {
    cancel_internal::current_flag = flag;
  }
  ~CancelScope() { cancel_internal::current_flag = previous_; }
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  const std::atomic<bool>* previous_;
};

// Whether this thread's work has been cancelled (false outside any scope).
inline bool cancel_requested() {
  const std::atomic<bool>* f = cancel_internal::current_flag;
  return f != nullptr && f->load(std::memory_order_relaxed);
}

}  // namespace larder
