// ApiMetrics: what GET /metrics exposes, in the Prometheus text exposition
// format (version 0.0.4: `# HELP` / `# TYPE` lines, counters ending in
// _total, histograms as _bucket{le=...} / _sum / _count), written by
// prometheus-cpp's TextSerializer.
//
// Counted by the API layer (loop thread; prometheus-cpp's metrics are
// thread-safe, so the scrape may read them on a pool thread):
//   larder_http_requests_total{endpoint, code}   responses sent, by endpoint
//       (the known paths, "/v1/..." spelled in full; anything else "other")
//       and HTTP status
//   larder_prompt_tokens_total, larder_prompt_cached_tokens_total,
//   larder_generation_tokens_total               per finished generation
//   larder_time_to_first_token_seconds           histogram: from the request's
//       submission to the engine (after its prompt was tokenized) to the
//       first event with output (the first text, or the end)
//   larder_inter_token_latency_seconds           histogram: between two
//       text events of one response (one token each, except where the
//       detokenizer or a stop string held text back)
// Taken from the engine at each scrape (Generator::cache_report; left out
// when the engine cannot answer):
//   larder_cache_{hits,misses}_total{tier}, larder_cache_{restored,spilled}_bytes_total{tier},
//   larder_cache_{restore,spill}_seconds_total{tier}, larder_cache_evictions_total{tier, reason},
//   larder_cache_{used,budget}_bytes{tier}, larder_cache_entries{tier}, larder_cache_pinned_entries{tier},
//   larder_queue_length, larder_running_sequences, larder_preemptions_total,
//   larder_cache_restore_decisions_total{choice} (restore or recompute),
//   larder_pinned_prefixes, larder_prefill_tokens_total (prompt positions
//   computed by prefill), larder_draft_tokens{,_accepted}_total (speculative
//   decoding: drafts verified, agreed), larder_draft_model_tokens{,_accepted}_total (of
//   those, the draft model's), larder_choice_pages_{shared,copied}_total (n > 1:
//   prompt pages the choices share, partial last pages copied for them)
// (engine/cache_admin.h says what each tier's numbers count).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "engine/cache_admin.h"
#include "engine/generation.h"

namespace prometheus {
class Registry;
class Counter;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace larder {

// Content-Type of the exposition.
inline constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

class ApiMetrics {
 public:
  ApiMetrics();
  ~ApiMetrics();
  ApiMetrics(const ApiMetrics&) = delete;
  ApiMetrics& operator=(const ApiMetrics&) = delete;

  // A response with `status` to a request for `path` (the target without
  // its query).
  void count_response(std::string_view path, int status);
  // A generation's final event: its prompt, cached and generated tokens
  // (count_prompt false: the generated ones only, for the 2nd..nth choice
  // of one prompt).
  void count_generation(const GenerationEvent& final_event, bool count_prompt = true);
  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);

  // The exposition of every metric; the cache's when `report` is given.
  std::string render(const CacheReport* report) const;

  // The endpoint label of a path: "/v1/chat/completions", "/v1/completions",
  // "/v1/models", "/health", "/admin/cache", "/admin/cache/pin",
  // "/admin/cache/evict", "/admin/reload", "/metrics", else "other".
  static std::string_view endpoint_label(std::string_view path);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* cached_tokens_;
  prometheus::Counter* generated_tokens_;
  prometheus::Histogram* ttft_;
  prometheus::Histogram* itl_;
};

}  // namespace larder
