#include "api/router.h"

#include <ctime>
#include <exception>

#include <spdlog/spdlog.h>

#include "api/openai_response.h"

namespace larder {

namespace {

// "/v1/x" and "/x" are the same endpoint.
std::string_view strip_v1(std::string_view path) {
  if (path.size() > 3 && path.substr(0, 4) == "/v1/") return path.substr(3);
  if (path == "/v1") return "/";
  return path;
}

HttpResponse method_not_allowed(const char* allowed) {
  HttpResponse r = error_response(ApiError{405, "method not allowed; use " + std::string(allowed),
                                           "invalid_request_error", std::nullopt, "method_not_allowed"});
  r.headers.emplace_back("Allow", std::string(allowed) + ", OPTIONS");
  return r;
}

}  // namespace

ApiRouter::ApiRouter(Generator& generator, const ServerOptions& options, std::shared_ptr<LoopWaker> waker)
    : generator_(generator), options_(options), waker_(std::move(waker)), rng_(std::random_device{}()) {}

HandlerResult ApiRouter::handle(const HttpRequest& request) {
  try {
    return dispatch(request);
  } catch (const std::exception& e) {
    spdlog::error("api: {} {} failed: {}", request.method, request.target, e.what());
    return error_response(ApiError::server(std::string("internal error: ") + e.what()));
  } catch (...) {
    return error_response(ApiError::server("internal error"));
  }
}

HandlerResult ApiRouter::dispatch(const HttpRequest& request) {
  const std::string& method = request.method;
  if (method == "OPTIONS") {
    HttpResponse r;
    r.status = 204;
    r.content_type.clear();
    return r;
  }
  std::string_view path = strip_v1(request.path());
  if (path == "/chat/completions") {
    if (method != "POST") return method_not_allowed("POST");
    return chat_completions(request);
  }
  if (path == "/completions") {
    if (method != "POST") return method_not_allowed("POST");
    return completions(request);
  }
  if (path == "/models" || path.starts_with("/models/")) {
    if (method != "GET") return method_not_allowed("GET");
    return models(path == "/models" ? std::string_view() : path.substr(8));
  }
  if (path == "/health") {
    if (method != "GET") return method_not_allowed("GET");
    return json_response(200, {{"status", "ok"}});
  }
  return error_response(ApiError::not_found("unknown endpoint " + std::string(request.path()), std::nullopt,
                                            "unknown_url"));
}

HttpResponse ApiRouter::models(std::string_view model_id) const {
  const ModelInfo& info = generator_.model_info();
  if (model_id.empty()) return json_response(200, models_list_json(info));
  if (model_id != info.id) {
    return error_response(ApiError::not_found("the model '" + std::string(model_id) + "' does not exist",
                                              "model", "model_not_found"));
  }
  return json_response(200, model_json(info));
}

std::optional<ApiError> ApiRouter::check_model(const GenerationOptions& options) const {
  const ModelInfo& info = generator_.model_info();
  if (options.model && *options.model != info.id) {
    return ApiError::not_found("the model '" + *options.model + "' does not exist; this server serves '" +
                                   info.id + "'",
                               "model", "model_not_found");
  }
  return std::nullopt;
}

HandlerResult ApiRouter::chat_completions(const HttpRequest& request) {
  ChatCompletionRequest parsed;
  if (auto e = parse_chat_completion_request(request.body, options_.default_sampling, &parsed)) {
    return error_response(*e);
  }
  if (auto e = check_model(parsed.options)) return error_response(*e);
  ToolCallOptions tools;
  if (!parsed.chat.tools_json.empty()) {
    tools.syntax = generator_.tool_call_syntax();
    tools.tool_names = parsed.tool_names;
    if (tools.syntax == ToolCallSyntax::kNone) {
      return error_response(ApiError::invalid(
          "this model cannot be offered tools: its chat template does not render them (a Jinja "
          "tokenizer.chat_template that uses `tools` is needed)",
          "tools"));
    }
  }
  parsed.chat.special_in_content = parsed.options.parse_special;
  Result<std::vector<int32_t>> tokens = generator_.chat_prompt(parsed.chat);
  if (!tokens.is_ok()) {
    const bool tools_error = tokens.status().code() == StatusCode::kUnsupported;
    return error_response(ApiError::invalid(tokens.status().message(), tools_error ? "tools" : "messages"));
  }
  return submit(CompletionKind::kChat, parsed.options, std::move(*tokens), "messages", std::move(tools));
}

HandlerResult ApiRouter::completions(const HttpRequest& request) {
  CompletionRequest parsed;
  if (auto e = parse_completion_request(request.body, options_.default_sampling, generator_.model_info().n_vocab,
                                        &parsed)) {
    return error_response(*e);
  }
  if (auto e = check_model(parsed.options)) return error_response(*e);
  std::vector<int32_t> tokens =
      parsed.prompt_is_tokens ? std::move(parsed.prompt_tokens) : generator_.tokenize(parsed.prompt_text, parsed.options.parse_special);
  return submit(CompletionKind::kText, parsed.options, std::move(tokens), "prompt");
}

HandlerResult ApiRouter::submit(CompletionKind kind, const GenerationOptions& options,
                                std::vector<int32_t> prompt_tokens, const char* prompt_param,
                                ToolCallOptions tools) {
  const ModelInfo& info = generator_.model_info();
  const int n_prompt = static_cast<int>(prompt_tokens.size());
  if (n_prompt == 0) return error_response(ApiError::invalid("the prompt is empty", prompt_param));
  if (n_prompt >= info.n_ctx) {
    return error_response(ApiError::invalid(
        "the prompt is " + std::to_string(n_prompt) + " tokens long, but the model's context holds " +
            std::to_string(info.n_ctx) + " tokens (prompt and completion together); shorten the prompt",
        prompt_param, "context_length_exceeded"));
  }
  const int room = info.n_ctx - n_prompt;
  int max_tokens = options.max_tokens.value_or(options_.default_max_tokens);
  if (max_tokens <= 0 || max_tokens > room) max_tokens = room;

  GenerationRequest req;
  req.prompt_tokens = std::move(prompt_tokens);
  req.sampling = options.sampling;
  req.max_tokens = max_tokens;
  req.stop = options.stop;
  req.ignore_eos = options.ignore_eos;
  req.remember_answer = kind == CompletionKind::kChat;

  CompletionMeta meta;
  meta.kind = kind;
  meta.id = make_completion_id(kind == CompletionKind::kChat ? "chatcmpl-" : "cmpl-", rng_);
  meta.model = info.id;
  meta.created = static_cast<int64_t>(std::time(nullptr));
  meta.return_tokens = options.return_tokens;

  auto sink = std::make_shared<QueueSink>(waker_);
  const uint64_t tool_call_id_seed = rng_();
  auto job = std::make_unique<GenerationJob>(std::move(meta), options.stream, options.include_usage, sink,
                                             std::move(tools), tool_call_id_seed);
  generator_.submit(std::move(req), sink);
  return std::unique_ptr<ResponseJob>(std::move(job));
}

}  // namespace larder
