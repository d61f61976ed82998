// Token log-probabilities, as OpenAI's `logprobs` / `top_logprobs` and
// llama.cpp's `n_probs` report them: the log-softmax of the model's raw
// logits at one position, before logit_bias, a grammar mask, penalties,
// temperature or truncation (top-k/p, min-p) change them.
//
//   logprob(t) = logit[t] - log(sum_j exp(logit[j]))
//
// The sum is taken in double, shifted by the row's maximum (so no exp
// overflows); -inf logits add nothing, NaN logits are skipped. Computed only
// for requests that ask (GenerationRequest::logprobs), one row per token.
//
// LogprobQueue ties each generated token's entry to the text it wrote, so
// that an entry reaches the client together with (the first byte of) its
// text, and entries of tokens that a stop string cut off entirely are never
// sent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

namespace larder {

// One alternative at a position: token id, its log-probability (natural
// log, <= 0; -inf for a banned or -inf logit) and its text piece (raw bytes
// of Tokenizer::token_to_piece: may be part of a UTF-8 character, or "").
struct TopLogprob {
  int32_t id = 0;
  double logprob = 0;
  std::string piece;
};

// The entry of one token of the output (or of the prompt, for echo).
struct TokenLogprob {
  int32_t id = 0;
  // log-probability of `id` at its position; false for the first prompt
  // token, which no distribution predicts (OpenAI's null).
  bool has_logprob = true;
  double logprob = 0;
  std::string piece;               // raw bytes of the token's text piece
  std::vector<TopLogprob> top;     // the N most likely tokens, best first (ties: lower id first)
  // Byte offset of the token's text in the text sent to the client (the
  // generated text, or the echoed prompt), where its first byte is (or
  // would be: "" pieces sit where the next text starts).
  size_t text_offset = 0;
};

// Requests may ask for at most this many alternatives per position
// (OpenAI's chat limit; llama.cpp allows as many for completions).
inline constexpr int kMaxTopLogprobs = 20;

namespace logprobs {

// log(sum_j exp(logits[j])) in double, max-shifted. -inf when every logit
// is -inf (or the row is empty); NaN entries are skipped; +inf when a logit
// is +inf.
double log_sum_exp(std::span<const float> logits);

// The n ids with the highest logits (n clamped to [0, size]), best first,
// ties to the lower id; NaN logits last. logprob = logit - lse. O(size + n log n).
std::vector<TopLogprob> top(std::span<const float> logits, int n, double lse);

// The entry of `token` at a position whose raw logits are `logits`
// [n_vocab], with n_top alternatives (pieces left empty). token must be in
// [0, n_vocab).
TokenLogprob of_token(std::span<const float> logits, int32_t token, int n_top);

}  // namespace logprobs

// Holds each generated token's entry until the client gets its text (engine
// thread). Offsets are bytes of the detokenized output, which the stop
// matcher passes through unchanged except that it holds back and cuts.
class LogprobQueue {
 public:
  // The entry of the token about to be detokenized: its text starts at the
  // current end of the output. Sets entry.text_offset.
  void push(TokenLogprob entry);
  // The detokenizer produced n_bytes more output.
  void wrote(size_t n_bytes) { n_written_ += n_bytes; }
  // Entries whose text starts before byte n_sent of the output (at least
  // one byte of it has been sent), in order.
  std::vector<TokenLogprob> release(size_t n_sent);
  // Every entry left.
  std::vector<TokenLogprob> release_all();
  bool empty() const { return pending_.empty(); }

 private:
  std::deque<TokenLogprob> pending_;
  size_t n_written_ = 0;
};

}  // namespace larder
