// Sampler: the whole chain for one request (greedy path, penalty window,
// seeding, empirical distribution). Expected values by hand or python3/numpy
// as noted.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "engine/sampling/sampler.h"

using larder::Sampler;
using larder::SamplingParams;

namespace {

// Plain sampling at temperature T: every truncation stage off.
SamplingParams plain(float temperature, uint64_t seed) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

SamplingParams greedy() { return plain(0.0f, 1); }

std::vector<double> frequencies(Sampler& s, const std::vector<float>& logits, int n_draws) {
  std::vector<double> f(logits.size(), 0.0);
  for (int i = 0; i < n_draws; ++i) {
    const int32_t id = s.sample(logits, {});
    REQUIRE(id >= 0);
    REQUIRE(id < static_cast<int32_t>(logits.size()));
    f[id] += 1.0 / n_draws;
  }
  return f;
}

}  // namespace

TEST_CASE("greedy takes the argmax, ties to the lowest id", "[sampling]") {
  // By hand: max 3 at ids 1 and 2 -> 1.
  Sampler s(greedy(), 4);
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f};
  CHECK(s.sample(logits, {}) == 1);
  // Negative temperature is greedy too.
  SamplingParams neg = greedy();
  neg.temperature = -1.0f;
  Sampler s2(neg, 4);
  CHECK(s2.sample(logits, {}) == 1);
}

TEST_CASE("greedy after penalties", "[sampling]") {
  struct Row {
    std::vector<float> logits;
    std::vector<int32_t> history;
    float repeat, presence, frequency;
    int last_n;
    int32_t expected;
  };
  // All by hand.
  const std::vector<Row> table = {
      // 5 / 2 = 2.5 < 4: id 1.
      {{5.0f, 4.0f}, {0}, 2.0f, 0.0f, 0.0f, 64, 1},
      // frequency 1, id 1 once: 4 - 1 = 3 ties with id 2 (3) -> lowest id 1.
      {{1.0f, 4.0f, 3.0f}, {1}, 1.0f, 0.0f, 1.0f, 64, 1},
      // id 1 twice: 4 - 2 = 2 < 3 -> id 2.
      {{1.0f, 4.0f, 3.0f}, {1, 1}, 1.0f, 0.0f, 1.0f, 64, 2},
      // presence 1.5 on ids 1 and 2: 2.5, 1.5 -> id 1 (2.5 > 1).
      {{1.0f, 4.0f, 3.0f}, {2, 1, 2}, 1.0f, 1.5f, 0.0f, 64, 1},
      // Window: logits [5, 1, 4.5], history [0, 1, 1], repeat 2.
      // last 2 = [1, 1]: id 0 untouched (5) -> 0.
      {{5.0f, 1.0f, 4.5f}, {0, 1, 1}, 2.0f, 0.0f, 0.0f, 2, 0},
      // last 3: id 0 -> 2.5 < 4.5 -> 2; -1 (all) the same; 0: no penalty -> 0.
      {{5.0f, 1.0f, 4.5f}, {0, 1, 1}, 2.0f, 0.0f, 0.0f, 3, 2},
      {{5.0f, 1.0f, 4.5f}, {0, 1, 1}, 2.0f, 0.0f, 0.0f, -1, 2},
      {{5.0f, 1.0f, 4.5f}, {0, 1, 1}, 2.0f, 0.0f, 0.0f, 0, 0},
      // Penalised ids at both ends and an out-of-range id in the history:
      // 6 / 2 = 3 and 7 / 2 = 3.5 lose to 4 at id 2.
      {{6.0f, 1.0f, 4.0f, 7.0f}, {0, 3, 99}, 2.0f, 0.0f, 0.0f, 64, 2},
  };
  for (size_t i = 0; i < table.size(); ++i) {
    const Row& row = table[i];
    INFO("row " << i);
    SamplingParams p = greedy();
    p.repeat_penalty = row.repeat;
    p.presence_penalty = row.presence;
    p.frequency_penalty = row.frequency;
    p.repeat_last_n = row.last_n;
    Sampler s(p, static_cast<int>(row.logits.size()));
    CHECK(s.sample(row.logits, row.history) == row.expected);
  }
}

TEST_CASE("greedy with a penalty on a 128k vocabulary", "[sampling]") {
  // By hand: all logits 0 except id 70000 = 10 and id 131071 = 9; a repeat
  // penalty of 2 on id 70000 (10 -> 5) hands the win to id 131071.
  const int n_vocab = 131072;
  std::vector<float> logits(n_vocab, 0.0f);
  logits[70000] = 10.0f;
  logits[131071] = 9.0f;
  SamplingParams p = greedy();
  p.repeat_penalty = 2.0f;
  Sampler s(p, n_vocab);
  CHECK(s.sample(logits, std::vector<int32_t>{}) == 70000);
  CHECK(s.sample(logits, std::vector<int32_t>{5, 70000}) == 131071);
}

TEST_CASE("the same seed gives the same tokens, another seed others", "[sampling]") {
  // 50 equally likely tokens, 100 draws: two seeds agreeing on all 100 draws
  // by chance has probability 50^-100.
  const std::vector<float> logits(50, 0.0f);
  auto run = [&](uint64_t seed) {
    Sampler s(plain(1.0f, seed), 50);
    std::vector<int32_t> out;
    for (int i = 0; i < 100; ++i) out.push_back(s.sample(logits, {}));
    return out;
  };
  const auto a = run(42);
  CHECK(a == run(42));
  CHECK(a != run(43));
}

TEST_CASE("empirical frequencies match the softmax", "[sampling]") {
  struct Row {
    float temperature;
    std::vector<float> logits;
    std::vector<double> expected;  // numpy: softmax(logits / T)
  };
  const std::vector<Row> table = {
      {1.0f, {2.0f, 1.0f, 0.0f, -1.0f}, {0.643914, 0.236883, 0.087144, 0.032059}},
      {0.5f, {2.0f, 1.0f, 0.0f}, {0.866813, 0.117310, 0.015876}},
  };
  for (const Row& row : table) {
    INFO("T = " << row.temperature);
    Sampler s(plain(row.temperature, 1234), static_cast<int>(row.logits.size()));
    const auto f = frequencies(s, row.logits, 20000);
    for (size_t i = 0; i < f.size(); ++i) CHECK(f[i] == Approx(row.expected[i]).margin(0.015));
  }
}

TEST_CASE("truncation stages inside the chain", "[sampling]") {
  // p = 50/20/15/10/5 % as logits = log p, placed at ids 0..4.
  std::vector<float> logits;
  for (double p : {0.50, 0.20, 0.15, 0.10, 0.05}) logits.push_back(static_cast<float>(std::log(p)));
  struct Row {
    int top_k;
    float top_p, min_p;
    std::vector<double> expected;  // by hand: the kept p renormalised
  };
  const std::vector<Row> table = {
      {2, 1.0f, 0.0f, {0.5 / 0.7, 0.2 / 0.7, 0, 0, 0}},
      {0, 0.9f, 0.0f, {0.5 / 0.95, 0.2 / 0.95, 0.15 / 0.95, 0.1 / 0.95, 0}},
      {0, 1.0f, 0.25f, {0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0, 0}},
      // Stages compose: top-k 4 (drops .05), then top-p .8 on .5/.95 = .526,
      // .2/.95 -> cum .737, .15/.95 -> cum .895 >= .8: 3 kept, /.85.
      {4, 0.8f, 0.0f, {0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0, 0}},
      // min-p after top-p: top-p .9 keeps 4 (renormalised), min-p .35 keeps
      // p >= .35 * .526 = .184: ids 0 and 1 -> .5/.7, .2/.7.
      {0, 0.9f, 0.35f, {0.5 / 0.7, 0.2 / 0.7, 0, 0, 0}},
  };
  for (size_t r = 0; r < table.size(); ++r) {
    const Row& row = table[r];
    INFO("row " << r);
    SamplingParams p = plain(1.0f, 99);
    p.top_k = row.top_k;
    p.top_p = row.top_p;
    p.min_p = row.min_p;
    Sampler s(p, 5);
    const auto f = frequencies(s, logits, 20000);
    for (size_t i = 0; i < f.size(); ++i) {
      if (row.expected[i] == 0) {
        CHECK(f[i] == 0.0);  // a dropped token is never drawn
      } else {
        CHECK(f[i] == Approx(row.expected[i]).margin(0.015));
      }
    }
  }
}

// Timing for a 128k vocabulary; hidden (run with `test_sampling [.bench]`).
TEST_CASE("sampler timing on 128k logits", "[.bench]") {
  const int n_vocab = 128 * 1024;
  std::mt19937 g(5);
  std::normal_distribution<float> peaked(0.0f, 3.0f), flat(0.0f, 0.1f);
  std::vector<float> logits_peaked(n_vocab), logits_flat(n_vocab);
  for (int i = 0; i < n_vocab; ++i) {
    logits_peaked[i] = peaked(g);
    logits_flat[i] = flat(g);
  }
  std::vector<int32_t> history(64);
  for (int i = 0; i < 64; ++i) history[i] = i * 977;
  struct Config {
    const char* name;
    float temperature;
    int top_k;
    float top_p, min_p, repeat;
  };
  const std::vector<Config> configs = {
      {"greedy", 0.0f, 0, 1.0f, 0.0f, 1.0f},
      {"greedy+repeat1.1", 0.0f, 0, 1.0f, 0.0f, 1.1f},
      {"defaults k40 p.95 minp.05", 0.8f, 40, 0.95f, 0.05f, 1.0f},
      {"no top-k, p.95 minp.05", 0.8f, 0, 0.95f, 0.05f, 1.0f},
      {"no top-k, p.95", 0.8f, 0, 0.95f, 0.0f, 1.0f},
      {"no top-k, minp.05", 0.8f, 0, 1.0f, 0.05f, 1.0f},
      {"no truncation", 0.8f, 0, 1.0f, 0.0f, 1.0f},
  };
  for (const auto* logits : {&logits_peaked, &logits_flat}) {
    for (const Config& c : configs) {
      SamplingParams p = plain(c.temperature, 3);
      p.top_k = c.top_k;
      p.top_p = c.top_p;
      p.min_p = c.min_p;
      p.repeat_penalty = c.repeat;
      Sampler s(p, n_vocab);
      const int n = 200;
      const auto t0 = std::chrono::steady_clock::now();
      int64_t sink = 0;
      for (int i = 0; i < n; ++i) sink += s.sample(*logits, history);
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
      std::printf("%-6s %-28s %8.1f us/token (%lld)\n", logits == &logits_peaked ? "peaked" : "flat",
                  c.name, us, static_cast<long long>(sink % 10));
      CHECK(sink >= 0);
    }
  }
}

TEST_CASE("greedy refuses logits with a NaN or +inf instead of answering token 0", "[sampling]") {
  // Found by the hostile pass of issue 11: a NaN weight made every logit NaN
  // and greedy answered token 0 three times with HTTP 200, while sampling
  // reported the corrupt model.
  SamplingParams p;
  p.temperature = 0.0f;
  Sampler s(p, 6);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  CHECK(s.sample(std::vector<float>(6, nan), {}) == -1);
  CHECK(s.sample(std::vector<float>{0.5f, 2.0f, nan, 1.0f, 0.0f, -1.0f}, {}) == -1);  // one NaN among finite logits
  CHECK(s.sample(std::vector<float>{0.5f, inf, 1.0f, 1.0f, 0.0f, -1.0f}, {}) == -1);
  // -inf logits (masked tokens) are fine: the argmax of the rest.
  CHECK(s.sample(std::vector<float>{-inf, -inf, 3.0f, 1.0f, -inf, 2.0f}, {}) == 2);
  // With penalties the same rule holds.
  SamplingParams pp = p;
  pp.repeat_penalty = 1.3f;
  Sampler sp(pp, 6);
  const std::vector<int32_t> history = {2, 2};
  CHECK(sp.sample(std::vector<float>{0.5f, 2.0f, nan, 1.0f, 0.0f, -1.0f}, history) == -1);
  CHECK(sp.sample(std::vector<float>{0.5f, 2.0f, 2.5f, 1.0f, 0.0f, -1.0f}, history) == 1);  // id 2 penalised: 2.5 / 1.3 = 1.92 < 2.0 (id 1)
}
