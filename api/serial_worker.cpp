#include "api/serial_worker.h"

#include <atomic>
#include <exception>
#include <optional>

#include <spdlog/spdlog.h>

#include "api/openai_response.h"

namespace larder {

SerialWorker::SerialWorker() : thread_([this] { run(); }) {}

SerialWorker::~SerialWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    tasks_.clear();
  }
  cv_.notify_all();
  thread_.join();
}

void SerialWorker::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void SerialWorker::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
    if (stopping_) return;
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    task = nullptr;  // its captures go on this thread, unlocked
    lock.lock();
  }
}

struct SerialJob::State {
  Work work;                          // run once on the worker, then released
  std::shared_ptr<LoopWaker> waker;
  std::atomic<bool> abandoned{false};  // the job is gone: skip the work, drop the result
  // Whether the work began: the worker and withdraw() race for it.
  enum Phase : int { kQueued, kRunning, kWithdrawn };
  std::atomic<int> phase{kQueued};
  std::mutex mu;
  std::optional<HttpResponse> result;  // guarded by mu
};

SerialJob::SerialJob(SerialWorker& worker, std::shared_ptr<LoopWaker> waker, Work work)
    : state_(std::make_shared<State>()) {
  state_->work = std::move(work);
  state_->waker = std::move(waker);
  worker.post([st = state_] {
    int queued = State::kQueued;
    if (st->abandoned.load() || !st->phase.compare_exchange_strong(queued, State::kRunning)) return;
    HttpResponse r;
    try {
      r = st->work();
    } catch (const std::exception& e) {
      spdlog::error("api: an admin job failed: {}", e.what());
      r = error_response(ApiError::server(std::string("internal error: ") + e.what()));
    } catch (...) {
      r = error_response(ApiError::server("internal error"));
    }
    st->work = nullptr;
    {
      std::lock_guard<std::mutex> lock(st->mu);
      st->result = std::move(r);
    }
    if (!st->abandoned.load() && st->waker) st->waker->wake();
  });
}

SerialJob::~SerialJob() { state_->abandoned.store(true); }

bool SerialJob::withdraw() {
  int phase = State::kQueued;
  // Withdrawn now, or earlier (phase then holds what it was).
  return state_->phase.compare_exchange_strong(phase, State::kWithdrawn) || phase == State::kWithdrawn;
}

void SerialJob::pump(ResponseWriter& writer) {
  if (done_) return;
  std::optional<HttpResponse> r;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->result) return;
    r = std::move(state_->result);
    state_->result.reset();
  }
  done_ = true;
  writer.send(std::move(*r));
}

}  // namespace larder
