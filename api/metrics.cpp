#include "api/metrics.h"

#include <array>
#include <sstream>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace larder {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Seconds. Time to first token spans a restored 2 ms prompt to a cold
// prefill of minutes; tokens come every ~50 us (the test model on a CPU) to
// a second (a large model on a slow machine).
const prometheus::Histogram::BucketBoundaries kTtftBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640};
const prometheus::Histogram::BucketBoundaries kItlBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2.5,
    5, 10};

constexpr std::array<std::string_view, 12> kEndpoints = {
    "/v1/chat/completions", "/v1/completions",    "/v1/models",    "/health",   "/tokenize",  "/detokenize",
    "/apply-template",      "/admin/cache",       "/admin/cache/pin", "/admin/cache/evict", "/admin/reload", "/metrics"};

MetricFamily family(std::string name, std::string help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

ClientMetric sample(double value, MetricType type, std::vector<ClientMetric::Label> labels = {}) {
  ClientMetric m;
  m.label = std::move(labels);
  if (type == MetricType::Counter) m.counter.value = value;
  else m.gauge.value = value;
  return m;
}

// One family with a sample per tier.
template <typename Get>
MetricFamily per_tier(const CacheReport& r, std::string name, std::string help, MetricType type, Get get) {
  MetricFamily f = family(std::move(name), std::move(help), type);
  for (const CacheTierReport& t : r.tiers) f.metric.push_back(sample(double(get(t)), type, {{"tier", t.name}}));
  return f;
}

void add_cache(const CacheReport& r, std::vector<MetricFamily>& out) {
  const MetricType C = MetricType::Counter, G = MetricType::Gauge;
  out.push_back(per_tier(r, "larder_cache_hits_total",
                         "KV pages found in the tier (device: prefix pages resident when a request was admitted; "
                         "host, disk: records read and found).",
                         C, [](const CacheTierReport& t) { return t.hits; }));
  out.push_back(per_tier(r, "larder_cache_misses_total", "KV pages looked up in the tier and not found.", C,
                         [](const CacheTierReport& t) { return t.misses; }));
  out.push_back(per_tier(r, "larder_cache_restored_bytes_total",
                         "Bytes restored (device: copied onto it from a lower tier; host, disk: read from it).", C,
                         [](const CacheTierReport& t) { return t.bytes_restored; }));
  out.push_back(per_tier(r, "larder_cache_spilled_bytes_total",
                         "Bytes spilled (device: page records copied off it; host, disk: written to it).", C,
                         [](const CacheTierReport& t) { return t.bytes_spilled; }));
  out.push_back(per_tier(r, "larder_cache_restore_seconds_total", "Time spent restoring (reading) pages.", C,
                         [](const CacheTierReport& t) { return t.restore_seconds; }));
  out.push_back(per_tier(r, "larder_cache_spill_seconds_total", "Time spent spilling (writing) pages.", C,
                         [](const CacheTierReport& t) { return t.spill_seconds; }));
  MetricFamily ev = family("larder_cache_evictions_total", "KV pages evicted from the tier, by reason.", C);
  for (const CacheTierReport& t : r.tiers) {
    for (size_t i = 0; i < t.evictions.size(); ++i) {
      ev.metric.push_back(sample(double(t.evictions[i]), C,
                                 {{"reason", evict_reason_name(EvictReason(i))}, {"tier", t.name}}));
    }
  }
  out.push_back(std::move(ev));
  out.push_back(per_tier(r, "larder_cache_used_bytes", "Bytes the tier holds now (metadata included).", G,
                         [](const CacheTierReport& t) { return t.bytes_used; }));
  out.push_back(per_tier(r, "larder_cache_budget_bytes", "The tier's byte budget.", G,
                         [](const CacheTierReport& t) { return t.budget_bytes; }));
  out.push_back(per_tier(r, "larder_cache_entries", "KV pages (records) the tier holds now.", G,
                         [](const CacheTierReport& t) { return t.entries; }));
  out.push_back(per_tier(r, "larder_cache_pinned_entries", "Of those, pinned ones.", G,
                         [](const CacheTierReport& t) { return t.pinned; }));
  const auto single = [&](std::string name, std::string help, MetricType type, double v) {
    MetricFamily f = family(std::move(name), std::move(help), type);
    f.metric.push_back(sample(v, type));
    out.push_back(std::move(f));
  };
  single("larder_queue_length", "Requests waiting for admission.", G, double(r.queue_length));
  single("larder_running_sequences", "Sequences admitted (prefilling, decoding or waiting for a restore).", G,
         double(r.running));
  single("larder_preemptions_total", "Sequences preempted because KV pages ran out.", C, double(r.preemptions));
  MetricFamily choice = family("larder_cache_restore_decisions_total",
                               "Lookups of a request's pages in the tiers below the device, by what the engine chose: "
                               "read them (restore) or prefill them (recompute: the measured prefill rate beat the "
                               "slowest tier's measured read bandwidth; docs/cache-tuning.md).",
                               C);
  choice.metric.push_back(sample(double(r.chose_restore), C, {{"choice", "restore"}}));
  choice.metric.push_back(sample(double(r.chose_recompute), C, {{"choice", "recompute"}}));
  out.push_back(std::move(choice));
  single("larder_prefill_tokens_total", "Prompt positions computed by prefill (not covered by the cache or a fork).",
         C, double(r.prefill_tokens));
  single("larder_draft_tokens_total", "Draft tokens of speculative decoding (prompt lookup and the draft model) verified.", C,
         double(r.draft_tokens));
  single("larder_draft_tokens_accepted_total", "Draft tokens the model agreed with (emitted without a pass of their own).",
         C, double(r.draft_tokens_accepted));
  single("larder_draft_model_tokens_total",
         "Of the draft tokens verified, those the draft model (engine.draft_model) proposed.", C,
         double(r.draft_model_tokens));
  single("larder_draft_model_tokens_accepted_total", "Of the draft model's draft tokens, those the model agreed with.",
         C, double(r.draft_model_tokens_accepted));
  single("larder_choice_pages_shared_total", "Full prompt pages the choices of an n > 1 request share by reference.",
         C, double(r.choice_pages_shared));
  single("larder_choice_pages_copied_total", "Partial last prompt pages copied for the choices of an n > 1 request.",
         C, double(r.choice_pages_copied));
  single("larder_pinned_prefixes", "Prompt prefixes pinned (POST /admin/cache/pin).", G, double(r.pinned_prefixes));
}

}  // namespace

ApiMetrics::ApiMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  requests_ = &prometheus::BuildCounter()
                   .Name("larder_http_requests_total")
                   .Help("HTTP responses sent, by endpoint and status code.")
                   .Register(*registry_);
  const auto counter = [&](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(*registry_).Add({});
  };
  prompt_tokens_ = counter("larder_prompt_tokens_total", "Prompt tokens of finished generations.");
  cached_tokens_ = counter("larder_prompt_cached_tokens_total",
                           "Of those, tokens whose KV came from the cache (usage.prompt_tokens_details.cached_tokens).");
  generated_tokens_ = counter("larder_generation_tokens_total", "Tokens generated.");
  ttft_ = &prometheus::BuildHistogram()
               .Name("larder_time_to_first_token_seconds")
               .Help("From a request's submission to the engine to its first output.")
               .Register(*registry_)
               .Add({}, kTtftBuckets);
  itl_ = &prometheus::BuildHistogram()
              .Name("larder_inter_token_latency_seconds")
              .Help("Time between two streamed tokens of one response.")
              .Register(*registry_)
              .Add({}, kItlBuckets);
}

ApiMetrics::~ApiMetrics() = default;

std::string_view ApiMetrics::endpoint_label(std::string_view path) {
  std::string_view p = path;
  if (p.starts_with("/v1/")) p.remove_prefix(3);
  if (p == "/models" || p.starts_with("/models/")) return "/v1/models";
  if (p == "/chat/completions") return "/v1/chat/completions";
  if (p == "/completions") return "/v1/completions";
  if (p == "/health") return "/health";
  if (p == "/tokenize") return "/tokenize";
  if (p == "/detokenize") return "/detokenize";
  if (p == "/apply-template") return "/apply-template";
  for (std::string_view e : kEndpoints) {
    if (path == e) return e;
  }
  return "other";
}

void ApiMetrics::count_response(std::string_view path, int status) {
  requests_->Add({{"endpoint", std::string(endpoint_label(path))}, {"code", std::to_string(status)}}).Increment();
}

void ApiMetrics::count_generation(const GenerationEvent& e, bool count_prompt) {
  if (count_prompt) {
    prompt_tokens_->Increment(double(e.prompt_tokens));
    cached_tokens_->Increment(double(e.cached_tokens));
  }
  generated_tokens_->Increment(double(e.completion_tokens));
}

void ApiMetrics::observe_time_to_first_token(double seconds) { ttft_->Observe(seconds); }
void ApiMetrics::observe_inter_token_latency(double seconds) { itl_->Observe(seconds); }

std::string ApiMetrics::render(const CacheReport* report) const {
  std::vector<MetricFamily> families = registry_->Collect();
  if (report != nullptr) add_cache(*report, families);
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace larder
