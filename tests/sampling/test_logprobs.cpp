// engine/sampling/logprobs.h: log-softmax of raw logits, the top-N list and
// the queue that ties entries to the text they wrote. Expected values by
// Python's math module (math.log(sum(math.exp(x) for x in l))).
#include <cmath>
#include <random>

#include <catch2/catch.hpp>

#include "engine/sampling/logprobs.h"

using namespace larder;

TEST_CASE("logprobs: log-sum-exp and log-softmax by hand", "[sampling][logprobs]") {
  const std::vector<float> l = {1.0f, 2.0f, 3.0f, 0.5f};
  CHECK(logprobs::log_sum_exp(l) == Approx(3.460773489156851).epsilon(1e-12));
  const TokenLogprob e = logprobs::of_token(l, 1, 3);
  CHECK(e.logprob == Approx(-1.4607734891568511).epsilon(1e-12));
  REQUIRE(e.top.size() == 3);
  CHECK(e.top[0].id == 2);
  CHECK(e.top[0].logprob == Approx(-0.4607734891568511).epsilon(1e-12));
  CHECK(e.top[1].id == 1);
  CHECK(e.top[1].logprob == e.logprob);
  CHECK(e.top[2].id == 0);
  CHECK(e.top[2].logprob == Approx(-2.460773489156851).epsilon(1e-12));
  // Max-shifted: huge logits do not overflow.
  const std::vector<float> big = {1000.0f, 999.0f};
  CHECK(logprobs::log_sum_exp(big) == Approx(1000.3132616875182).epsilon(1e-12));
  CHECK(logprobs::of_token(big, 1, 0).logprob == Approx(-1.3132616875182066).epsilon(1e-12));
  CHECK(logprobs::of_token(big, 1, 0).top.empty());
}

TEST_CASE("logprobs: the probabilities of a full distribution sum to 1", "[sampling][logprobs]") {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 8.0f);
  for (int n : {1, 2, 512, 32000}) {
    std::vector<float> l(static_cast<size_t>(n));
    for (float& x : l) x = normal(rng);
    const auto all = logprobs::top(l, n, logprobs::log_sum_exp(l));
    REQUIRE(all.size() == size_t(n));
    double sum = 0;
    for (const TopLogprob& t : all) sum += std::exp(t.logprob);
    CHECK(sum == Approx(1.0).epsilon(1e-9));
    for (size_t i = 1; i < all.size(); ++i) CHECK(all[i - 1].logprob >= all[i].logprob);
  }
}

TEST_CASE("logprobs: ties go to the lower id; -inf, NaN and n out of range", "[sampling][logprobs]") {
  const float inf = INFINITY;
  const std::vector<float> l = {0.0f, 2.0f, -inf, 2.0f, NAN, 0.0f};
  const double lse = logprobs::log_sum_exp(l);
  // NaN skipped, -inf adds nothing: log(2 e^2 + 2).
  CHECK(lse == Approx(std::log(2 * std::exp(2.0) + 2)).epsilon(1e-12));
  const auto t = logprobs::top(l, 100, lse);
  REQUIRE(t.size() == 6);
  CHECK(t[0].id == 1);
  CHECK(t[1].id == 3);
  CHECK(t[2].id == 0);
  CHECK(t[3].id == 5);
  CHECK(t[4].id == 2);
  CHECK(t[4].logprob == -inf);
  CHECK(t[5].id == 4);  // NaN last
  CHECK(logprobs::top(l, -3, lse).empty());
  CHECK(logprobs::log_sum_exp(std::vector<float>{-inf, -inf}) == -inf);
  CHECK(logprobs::log_sum_exp(std::vector<float>{}) == -inf);
}

TEST_CASE("logprobs: the queue releases an entry with the first byte of its text", "[sampling][logprobs]") {
  auto entry = [](int32_t id) {
    TokenLogprob e;
    e.id = id;
    return e;
  };
  LogprobQueue q;
  q.push(entry(1));  // "ab" at 0
  q.wrote(2);
  q.push(entry(2));  // "" at 2 (a byte held by the detokenizer)
  q.push(entry(3));  // "cd" at 2
  q.wrote(2);
  CHECK(q.release(0).empty());
  auto a = q.release(1);  // one byte of "ab" sent
  REQUIRE(a.size() == 1);
  CHECK(a[0].id == 1);
  CHECK(a[0].text_offset == 0);
  CHECK(q.release(2).empty());  // "ab" sent, nothing of what follows
  auto b = q.release(3);
  REQUIRE(b.size() == 2);
  CHECK(b[0].id == 2);
  CHECK(b[1].id == 3);
  CHECK(b[1].text_offset == 2);
  q.push(entry(4));
  CHECK(q.release(4).empty());
  auto rest = q.release_all();
  REQUIRE(rest.size() == 1);
  CHECK(rest[0].text_offset == 4);
  CHECK(q.empty());
}
