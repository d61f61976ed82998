#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <utility>

namespace larder {
namespace sampling {

// Descending logit, ties -> lowest id: a strict weak order for non-NaN logits.
static bool better(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

namespace {

// An extreme penalty (repeat_penalty 1e-38 divides a logit of 10 past
// FLT_MAX) saturates at +-FLT_MAX instead of making the softmax NaN.
float penalised(float logit, int count, float repeat_penalty, float presence, float frequency) {
  const float in = logit;
  if (repeat_penalty != 1.0f) logit = logit > 0.0f ? logit / repeat_penalty : logit * repeat_penalty;
  const float out = logit - frequency * static_cast<float>(count) - (count > 0 ? presence : 0.0f);
  if (std::isinf(out) && std::isfinite(in)) {
    return std::copysign(std::numeric_limits<float>::max(), out);
  }
  return out;
}

// Fills p over c[0, n) with softmax of the logits; returns nothing. All -inf:
// uniform.
void normalize_prefix(std::vector<Candidate>& c, size_t n) {
  if (n == 0) return;
  float max_logit = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) max_logit = std::max(max_logit, c[i].logit);
  if (max_logit == -std::numeric_limits<float>::infinity()) {
    for (size_t i = 0; i < n; ++i) c[i].p = 1.0f / static_cast<float>(n);
    return;
  }
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    c[i].p = std::exp(c[i].logit - max_logit);
    sum += c[i].p;
  }
  const double inv = 1.0 / sum;
  for (size_t i = 0; i < n; ++i) c[i].p = static_cast<float>(c[i].p * inv);
}

}  // namespace

void apply_penalties(std::vector<Candidate>& c, std::span<const int32_t> recent,
                     float repeat_penalty, float presence, float frequency) {
  if (c.empty() || recent.empty()) return;
  if (repeat_penalty == 1.0f && presence == 0.0f && frequency == 0.0f) return;

  // Distinct tokens of the window with their counts, sorted by id.
  std::vector<int32_t> ids(recent.begin(), recent.end());
  std::sort(ids.begin(), ids.end());
  std::vector<std::pair<int32_t, int>> counts;
  for (int32_t id : ids) {
    if (!counts.empty() && counts.back().first == id) {
      ++counts.back().second;
    } else {
      counts.emplace_back(id, 1);
    }
  }

  // Fast path: the candidate sits at index == id (full vocabulary in order).
  std::vector<std::pair<int32_t, int>> unresolved;
  for (const auto& [id, count] : counts) {
    if (id >= 0 && static_cast<size_t>(id) < c.size() && c[id].id == id) {
      c[id].logit = penalised(c[id].logit, count, repeat_penalty, presence, frequency);
    } else {
      unresolved.emplace_back(id, count);
    }
  }
  if (unresolved.empty()) return;
  // Candidates in ascending id order (a subset of the vocabulary, as
  // Sampler::sample_among makes): find each penalised id by binary search.
  const auto by_id = [](const Candidate& a, const Candidate& b) { return a.id < b.id; };
  const auto not_ascending = [](const Candidate& a, const Candidate& b) { return a.id >= b.id; };
  if (std::adjacent_find(c.begin(), c.end(), not_ascending) == c.end()) {
    for (const auto& [id, count] : unresolved) {
      auto it = std::lower_bound(c.begin(), c.end(), Candidate{id, 0.0f, 0.0f}, by_id);
      if (it != c.end() && it->id == id) it->logit = penalised(it->logit, count, repeat_penalty, presence, frequency);
    }
    return;
  }
  for (Candidate& x : c) {
    auto it = std::lower_bound(unresolved.begin(), unresolved.end(), x.id,
                               [](const std::pair<int32_t, int>& e, int32_t id) { return e.first < id; });
    if (it != unresolved.end() && it->first == x.id) {
      x.logit = penalised(x.logit, it->second, repeat_penalty, presence, frequency);
    }
  }
}

void apply_temperature(std::vector<Candidate>& c, float temperature) {
  if (c.empty()) return;
  if (temperature <= 0.0f) {
    const Candidate best = *std::min_element(c.begin(), c.end(), better);
    c.assign(1, best);
    c[0].p = 1.0f;
    return;
  }
  if (temperature == 1.0f) return;
  const float inv = 1.0f / temperature;
  float max_logit = -std::numeric_limits<float>::infinity();
  for (const Candidate& x : c) max_logit = std::max(max_logit, x.logit);
  if (std::isfinite(max_logit * inv)) {
    for (Candidate& x : c) x.logit *= inv;
    return;
  }
  // A temperature so small that max_logit / temperature overflows: scale the
  // distances from the best logit instead (the same softmax, no inf - inf);
  // at inv = inf only the best logits keep a finite value (0).
  for (Candidate& x : c) {
    const float d = x.logit - max_logit;  // <= 0
    x.logit = d == 0.0f ? 0.0f : d * inv;
  }
}

void softmax(std::vector<Candidate>& c) {
  if (!std::is_sorted(c.begin(), c.end(), better)) std::sort(c.begin(), c.end(), better);
  normalize_prefix(c, c.size());
}

void normalize(std::vector<Candidate>& c) { normalize_prefix(c, c.size()); }

void top_k(std::vector<Candidate>& c, int k) {
  if (k <= 0 || static_cast<size_t>(k) >= c.size()) return;
  const size_t kk = static_cast<size_t>(k);
  if (kk * 16 <= c.size()) {
    // Small k: one scan with a heap of the k best seen so far, its worst on
    // top. Most candidates lose to the top and cost a single comparison.
    std::make_heap(c.begin(), c.begin() + k, better);
    for (size_t i = kk; i < c.size(); ++i) {
      if (better(c[i], c[0])) {
        std::pop_heap(c.begin(), c.begin() + k, better);
        c[kk - 1] = c[i];
        std::push_heap(c.begin(), c.begin() + k, better);
      }
    }
  } else {
    std::nth_element(c.begin(), c.begin() + k, c.end(), better);
  }
  c.resize(kk);
  std::sort(c.begin(), c.end(), better);
}

void top_p(std::vector<Candidate>& c, float p) {
  if (p >= 1.0f || c.empty()) return;
  normalize(c);
  // Grow a sorted prefix [0, sorted) from the top until its mass reaches p.
  // After nth_element at m, every element of [m, n) ranks below [0, m), so
  // sorting the new slice extends the sorted prefix.
  constexpr size_t kFirstChunk = 128;
  const size_t n = c.size();
  size_t sorted = 0;
  size_t m = std::min(n, kFirstChunk);
  double cum = 0.0;
  size_t keep = n;
  while (sorted < n) {
    if (m < n) std::nth_element(c.begin() + sorted, c.begin() + m, c.end(), better);
    std::sort(c.begin() + sorted, c.begin() + m, better);
    for (size_t i = sorted; i < m; ++i) {
      cum += c[i].p;
      if (cum >= p) {
        keep = i + 1;
        break;
      }
    }
    if (keep < n || m == n) break;
    sorted = m;
    m = std::min(n, m * 4);
  }
  if (keep == n) {
    // Rounding left cum just short of p: everything stays (and is sorted).
    cum = 0.0;
    for (const Candidate& x : c) cum += x.p;
  }
  c.resize(keep);
  const double inv = 1.0 / cum;
  for (Candidate& x : c) x.p = static_cast<float>(x.p * inv);
}

void min_p(std::vector<Candidate>& c, float p) {
  if (p <= 0.0f || c.empty()) return;
  // p_i >= p * p_max  <=>  logit_i - logit_max >= log(p): no exp over the
  // whole array, only over the survivors. p > 1 would drop everything; it is
  // clamped so the best candidate always stays.
  float max_logit = c[0].logit;
  for (const Candidate& x : c) max_logit = std::max(max_logit, x.logit);
  const float threshold = max_logit + std::log(std::min(p, 1.0f));
  size_t out = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i].logit >= threshold) c[out++] = c[i];
  }
  c.resize(out);  // out >= 1: the best candidate meets the threshold
  normalize_prefix(c, out);
}

int32_t draw(const std::vector<Candidate>& c, double u) {
  if (c.empty()) return -1;
  double total = 0.0;
  for (const Candidate& x : c) total += x.p;
  const double target = u * total;
  double cum = 0.0;
  for (const Candidate& x : c) {
    cum += x.p;
    if (target < cum) return x.id;
  }
  // u * total rounded onto the very end: the last candidate with mass.
  for (auto it = c.rbegin(); it != c.rend(); ++it) {
    if (it->p > 0.0f) return it->id;
  }
  return c.back().id;
}

int32_t argmax(std::span<const float> logits) {
  assert(!logits.empty());
  // Pass 1: the maximum, in 8 independent lanes so the compiler can keep
  // them in one vector register. Pass 2: its first index (ties -> lowest).
  constexpr size_t kLanes = 8;
  const size_t n = logits.size();
  float lane_max[kLanes];
  for (float& m : lane_max) m = -std::numeric_limits<float>::infinity();
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) {
      lane_max[l] = logits[i + l] > lane_max[l] ? logits[i + l] : lane_max[l];
    }
  }
  float best = -std::numeric_limits<float>::infinity();
  for (; i < n; ++i) best = logits[i] > best ? logits[i] : best;
  for (float m : lane_max) best = m > best ? m : best;
  for (size_t j = 0; j < n; ++j) {
    if (logits[j] == best) return static_cast<int32_t>(j);
  }
  return 0;  // every logit NaN or -inf
}

}  // namespace sampling

Sampler::Sampler(const SamplingParams& params, int n_vocab)
    : params_(params), n_vocab_(n_vocab) {
  assert(n_vocab > 0);
  if (params_.seed) {
    rng_.seed(*params_.seed);
  } else {
    std::random_device rd;
    const uint64_t seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    rng_.seed(seed);
  }
  cands_.reserve(static_cast<size_t>(n_vocab));
}

bool Sampler::penalties_on() const {
  return params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f ||
         params_.frequency_penalty != 0.0f;
}

std::span<const int32_t> Sampler::penalty_window(std::span<const int32_t> history) const {
  if (params_.repeat_last_n < 0) return history;
  const size_t n = std::min(history.size(), static_cast<size_t>(params_.repeat_last_n));
  return history.subspan(history.size() - n);
}

double Sampler::next_uniform() {
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  assert(logits.size() == static_cast<size_t>(n_vocab_));
  const std::span<const int32_t> window =
      penalties_on() ? penalty_window(history) : std::span<const int32_t>();

  if (params_.temperature <= 0.0f) {
    // A NaN or +inf logit (corrupt weights) has no most likely token: -1, as
    // the sampling path gives when no candidate is left, not token 0.
    bool bad = false;
    for (float x : logits) bad |= (x != x) | (x == std::numeric_limits<float>::infinity());
    if (bad) return -1;
    if (window.empty()) return sampling::argmax(logits);
    // Greedy with penalties in one pass: only the window's distinct tokens
    // change, so score them apart and take the argmax over the rest by
    // scanning the gaps between them.
    std::vector<int32_t> ids;
    ids.reserve(window.size());
    for (int32_t id : window) {
      if (id >= 0 && id < n_vocab_) ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    std::vector<Candidate> touched;
    touched.reserve(ids.size());
    for (int32_t id : ids) touched.push_back({id, logits[id], 0.0f});
    sampling::apply_penalties(touched, window, params_.repeat_penalty, params_.presence_penalty,
                              params_.frequency_penalty);

    int32_t best_id = -1;
    float best = 0.0f;
    auto consider = [&](int32_t id, float v) {
      if (best_id < 0 || v > best || (v == best && id < best_id)) {
        best_id = id;
        best = v;
      }
    };
    int32_t start = 0;
    for (const Candidate& t : touched) {
      if (t.id > start) {
        const int32_t i = start + sampling::argmax(logits.subspan(start, t.id - start));
        consider(i, logits[i]);
      }
      consider(t.id, t.logit);
      start = t.id + 1;
    }
    if (start < n_vocab_) {
      const int32_t i = start + sampling::argmax(logits.subspan(start));
      consider(i, logits[i]);
    }
    return best_id;
  }

  cands_.resize(static_cast<size_t>(n_vocab_));
  for (int32_t i = 0; i < n_vocab_; ++i) cands_[i] = {i, logits[i], 0.0f};
  sampling::apply_penalties(cands_, window, params_.repeat_penalty, params_.presence_penalty,
                            params_.frequency_penalty);
  sampling::apply_temperature(cands_, params_.temperature);
  sampling::top_k(cands_, params_.top_k);
  sampling::top_p(cands_, params_.top_p);
  sampling::min_p(cands_, params_.min_p);
  sampling::normalize(cands_);  // the chain's softmax; draw needs no order
  return sampling::draw(cands_, next_uniform());
}

int32_t Sampler::sample_among(std::span<const float> logits, std::span<const int32_t> allowed,
                              std::span<const int32_t> history) {
  assert(logits.size() == static_cast<size_t>(n_vocab_) && !allowed.empty());
  bool any_finite = false, exact = true;
  for (int32_t id : allowed) {
    const float x = logits[id];
    any_finite = any_finite || std::isfinite(x);
    exact = exact && !std::isnan(x) && x != std::numeric_limits<float>::infinity();
  }
  if (!any_finite || !exact) {
    scratch_.assign(static_cast<size_t>(n_vocab_), -std::numeric_limits<float>::infinity());
    for (int32_t id : allowed) scratch_[id] = logits[id];
    return sample(scratch_, history);  // sample() does not use scratch_
  }
  const std::span<const int32_t> window =
      penalties_on() ? penalty_window(history) : std::span<const int32_t>();
  cands_.resize(allowed.size());
  for (size_t i = 0; i < allowed.size(); ++i) cands_[i] = {allowed[i], logits[allowed[i]], 0.0f};
  sampling::apply_penalties(cands_, window, params_.repeat_penalty, params_.presence_penalty,
                            params_.frequency_penalty);
  if (params_.temperature <= 0.0f) {
    // sample()'s greedy path: the highest (penalised) logit, ties -> lowest id.
    return std::min_element(cands_.begin(), cands_.end(), sampling::better)->id;
  }
  sampling::apply_temperature(cands_, params_.temperature);
  // sample()'s top_k sorts whenever 0 < k < n_vocab, also when k is at
  // least the number of allowed tokens (the -inf ones fill the rest).
  if (params_.top_k > 0 && params_.top_k < n_vocab_) {
    if (static_cast<size_t>(params_.top_k) >= cands_.size()) {
      std::sort(cands_.begin(), cands_.end(), sampling::better);
    } else {
      sampling::top_k(cands_, params_.top_k);
    }
  }
  sampling::top_p(cands_, params_.top_p);
  sampling::min_p(cands_, params_.min_p);
  sampling::normalize(cands_);
  return sampling::draw(cands_, next_uniform());
}

}  // namespace larder
