// The sampler chain's stages, each on its own (table-driven, in the manner of
// llama.cpp tests/test-sampling.cpp). Expected values are computed by hand or
// with python3/numpy as noted next to each table.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "engine/sampling/sampler.h"

using larder::Candidate;
namespace sampling = larder::sampling;

namespace {

// Candidates with id = index and the given logits.
std::vector<Candidate> from_logits(const std::vector<float>& logits) {
  std::vector<Candidate> c;
  for (size_t i = 0; i < logits.size(); ++i) c.push_back({static_cast<int32_t>(i), logits[i], 0.0f});
  return c;
}

// Candidates with id = index and logit = log(p).
std::vector<Candidate> from_probs(const std::vector<float>& probs) {
  std::vector<float> logits;
  for (float p : probs) logits.push_back(std::log(p));
  return from_logits(logits);
}

std::vector<int32_t> ids_of(const std::vector<Candidate>& c) {
  std::vector<int32_t> ids;
  for (const Candidate& x : c) ids.push_back(x.id);
  return ids;
}

}  // namespace

TEST_CASE("softmax with temperature", "[sampling]") {
  // numpy: e = exp(x - x.max()); e / e.sum() for x = [2,1,0] / T.
  struct Row {
    float temperature;
    std::vector<float> expected;  // p of ids 0, 1, 2 (already descending)
  };
  const std::vector<Row> table = {
      {1.0f, {0.66524f, 0.24473f, 0.09003f}},  // the familiar 66.5 / 24.5 / 9.0 %
      {0.5f, {0.86681f, 0.11731f, 0.01588f}},  // logits [4, 2, 0]: 86.7 / 11.7 / 1.6 %
  };
  for (const Row& row : table) {
    INFO("T = " << row.temperature);
    auto c = from_logits({2.0f, 1.0f, 0.0f});
    sampling::apply_temperature(c, row.temperature);
    sampling::softmax(c);
    REQUIRE(ids_of(c) == std::vector<int32_t>{0, 1, 2});
    for (size_t i = 0; i < 3; ++i) CHECK(c[i].p == Approx(row.expected[i]).margin(0.001));
  }
}

TEST_CASE("softmax sorts by logit descending, ties to the lowest id", "[sampling]") {
  // By hand: logits [0, 2, 1, 2] -> order 1, 3 (tie with 1, higher id), 2, 0.
  auto c = from_logits({0.0f, 2.0f, 1.0f, 2.0f});
  sampling::softmax(c);
  CHECK(ids_of(c) == std::vector<int32_t>{1, 3, 2, 0});
  // The two tied tokens get equal mass: e^2 / (2 e^2 + e + 1) = 0.39949 (numpy).
  CHECK(c[0].p == Approx(0.39949f).margin(1e-4));
  CHECK(c[1].p == Approx(c[0].p));
}

TEST_CASE("temperature 0 keeps only the best candidate", "[sampling]") {
  // By hand: the max logit 3 is shared by ids 1 and 3; the lowest id wins.
  auto c = from_logits({1.0f, 3.0f, -2.0f, 3.0f});
  sampling::apply_temperature(c, 0.0f);
  REQUIRE(c.size() == 1);
  CHECK(c[0].id == 1);
  CHECK(c[0].p == 1.0f);
}

TEST_CASE("top-k, top-p and min-p on 50/20/15/10/5 %", "[sampling]") {
  // Probabilities placed out of order: id -> p.
  const std::vector<float> probs = {0.10f, 0.50f, 0.05f, 0.20f, 0.15f};
  struct Row {
    const char* stage;
    float knob;
    std::vector<int32_t> ids;       // kept, in the stage's output order
    std::vector<float> renorm_p;    // empty: p not checked
  };
  // By hand: sorted p = .5 (id 1), .2 (id 3), .15 (id 4), .1 (id 0), .05 (id 2).
  // top-p 0.9: cumulative .5, .7, .85, .95 -> 4 kept; renormalised by .95 (numpy:
  // [.5, .2, .15, .1] / .95). min-p 0.25: threshold .25 * .5 = .125 keeps .5,
  // .2, .15 in input order (ids 1, 3, 4); renormalised by .85.
  const std::vector<Row> table = {
      {"top_k", 2, {1, 3}, {}},
      {"top_k", 0, {0, 1, 2, 3, 4}, {}},   // off
      {"top_k", 10, {0, 1, 2, 3, 4}, {}},  // k >= n: unchanged
      {"top_p", 0.9f, {1, 3, 4, 0}, {0.526316f, 0.210526f, 0.157895f, 0.105263f}},
      {"top_p", 0.3f, {1}, {1.0f}},        // the first token alone passes .3
      {"top_p", 0.6f, {1, 3}, {0.714286f, 0.285714f}},  // .5 < .6 <= .7; / .7
      {"top_p", 1.0f, {0, 1, 2, 3, 4}, {}},  // off
      {"min_p", 0.25f, {1, 3, 4}, {0.588235f, 0.235294f, 0.176471f}},
      {"min_p", 0.0f, {0, 1, 2, 3, 4}, {}},  // off
      {"min_p", 1.0f, {1}, {1.0f}},          // only p_max itself
      {"min_p", 0.15f, {0, 1, 3, 4}, {0.105263f, 0.526316f, 0.210526f, 0.157895f}},  // >= .075
  };
  for (const Row& row : table) {
    INFO(row.stage << " " << row.knob);
    auto c = from_probs(probs);
    const std::string stage = row.stage;
    if (stage == "top_k") sampling::top_k(c, static_cast<int>(row.knob));
    if (stage == "top_p") sampling::top_p(c, row.knob);
    if (stage == "min_p") sampling::min_p(c, row.knob);
    CHECK(ids_of(c) == row.ids);
    REQUIRE((row.renorm_p.empty() || row.renorm_p.size() == c.size()));
    for (size_t i = 0; i < row.renorm_p.size(); ++i) CHECK(c[i].p == Approx(row.renorm_p[i]).margin(1e-5));
  }
}

TEST_CASE("top-p grows its partial sort past the first chunk", "[sampling]") {
  // 1000 tokens, logit(id) = -0.001 * id, stored in shuffled order. numpy:
  // p = softmax(-0.001 * arange(1000)); cumsum(p) first reaches 0.5 at index
  // 379 (0.49904 at 378, 0.50012 at 379), so 380 tokens stay, ids 0..379 in
  // order, and p(0) renormalised = 0.0031616.
  std::vector<Candidate> c;
  for (int32_t i = 0; i < 1000; ++i) c.push_back({i, -0.001f * static_cast<float>(i), 0.0f});
  std::mt19937 g(7);
  std::shuffle(c.begin(), c.end(), g);
  sampling::top_p(c, 0.5f);
  REQUIRE(c.size() == 380);
  std::vector<int32_t> expected(380);
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(ids_of(c) == expected);
  CHECK(c[0].p == Approx(0.0031616f).margin(1e-6));
  double sum = 0;
  for (const Candidate& x : c) sum += x.p;
  CHECK(sum == Approx(1.0).margin(1e-5));
}

TEST_CASE("top-k on a shuffled array returns the k best sorted", "[sampling]") {
  // Same construction: the 5 best of logit = -0.001 * id are ids 0..4.
  std::vector<Candidate> c;
  for (int32_t i = 0; i < 1000; ++i) c.push_back({i, -0.001f * static_cast<float>(i), 0.0f});
  std::mt19937 g(11);
  std::shuffle(c.begin(), c.end(), g);
  sampling::top_k(c, 5);
  CHECK(ids_of(c) == std::vector<int32_t>{0, 1, 2, 3, 4});
}

TEST_CASE("penalties", "[sampling]") {
  // logits [3, -2, 1, 0.5]; recent tokens [1, 0, 1, 3]: counts id0 = 1,
  // id1 = 2, id3 = 1, id2 absent.
  // numpy, per distinct token t with count n:
  //   l = l / r if l > 0 else l * r;  l -= freq * n + pres * (n > 0)
  const std::vector<float> logits = {3.0f, -2.0f, 1.0f, 0.5f};
  const std::vector<int32_t> recent = {1, 0, 1, 3};
  struct Row {
    float repeat, presence, frequency;
    std::vector<float> expected;
  };
  const std::vector<Row> table = {
      // repeat 1.5: 3 / 1.5 = 2; -2 * 1.5 = -3 (once, although id 1 occurs twice);
      // 0.5 / 1.5 = 0.33333; id 2 untouched.
      {1.5f, 0.0f, 0.0f, {2.0f, -3.0f, 1.0f, 0.333333f}},
      // presence .5, frequency .25: 3 - .25 - .5 = 2.25; -2 - .5 - .5 = -3;
      // .5 - .25 - .5 = -.25.
      {1.0f, 0.5f, 0.25f, {2.25f, -3.0f, 1.0f, -0.25f}},
      // both, repeat first: 2 - .75 = 1.25; -3 - 1 = -4; .33333 - .75 = -.41667.
      {1.5f, 0.5f, 0.25f, {1.25f, -4.0f, 1.0f, -0.416667f}},
      // repeat < 1 raises positive logits: 3 / 0.5 = 6, -2 * 0.5 = -1, .5 / .5 = 1.
      {0.5f, 0.0f, 0.0f, {6.0f, -1.0f, 1.0f, 1.0f}},
  };
  for (const Row& row : table) {
    INFO("repeat " << row.repeat << " presence " << row.presence << " frequency " << row.frequency);
    // Identity layout (fast path) and a reversed layout (lookup path).
    auto c = from_logits(logits);
    sampling::apply_penalties(c, recent, row.repeat, row.presence, row.frequency);
    auto r = from_logits(logits);
    std::reverse(r.begin(), r.end());
    sampling::apply_penalties(r, recent, row.repeat, row.presence, row.frequency);
    // And a subset in ascending id order (ids 1..3; sample_among's layout).
    auto sub = from_logits(logits);
    sub.erase(sub.begin());
    sampling::apply_penalties(sub, recent, row.repeat, row.presence, row.frequency);
    for (size_t i = 0; i < 4; ++i) {
      CHECK(c[i].logit == Approx(row.expected[i]).margin(1e-5));
      CHECK(r[3 - i].logit == Approx(row.expected[i]).margin(1e-5));
      if (i > 0) CHECK(sub[i - 1].logit == Approx(row.expected[i]).margin(1e-5));
    }
  }
}

TEST_CASE("penalties ignore ids that are not candidates; zero logit stays zero", "[sampling]") {
  // By hand: id 2 has logit 0 -> 0 * 1.5 = 0; ids 7 and -1 are not among the
  // candidates; id 0 (logit 4) is not in recent.
  auto c = from_logits({4.0f, 1.0f, 0.0f});
  const std::vector<int32_t> recent = {2, 7, -1};
  sampling::apply_penalties(c, recent, 1.5f, 0.0f, 0.0f);
  CHECK(c[0].logit == 4.0f);
  CHECK(c[1].logit == 1.0f);
  CHECK(c[2].logit == 0.0f);
}

TEST_CASE("draw is the inverse CDF in array order", "[sampling]") {
  // p = .5, .2, .15, .1, .05 with ids 10..50: cumulative .5, .7, .85, .95, 1.
  // By hand: the first id whose cumulative p exceeds u.
  std::vector<Candidate> c = {
      {10, 0, 0.50f}, {20, 0, 0.20f}, {30, 0, 0.15f}, {40, 0, 0.10f}, {50, 0, 0.05f}};
  const std::vector<std::pair<double, int32_t>> table = {
      {0.0, 10}, {0.49, 10}, {0.5, 20}, {0.69, 20}, {0.71, 30},
      {0.849, 30}, {0.9, 40}, {0.96, 50}, {0.999999, 50},
  };
  for (const auto& [u, id] : table) {
    INFO("u = " << u);
    CHECK(sampling::draw(c, u) == id);
  }
  CHECK(sampling::draw({}, 0.3) == -1);
  // Unnormalised p is scaled by its sum: p = 2, 2 -> u = .49 first, .51 second.
  std::vector<Candidate> unnorm = {{1, 0, 2.0f}, {2, 0, 2.0f}};
  CHECK(sampling::draw(unnorm, 0.49) == 1);
  CHECK(sampling::draw(unnorm, 0.51) == 2);
}

// Seen in hostile testing: tiny temperatures and penalties made the logits
// inf, the softmax NaN and the output a stream of one token. The result must
// stay a distribution: by hand, logits [2, 1, 0] at T = 1e-38 (1/T ~ 1e38,
// 2/T past FLT_MAX) put all mass on id 0; at T = 1e-30 (finite products)
// too, as exp(-1e30) is 0. Two tied best logits share the mass equally.
TEST_CASE("extreme temperatures and penalties give a distribution, never NaN", "[sampling]") {
  for (float t : {1e-30f, 1e-38f, 1e-45f}) {
    INFO("T = " << t);
    auto c = from_logits({2.0f, 1.0f, 0.0f});
    sampling::apply_temperature(c, t);
    sampling::softmax(c);
    REQUIRE(ids_of(c) == std::vector<int32_t>{0, 1, 2});
    CHECK(c[0].p == 1.0f);
    CHECK(c[1].p == 0.0f);
    CHECK(c[2].p == 0.0f);
  }
  auto tied = from_logits({5.0f, 1.0f, 5.0f});
  sampling::apply_temperature(tied, 1e-40f);
  sampling::softmax(tied);
  CHECK(tied[0].p == 0.5f);
  CHECK(tied[1].p == 0.5f);
  CHECK(tied[2].p == 0.0f);

  // repeat_penalty 1e-38 divides the logit 10 of a seen token past FLT_MAX:
  // it saturates, so the seen token takes all the mass, with no NaN.
  auto pen = from_logits({10.0f, 3.0f, -1.0f});
  const std::vector<int32_t> seen = {0, 2};
  sampling::apply_penalties(pen, seen, 1e-38f, 0.0f, 0.0f);
  CHECK(pen[0].logit == std::numeric_limits<float>::max());
  CHECK(pen[2].logit == Approx(-1e-38f));
  sampling::softmax(pen);
  for (const Candidate& x : pen) CHECK(!std::isnan(x.p));
  CHECK(pen[0].id == 0);
  CHECK(pen[0].p == 1.0f);
}
