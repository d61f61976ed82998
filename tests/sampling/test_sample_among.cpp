// Sampler::sample_among (the grammar mask's path: only the allowed tokens
// become candidates) against sample() on a copy of the logits with every
// other token set to -inf (what the engine did before), under the same
// seed, for a grid of sampler settings; and against an independent masked
// softmax with the sampler's documented draw.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/sampling/sampler.h"

using namespace larder;

namespace {

constexpr int kVocab = 500;

std::vector<float> masked_copy(const std::vector<float>& logits, const std::vector<int32_t>& allowed) {
  std::vector<float> out(logits.size(), -std::numeric_limits<float>::infinity());
  for (int32_t id : allowed) out[size_t(id)] = logits[size_t(id)];
  return out;
}

// Ascending ids, each kept with probability `density` (at least one).
std::vector<int32_t> random_mask(std::mt19937& rng, double density) {
  std::vector<int32_t> ids;
  std::uniform_real_distribution<double> u(0, 1);
  for (int32_t id = 0; id < kVocab; ++id) {
    if (u(rng) < density) ids.push_back(id);
  }
  if (ids.empty()) ids.push_back(int32_t(rng() % kVocab));
  return ids;
}

}  // namespace

TEST_CASE("sample_among draws what sample() draws on the -inf masked logits", "[sampling]") {
  std::mt19937 rng(2024);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  struct Setting {
    float temperature;
    int top_k;
    float top_p, min_p;
    bool penalties;
  };
  std::vector<Setting> settings;
  for (float t : {0.0f, 0.7f, 1.0f, 1.6f}) {
    for (int k : {0, 1, 5, 40, kVocab - 1, kVocab + 100}) {
      for (float p : {1.0f, 0.9f, 0.4f}) {
        for (float m : {0.0f, 0.05f}) {
          for (bool pen : {false, true}) settings.push_back({t, k, p, m, pen});
        }
      }
    }
  }
  int n_compared = 0, n_distinct_runs = 0;
  for (const Setting& st : settings) {
    SamplingParams params;
    params.temperature = st.temperature;
    params.top_k = st.top_k;
    params.top_p = st.top_p;
    params.min_p = st.min_p;
    params.seed = 77 + uint64_t(n_compared);
    if (st.penalties) {
      params.repeat_penalty = 1.3f;
      params.presence_penalty = 0.5f;
      params.frequency_penalty = 0.2f;
      params.repeat_last_n = 16;
    }
    Sampler old_path(params, kVocab), new_path(params, kVocab);
    std::vector<int32_t> history;
    std::vector<int32_t> drawn;
    for (int step = 0; step < 12; ++step) {
      std::vector<float> logits(kVocab);
      // Some steps have ties (logits rounded to halves).
      for (float& x : logits) x = step % 3 == 0 ? std::round(normal(rng) * 2) / 2 : normal(rng);
      const double density = std::vector<double>{0.002, 0.01, 0.1, 0.5, 1.0}[size_t(step) % 5];
      std::vector<int32_t> allowed = random_mask(rng, density);
      // A banned allowed token (logit_bias -100 makes it -inf), when more than one.
      if (allowed.size() > 2 && step % 2 == 1) logits[size_t(allowed[1])] = -std::numeric_limits<float>::infinity();
      const int32_t want = old_path.sample(masked_copy(logits, allowed), history);
      const int32_t got = new_path.sample_among(logits, allowed, history);
      INFO("t " << st.temperature << " k " << st.top_k << " p " << st.top_p << " min_p " << st.min_p << " pen "
                << st.penalties << " step " << step << " allowed " << allowed.size());
      REQUIRE(got == want);
      ++n_compared;
      drawn.push_back(got);
      history.push_back(got);
      history.push_back(int32_t(rng() % kVocab));  // prompt-like tokens in the window, allowed or not
    }
    std::sort(drawn.begin(), drawn.end());
    n_distinct_runs += std::unique(drawn.begin(), drawn.end()) - drawn.begin() > 3 ? 1 : 0;
  }
  CHECK(n_compared == int(settings.size()) * 12);
  CHECK(n_distinct_runs > int(settings.size()) / 4);  // the draws vary: not one forced token
}

TEST_CASE("sample_among falls back to the masked copy when no allowed logit is finite", "[sampling]") {
  SamplingParams params;
  params.temperature = 1.0f;
  params.seed = 5;
  Sampler old_path(params, kVocab), new_path(params, kVocab);
  std::vector<float> logits(kVocab, 1.0f);
  const std::vector<int32_t> allowed = {3, 9, 200};
  for (int32_t id : allowed) logits[size_t(id)] = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < 10; ++i) CHECK(new_path.sample_among(logits, allowed, {}) == old_path.sample(masked_copy(logits, allowed), {}));
}

TEST_CASE("sample_among at temperature 1 draws by the masked softmax's inverse CDF", "[sampling]") {
  // The reference: p_i = exp(l_i) / sum over the allowed tokens, in id
  // order; u = (the seeded mt19937_64's next output >> 11) * 2^-53 (the
  // sampler's documented draw); the first token whose cumulative p
  // exceeds u.
  std::mt19937 rng(99);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  SamplingParams params;
  params.temperature = 1.0f;
  params.top_k = 0;
  params.top_p = 1.0f;
  params.min_p = 0.0f;
  params.seed = 1234;
  Sampler s(params, kVocab);
  std::mt19937_64 ref_rng(1234);
  int n_distinct = 0;
  std::vector<int32_t> seen;
  for (int step = 0; step < 200; ++step) {
    std::vector<float> logits(kVocab);
    for (float& x : logits) x = normal(rng);
    const std::vector<int32_t> allowed = random_mask(rng, step % 2 ? 0.02 : 0.3);
    double max_l = -INFINITY, sum = 0;
    for (int32_t id : allowed) max_l = std::max(max_l, double(logits[size_t(id)]));
    for (int32_t id : allowed) sum += std::exp(double(logits[size_t(id)]) - max_l);
    const double u = double(ref_rng() >> 11) * 0x1.0p-53;
    double cum = 0;
    int32_t want = allowed.back();
    for (int32_t id : allowed) {
      cum += std::exp(double(logits[size_t(id)]) - max_l) / sum;
      if (u < cum) {
        want = id;
        break;
      }
    }
    const int32_t got = s.sample_among(logits, allowed, {});
    CHECK(got == want);
    if (std::find(seen.begin(), seen.end(), got) == seen.end()) {
      seen.push_back(got);
      ++n_distinct;
    }
  }
  CHECK(n_distinct > 50);
}
