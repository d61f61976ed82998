#include "api/prompt_job.h"

#include <string>

#include "api/openai_response.h"

namespace larder {

namespace {

PreparedRequest server_error(const std::string& what) { return ApiError::server(what); }

}  // namespace

PromptJob::PromptJob(uv_loop_t* loop, std::shared_ptr<LoopWaker> waker, Prepare prepare, Submit submit,
                     LaneEntry lane)
    : task_(loop, std::move(waker), std::move(prepare), &server_error, lane), submit_(std::move(submit)) {}

void PromptJob::pump(ResponseWriter& writer) {
  if (done_) return;
  if (!next_) {
    if (!task_.finished()) return;  // still on the pool
    PreparedRequest result = task_.take();
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
