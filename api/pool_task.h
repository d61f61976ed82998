// PoolTask<T>: one call run on libuv's thread pool (uv_queue_work) whose
// result the loop thread picks up: the machinery under PoolJob (an admin
// response) and PromptJob (a parsed, rendered, tokenized request).
//
// Lifetime: the queued work item shares the task's state. Destroying the
// task (the client went away, shutdown) cancels work that has not started
// and makes a running one's result be dropped when it arrives; running work
// also sees cancel_requested() (storage/cancel.h) turn true, so long steps
// can stop early. The loop
// does not end while work is in flight (libuv keeps it alive), so `work`
// may use objects that live as long as the server.
//
// Threads: constructed, polled and destroyed on the loop thread; `work`
// runs on a pool thread and must only touch thread-safe state. When it is
// done, `waker` is woken (the server then pumps its connections).
#pragma once

#include <uv.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "api/generation_job.h"
#include "api/pool_lane.h"
#include "storage/cancel.h"

namespace larder {

template <typename T>
class PoolTask {
 public:
  using Work = std::function<T()>;
  // The result for a failure: an exception out of `work` (its what()), or
  // work that could not be queued ("cannot queue the request: ...").
  using OnError = T (*)(const std::string& what);

  // `lane.lane` (may be null; must outlive the loop's pool work): the work
  // is queued when the lane admits it, and leaves the lane when it is over.
  PoolTask(uv_loop_t* loop, std::shared_ptr<LoopWaker> waker, Work work, OnError on_error, LaneEntry lane = {})
      : state_(std::make_shared<State>()) {
    state_->work = std::move(work);
    state_->waker = std::move(waker);
    state_->on_error = on_error;
    state_->lane = lane.lane;
    if (lane.lane == nullptr) {
      queue(loop, state_);
      return;
    }
    lane_ticket_ = lane.lane->enter([loop, state = state_] { queue(loop, state); }, lane.bytes);
  }
  ~PoolTask() {
    state_->abandoned = true;
    state_->cancelled.store(true, std::memory_order_relaxed);  // running work may stop early
    // Still waiting for the lane: never queued.
    if (lane_ticket_ != 0) state_->lane->cancel(lane_ticket_);
    // Not started yet: never run it (after() still runs, with UV_ECANCELED).
    if (state_->item) uv_cancel(reinterpret_cast<uv_req_t*>(state_->item));
  }
  PoolTask(const PoolTask&) = delete;
  PoolTask& operator=(const PoolTask&) = delete;

  // Whether the result is ready (after() ran on the loop thread).
  bool finished() const { return state_->finished && state_->result.has_value(); }
  // The result, once; requires finished().
  T take() {
    T out = std::move(*state_->result);
    state_->result.reset();
    return out;
  }

 private:
  struct State {
    Work work;                          // run once on the pool, then released
    std::shared_ptr<LoopWaker> waker;
    OnError on_error = nullptr;
    PoolLane* lane = nullptr;           // left in after() (or when queueing fails)
    std::optional<T> result;            // written by the pool thread before after()
    bool finished = false;              // loop thread: after() ran
    bool abandoned = false;             // loop thread: the task is gone
    std::atomic<bool> cancelled{false};  // set with `abandoned`; read by the work (cancel_requested())
    uv_work_t* item = nullptr;          // loop thread: the queued item, until after()
  };
  struct Item {
    uv_work_t req{};
    std::shared_ptr<State> state;
  };

  // Loop thread: hands the work to the pool (admitted by the lane, if any).
  static void queue(uv_loop_t* loop, const std::shared_ptr<State>& state) {
    auto item = std::make_unique<Item>();
    item->req.data = item.get();
    item->state = state;
    const int rc = uv_queue_work(loop, &item->req, &PoolTask::run, &PoolTask::after);
    if (rc != 0) {
      state->result = state->on_error(std::string("cannot queue the request: ") + uv_strerror(rc));
      state->finished = true;
      if (state->lane) state->lane->leave();
      if (!state->abandoned && state->waker) state->waker->wake();
      return;
    }
    state->item = &item.release()->req;  // freed by after()
  }

  static void run(uv_work_t* req) {
    State& st = *static_cast<Item*>(req->data)->state;
    CancelScope scope(&st.cancelled);
    try {
      st.result = st.work();
    } catch (const std::exception& e) {
      spdlog::error("api: work on the thread pool failed: {}", e.what());
      st.result = st.on_error(std::string("internal error: ") + e.what());
    } catch (...) {
      st.result = st.on_error("internal error");
    }
    st.work = nullptr;  // release what it captured (a request body) on the pool
#if defined(__GLIBC__)
    // A large body's preparation frees hundreds of MB (its JSON, a schema's
    // grammar text and rules) into this pool thread's malloc arena, which
    // glibc keeps mapped: give it back (found in hostile testing: RSS went
    // from 22 MB to 1.4 GB after heavy schema requests and stayed there).
    if (st.lane != nullptr) malloc_trim(0);
#endif
  }
  static void after(uv_work_t* req, int status) {
    std::unique_ptr<Item> item(static_cast<Item*>(req->data));
    State& st = *item->state;
    st.item = nullptr;
    st.finished = true;
    if (st.lane) st.lane->leave();
    if (status == UV_ECANCELED) return;  // destroyed before the work started
    if (!st.abandoned && st.waker) st.waker->wake();
  }

  std::shared_ptr<State> state_;
  uint64_t lane_ticket_ = 0;  // its place in state_->lane's queue (0: admitted at once; cancel() ignores an admitted one)
};

}  // namespace larder
