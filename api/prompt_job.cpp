#include "api/prompt_job.h"

#include <exception>

#include <spdlog/spdlog.h>

#include "api/openai_response.h"

namespace larder {

struct PromptJob::State {
  Prepare prepare;                          // run once on the pool, then released
  std::shared_ptr<LoopWaker> waker;
  std::optional<PreparedRequest> result;    // written by the pool thread before after_work
  bool finished = false;                    // loop thread: after_work ran
  bool abandoned = false;                   // loop thread: the job is gone
  uv_work_t* work = nullptr;                // loop thread: the queued item, until after_work
};

namespace {

struct WorkItem {
  uv_work_t req{};
  std::shared_ptr<PromptJob::State> state;
};

void run_prepare(uv_work_t* req) {
  auto* item = static_cast<WorkItem*>(req->data);
  PromptJob::State& st = *item->state;
  try {
    st.result = st.prepare();
  } catch (const std::exception& e) {
    spdlog::error("api: preparing a request failed: {}", e.what());
    st.result = ApiError::server(std::string("internal error: ") + e.what());
  } catch (...) {
    st.result = ApiError::server("internal error");
  }
  st.prepare = nullptr;  // release what it captured (the request body) on the pool
}

void after_prepare(uv_work_t* req, int status) {
  std::unique_ptr<WorkItem> item(static_cast<WorkItem*>(req->data));
  PromptJob::State& st = *item->state;
  st.work = nullptr;
  st.finished = true;
  if (status == UV_ECANCELED) return;  // the job was destroyed before the work started
  if (!st.abandoned && st.waker) st.waker->wake();
}

}  // namespace

PromptJob::PromptJob(uv_loop_t* loop, std::shared_ptr<LoopWaker> waker, Prepare prepare, Submit submit)
    : state_(std::make_shared<State>()), submit_(std::move(submit)) {
  state_->prepare = std::move(prepare);
  state_->waker = std::move(waker);
  auto item = std::make_unique<WorkItem>();
  item->req.data = item.get();
  item->state = state_;
  int rc = uv_queue_work(loop, &item->req, run_prepare, after_prepare);
  if (rc != 0) {
    state_->result = ApiError::server(std::string("cannot queue the request: ") + uv_strerror(rc));
    state_->finished = true;
    return;
  }
  state_->work = &item.release()->req;  // freed by after_prepare
}

PromptJob::~PromptJob() {
  state_->abandoned = true;
  // Not started yet: never run it (after_prepare still runs, with UV_ECANCELED).
  if (state_->work) uv_cancel(reinterpret_cast<uv_req_t*>(state_->work));
}

void PromptJob::pump(ResponseWriter& writer) {
  if (done_) return;
  if (!next_) {
    if (!state_->finished) return;  // still on the pool
    PreparedRequest result = std::move(*state_->result);
    state_->result.reset();
    if (auto* error = std::get_if<ApiError>(&result)) {
      done_ = true;
      writer.send(error_response(*error));
      return;
    }
    next_ = submit_(std::move(std::get<PreparedGeneration>(result)));
  }
  next_->pump(writer);
  done_ = next_->done();
}

}  // namespace larder
