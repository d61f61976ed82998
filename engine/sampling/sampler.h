// The sampler chain: turns one row of logits into the next token id.
//
// Chain (DESIGN.md, engine/generation.h): penalties -> temperature -> top-k
// -> top-p -> min-p -> softmax -> draw. Each stage is a free function on a
// candidate array so that it can be tested on its own (the layout follows
// llama.cpp src/llama-sampling.cpp and llama2.c run.c, where the random draw
// is an argument). Sampler strings the stages together for one request and
// owns its seeded RNG and scratch buffers.
//
// Cost for a 128k vocabulary (Release, one x86 core, measured by the hidden
// test "[.bench]"): greedy ~25 us; the default chain (top-k 40) ~0.2 ms;
// top-k off with top-p 0.95 2.5 ms (peaked logits) to 12 ms (near-flat
// logits, where almost the whole vocabulary is kept and sorted); no
// truncation ~0.7 ms (one exp per token).
//
// Not thread-safe: one Sampler per sequence, used by the engine thread.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "engine/generation.h"

namespace larder {

// One token under consideration. logit: raw or transformed score; p: its
// probability once a stage has normalised (softmax, normalize, top_p, min_p);
// stale otherwise.
struct Candidate {
  int32_t id;
  float logit;
  float p;
};

namespace sampling {

// Penalises the tokens of `recent` (token ids; may repeat, any order; ids not
// among the candidates are ignored). For every distinct token t of `recent`
// with count n_t (llama.cpp llama_sampler_penalties_apply; OpenAI API
// reference for presence/frequency):
//   repeat:   logit > 0 ? logit / repeat_penalty : logit * repeat_penalty
//             (applied once per distinct token, 1.0 = off)
//   then:     logit -= frequency * n_t + presence * (n_t > 0)
// Order of `c` is kept. Fast path when c[id].id == id (the full vocabulary in
// id order): O(|recent| log |recent|); ids strictly ascending (a subset of
// the vocabulary): O(|c| + |recent| log |c|); otherwise O(|c| log |recent|).
void apply_penalties(std::vector<Candidate>& c, std::span<const int32_t> recent,
                     float repeat_penalty, float presence, float frequency);

// logit /= temperature. temperature <= 0 is greedy: only the candidate with
// the highest logit stays (ties -> lowest id).
void apply_temperature(std::vector<Candidate>& c, float temperature);

// Sorts by logit descending (ties -> lowest id first) and fills p with
// exp(logit - max) / sum. No-op on an empty array. O(n log n); skips the
// sort when the array is already in that order.
void softmax(std::vector<Candidate>& c);

// Fills p like softmax but keeps the order (O(n)). The chain's last step in
// Sampler uses this: draw does not need sorted input.
void normalize(std::vector<Candidate>& c);

// Keeps the k candidates with the highest logits, sorted descending (ties ->
// lowest id). k <= 0 or k >= size: unchanged. Small k (k * 16 <= n): one
// scan with a k-heap, O(n) comparisons for typical logits; otherwise
// nth_element. Then the k are sorted. p is stale afterwards.
void top_k(std::vector<Candidate>& c, int k);

// Nucleus sampling (Holtzman et al. 2019, "The Curious Case of Neural Text
// Degeneration"): p is computed from the logits (softmax), the candidates are
// sorted descending and the smallest prefix whose cumulative p >= p is kept
// (at least 1 candidate), with p renormalised over it. p >= 1: unchanged.
// Sorts only as much as needed: a growing partial sort from the top, so a
// 128k vocabulary whose mass sits in a few hundred tokens is not fully sorted.
void top_p(std::vector<Candidate>& c, float p);

// min-p (Nguyen et al. 2024, "Turning Up the Heat: Min-p Sampling"): keeps
// candidates whose probability p_i >= p * p_max (at least the best one),
// with p renormalised over them; order is kept. p <= 0: unchanged; p > 1
// acts as 1. O(n).
void min_p(std::vector<Candidate>& c, float p);

// Inverse CDF over p in array order: the first candidate whose cumulative p
// exceeds u * sum(p). u in [0, 1). Returns its id, or -1 for an empty array.
int32_t draw(const std::vector<Candidate>& c, double u);

// Index of the highest logit (ties -> lowest index). logits must be non-empty.
int32_t argmax(std::span<const float> logits);

}  // namespace sampling

class Sampler {
 public:
  // RNG: std::mt19937_64 seeded from params.seed, else from std::random_device.
  // n_vocab: the length of every logits row passed to sample().
  Sampler(const SamplingParams& params, int n_vocab);

  // logits: [n_vocab] (not modified). history: prompt + generated tokens;
  // the penalties look at the last repeat_last_n of them (-1: all, 0: none).
  // temperature <= 0: greedy argmax (ties -> lowest id) after penalties.
  // Returns a token id in [0, n_vocab), or -1 when the logits hold a NaN or
  // +inf (greedy) or no candidate is left (every logit NaN or -inf).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

  // sample() restricted to the tokens `allowed` (ascending ids in
  // [0, n_vocab), non-empty): the token sample() draws from a copy of
  // `logits` with every other logit set to -inf, and the same random draws,
  // for every setting; but only the allowed tokens are read and become
  // candidates (a grammar mask allowing a few tokens of a 128k vocabulary
  // costs a few candidates, not a copy and a pass over the vocabulary).
  // Why they agree: a -inf logit stays -inf through the penalties and the
  // temperature, ranks below every other in top-k and top-p, fails min-p,
  // and gets probability 0 in the softmax, so it moves neither a sum nor a
  // draw; the allowed tokens keep their relative order (id order, or
  // sorted where sample() sorts). When no allowed logit is finite, or one
  // is +inf or NaN, the -inf copy is made and sample() runs on it.
  int32_t sample_among(std::span<const float> logits, std::span<const int32_t> allowed,
                       std::span<const int32_t> history);

  const SamplingParams& params() const { return params_; }

 private:
  bool penalties_on() const;
  std::span<const int32_t> penalty_window(std::span<const int32_t> history) const;
  double next_uniform();  // [0, 1), 53 random bits: same on every standard library

  SamplingParams params_;
  int n_vocab_;
  std::mt19937_64 rng_;
  std::vector<Candidate> cands_;  // scratch: [n_vocab]
  std::vector<float> scratch_;    // scratch for the greedy path and sample_among's fallback: [n_vocab]
};

}  // namespace larder
