// DraftModel: a small model sharing the served model's vocabulary that
// proposes draft tokens for speculative decoding ([engine] draft_model;
// llama.cpp's --model-draft, vLLM's draft-model proposer).
//
// Drafts are the draft model's greedy continuation of a sequence. They are
// verified by engine_decode.cpp exactly like prompt-lookup drafts: the served
// model samples each row with the sequence's own sampler and a draft token is
// kept only when it equals the token sampled. A greedy draft is a point-mass
// proposal q = delta(d), for which that rule is speculative sampling
// (Leviathan et al. 2023, Chen et al. 2023: accept with min(1, p(d)/q(d)) =
// p(d), else sample the residual), so the output is the same token for token
// as without a draft, greedy or seeded sampling alike.
//
// The draft model runs on the CPU with its own page pool: each sequence it
// drafts for holds pages with the K/V of the last kWindow to 2 kWindow
// tokens it was fed (never cached or spilled). A call feeds what changed
// since the last one (the common prefix of what it was fed and the window's
// tokens is kept), so a step costs about one draft-model pass per draft
// token, plus kWindow positions each time the window starts again (every
// kWindow tokens, and for a new sequence). Catch-up is shared out
// kMaxCatchUp positions per call; a sequence left over drafts a step later.
//
// Engine thread only; not thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/backend.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "storage/log_limiter.h"
#include "storage/status.h"

namespace larder {

class DraftModel {
 public:
  // Positions one call feeds at most to catch sequences up (a prefill chunk).
  static constexpr int kMaxCatchUp = 512;
  // The draft model sees the last kWindow to 2 kWindow tokens of a sequence
  // (at positions from 0): a sequence that grows past 2 kWindow tokens
  // starts again from its last kWindow. So its K/V never hold more than
  // 2 kWindow + 32 positions, and a long prompt (a returning conversation
  // whose pages the served model found in its cache) costs it kWindow
  // positions, not the whole prompt. Copying from further back is prompt
  // lookup's part.
  static constexpr int kWindow = 256;
  // Drafting stops before a token whose probability under the draft model is
  // below this (the first token of a draft is always proposed): a token the
  // draft itself doubts is seldom the served model's choice, and each draft
  // token costs a draft pass and a verification row.
  static constexpr float kMinProb = 0.5f;

  // Loads `path` and checks its vocabulary against the served model's
  // (`target`): the same number of tokens and the same text for every id.
  // K/V pages: `dtype` (f16 when the draft's K/V width does not suit q8_0),
  // `page_size` tokens each, `n_pages` of them, allocated now; `n_threads` as
  // EngineOptions. Errors name the file: kNotFound / kCorruption (load),
  // kInvalidArgument (vocabulary differs: the first differing id and both
  // texts), kResourceExhausted (pages do not fit in memory).
  // The vocabulary check of load(): `mine` (the draft's, from `path`) has
  // as many tokens as `target` and the same text for every id; else
  // kInvalidArgument naming the first differing id and both texts.
  static Status check_vocabulary(const std::string& path, const Tokenizer& mine, const Tokenizer& target);
  static Result<std::unique_ptr<DraftModel>> load(const std::string& path, const Tokenizer& target,
                                                  KvDtype dtype, int page_size, int n_pages,
                                                  int n_threads);
  // Pages of `page_size` positions for n_sequences windows (never longer
  // than n_ctx) and their max_draft draft positions: the pool load() needs
  // so that every running sequence can draft.
  static int64_t pages_for(int n_ctx, int n_sequences, int max_draft, int page_size) {
    const int64_t per_sequence = (std::min<int64_t>(n_ctx, 2 * kWindow) + max_draft + page_size - 1) / page_size;
    return int64_t(n_sequences) * per_sequence;
  }

  // One sequence's share of a propose() call: `tokens` is the sequence so
  // far (prompt and output), `seq_id` names the sequence whose K/V the call
  // reuses, max_draft the most draft tokens wanted.
  struct Request {
    uint64_t seq_id = 0;
    std::span<const int32_t> tokens;
    int max_draft = 0;
  };
  // For each request, up to max_draft tokens that the draft model predicts
  // after its tokens, greedily; fewer when its confidence falls below
  // kMinProb or its pages run out; none while the sequence is still
  // catching up or on a draft-model error (logged, never the request's).
  // All the sequences share each forward pass (the catch-up, then one pass
  // per draft position), so the draft's weights are read once per position
  // whatever the number of sequences. At most kMaxCatchUp positions are fed
  // before the first draft position in all; sequences past that budget
  // catch up in later calls.
  std::vector<std::vector<int32_t>> propose(std::span<const Request> requests);
  // propose() for one sequence.
  std::vector<int32_t> propose(uint64_t seq_id, std::span<const int32_t> tokens, int max_draft) {
    const Request r{seq_id, tokens, max_draft};
    return std::move(propose(std::span<const Request>(&r, 1)).front());
  }

  // Frees the pages of every sequence not in `live` (finished, preempted).
  void retain_only(std::span<const uint64_t> live);

  // One line for the log: file, size, layers, pages.
  std::string describe() const;
  int n_sequences() const { return int(seqs_.size()); }
  int n_free_pages() const;

 private:
  struct SeqState {
    std::vector<int32_t> pages;  // block table
    int start = 0;               // the window's first token: position 0 of the pages
    std::vector<int32_t> fed;    // tokens[start ..) whose K/V are in the pages, by position
  };
  DraftModel() = default;
  // Grows s's block table to cover `n_positions`; false when the pool is short.
  bool ensure_pages(SeqState& s, int n_positions);
  void release(SeqState& s);
  // One forward pass of the draft model; rows of logits_ for the tokens
  // with want_logits. False (logged) on an error.
  bool forward(std::span<const BatchToken> batch, std::span<const SeqBlockTable> tables);

  std::string path_;
  std::unique_ptr<Model> model_;      // before backend_: the forward pass reads its weights
  std::unique_ptr<Backend> backend_;  // CPU
  int n_vocab_ = 0;
  std::unordered_map<uint64_t, SeqState> seqs_;
  std::vector<float> logits_;         // [rows][n_vocab]
  LogLimiter log_limited_{10000};
};

}  // namespace larder
