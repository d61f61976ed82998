#include "engine/sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace larder {
namespace logprobs {

double log_sum_exp(std::span<const float> logits) {
  double max = -std::numeric_limits<double>::infinity();
  for (float x : logits) {
    if (!std::isnan(x) && double(x) > max) max = double(x);
  }
  if (!std::isfinite(max)) return max;  // empty / all -inf: -inf; any +inf: +inf
  double sum = 0;
  for (float x : logits) {
    if (!std::isnan(x)) sum += std::exp(double(x) - max);
  }
  return max + std::log(sum);
}

std::vector<TopLogprob> top(std::span<const float> logits, int n, double lse) {
  const size_t k = size_t(std::clamp<int64_t>(n, 0, int64_t(logits.size())));
  std::vector<TopLogprob> out;
  if (k == 0) return out;
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  // Descending logit, ties to the lower id, NaN after every number.
  auto better = [&](int32_t a, int32_t b) {
    const float x = logits[size_t(a)], y = logits[size_t(b)];
    const bool xn = std::isnan(x), yn = std::isnan(y);
    if (xn != yn) return yn;
    if (!xn && x != y) return x > y;
    return a < b;
  };
  std::partial_sort(ids.begin(), ids.begin() + long(k), ids.end(), better);
  out.reserve(k);
  for (size_t i = 0; i < k; ++i) out.push_back({ids[i], double(logits[size_t(ids[i])]) - lse, {}});
  return out;
}

TokenLogprob of_token(std::span<const float> logits, int32_t token, int n_top) {
  const double lse = log_sum_exp(logits);
  TokenLogprob e;
  e.id = token;
  e.logprob = double(logits[size_t(token)]) - lse;
  e.top = top(logits, n_top, lse);
  return e;
}

}  // namespace logprobs

void LogprobQueue::push(TokenLogprob entry) {
  entry.text_offset = n_written_;
  pending_.push_back(std::move(entry));
}

std::vector<TokenLogprob> LogprobQueue::release(size_t n_sent) {
  std::vector<TokenLogprob> out;
  while (!pending_.empty() && pending_.front().text_offset < n_sent) {
    out.push_back(std::move(pending_.front()));
    pending_.pop_front();
  }
  return out;
}

std::vector<TokenLogprob> LogprobQueue::release_all() {
  std::vector<TokenLogprob> out(std::make_move_iterator(pending_.begin()), std::make_move_iterator(pending_.end()));
  pending_.clear();
  return out;
}

}  // namespace larder
