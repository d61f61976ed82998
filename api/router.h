// ApiRouter: maps a parsed HTTP request to an endpoint handler, and the
// handlers themselves (validate -> render/tokenize -> submit to the engine).
// Endpoints (each also under /v1/): POST /chat/completions, /completions,
// /tokenize, /detokenize, /apply-template; GET /models, /models/{id},
// /health; the admin routes (api/admin_routes.h).
// Runs on the loop thread and never blocks: parsing, template rendering and
// tokenizing of generation requests run on libuv's thread pool
// (api/prompt_job.h); Generator::submit only queues.
#pragma once

#include <uv.h>

#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "api/admin_routes.h"
#include "api/generation_job.h"
#include "api/http_message.h"
#include "api/http_server.h"
#include "api/openai_request.h"
#include "api/pool_lane.h"
#include "api/prompt_job.h"
#include "api/tool_call_grammar.h"

namespace larder {

class ApiRouter {
 public:
  // `loop` runs the prompt jobs' pool work (api/prompt_job.h); `metrics`
  // counts generations (null: none are counted).
  ApiRouter(uv_loop_t* loop, Generator& generator, const ServerOptions& options, std::shared_ptr<LoopWaker> waker,
            std::shared_ptr<ApiMetrics> metrics = nullptr);

  // Never throws: an unexpected exception becomes a 500 server_error. May
  // take the request's body (generation endpoints move it to a pool thread).
  HandlerResult handle(HttpRequest& request);

  // The admin endpoints (SIGHUP runs their reload).
  AdminRoutes& admin() { return admin_; }

 private:
  HandlerResult dispatch(HttpRequest& request);
  HandlerResult chat_completions(HttpRequest& request);
  HandlerResult completions(HttpRequest& request);
  HttpResponse models(std::string_view model_id) const;
  // /tokenize, /detokenize (api/text_routes.h) and /apply-template, on the pool.
  HandlerResult text_job(std::string_view path, HttpRequest& request);
  // Pool thread: POST /apply-template, a chat completion body (every chat
  // field, validated as for /v1/chat/completions) -> {"prompt": the
  // rendered chat template, generation prompt or assistant prefill included}.
  HttpResponse apply_template(const std::string& body) const;
  // A render_chat / chat_prompt error as the 400 the chat endpoint answers.
  static ApiError chat_error(const Status& status);
  // `lane`: lane_for(the request).
  HandlerResult prompt_job(std::function<PreparedRequest()> prepare, LaneEntry lane);
  // large_bodies_ for a body over kLargeBodyBytes, else none.
  LaneEntry lane_for(const HttpRequest& request) {
    if (request.body.size() <= kLargeBodyBytes) return {};
    return {&large_bodies_, request.body.size()};
  }
  // 503 server_busy (Retry-After: 1) when `lane`'s body would take the
  // bodies waiting for it past ServerOptions::max_total_body_bytes: they
  // are in memory, and no longer counted as bodies being read (found in
  // hostile testing: a hundred 8 MiB bodies waited behind 12 slow compiles).
  std::optional<HttpResponse> lane_busy(const LaneEntry& lane) const;
  // Pool thread (thread-safe: they read only the generator and options_):
  // parse and validate a body, render and tokenize its prompt.
  PreparedRequest prepare_chat(const std::string& body) const;
  // tool_choice "auto": the calls' grammar, lazy (api/tool_call_grammar.h
  // tool_call_triggers), into *options; nothing where the syntax has no
  // triggers or the tools' schemas cannot be enforced.
  void set_lazy_tool_grammar(ToolCallSyntax syntax, const nlohmann::ordered_json& tools, bool parallel,
                             bool prompt_opens_reasoning, GenerationOptions* options) const;
  PreparedRequest prepare_completion(const std::string& body) const;
  // An empty prompt or one that leaves no room for a generated token (one
  // over the context when scores_only: echo with max_tokens 0, which
  // generates nothing): the error to answer.
  std::optional<ApiError> check_prompt(const PreparedGeneration& p, bool scores_only = false) const;
  std::optional<ApiError> check_prompt(const std::vector<int32_t>& prompt, const char* param,
                                       bool scores_only = false) const;
  // Loop thread: max_tokens clamp, submit to the engine, the response job.
  std::unique_ptr<ResponseJob> submit(PreparedGeneration prepared);
  // The engine request for one prompt of `p` (max_tokens clamped to the room left).
  GenerationRequest generation_request(const PreparedGeneration& p, std::vector<int32_t> prompt) const;
  // The options against the served model and server: "model" names it
  // (else 404), logit_bias's token ids lie within its vocabulary and n is
  // at most max_n (else 400).
  std::optional<ApiError> check_model(const GenerationOptions& options) const;

  uv_loop_t* loop_;
  Generator& generator_;
  const ServerOptions& options_;
  std::shared_ptr<LoopWaker> waker_;
  std::shared_ptr<ApiMetrics> metrics_;
  GenerationDefaults defaults_;  // [sampling]: a reload changes them
  AdminRoutes admin_;
  // Generation, /tokenize and /apply-template bodies over kLargeBodyBytes
  // are prepared in this lane: at most large_body_pool_threads() of libuv's
  // pool threads at once, so that the rest stay free for small requests.
  static constexpr size_t kLargeBodyBytes = 64 << 10;

  PoolLane large_bodies_;
  mutable ToolGrammarCache tool_grammars_;  // forced and lazy tool-call grammars (pool threads)
  std::mt19937_64 rng_;  // completion ids (loop thread)
  std::string system_fingerprint_;  // make_system_fingerprint(model, build)
};

}  // namespace larder
