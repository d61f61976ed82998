// AdminRoutes: the admin and metrics endpoints. They exist only at these
// paths (no /v1 prefix) and only with ServerOptions::admin_enabled (else
// 404, like any unknown path); access: api/access_policy.h (admin_token,
// never CORS).
//
//   GET    /admin/cache        the cache report (Generator::cache_report) as
//                              {"page_size", "page_bytes", "device_pages":
//                              {"pool", "budget", "available"}, "queue_length",
//                              "running", "preemptions", "requests_total",
//                              "restore_decisions": {"restore", "recompute"},
//                              "pins": {"prefixes", "pages"}, "tiers": [{"name",
//                              "policy", "persistent", "budget_bytes",
//                              "bytes_used", "entries", "pinned", "hits",
//                              "misses", "bytes_restored", "bytes_spilled",
//                              "restore_seconds", "spill_seconds",
//                              "puts_skipped", "writes_failed", "evictions":
//                              {"budget", "ttl", "admin", "corrupt"}}]}
//   POST   /admin/cache/pin    body {"prompt": ...} (a string or token ids, as
//                              /v1/completions takes it) or {"messages": [...]}
//                              (and "tools", as /v1/chat/completions), optional
//                              "cache_salt", "parse_special": pins the prompt's
//                              full pages. 200 {"pinned": true, "pages",
//                              "tokens", "prompt_tokens", "cached_tokens",
//                              "already_pinned"}
//   DELETE /admin/cache/pin    the same body: unpins. 200 {"unpinned": true,
//                              "pages", "tokens"}; 404 when not pinned
//   POST   /admin/cache/evict  no body, {} or {"all": true}: everything; or a
//                              prompt / messages body: its pages. 200
//                              {"evicted": {"<tier>": n, ...},
//                              "device_pages_in_use": n}
//   POST   /admin/reload       ServerOptions::reload: 200 {"reloaded": true,
//                              "config_file", "changed": [...],
//                              "restart_needed": [...]}; a config error 400
//                              (the message names the key; nothing changes)
//   GET    /metrics            api/metrics.h, text/plain; version=0.0.4
// Errors are OpenAI-shaped (api/api_error.h). No engine call, tokenizing or
// rendering runs on the loop: GET /admin/cache and /metrics run on libuv's
// pool (api/pool_job.h); pin, unpin, evict and reload, which may block for
// long, run one at a time in arrival order on the routes' own thread
// (api/serial_worker.h), so they never hold the pool threads that chat
// requests build their prompts on.
#pragma once

#include <uv.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "api/generation_job.h"
#include "api/http_message.h"
#include "api/http_server.h"
#include "api/metrics.h"
#include "api/serial_worker.h"

namespace larder {

// The generation defaults ([sampling]) a reload may change while requests
// are prepared on pool threads. Thread-safe.
class GenerationDefaults {
 public:
  GenerationDefaults(const SamplingParams& sampling, int max_tokens) : sampling_(sampling), max_tokens_(max_tokens) {}
  SamplingParams sampling() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sampling_;
  }
  int max_tokens() const {
    std::lock_guard<std::mutex> lock(mu_);
    return max_tokens_;
  }
  void set(const SamplingParams& sampling, int max_tokens) {
    std::lock_guard<std::mutex> lock(mu_);
    sampling_ = sampling;
    max_tokens_ = max_tokens;
  }

 private:
  mutable std::mutex mu_;
  SamplingParams sampling_;
  int max_tokens_;
};

class AdminRoutes {
 public:
  AdminRoutes(uv_loop_t* loop, Generator& generator, const ServerOptions& options, std::shared_ptr<LoopWaker> waker,
              std::shared_ptr<ApiMetrics> metrics, GenerationDefaults& defaults);

  // "/metrics", "/admin" and everything under "/admin/".
  static bool is_admin_path(std::string_view path);

  // Routes a request for an admin path (admin is on). May take the body.
  HandlerResult handle(HttpRequest& request);

  // Runs the reload and applies the server's part (the sampling defaults);
  // logs the outcome. Pool thread (POST /admin/reload, SIGHUP).
  Result<ReloadReport> reload() const;

  // SIGHUP (loop thread): queues reload() on the admin thread. A SIGHUP
  // while a reload is queued and not started yet adds nothing (that reload
  // reads the file as it is then), so a storm of signals costs one or two
  // reloads.
  void reload_in_background();

 private:
  HandlerResult on_pool(std::function<HttpResponse()> work);
  HandlerResult on_worker(std::function<HttpResponse()> work);
  HttpResponse cache_report() const;
  HttpResponse pin(const std::string& body, bool unpin) const;
  HttpResponse evict(const std::string& body) const;
  HttpResponse reload_response() const;
  HttpResponse metrics() const;

  uv_loop_t* loop_;
  Generator& generator_;
  const ServerOptions& options_;
  std::shared_ptr<LoopWaker> waker_;
  std::shared_ptr<ApiMetrics> metrics_;
  GenerationDefaults& defaults_;
  std::atomic<bool> reload_queued_{false};
  // Last: joined (the running admin call finished) before the rest goes.
  SerialWorker worker_;
};

}  // namespace larder
