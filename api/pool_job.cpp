#include "api/pool_job.h"

#include <exception>
#include <string>

#include <spdlog/spdlog.h>

#include "api/openai_response.h"

namespace larder {

namespace {

HttpResponse server_error(const std::string& what) { return error_response(ApiError::server(what)); }

struct DetachedItem {
  uv_work_t req{};
  std::function<void()> work;
};

}  // namespace

PoolJob::PoolJob(uv_loop_t* loop, std::shared_ptr<LoopWaker> waker, Work work, LaneEntry lane)
    : task_(loop, std::move(waker), std::move(work), &server_error, lane) {}

void PoolJob::pump(ResponseWriter& writer) {
  if (done_ || !task_.finished()) return;
  done_ = true;
  writer.send(task_.take());
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
