#include "api/admin_routes.h"

#include <optional>
#include <variant>

#include <spdlog/spdlog.h>

#include "api/access_policy.h"
#include "api/generic_tools.h"
#include "api/json_depth.h"
#include "api/openai_request.h"
#include "api/openai_response.h"
#include "api/pool_job.h"

namespace larder {

namespace {

using nlohmann::json;

HttpResponse method_not_allowed(const char* allowed) {
  HttpResponse r = error_response(ApiError{405, "method not allowed; use " + std::string(allowed),
                                           "invalid_request_error", std::nullopt, "method_not_allowed"});
  r.headers.emplace_back("Allow", std::string(allowed));
  return r;
}

// An engine error as an HTTP answer.
ApiError admin_error(const Status& st, const char* param = nullptr) {
  const std::optional<std::string> p = param ? std::optional<std::string>(param) : std::nullopt;
  switch (st.code()) {
    case StatusCode::kInvalidArgument: return ApiError::invalid(st.message(), p);
    case StatusCode::kOutOfRange: return ApiError::invalid(st.message(), p, "context_length_exceeded");
    case StatusCode::kNotFound: return ApiError::not_found(st.message(), p, "not_pinned");
    case StatusCode::kResourceExhausted: return ApiError::invalid(st.message(), p, "cache_too_small");
    case StatusCode::kUnsupported:
      return ApiError{501, st.message(), "server_error", std::nullopt, std::string("not_implemented")};
    case StatusCode::kCancelled:
      return ApiError{503, st.message(), "server_error", std::nullopt, std::string("unavailable")};
    default: return ApiError::server(st.to_string());
  }
}

bool blank(const std::string& body) { return body.find_first_not_of(" \t\r\n") == std::string::npos; }

// The prompt an admin body names; nullopt: everything (evict's {}).
struct AdminPrompt {
  std::vector<int32_t> tokens;
  std::string cache_salt;
};
using PromptOrError = std::variant<ApiError, std::optional<AdminPrompt>>;

PromptOrError read_prompt(const std::string& body, bool evict, bool need_fit, Generator& generator,
                          const SamplingParams& defaults) {
  const char* const kWhat = evict ? "give 'prompt' or 'messages' (the pages of that prompt), or send {} or "
                                    "{\"all\": true} to evict everything"
                                  : "give the prompt to pin as 'prompt' (a string or token ids) or 'messages' "
                                    "(as /v1/chat/completions takes them)";
  if (blank(body)) {
    if (evict) return std::optional<AdminPrompt>();
    return ApiError::invalid(std::string("a JSON body is required: ") + kWhat);
  }
  if (json_nesting_exceeds(body)) {
    return ApiError::invalid("the request body nests arrays/objects more than " + std::to_string(kMaxJsonDepth) +
                             " levels deep");
  }
  const json obj = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (obj.is_discarded()) return ApiError::invalid("the request body is not valid JSON");
  if (!obj.is_object()) return ApiError::invalid("the request body must be a JSON object");
  const auto given = [&](const char* name) { return obj.contains(name) && !obj.at(name).is_null(); };
  const bool has_prompt = given("prompt"), has_messages = given("messages");
  if (given("all")) {
    if (!obj.at("all").is_boolean()) return ApiError::invalid("'all' must be true or false", "all");
    if (!evict) return ApiError::invalid("'all' is for POST /admin/cache/evict only", "all");
    if (obj.at("all").get<bool>()) {
      if (has_prompt || has_messages) return ApiError::invalid("'all' evicts everything: give no prompt with it", "all");
      // Found in hostile testing: {"all": true, "cache_salt": "C"} evicted
      // the pages of every salt.
      for (const auto& [key, value] : obj.items()) {
        if (key != "all" && !value.is_null()) {
          return ApiError::invalid("'all' evicts everything, of every cache_salt: give no '" + key +
                                       "' with it (a prompt with its cache_salt evicts that prompt's pages)",
                                   key);
        }
      }
      return std::optional<AdminPrompt>();
    }
  }
  if (has_prompt && has_messages) return ApiError::invalid("give 'prompt' or 'messages', not both", "prompt");
  if (!has_prompt && !has_messages) {
    if (evict && obj.empty()) return std::optional<AdminPrompt>();
    return ApiError::invalid(kWhat);
  }
  const ModelInfo& info = generator.model_info();
  AdminPrompt out;
  if (has_prompt) {
    CompletionRequest parsed;
    if (auto e = parse_completion_request(body, defaults, info.n_vocab, &parsed)) return *e;
    if (!parsed.more_prompts.empty()) return ApiError::invalid("'prompt' must be one prompt here, not an array of them", "prompt");
    if (!parsed.prompt_is_tokens && need_fit && info.max_prompt_bytes > 0 &&
        parsed.prompt_text.size() > info.max_prompt_bytes) {
      return ApiError::invalid("the prompt is " + std::to_string(parsed.prompt_text.size()) +
                                   " bytes long, more than the model's context of " + std::to_string(info.n_ctx) +
                                   " tokens can hold",
                               "prompt", "context_length_exceeded");
    }
    out.tokens = parsed.prompt_is_tokens ? std::move(parsed.prompt_tokens)
                                         : generator.tokenize(parsed.prompt_text, parsed.options.parse_special);
    out.cache_salt = std::move(parsed.options.cache_salt);
    return std::optional<AdminPrompt>(std::move(out));
  }
  ChatCompletionRequest parsed;
  if (auto e = parse_chat_completion_request(body, defaults, &parsed)) return *e;
  parsed.chat.special_in_content = parsed.options.parse_special;
  parsed.chat.cache_salt = parsed.options.cache_salt;
  // As a chat completion renders it (api/router.cpp).
  ChatPromptInfo prompt_info;
  Result<std::vector<int32_t>> tokens =
      chat_prompt_with_tools(generator, parsed.parallel_tool_calls, &parsed.chat, &prompt_info);
  if (!tokens.is_ok()) {
    const StatusCode code = tokens.status().code();
    if (code == StatusCode::kOutOfRange) {
      return ApiError::invalid(tokens.status().message(), "messages", "context_length_exceeded");
    }
    return ApiError::invalid(tokens.status().message(), code == StatusCode::kUnsupported ? "tools" : "messages");
  }
  out.tokens = std::move(*tokens);
  out.cache_salt = std::move(parsed.options.cache_salt);
  return std::optional<AdminPrompt>(std::move(out));
}

json tier_json(const CacheTierReport& t) {
  json ev = json::object();
  for (size_t i = 0; i < t.evictions.size(); ++i) ev[evict_reason_name(EvictReason(i))] = t.evictions[i];
  return {{"name", t.name},
          {"policy", t.policy},
          {"persistent", t.persistent},
          {"budget_bytes", t.budget_bytes},
          {"bytes_used", t.bytes_used},
          {"entries", t.entries},
          {"pinned", t.pinned},
          {"hits", t.hits},
          {"misses", t.misses},
          {"bytes_restored", t.bytes_restored},
          {"bytes_spilled", t.bytes_spilled},
          {"restore_seconds", t.restore_seconds},
          {"spill_seconds", t.spill_seconds},
          {"puts_skipped", t.puts_skipped},
          {"writes_failed", t.writes_failed},
          {"evictions", ev}};
}

json report_json(const CacheReport& r) {
  json tiers = json::array();
  for (const CacheTierReport& t : r.tiers) tiers.push_back(tier_json(t));
  return {{"page_size", r.page_size},
          {"page_bytes", r.page_bytes},
          {"device_pages", {{"pool", r.pool_pages}, {"budget", r.budget_pages}, {"available", r.free_pages}}},
          {"queue_length", r.queue_length},
          {"running", r.running},
          {"preemptions", r.preemptions},
          {"requests_total", r.requests_total},
          {"restore_decisions", {{"restore", r.chose_restore}, {"recompute", r.chose_recompute}}},
          {"pins", {{"prefixes", r.pinned_prefixes}, {"pages", r.pinned_pages}}},
          {"tiers", tiers}};
}

}  // namespace

AdminRoutes::AdminRoutes(uv_loop_t* loop, Generator& generator, const ServerOptions& options,
                         std::shared_ptr<LoopWaker> waker, std::shared_ptr<ApiMetrics> metrics,
                         GenerationDefaults& defaults)
    : loop_(loop),
      generator_(generator),
      options_(options),
      waker_(std::move(waker)),
      metrics_(std::move(metrics)),
      defaults_(defaults) {}

bool AdminRoutes::is_admin_path(std::string_view path) { return larder::is_admin_path(path); }

HandlerResult AdminRoutes::on_pool(std::function<HttpResponse()> work) {
  return std::make_unique<PoolJob>(loop_, waker_, std::move(work));
}

HandlerResult AdminRoutes::on_worker(std::function<HttpResponse()> work) {
  return std::make_unique<SerialJob>(worker_, waker_, std::move(work));
}

void AdminRoutes::reload_in_background() {
  if (reload_queued_.exchange(true)) {
    spdlog::info("api: SIGHUP: a reload is queued already; it reads the config as it is when it runs");
    return;
  }
  worker_.post([this] {
    reload_queued_.store(false);
    try {
      (void)reload();
    } catch (const std::exception& e) {
      spdlog::error("api: SIGHUP: the reload failed: {}", e.what());
    }
  });
}

HandlerResult AdminRoutes::handle(HttpRequest& request) {
  const std::string& method = request.method;
  const std::string_view path = request.path();
  const bool get = method == "GET" || method == "HEAD";
  if (path == "/metrics") {
    if (!get) return method_not_allowed("GET, HEAD");
    return on_pool([this] { return metrics(); });
  }
  if (path == "/admin/cache") {
    if (!get) return method_not_allowed("GET, HEAD");
    return on_pool([this] { return cache_report(); });
  }
  if (path == "/admin/cache/pin") {
    if (method != "POST" && method != "DELETE") return method_not_allowed("POST, DELETE");
    return on_worker([this, body = std::move(request.body), unpin = method == "DELETE"] { return pin(body, unpin); });
  }
  if (path == "/admin/cache/evict") {
    if (method != "POST") return method_not_allowed("POST");
    return on_worker([this, body = std::move(request.body)] { return evict(body); });
  }
  if (path == "/admin/reload") {
    if (method != "POST") return method_not_allowed("POST");
    return on_worker([this] { return reload_response(); });
  }
  return error_response(ApiError::not_found("unknown endpoint " + clip_for_message(path) +
                                                " (admin endpoints: /admin/cache, /admin/cache/pin, "
                                                "/admin/cache/evict, /admin/reload, /metrics)",
                                            std::nullopt, "unknown_url"));
}

HttpResponse AdminRoutes::cache_report() const {
  Result<CacheReport> r = generator_.cache_report();
  if (!r.is_ok()) return error_response(admin_error(r.status()));
  return json_response(200, report_json(*r));
}

HttpResponse AdminRoutes::pin(const std::string& body, bool unpin) const {
  PromptOrError p = read_prompt(body, /*evict=*/false, /*need_fit=*/!unpin, generator_, defaults_.sampling());
  if (auto* e = std::get_if<ApiError>(&p)) return error_response(*e);
  const AdminPrompt& prompt = *std::get<std::optional<AdminPrompt>>(p);
  Result<PinResult> r = unpin ? generator_.unpin(prompt.tokens, prompt.cache_salt)
                              : generator_.pin(prompt.tokens, prompt.cache_salt);
  if (!r.is_ok()) return error_response(admin_error(r.status(), "prompt"));
  if (unpin) return json_response(200, {{"unpinned", true}, {"pages", r->n_pages}, {"tokens", r->n_tokens}});
  return json_response(200, {{"pinned", true},
                             {"pages", r->n_pages},
                             {"tokens", r->n_tokens},
                             {"prompt_tokens", r->n_prompt_tokens},
                             {"cached_tokens", r->n_cached_tokens},
                             {"already_pinned", !r->changed}});
}

HttpResponse AdminRoutes::evict(const std::string& body) const {
  PromptOrError p = read_prompt(body, /*evict=*/true, /*need_fit=*/false, generator_, defaults_.sampling());
  if (auto* e = std::get_if<ApiError>(&p)) return error_response(*e);
  const std::optional<AdminPrompt>& prompt = std::get<std::optional<AdminPrompt>>(p);
  Result<EvictResult> r = prompt ? generator_.evict(&prompt->tokens, prompt->cache_salt)
                                 : generator_.evict(nullptr, std::string());
  if (!r.is_ok()) return error_response(admin_error(r.status(), "prompt"));
  json evicted = json::object();
  for (const auto& [tier, n] : r->evicted) evicted[tier] = n;
  return json_response(200, {{"evicted", evicted}, {"device_pages_in_use", r->active_skipped}});
}

Result<ReloadReport> AdminRoutes::reload() const {
  if (!options_.reload) return Status::unsupported("this server cannot reload its configuration");
  Result<ReloadReport> r = options_.reload();
  if (!r.is_ok()) {
    spdlog::error("config reload failed, the configuration in force is unchanged: {}", r.status().message());
    return r;
  }
  defaults_.set(r->default_sampling, r->default_max_tokens);
  std::string changed, later;
  for (const std::string& c : r->changed) changed += (changed.empty() ? "" : "; ") + c;
  for (const std::string& c : r->restart_needed) later += (later.empty() ? "" : "; ") + c;
  spdlog::info("config reloaded from {}: {}{}", r->config_path.empty() ? "(no file)" : r->config_path,
               changed.empty() ? "nothing changed" : "applied " + changed,
               later.empty() ? "" : "; needs a restart to apply (not in force): " + later);
  return r;
}

HttpResponse AdminRoutes::reload_response() const {
  Result<ReloadReport> r = reload();
  if (!r.is_ok()) {
    const StatusCode code = r.status().code();
    if (code == StatusCode::kUnsupported || code == StatusCode::kCancelled) {
      return error_response(admin_error(r.status()));
    }
    return error_response(ApiError{400, r.status().message(), "invalid_request_error", std::nullopt,
                                   std::string("invalid_config")});
  }
  return json_response(200, {{"reloaded", true},
                             {"config_file", r->config_path.empty() ? json(nullptr) : json(r->config_path)},
                             {"changed", r->changed},
                             {"restart_needed", r->restart_needed}});
}

HttpResponse AdminRoutes::metrics() const {
  Result<CacheReport> report = generator_.cache_report();
  if (!report.is_ok() && report.status().code() != StatusCode::kUnsupported) {
    spdlog::debug("metrics: no cache report: {}", report.status().message());
  }
  HttpResponse r;
  r.content_type = std::string(kMetricsContentType);
  r.body = metrics_->render(report.is_ok() ? &*report : nullptr);
  return r;
}

}  // namespace larder
