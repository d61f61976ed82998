// Small helpers shared by the bench programs: a blocking request on top of
// Engine::submit, temp directories, medians, the reference prompt text and
// JSON-line output. Benchmarks print numbers; they never assert on time.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "tests/support/temp_dir.h"

namespace larder::bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Collects one request's final event; records when the first event (the first
// token's text, or the final event) arrived.
class WaitSink : public GenerationSink {
 public:
  void on_event(GenerationEvent ev) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (!have_first_) {
      t_first_ = Clock::now();
      have_first_ = true;
    }
    if (ev.done) {
      final_ = std::move(ev);
      done_ = true;
      cv_.notify_all();
    }
  }
  // Waits for the final event; false after `timeout_s` seconds.
  bool wait(int timeout_s) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, std::chrono::seconds(timeout_s), [&] { return done_; });
  }
  GenerationEvent final_;
  Clock::time_point t_first_;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool have_first_ = false;
};

struct Timed {
  GenerationEvent final;
  double first_event_ms = 0;  // submit -> first event seen by the client (wall clock)
  double total_ms = 0;        // submit -> final event
};

// Greedy, no penalties, EOS ignored: the same settings on both sides of the
// llama.cpp comparison.
inline GenerationRequest greedy(std::vector<int32_t> prompt, int max_tokens) {
  GenerationRequest r;
  r.prompt_tokens = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.sampling.top_k = 0;
  r.sampling.top_p = 1;
  r.sampling.min_p = 0;
  r.sampling.repeat_penalty = 1;
  r.ignore_eos = true;
  return r;
}

// Submits and blocks until the request is done. Exits the program on an
// engine error or a timeout (a benchmark with a failed request means nothing).
inline Timed run_request(Engine& engine, GenerationRequest req, int timeout_s = 600) {
  auto sink = std::make_shared<WaitSink>();
  auto t0 = Clock::now();
  engine.submit(std::move(req), sink);
  if (!sink->wait(timeout_s)) {
    std::fprintf(stderr, "request timed out after %d s\n", timeout_s);
    std::exit(1);
  }
  Timed t;
  t.total_ms = ms_since(t0);
  t.first_event_ms = std::chrono::duration<double, std::milli>(sink->t_first_ - t0).count();
  t.final = std::move(sink->final_);
  if (t.final.finish == FinishReason::kError || t.final.finish == FinishReason::kCancelled) {
    std::fprintf(stderr, "request failed (%s): %s\n", finish_reason_name(t.final.finish),
                 t.final.error.c_str());
    std::exit(1);
  }
  return t;
}

inline std::unique_ptr<Engine> make_engine(const EngineOptions& opt) {
  auto r = Engine::create(opt);
  if (!r.is_ok()) {
    std::fprintf(stderr, "Engine::create(%s): %s\n", opt.model_path.c_str(),
                 r.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

using TempDir = ::larder::testing::TempDir;  // tests/support/temp_dir.h

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline double min_of(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}
inline double max_of(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

// The reference.json next to the model files: $LARDER_TEST_MODELS, else the
// directory of `model_path`.
inline std::string reference_path(const std::string& model_path) {
  if (const char* env = std::getenv("LARDER_TEST_MODELS"); env != nullptr && *env != '\0') {
    std::string p = std::string(env) + "/reference.json";
    if (std::filesystem::exists(p)) return p;
  }
  return (std::filesystem::path(model_path).parent_path() / "reference.json").string();
}

// The prompt text of reference.json case `name` ("long": 299 tokens with BOS
// on stories260K). Exits when the file or the case is missing.
inline std::string reference_prompt(const std::string& path, const std::string& name) {
  std::ifstream f(path);
  if (!f) {
    std::fprintf(stderr, "cannot open %s (set LARDER_TEST_MODELS or pass --reference)\n", path.c_str());
    std::exit(1);
  }
  // A reference.json beside the test models: {"cases": [{"name", "prompt", ...}, ...]}.
  try {
    nlohmann::json j = nlohmann::json::parse(f);
    for (const auto& c : j.at("cases")) {
      if (c.at("name") == name) return c.at("prompt").get<std::string>();
    }
  } catch (const nlohmann::json::exception& e) {
    std::fprintf(stderr, "%s: not a reference file ({\"cases\": [{\"name\", \"prompt\"}]}): %s\n", path.c_str(), e.what());
    std::exit(1);
  }
  std::fprintf(stderr, "%s: no case named %s\n", path.c_str(), name.c_str());
  std::exit(1);
}

// Prints one machine-readable result line (prefixed by nothing, starts with '{').
inline void print_json_line(const nlohmann::json& j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

inline std::string file_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

}  // namespace larder::bench
