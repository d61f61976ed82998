// ApiRouter: maps a parsed HTTP request to an endpoint handler, and the
// handlers themselves (validate -> render/tokenize -> submit to the engine).
// Runs on the loop thread; never blocks (Generator::submit only queues).
#pragma once

#include <memory>
#include <random>
#include <variant>

#include "api/generation_job.h"
#include "api/http_message.h"
#include "api/http_server.h"
#include "api/openai_request.h"

namespace larder {

// A handler either answers at once or hands back a job that answers as the
// engine's events arrive.
using HandlerResult = std::variant<HttpResponse, std::unique_ptr<ResponseJob>>;

class ApiRouter {
 public:
  ApiRouter(Generator& generator, const ServerOptions& options, std::shared_ptr<LoopWaker> waker);

  // Never throws: an unexpected exception becomes a 500 server_error.
  HandlerResult handle(const HttpRequest& request);

 private:
  HandlerResult dispatch(const HttpRequest& request);
  HandlerResult chat_completions(const HttpRequest& request);
  HandlerResult completions(const HttpRequest& request);
  HttpResponse models(std::string_view model_id) const;
  // Shared tail of both endpoints: model check, context check, max_tokens
  // clamp, submit. `prompt_param` names the field blamed for an over-long prompt.
  HandlerResult submit(CompletionKind kind, const GenerationOptions& options,
                       std::vector<int32_t> prompt_tokens, const char* prompt_param,
                       ToolCallOptions tools = {});
  std::optional<ApiError> check_model(const GenerationOptions& options) const;

  Generator& generator_;
  const ServerOptions& options_;
  std::shared_ptr<LoopWaker> waker_;
  std::mt19937_64 rng_;  // completion ids
};

}  // namespace larder
