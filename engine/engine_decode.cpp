// Engine: the decode step, with speculative decoding by prompt lookup and,
// where that finds no draft, by a draft model (engine/draft_model.h).
//
// Prompt lookup ("prompt lookup decoding", A. Saxena 2023; vLLM's n-gram
// proposer, llama.cpp's lookup decoding): when the last n tokens of a
// sequence (n = 4, 3, 2, the longest first) occurred earlier in it, prompt
// or output, the tokens that followed the most recent such occurrence are a
// draft of what comes next. Agents that edit code or quote documents repeat
// their input, and such drafts are often right.
//
// Verification: the draft d_1..d_k is fed in the same forward pass as the
// sequence's last token t_0, at positions p, p+1, .., p+k, each row with its
// logits. Row i's logits are those a plain decode step would compute after
// t_0, d_1, .., d_i (the CPU kernels give every row the same bits whatever
// the batch: engine/cpu/matmul.h). The rows are then sampled in order with
// the sequence's own sampler, exactly as plain decode steps would (same
// penalties, grammar, logit_bias, logprobs, stop checks): the token sampled
// from row i is emitted, and row i + 1 is used only if that token is d_{i+1};
// at the first mismatch the rest of the draft is dropped. So every emitted
// token is the one plain decoding would have emitted, and the sampler draws
// once per emitted token as it would without a draft: the output is the same
// token for token, greedy or seeded sampling alike. For a draft that is a
// single proposed token, "sample from the target, accept when equal" is
// speculative sampling (Leviathan et al. 2023, Chen et al. 2023) with a
// point-mass draft distribution q = delta(d): acceptance min(1, p(d) / q(d))
// = p(d), and on rejection a sample from the residual norm(max(0, p - q)).
//
// A draft model's drafts (its greedy continuation, [engine] draft_model) are
// verified the same way: they too are a point-mass proposal.
//
// The K/V written for rejected positions stay in the pages past n_computed,
// never sealed into the cache, and are overwritten when those positions are
// computed for real.
#include <algorithm>
#include <span>
#include <vector>

#include "engine/engine_impl.h"
#include "engine/prompt_lookup.h"

namespace larder {

namespace {

constexpr int kMaxNgram = 4;
constexpr int kMinNgram = 2;
// Draft tokens of all sequences in one step, at most (a step's rows stay
// few: verifying costs little while decode is bound by reading the weights).
constexpr int kMaxDraftRows = 32;
// How far back the lookup searches, in tokens.
constexpr int kLookupWindow = 1 << 16;
// A sequence's draft length adapts to how well its drafts fare: it starts
// here, doubles (up to EngineOptions::draft_tokens) when a whole draft is
// accepted and falls to one more than the accepted count when not. Verifying
// costs little per row, but not nothing (bench_verify: on the 1B-shaped Q8_0
// file 1, 2, 4, 8 drafts cost 1.1, 1.25, 1.5, 1.9 decode steps).
constexpr int kFirstDraftLen = 2;
// The draft model's back-off after drafts rejected from their first token:
// at most 2^5 - 1 = 31 steps without it (see run_decode).
constexpr int kMaxDraftModelBackoff = 5;

}  // namespace

std::vector<int32_t> prompt_lookup_draft(std::span<const int32_t> tokens, int max_draft) {
  const int len = int(tokens.size());
  if (max_draft <= 0) return {};
  for (int n = kMaxNgram; n >= kMinNgram; --n) {
    if (len < n + 1) continue;
    const int32_t* suffix = tokens.data() + len - n;
    const int lowest = std::max(0, len - kLookupWindow);
    // Starts j with j + n <= len - 1: the occurrence is followed by a token.
    for (int j = len - n - 1; j >= lowest; --j) {
      if (tokens[size_t(j)] != suffix[0] || !std::equal(suffix, suffix + n, tokens.data() + j)) continue;
      const int from = j + n;
      const int count = std::min(max_draft, len - from);
      return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + from + count);
    }
  }
  return {};
}

void Engine::Impl::run_decode(const std::vector<Sequence*>& active, int spare_pages) {
  std::vector<Sequence*> in_batch;
  const int free_before = kv->n_free();
  for (Sequence* s : active) {
    const int pos = int(s->tokens.size()) - 1;
    if (!kv->ensure_pages(s->pages, pos + 1)) {
      finish(*s, FinishReason::kError, "KV cache is full (raise cache.device.budget)");
      continue;
    }
    in_batch.push_back(s);
  }
  if (in_batch.empty()) return;
  spare_pages -= std::max(0, free_before - kv->n_free());

  if (draft) {  // the draft model's pages of sequences that left
    std::vector<uint64_t> live;
    for (const auto& s : seqs)
      if (s) live.push_back(s->id);
    draft->retain_only(live);
  }
  // Drafts, within the pages each sequence holds and the spare ones: prompt
  // lookup's first, then the draft model's for the sequences it left without
  // (one propose() call for all of them, so they share its passes).
  const int ps = kv->page_size();
  std::vector<std::vector<int32_t>> drafts(in_batch.size());
  std::vector<char> from_model(in_batch.size(), 0);  // drafts[i] is the draft model's
  std::vector<DraftModel::Request> model_requests;
  std::vector<size_t> model_request_of;  // in_batch index of each model request
  int reserved_rows = 0;
  for (size_t i = 0; i < in_batch.size() && opt.draft_tokens > 0; ++i) {
    Sequence& s = *in_batch[i];
    // d drafts emit up to d + 1 tokens and write positions up to pos + d.
    if (s.draft_len == 0) s.draft_len = std::min(opt.draft_tokens, kFirstDraftLen);
    int room = std::min(s.draft_len, kMaxDraftRows - reserved_rows);
    room = std::min(room, n_ctx - int(s.tokens.size()) - 1);
    if (s.request.max_tokens > 0) room = std::min(room, s.request.max_tokens - s.n_generated - 1);
    if (room <= 0) continue;
    drafts[i] = prompt_lookup_draft(s.tokens, room);
    if (!drafts[i].empty()) {
      reserved_rows += int(drafts[i].size());
    } else if (draft && s.draft_model_wait > 0) {
      --s.draft_model_wait;
    } else if (draft) {
      model_requests.push_back(DraftModel::Request{s.id, std::span<const int32_t>(s.tokens), room});
      model_request_of.push_back(i);
      reserved_rows += room;
    }
  }
  if (!model_requests.empty()) {
    std::vector<std::vector<int32_t>> proposed = draft->propose(model_requests);
    for (size_t k = 0; k < proposed.size(); ++k) {
      drafts[model_request_of[k]] = std::move(proposed[k]);
      from_model[model_request_of[k]] = 1;
    }
  }
  int draft_rows = 0;
  for (size_t i = 0; i < in_batch.size(); ++i) {
    std::vector<int32_t>& d = drafts[i];
    if (d.empty()) continue;
    Sequence& s = *in_batch[i];
    const int pos = int(s.tokens.size()) - 1;
    const int held = int(s.pages.block_table.size()) * ps - (pos + 1);
    const int extra_pages = (int(d.size()) - held + ps - 1) / ps;
    if (extra_pages > 0) {
      if (extra_pages <= spare_pages && kv->ensure_pages(s.pages, pos + 1 + int(d.size()))) {
        spare_pages -= extra_pages;
      } else {
        d.resize(size_t(std::max(0, held)));
      }
    }
    draft_rows += int(d.size());
  }

  std::vector<BatchToken> batch;
  std::vector<SeqBlockTable> tables;
  std::vector<size_t> first_row;
  for (size_t i = 0; i < in_batch.size(); ++i) {
    const Sequence& s = *in_batch[i];
    const int pos = int(s.tokens.size()) - 1;
    first_row.push_back(batch.size());
    batch.push_back(BatchToken{s.tokens.back(), pos, int32_t(i), true});
    for (size_t j = 0; j < drafts[i].size(); ++j) {
      batch.push_back(BatchToken{drafts[i][j], pos + 1 + int(j), int32_t(i), true});
    }
    tables.push_back(SeqBlockTable{std::span<const int32_t>(s.pages.block_table)});
  }
  logits.resize(batch.size() * size_t(n_vocab));
  Status st = backend->forward(batch, tables, /*prefill=*/draft_rows > 0, logits.data());
  if (!st.is_ok()) {
    for (Sequence* s : in_batch) finish(*s, FinishReason::kError, st.to_string());
    return;
  }
  for (size_t i = 0; i < in_batch.size(); ++i) {
    Sequence& s = *in_batch[i];
    const std::vector<int32_t>& d = drafts[i];
    stats.draft_tokens += int64_t(d.size());
    if (from_model[i]) stats.draft_model_tokens += int64_t(d.size());
    int agreed_count = 0;
    for (size_t r = 0; r <= d.size(); ++r) {
      // Row r: the K/V of position pos + r (the last token, then accepted
      // drafts) are valid now.
      s.n_computed += 1;
      kv->commit(s.pages, s.tokens, s.n_computed);
      std::span<const float> row(logits.data() + (first_row[i] + r) * size_t(n_vocab), size_t(n_vocab));
      const int32_t token = sample_next(s, row);
      handle_token(s, token);
      const bool agreed = r < d.size() && token == d[r];
      if (agreed) {
        stats.draft_tokens_accepted += 1;
        if (from_model[i]) stats.draft_model_tokens_accepted += 1;
        ++agreed_count;
      }
      if (s.state == SeqState::kFinished || !agreed) break;
    }
    if (from_model[i] && !d.empty()) {
      // A draft model that keeps missing is asked less often: after k
      // drafts in a row rejected from their first token, it waits
      // 2^k - 1 steps (at most 31), so a draft model that does not suit
      // the served one costs about 1/32 of its passes rather than all.
      if (agreed_count == 0) {
        s.draft_model_misses = std::min(s.draft_model_misses + 1, kMaxDraftModelBackoff);
        s.draft_model_wait = (1 << s.draft_model_misses) - 1;
      } else {
        s.draft_model_misses = 0;
      }
    }
    if (!d.empty()) {
      s.draft_len = agreed_count == int(d.size()) ? std::min(opt.draft_tokens, 2 * int(d.size()))
                                                  : agreed_count + 1;
    }
  }
}

}  // namespace larder
