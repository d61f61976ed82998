// SerialWorker: one thread of its own that runs tasks one at a time, in the
// order they were posted. The admin changes (pin, unpin, evict, reload) run
// here rather than on libuv's pool: each may block for long (a pin waits
// for its prompt to be computed behind other requests, up to 10 minutes; a
// reload reads a file and waits for the engine), and libuv's pool has only
// four threads, which every chat and completion request needs to build its
// prompt (api/prompt_job.h). Seen in hostile testing: four SIGHUPs while
// the config file could not be read to its end (a FIFO) left no pool
// thread, and every new chat request hung.
//
// SerialJob is PoolJob's counterpart on a SerialWorker: `work` runs on the
// worker thread and returns the whole response, which the next pump() on the
// loop thread sends. Destroying the job before its work started skips the
// work; a running one finishes and its result is dropped. An exception in
// `work` becomes a 500.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "api/generation_job.h"
#include "api/http_message.h"

namespace larder {

class SerialWorker {
 public:
  SerialWorker();
  // Waits for the running task, drops those not started, joins.
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // Any thread. Tasks must not throw (post_job's wrapper catches).
  void post(std::function<void()> task);

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

class SerialJob : public ResponseJob {
 public:
  using Work = std::function<HttpResponse()>;  // worker thread

  // Posts `work` to `worker`; `waker` is woken when it is done.
  SerialJob(SerialWorker& worker, std::shared_ptr<LoopWaker> waker, Work work);
  ~SerialJob() override;
  SerialJob(const SerialJob&) = delete;
  SerialJob& operator=(const SerialJob&) = delete;

  void pump(ResponseWriter& writer) override;
  bool done() const override { return done_; }
  bool withdraw() override;  // false once the work began (it runs to its end)

  struct State;  // shared with the task (api/serial_worker.cpp)

 private:
  std::shared_ptr<State> state_;
  bool done_ = false;
};

}  // namespace larder
