// PoolLane: at most `capacity` tasks of one kind on libuv's thread pool at
// once; the others wait, first come first served, and start as running ones
// finish. The server puts the preparation of large request bodies in a lane
// (api/router.h) so that the pool always keeps threads for small requests
// and admin calls: a body's template rendering, tokenizing and grammar
// compile take time in proportion to its size, and enough large ones
// (twenty 2 MB json_schema bodies) once held every pool thread while a
// one-line chat waited behind them.
//
// Threads: loop thread only. A task that entered must call leave() exactly
// once when its pool work is over (PoolTask does: api/pool_task.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <utility>

namespace larder {

class PoolLane {
 public:
  explicit PoolLane(size_t capacity) : capacity_(std::max<size_t>(1, capacity)) {}
  PoolLane(const PoolLane&) = delete;
  PoolLane& operator=(const PoolLane&) = delete;

  // Runs `start` now when fewer than capacity tasks run and none waits
  // (returns 0), else queues it and returns a ticket for cancel(). `bytes`:
  // what the task holds while it waits (its request body), counted in
  // waiting_bytes().
  uint64_t enter(std::function<void()> start, size_t bytes = 0) {
    if (running_ < capacity_ && waiting_.empty()) {
      ++running_;
      start();
      return 0;
    }
    waiting_.push_back({next_ticket_, bytes, std::move(start)});
    waiting_bytes_ += bytes;
    return next_ticket_++;
  }
  // A waiting task leaves without starting (its client went away). False
  // when `ticket` is not waiting (0, started, or cancelled already).
  bool cancel(uint64_t ticket) {
    auto it = std::find_if(waiting_.begin(), waiting_.end(), [&](const Waiting& w) { return w.ticket == ticket; });
    if (it == waiting_.end()) return false;
    waiting_bytes_ -= it->bytes;
    waiting_.erase(it);
    return true;
  }
  // A running task is over: the next waiting ones start. (A start that
  // fails at once may call leave() from inside itself.)
  void leave() {
    --running_;
    while (running_ < capacity_ && !waiting_.empty()) {
      std::function<void()> start = std::move(waiting_.front().start);
      waiting_bytes_ -= waiting_.front().bytes;
      waiting_.pop_front();
      ++running_;
      start();
    }
  }

  size_t capacity() const { return capacity_; }
  size_t running() const { return running_; }
  size_t waiting() const { return waiting_.size(); }
  size_t waiting_bytes() const { return waiting_bytes_; }

 private:
  struct Waiting {
    uint64_t ticket;
    size_t bytes;
    std::function<void()> start;
  };
  size_t capacity_;
  size_t running_ = 0;
  size_t waiting_bytes_ = 0;
  uint64_t next_ticket_ = 1;
  std::deque<Waiting> waiting_;
};

// A lane and what a task entering it holds (PoolTask's argument).
struct LaneEntry {
  PoolLane* lane = nullptr;  // null: straight to the pool
  size_t bytes = 0;
};

}  // namespace larder
