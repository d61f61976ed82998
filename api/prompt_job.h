// PromptJob: the part of a generation request that may take long — parsing
// and validating the JSON body, rendering the chat template, tokenizing,
// reading remembered answers from the disk tier — runs on libuv's thread
// pool (uv_queue_work), never on the loop thread. When it is done, the loop
// thread gets the result (an error response, or a ready-to-submit request)
// and the job continues as the response that follows from it.
//
// Lifetime and threads: PoolTask (api/pool_task.h); `prepare` runs on a
// pool thread and must only touch thread-safe state.
#pragma once

#include <uv.h>

#include <functional>
#include <memory>
#include <variant>
#include <vector>

#include "api/api_error.h"
#include "api/generation_job.h"
#include "api/reasoning.h"
#include "api/openai_request.h"
#include "api/pool_task.h"
#include "api/tool_calls.h"

namespace larder {

// A request parsed, validated and tokenized: what the loop thread submits.
struct PreparedGeneration {
  CompletionKind kind = CompletionKind::kText;
  GenerationOptions options;
  std::vector<int32_t> prompt_tokens;
  // A completion's array of prompts: those after the first (prompt_tokens).
  std::vector<std::vector<int32_t>> more_prompts;
  const char* prompt_param = "prompt";  // the field blamed for an over-long prompt
  ToolCallOptions tools;
  ReasoningOptions reasoning;  // chat: how the answer's thinking is split off (api/reasoning.h)
};
// The outcome of the pool step: an error to answer, or a request to submit.
using PreparedRequest = std::variant<ApiError, PreparedGeneration>;

class PromptJob : public ResponseJob {
 public:
  using Prepare = std::function<PreparedRequest()>;                  // pool thread
  using Submit = std::function<std::unique_ptr<ResponseJob>(PreparedGeneration)>;  // loop thread

  // Queues `prepare` on `loop`'s thread pool; `waker` is woken when it is
  // done (the server then pumps its connections), and the next pump() either
  // answers the error or calls `submit` and continues as the job it returns.
  // A failure to queue answers 500 at the first pump(). `lane` (may be
  // null): `prepare` waits for a place in it (api/pool_lane.h).
  PromptJob(uv_loop_t* loop, std::shared_ptr<LoopWaker> waker, Prepare prepare, Submit submit,
            LaneEntry lane = {});

  void pump(ResponseWriter& writer) override;
  bool done() const override { return done_; }

 private:
  PoolTask<PreparedRequest> task_;
  Submit submit_;
  std::unique_ptr<ResponseJob> next_;  // what submit_ returned
  bool done_ = false;
};

}  // namespace larder
