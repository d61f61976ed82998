#include "api/pool_job.h"

#include <exception>
#include <optional>

#include <spdlog/spdlog.h>

#include "api/openai_response.h"

namespace larder {

struct PoolJob::State {
  Work work;                              // run once on the pool, then released
  std::shared_ptr<LoopWaker> waker;
  std::optional<HttpResponse> result;     // written by the pool thread before after_work
  bool finished = false;                  // loop thread: after_work ran
  bool abandoned = false;                 // loop thread: the job is gone
  uv_work_t* item = nullptr;              // loop thread: the queued item, until after_work
};

namespace {

struct WorkItem {
  uv_work_t req{};
  std::shared_ptr<PoolJob::State> state;
};

void run_work(uv_work_t* req) {
  PoolJob::State& st = *static_cast<WorkItem*>(req->data)->state;
  try {
    st.result = st.work();
  } catch (const std::exception& e) {
    spdlog::error("api: a pool job failed: {}", e.what());
    st.result = error_response(ApiError::server(std::string("internal error: ") + e.what()));
  } catch (...) {
    st.result = error_response(ApiError::server("internal error"));
  }
  st.work = nullptr;
}

void after_work(uv_work_t* req, int status) {
  std::unique_ptr<WorkItem> item(static_cast<WorkItem*>(req->data));
  PoolJob::State& st = *item->state;
  st.item = nullptr;
  st.finished = true;
  if (status == UV_ECANCELED) return;
  if (!st.abandoned && st.waker) st.waker->wake();
}

struct DetachedItem {
  uv_work_t req{};
  std::function<void()> work;
};

}  // namespace

PoolJob::PoolJob(uv_loop_t* loop, std::shared_ptr<LoopWaker> waker, Work work) : state_(std::make_shared<State>()) {
  state_->work = std::move(work);
  state_->waker = std::move(waker);
  auto item = std::make_unique<WorkItem>();
  item->req.data = item.get();
  item->state = state_;
  const int rc = uv_queue_work(loop, &item->req, run_work, after_work);
  if (rc != 0) {
    state_->result = error_response(ApiError::server(std::string("cannot queue the request: ") + uv_strerror(rc)));
    state_->finished = true;
    return;
  }
  state_->item = &item.release()->req;  // freed by after_work
}

PoolJob::~PoolJob() {
  state_->abandoned = true;
  if (state_->item) uv_cancel(reinterpret_cast<uv_req_t*>(state_->item));
}

void PoolJob::pump(ResponseWriter& writer) {
  if (done_ || !state_->finished) return;
  done_ = true;
  writer.send(std::move(*state_->result));
  state_->result.reset();
}

int run_detached_on_pool(uv_loop_t* loop, std::function<void()> work) {
  auto item = std::make_unique<DetachedItem>();
  item->req.data = item.get();
  item->work = std::move(work);
  const int rc = uv_queue_work(
      loop, &item->req,
      [](uv_work_t* req) {
        auto* it = static_cast<DetachedItem*>(req->data);
        try {
          it->work();
        } catch (const std::exception& e) {
          spdlog::error("api: background work failed: {}", e.what());
        } catch (...) {
          spdlog::error("api: background work failed");
        }
      },
      [](uv_work_t* req, int) { std::unique_ptr<DetachedItem> owned(static_cast<DetachedItem*>(req->data)); });
  if (rc == 0) (void)item.release();
  return rc;
}

}  // namespace larder
