// bench_chat_trace: a multi-user chat trace replayed through the engine under
// several cache configurations, against the same trace with the cache off.
//
// The trace (generated, fixed seed): U users share one system prompt of S
// tokens; each user opens with a message of 100 tokens and comes back T-1
// more times (random order: users interleave, so a user returns after a
// random gap of other users' turns), each turn sending the whole
// conversation: system prompt, earlier messages, the answers the model gave
// (the tokens it sampled, as a chat client resends them) and a new message
// of 50 tokens. Answers are 16 tokens (greedy, EOS ignored).
//
// Model: a random-weight llama (512 wide, 4 layers, 8 heads / 4 KV heads,
// context 4096, F16 weights): prefill costs something, the run stays short.
// Pages: 16 tokens of f32 K/V = 4 layers * 2 * 16 * 256 * 4 = 131,072 bytes.
// The device tier gets its minimum (4096 / 16 + 1 = 257 pages, ~32 MiB) and
// the disk tier less than the working set (--disk-mib, default 64 MiB = 512
// pages; 50 users * 3 turns make ~13,400 distinct tokens = ~840 pages =
// ~105 MiB, printed with the results).
//
// Configs: off (every request gets its own cache_salt: nothing is ever
// reused), lru, lfu, priority_lru (the same policy on the device and the
// disk tier). For each: prompt tokens served from the cache / all prompt
// tokens (hit rate), and TTFT (submit -> first token, wall clock) mean and
// p99. One engine per config, a fresh cache directory each time.
//
// usage: bench_chat_trace [--users 50] [--turns 3] [--system-tokens 1000]
//                         [--threads 2] [--disk-mib 64] [--configs off,lru,lfu,priority_lru]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "bench/bench_cli.h"
#include "bench/bench_util.h"
#include "storage/open_tiers.h"
#include "tests/support/random_llama.h"

namespace lb = larder::bench;

namespace {

struct Args {
  int users = 50, turns = 3, system_tokens = 1000, threads = 2, disk_mib = 64;
  std::vector<std::string> configs{"off", "lru", "lfu", "priority_lru"};
};

Args parse_args(int argc, char** argv) {
  Args a;
  CLI::App app("bench_chat_trace: prefix-cache hit rates of eviction policies on a chat trace");
  app.add_option("--users", a.users, "conversations")->check(larder::bench::kPositive);
  app.add_option("--turns", a.turns, "turns per conversation")->check(larder::bench::kPositive);
  app.add_option("--system-tokens", a.system_tokens, "shared system prompt length in tokens")->check(larder::bench::kPositive);
  app.add_option("--threads", a.threads, "engine threads")->check(larder::bench::kPositive);
  app.add_option("--disk-mib", a.disk_mib, "disk tier budget in MiB")->check(larder::bench::kNonNegative);
  app.add_option("--configs", a.configs, "policies to run, comma-separated (off: no reuse)")
      ->delimiter(',')
      ->check(CLI::IsMember({"off", "lru", "lfu", "priority_lru", "priority_lfu"}));
  lb::parse_or_exit(app, argc, argv);
  return a;
}

struct Result {
  std::string config;
  int64_t prompt_tokens = 0, cached_tokens = 0;
  std::vector<double> ttft_ms;
};

Result replay(const std::string& model, const Args& a, const std::string& config,
              const std::vector<int>& order, const std::vector<int32_t>& system,
              const std::vector<std::vector<std::vector<int32_t>>>& messages) {
  lb::TempDir dir("larder-bench-chat");
  larder::EngineOptions o;
  o.model_path = model;
  o.n_threads = a.threads;
  o.cache.page_size = 16;
  o.cache.device.budget_bytes = 257 * 131072;
  o.cache.disk.dir = dir.str();
  o.cache.disk.budget_bytes = int64_t(a.disk_mib) << 20;
  const bool off = config == "off";
  o.cache.device.policy = o.cache.disk.policy = off ? "lru" : config;
  o.open_tiers = larder::tier_factory();
  auto engine = lb::make_engine(o);

  Result r;
  r.config = config;
  std::vector<std::vector<int32_t>> conversation(size_t(a.users));
  std::vector<int> turn(size_t(a.users), 0);
  int64_t n = 0;
  for (int u : order) {
    std::vector<int32_t>& conv = conversation[size_t(u)];
    if (conv.empty()) conv = system;
    const auto& msg = messages[size_t(u)][size_t(turn[size_t(u)]++)];
    conv.insert(conv.end(), msg.begin(), msg.end());
    larder::GenerationRequest req = lb::greedy(conv, 16);
    if (off) req.cache_salt = "off-" + std::to_string(n);
    ++n;
    lb::Timed t = lb::run_request(*engine, std::move(req));
    r.prompt_tokens += t.final.prompt_tokens;
    r.cached_tokens += t.final.cached_tokens;
    r.ttft_ms.push_back(t.first_event_ms);
    conv.insert(conv.end(), t.final.output_tokens.begin(), t.final.output_tokens.end());
  }
  return r;
}

double p99(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, size_t(double(v.size()) * 0.99))];
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  const Args a = parse_args(argc, argv);
  lb::TempDir model_dir("larder-bench-model");
  larder::testing::RandomLlamaSpec spec;
  spec.n_vocab = 32000;
  spec.n_embd = 512;
  spec.n_layer = 4;
  spec.n_head = 8;
  spec.n_head_kv = 4;
  spec.n_ff = 1408;
  spec.n_ctx = 4096;
  spec.weight_type = larder::GgmlType::kF16;
  const std::string model = (model_dir.path() / "chat-synthetic-f16.gguf").string();
  if (larder::Status st = larder::testing::write_random_llama_gguf(model, spec); !st.is_ok()) {
    std::fprintf(stderr, "write_random_llama_gguf: %s\n", st.to_string().c_str());
    return 1;
  }

  std::mt19937 rng(12345);
  std::uniform_int_distribution<int32_t> id(3, spec.n_vocab - 1);
  auto tokens = [&](int n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& t : v) t = id(rng);
    return v;
  };
  std::vector<int32_t> system = tokens(a.system_tokens);
  system.insert(system.begin(), 1);  // BOS
  std::vector<std::vector<std::vector<int32_t>>> messages(size_t(a.users));
  std::vector<int> order;
  for (int u = 0; u < a.users; ++u) {
    for (int t = 0; t < a.turns; ++t) {
      messages[size_t(u)].push_back(tokens(t == 0 ? 100 : 50));
      order.push_back(u);
    }
  }
  // Random interleaving, each user's turns in order (a shuffle of the
  // multiset of user ids: the k-th occurrence of u is u's turn k).
  std::shuffle(order.begin(), order.end(), rng);

  std::vector<Result> results;
  for (const std::string& c : a.configs) {
    std::fprintf(stderr, "== %s: %zu requests\n", c.c_str(), order.size());
    results.push_back(replay(model, a, c, order, system, messages));
  }
  const Result* off = nullptr;
  for (const Result& r : results) {
    if (r.config == "off") off = &r;
  }
  // Working set: the pages of the system prompt once and of every user's
  // own messages and answers (16 answer tokens a turn), 131,072 bytes each.
  int64_t tokens_total = a.system_tokens + 1;
  for (int u = 0; u < a.users; ++u) {
    for (const auto& m : messages[size_t(u)]) tokens_total += int64_t(m.size()) + 16;
  }
  const double working_mib = double(tokens_total / 16) * 131072.0 / (1 << 20);
  std::printf("\n%d users, shared system prompt %d tokens, %d turns each (%zu requests), %d threads, "
              "disk budget %d MiB, working set ~%.0f MiB\n\n",
              a.users, a.system_tokens, a.turns, order.size(), a.threads, a.disk_mib, working_mib);
  std::printf("| config | hit rate (cached / prompt tokens) | TTFT mean ms | TTFT p99 ms | mean vs off |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: |\n");
  for (const Result& r : results) {
    const double m = mean(r.ttft_ms);
    std::printf("| %s | %.1f%% | %.0f | %.0f | %s |\n", r.config.c_str(),
                r.prompt_tokens == 0 ? 0.0 : 100.0 * double(r.cached_tokens) / double(r.prompt_tokens), m,
                p99(r.ttft_ms),
                off && m > 0 ? (std::to_string(mean(off->ttft_ms) / m).substr(0, 4) + "x faster").c_str() : "-");
  }
  return 0;
}
