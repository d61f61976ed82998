// PoolJob: a response computed on libuv's thread pool (uv_queue_work), for
// handlers that call something that blocks — the engine's admin calls
// (Generator::cache_report, pin, evict), tokenizing and rendering an admin
// request's prompt, re-reading the config file — so that the loop thread
// never waits. `work` runs on a pool thread and returns the whole response;
// the next pump() on the loop thread sends it.
//
// Lifetime and threads: PoolTask (api/pool_task.h). An exception in `work`
// becomes a 500.
#pragma once

#include <uv.h>

#include <functional>
#include <memory>

#include "api/generation_job.h"
#include "api/http_message.h"
#include "api/pool_task.h"

namespace larder {

class PoolJob : public ResponseJob {
 public:
  using Work = std::function<HttpResponse()>;  // pool thread

  // Queues `work`; `waker` is woken when it is done. A failure to queue
  // answers 500 at the first pump(). `lane` (may be null): `work` waits for
  // a place in it (api/pool_lane.h).
  PoolJob(uv_loop_t* loop, std::shared_ptr<LoopWaker> waker, Work work, LaneEntry lane = {});

  void pump(ResponseWriter& writer) override;
  bool done() const override { return done_; }

 private:
  PoolTask<HttpResponse> task_;
  bool done_ = false;
};

// Runs `work` on `loop`'s pool with nobody waiting for it (SIGHUP's reload):
// its result is its own business (logging). Returns a libuv error code.
int run_detached_on_pool(uv_loop_t* loop, std::function<void()> work);

}  // namespace larder
