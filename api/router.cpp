#include "api/router.h"

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <exception>

#include <spdlog/spdlog.h>

#include "api/generic_tools.h"
#include "api/openai_response.h"
#include "api/pool_job.h"
#include "api/text_routes.h"
#include "api/tool_call_grammar.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/template/json_parse.h"

namespace larder {

namespace {

// libuv's pool threads (UV_THREADPOOL_SIZE as libuv reads it: 4 when unset,
// 1 to 1024), less a quarter (at least one) kept for small requests: the
// large bodies' lane (api/pool_lane.h). 16 threads: 12; 4: 3.
size_t large_body_pool_threads() {
  size_t threads = 4;
  if (const char* v = std::getenv("UV_THREADPOOL_SIZE"); v != nullptr && *v != '\0') {
    const long n = std::strtol(v, nullptr, 10);
    threads = n < 1 ? 1 : static_cast<size_t>(std::min(n, 1024L));
  }
  return std::max<size_t>(1, threads - std::max<size_t>(1, threads / 4));
}

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

ApiRouter::ApiRouter(uv_loop_t* loop, Generator& generator, const ServerOptions& options,
                     std::shared_ptr<LoopWaker> waker, std::shared_ptr<ApiMetrics> metrics)
    : loop_(loop),
      generator_(generator),
      options_(options),
      waker_(waker),
      metrics_(metrics ? std::move(metrics) : std::make_shared<ApiMetrics>()),
      defaults_(options.default_sampling, options.default_max_tokens),
      admin_(loop, generator, options, std::move(waker), metrics_, defaults_),
      large_bodies_(large_body_pool_threads()),
      rng_(std::random_device{}()),
      system_fingerprint_(make_system_fingerprint(generator.model_info().fingerprint, options.build)) {}

HandlerResult ApiRouter::handle(HttpRequest& request) {
  try {
    return dispatch(request);
  } catch (const std::exception& e) {
    spdlog::error("api: {} {} {} failed: {}", request.request_id, request.method, clip_for_message(request.target),
                  e.what());
    return error_response(ApiError::server(std::string("internal error: ") + e.what()));
  } catch (...) {
    return error_response(ApiError::server("internal error"));
  }
}

HandlerResult ApiRouter::dispatch(HttpRequest& request) {
  const std::string& method = request.method;
  if (method == "OPTIONS") {
    HttpResponse r;
    r.status = 204;
    r.content_type.clear();
    return r;
  }
  if (AdminRoutes::is_admin_path(request.path())) {
    // Only at their own paths (no /v1 prefix), and only when admin is on.
    if (options_.admin_enabled) return admin_.handle(request);
    return error_response(ApiError::not_found("unknown endpoint " + clip_for_message(request.path()), std::nullopt,
                                              "unknown_url"));
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
  if (path == "/tokenize" || path == "/detokenize" || path == "/apply-template") {
    if (method != "POST") return method_not_allowed("POST");
    return text_job(path, request);
  }
  if (path == "/models" || path.starts_with("/models/")) {
    if (method != "GET" && method != "HEAD") return method_not_allowed("GET, HEAD");
    return models(path == "/models" ? std::string_view() : path.substr(8));
  }
  if (path == "/health") {
    if (method != "GET" && method != "HEAD") return method_not_allowed("GET, HEAD");
    return json_response(200, {{"status", "ok"}});
  }
  return error_response(ApiError::not_found("unknown endpoint " + std::string(request.path()), std::nullopt,
                                            "unknown_url"));
}

HandlerResult ApiRouter::text_job(std::string_view path, HttpRequest& request) {
  std::function<HttpResponse(const std::string&)> work;
  if (path == "/tokenize") {
    work = [this](const std::string& body) { return tokenize_response(generator_, body); };
  } else if (path == "/detokenize") {
    work = [this](const std::string& body) { return detokenize_response(generator_, body); };
  } else {
    work = [this](const std::string& body) { return apply_template(body); };
  }
  const LaneEntry lane = lane_for(request);
  if (auto busy = lane_busy(lane)) return std::move(*busy);
  return std::make_unique<PoolJob>(
      loop_, waker_, [work = std::move(work), body = std::move(request.body)] { return work(body); }, lane);
}

HttpResponse ApiRouter::apply_template(const std::string& body) const {
  ChatCompletionRequest parsed;
  if (auto e = parse_chat_completion_request(body, defaults_.sampling(), &parsed)) return error_response(*e);
  if (auto e = check_model(parsed.options)) return error_response(*e);
  parsed.chat.special_in_content = parsed.options.parse_special;
  // As a chat request renders it: the generic tool prompt where the
  // template cannot show tools.
  Result<std::string> prompt = render_chat_with_tools(generator_, parsed.parallel_tool_calls, &parsed.chat);
  if (!prompt.is_ok()) return error_response(chat_error(prompt.status()));
  return json_response(200, {{"prompt", std::move(*prompt)}});
}

ApiError ApiRouter::chat_error(const Status& status) {
  if (status.code() == StatusCode::kOutOfRange) {
    return ApiError::invalid(status.message(), "messages", "context_length_exceeded");
  }
  return ApiError::invalid(status.message(), status.code() == StatusCode::kUnsupported ? "tools" : "messages");
}

HttpResponse ApiRouter::models(std::string_view model_id) const {
  const ModelInfo& info = generator_.model_info();
  if (model_id.empty()) return json_response(200, models_list_json(info));
  if (model_id != info.id) {
    return error_response(ApiError::not_found("the model '" + clip_for_message(model_id) + "' does not exist",
                                              "model", "model_not_found"));
  }
  return json_response(200, model_json(info));
}

std::optional<ApiError> ApiRouter::check_model(const GenerationOptions& options) const {
  const ModelInfo& info = generator_.model_info();
  if (options.model && *options.model != info.id) {
    return ApiError::not_found("the model '" + clip_for_message(*options.model) + "' does not exist; this server serves '" +
                                   info.id + "'",
                               "model", "model_not_found");
  }
  if (options.n > options_.max_n) {
    return ApiError::invalid("'n' is " + std::to_string(options.n) + "; this server allows at most " +
                                 std::to_string(options_.max_n) + " choices per prompt (server.max_n)",
                             "n");
  }
  for (const auto& [id, bias] : options.logit_bias) {
    if (id >= info.n_vocab) {
      return ApiError::invalid("'logit_bias': token " + std::to_string(id) + " is past the vocabulary (" +
                                   std::to_string(info.n_vocab) + " tokens)",
                               "logit_bias");
    }
  }
  return std::nullopt;
}

std::optional<HttpResponse> ApiRouter::lane_busy(const LaneEntry& lane) const {
  if (lane.lane == nullptr || lane.lane->waiting_bytes() + lane.bytes <= options_.max_total_body_bytes) return std::nullopt;
  return retry_later_response("the server is busy preparing large requests (" +
                                  std::to_string(lane.lane->waiting_bytes() >> 20) + " MiB of them wait); try again",
                              "server_busy");
}

HandlerResult ApiRouter::prompt_job(std::function<PreparedRequest()> prepare, LaneEntry lane) {
  return std::make_unique<PromptJob>(
      loop_, waker_, std::move(prepare), [this](PreparedGeneration p) { return submit(std::move(p)); }, lane);
}

HandlerResult ApiRouter::chat_completions(HttpRequest& request) {
  const LaneEntry lane = lane_for(request);
  if (auto busy = lane_busy(lane)) return std::move(*busy);
  return prompt_job([this, body = std::move(request.body)] { return prepare_chat(body); }, lane);
}

HandlerResult ApiRouter::completions(HttpRequest& request) {
  const LaneEntry lane = lane_for(request);
  if (auto busy = lane_busy(lane)) return std::move(*busy);
  return prompt_job([this, body = std::move(request.body)] { return prepare_completion(body); }, lane);
}

void ApiRouter::set_lazy_tool_grammar(ToolCallSyntax syntax, const nlohmann::ordered_json& tools, bool parallel,
                                      bool prompt_opens_reasoning, GenerationOptions* options) const {
  std::vector<GrammarTrigger> triggers = tool_call_triggers(syntax);
  if (triggers.empty()) return;
  Result<std::shared_ptr<const CompiledGrammar>> cg = tool_grammars_.get(syntax, tools, "", parallel);
  if (!cg.is_ok()) {
    spdlog::debug("tool calls not constrained: {}", cg.status().to_string());
    return;
  }
  options->grammar = std::move(cg).value();
  options->grammar_triggers.triggers = std::move(triggers);
  // A call written while thinking is not a call (api/reasoning.h).
  if (generator_.reasoning_syntax() == ReasoningSyntax::kThinkTags) {
    options->grammar_triggers.block_open = kReasoningOpen;
    options->grammar_triggers.block_close = kReasoningClose;
    options->grammar_triggers.starts_in_block = prompt_opens_reasoning;
  }
}

PreparedRequest ApiRouter::prepare_chat(const std::string& body) const {
  ChatCompletionRequest parsed;
  if (auto e = parse_chat_completion_request(body, defaults_.sampling(), &parsed)) return *e;
  if (auto e = check_model(parsed.options)) return *e;
  PreparedGeneration out;
  out.kind = CompletionKind::kChat;
  out.prompt_param = "messages";
  // The offered tools as the parser kept them (ordered_json: the
  // properties come out in the client's order).
  nlohmann::ordered_json tools;
  const bool template_has_tools = generator_.tool_call_syntax() != ToolCallSyntax::kNone;
  if (!parsed.chat.tools_json.empty()) {
    tools = parse_json_ordered(parsed.chat.tools_json);
    out.tools.syntax = template_has_tools ? generator_.tool_call_syntax() : ToolCallSyntax::kJsonEnvelope;
    out.tools.tool_names = parsed.tool_names;
    out.tools.forced = parsed.tool_required;
  }
  parsed.chat.special_in_content = parsed.options.parse_special;
  parsed.chat.cache_salt = parsed.options.cache_salt;
  ChatPromptInfo prompt_info;
  // A template that cannot show tools or calls: the generic tool prompt does.
  Result<std::vector<int32_t>> tokens =
      chat_prompt_with_tools(generator_, parsed.parallel_tool_calls, &parsed.chat, &prompt_info);
  if (!tokens.is_ok()) return chat_error(tokens.status());
  if (parsed.tool_required) {
    // A named function is one call of it, as OpenAI answers it; "required"
    // may call several unless parallel_tool_calls is false.
    const bool parallel = parsed.parallel_tool_calls && parsed.forced_tool.empty();
    // The grammar comes from the client's schemas (a $ref that refers only
    // to itself is left-recursive): their fault, a 400.
    Result<std::shared_ptr<const CompiledGrammar>> cg =
        tool_grammars_.get(out.tools.syntax, tools, parsed.forced_tool, parallel);
    if (!cg.is_ok()) return ApiError::invalid("forcing a tool call: " + cg.status().message(), "tools");
    parsed.options.grammar = std::move(cg).value();
  } else if (!tools.empty() && !parsed.options.grammar) {
    // tool_choice "auto": a call the model opens is kept inside the grammar
    // (lazy: engine/grammar/grammar_trigger.h), as llama.cpp's server does.
    // Schemas the grammar cannot enforce leave the answer unconstrained.
    set_lazy_tool_grammar(out.tools.syntax, tools, parsed.parallel_tool_calls, prompt_info.opens_reasoning,
                          &parsed.options);
  }
  out.reasoning = reasoning_options(generator_.reasoning_syntax(), parsed.reasoning_format,
                                    prompt_info.opens_reasoning,
                                    parsed.options.grammar != nullptr && parsed.options.grammar_triggers.empty());
  out.options = std::move(parsed.options);
  out.prompt_tokens = std::move(*tokens);
  if (auto e = check_prompt(out)) return *e;
  return out;
}

PreparedRequest ApiRouter::prepare_completion(const std::string& body) const {
  CompletionRequest parsed;
  if (auto e = parse_completion_request(body, defaults_.sampling(), generator_.model_info().n_vocab,
                                        &parsed)) {
    return *e;
  }
  if (auto e = check_model(parsed.options)) return *e;
  PreparedGeneration out;
  out.kind = CompletionKind::kText;
  out.prompt_param = "prompt";
  const ModelInfo& info = generator_.model_info();
  // Echo with max_tokens 0 (the parser allows 0 only then) generates
  // nothing: its prompt may fill the whole context, one token more.
  const bool scores_only = parsed.options.max_tokens == 0;
  size_t max_bytes = info.max_prompt_bytes;  // (n_ctx - 1) x the longest token's bytes
  if (scores_only && info.n_ctx > 1) max_bytes += max_bytes / size_t(info.n_ctx - 1);
  if (!parsed.prompt_is_tokens && max_bytes > 0 && parsed.prompt_text.size() > max_bytes) {
    // Refused before tokenizing: no token covers more bytes than the longest.
    return ApiError::invalid("the prompt is " + std::to_string(parsed.prompt_text.size()) +
                                 " bytes long, more than the model's context of " + std::to_string(info.n_ctx) +
                                 " tokens can hold (" + std::to_string(max_bytes) + " bytes)",
                             "prompt", "context_length_exceeded");
  }
  out.prompt_tokens = parsed.prompt_is_tokens ? std::move(parsed.prompt_tokens)
                                              : generator_.tokenize(parsed.prompt_text, parsed.options.parse_special);
  if (auto e = check_prompt(out, scores_only)) return *e;
  for (CompletionPrompt& more : parsed.more_prompts) {
    if (!more.is_tokens && max_bytes > 0 && more.text.size() > max_bytes) {
      return ApiError::invalid("a prompt is " + std::to_string(more.text.size()) +
                                   " bytes long, more than the model's context can hold",
                               "prompt", "context_length_exceeded");
    }
    out.more_prompts.push_back(more.is_tokens ? std::move(more.tokens)
                                              : generator_.tokenize(more.text, parsed.options.parse_special));
    if (auto e = check_prompt(out.more_prompts.back(), out.prompt_param, scores_only)) return *e;
  }
  out.options = std::move(parsed.options);
  return out;
}

std::optional<ApiError> ApiRouter::check_prompt(const PreparedGeneration& p, bool scores_only) const {
  return check_prompt(p.prompt_tokens, p.prompt_param, scores_only);
}

std::optional<ApiError> ApiRouter::check_prompt(const std::vector<int32_t>& prompt, const char* param,
                                                bool scores_only) const {
  const ModelInfo& info = generator_.model_info();
  const int n_prompt = static_cast<int>(prompt.size());
  if (n_prompt == 0) return ApiError::invalid("the prompt is empty", param);
  if (scores_only && n_prompt > info.n_ctx) {
    return ApiError::invalid("the prompt is " + std::to_string(n_prompt) + " tokens long, but the model's context holds " +
                                 std::to_string(info.n_ctx) + " tokens; shorten the prompt",
                             param, "context_length_exceeded");
  }
  if (!scores_only && n_prompt >= info.n_ctx) {
    return ApiError::invalid(
        "the prompt is " + std::to_string(n_prompt) + " tokens long, but the model's context holds " +
            std::to_string(info.n_ctx) + " tokens (prompt and completion together); shorten the prompt",
        param, "context_length_exceeded");
  }
  return std::nullopt;
}

GenerationRequest ApiRouter::generation_request(const PreparedGeneration& p, std::vector<int32_t> prompt) const {
  const ModelInfo& info = generator_.model_info();
  const GenerationOptions& options = p.options;
  const int room = info.n_ctx - static_cast<int>(prompt.size());
  int max_tokens = options.max_tokens.value_or(defaults_.max_tokens());
  if (max_tokens <= 0 || max_tokens > room) max_tokens = room;
  if (options.max_tokens == 0) max_tokens = 0;  // echo: the prompt only (api/request_logprobs.h)

  GenerationRequest req;
  req.prompt_tokens = std::move(prompt);
  req.sampling = options.sampling;
  req.max_tokens = max_tokens;
  req.stop = options.stop;
  req.ignore_eos = options.ignore_eos;
  req.remember_answer = p.kind == CompletionKind::kChat;
  req.cache_salt = options.cache_salt;
  req.grammar = options.grammar;
  req.grammar_triggers = options.grammar_triggers;
  req.logit_bias = options.logit_bias;
  req.logprobs = options.logprobs;
  req.echo = options.echo;
  req.n = options.n;
  return req;
}

std::unique_ptr<ResponseJob> ApiRouter::submit(PreparedGeneration p) {
  const ModelInfo& info = generator_.model_info();
  const GenerationOptions& options = p.options;
  // One request per prompt, its choices numbered i * n + j (OpenAI's order).
  std::vector<std::pair<GenerationRequest, std::shared_ptr<GenerationSink>>> batch;
  auto sink = std::make_shared<QueueSink>(waker_);
  batch.emplace_back(generation_request(p, std::move(p.prompt_tokens)), sink);
  for (std::vector<int32_t>& prompt : p.more_prompts) {
    batch.emplace_back(generation_request(p, std::move(prompt)), sink);
    batch.back().first.first_choice = static_cast<int>(batch.size() - 1) * options.n;
  }
  const ChoiceLayout layout{static_cast<int>(batch.size()), options.n};

  CompletionMeta meta;
  meta.kind = p.kind;
  meta.id = make_completion_id(p.kind == CompletionKind::kChat ? "chatcmpl-" : "cmpl-", rng_);
  meta.model = info.id;
  meta.created = static_cast<int64_t>(std::time(nullptr));
  meta.return_tokens = options.return_tokens;
  meta.logprobs = options.logprobs >= 0;
  meta.system_fingerprint = system_fingerprint_;
  meta.stream_usage = options.stream && options.include_usage;

  const uint64_t tool_call_id_seed = rng_();
  auto job = std::make_unique<GenerationJob>(std::move(meta), options.stream, options.include_usage, sink,
                                             std::move(p.tools), tool_call_id_seed, metrics_, layout);
  job->set_reasoning(p.reasoning);
  job->assemble_on(loop_, waker_);
  if (batch.size() == 1) {
    generator_.submit(std::move(batch[0].first), std::move(batch[0].second));
  } else {
    generator_.submit_batch(std::move(batch));
  }
  return job;
}

}  // namespace larder
