// Helpers for engine tests: a sink that collects a request's events, and a
// blocking "generate" on top of Engine::submit.
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "storage/open_tiers.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_models.h"

namespace larder::testing {

class CollectSink : public GenerationSink {
 public:
  void on_event(GenerationEvent ev) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (!ev.done) {
      text_ += ev.text;
      tokens_.insert(tokens_.end(), ev.tokens.begin(), ev.tokens.end());
      ++n_text_events_;
      if (cancel_after_ > 0 && n_text_events_ >= cancel_after_) cancel();
    } else {
      text_ += ev.text;
      final_ = std::move(ev);
      done_ = true;
      cv_.notify_all();
    }
  }
  // Waits for the final event (fails the test after 60 s).
  bool wait() {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, std::chrono::seconds(60), [&] { return done_; });
  }
  void cancel_after(int n_events) { cancel_after_ = n_events; }
  std::string text_;
  std::vector<int32_t> tokens_;
  GenerationEvent final_;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  int n_text_events_ = 0;
  int cancel_after_ = 0;
};

// Engine options for the tests: 16-token pages, 64 MiB of KV memory, one
// thread, the disk tier in cache_dir ("" for none).
inline EngineOptions options_for(const std::string& model, const std::string& cache_dir) {
  EngineOptions o;
  o.model_path = model;
  o.cache.disk.dir = cache_dir;
  o.open_tiers = tier_factory();
  o.cache.page_size = 16;
  // The engine tests' byte counts and llama.cpp references are for F32 K/V
  // (the default is f16; tests that are about the dtype set it themselves).
  o.cache.kv_dtype = "f32";
  o.cache.device.budget_bytes = 64 << 20;
  o.n_threads = 1;
  return o;
}

inline std::unique_ptr<Engine> make_engine(const EngineOptions& o) {
  auto e = Engine::create(o);
  INFO(e.status().to_string());
  REQUIRE(e.is_ok());
  return std::move(e).value();
}

struct Generated {
  std::string text;
  std::vector<int32_t> tokens;   // every generated id (from the final event)
  GenerationEvent final;
};

inline GenerationRequest greedy_request(std::vector<int32_t> prompt, int max_tokens) {
  GenerationRequest r;
  r.prompt_tokens = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.sampling.top_k = 0;
  r.sampling.top_p = 1;
  r.sampling.min_p = 0;
  r.ignore_eos = true;
  r.return_prompt_logits = true;
  return r;
}

inline Generated generate(Engine& engine, GenerationRequest req) {
  auto sink = std::make_shared<CollectSink>();
  engine.submit(std::move(req), sink);
  bool ok = sink->wait();
  Generated g;
  if (!ok) {
    g.final.finish = FinishReason::kError;
    g.final.error = "timed out";
    return g;
  }
  g.text = sink->text_;
  g.tokens = sink->final_.output_tokens;
  g.final = std::move(sink->final_);
  return g;
}

// Seeds 1..n_seeds of a sampled request whose settings vary with the seed
// (temperature 0.8 or 1.5, top_p 1 or 0.9, repeat penalty 1 or 1.1): `a`
// and `b` must give the same tokens for each (CHECKed). Returns how many
// seeds give other tokens on `b` with seed + 1000, which shows the seed
// matters (so the equality says something).
inline int64_t check_same_seeded_samples(Engine& a, Engine& b, const std::vector<int32_t>& prompt, int max_tokens,
                                         uint64_t n_seeds) {
  int64_t differing = 0;
  for (uint64_t seed = 1; seed <= n_seeds; ++seed) {
    GenerationRequest req = greedy_request(prompt, max_tokens);
    req.sampling.temperature = seed % 3 == 0 ? 1.5f : 0.8f;
    req.sampling.top_p = seed % 2 == 0 ? 0.9f : 1.0f;
    req.sampling.repeat_penalty = seed % 4 == 0 ? 1.1f : 1.0f;
    req.sampling.seed = seed;
    const Generated x = generate(a, req), y = generate(b, req);
    INFO("seed " << seed);
    CHECK(x.tokens == y.tokens);
    req.sampling.seed = seed + 1000;
    differing += generate(b, req).tokens != y.tokens;
  }
  return differing;
}

inline nlohmann::json load_reference() {
  auto dir = test_models_dir();
  std::ifstream f(*dir + "/reference.json");
  return nlohmann::json::parse(f);
}

// The prompt tokens of one reference.json case (e.g. "long": 299 tokens);
// empty for an unknown name.
inline std::vector<int32_t> reference_prompt(const std::string& name) {
  const nlohmann::json ref = load_reference();
  for (const auto& c : ref["cases"]) {
    if (c["name"] == name) return c["prompt_tokens"].get<std::vector<int32_t>>();
  }
  return {};
}

}  // namespace larder::testing
