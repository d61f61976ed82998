// Constrained decoding on the engine thread: only the tokens the request's
// grammar allows next are sampled from, as if every other logit were -inf
// (what llama.cpp's grammar sampler does), so every stage of the chain
// (penalties, temperature, top-k/p, min-p) sees only allowed tokens.
// Sampler::sample_among draws exactly what the sampler would draw from such
// a masked copy, but reads only the allowed tokens: the mask's set bits,
// found a 64-bit word at a time, not a pass over the vocabulary.
// logit_bias is added first, so a grammar still wins over a bias.
#include <algorithm>
#include <bit>
#include <cmath>

#include <spdlog/spdlog.h>

#include "engine/engine_impl.h"

namespace larder {

std::shared_ptr<const TokenTrie> Engine::Impl::token_trie() {
  if (trie_) return trie_;
  // What each token adds to the output; end-of-generation and control
  // tokens add nothing and are never in a mask (end of generation is
  // decided by the grammar state).
  std::vector<std::string> pieces(static_cast<size_t>(n_vocab));
  for (int32_t id = 0; id < n_vocab; ++id) {
    if (tokenizer->is_end_of_generation(id)) {
      end_of_generation_ids_.push_back(id);
    } else {
      pieces[size_t(id)] = tokenizer->token_to_piece(id);
    }
  }
  trie_ = std::make_shared<const TokenTrie>(pieces);
  return trie_;
}

int32_t Engine::Impl::sample_next(Sequence& s, std::span<const float> row) {
  const int32_t token = sample_constrained(s, row);
  // Logprobs come from the raw row, before logit_bias and the grammar mask.
  if (s.request.logprobs >= 0 && token >= 0 && token < n_vocab) {
    s.next_logprob = logprob_entry(s, row, token, s.tokens.empty() ? -1 : s.tokens.back());
  }
  return token;
}

void Engine::Impl::watch_for_trigger(Sequence& s, int32_t token) {
  if (token < 0 || token >= n_vocab || tokenizer->is_end_of_generation(token)) return;
  std::optional<std::string> text = s.trigger_watch.push(tokenizer->token_to_piece(token));
  if (!text) return;
  // Fired: the grammar takes the text from the trigger on, then every token.
  s.grammar_waiting = false;
  const CompiledGrammar& g = *s.request.grammar;
  GrammarState state = grammar_start(g);
  for (char c : *text) {
    if (state.empty()) break;
    state = grammar_advance(g, state, uint8_t(c));
  }
  if (state.empty()) {
    // The token that brought the trigger also brought text the grammar
    // refuses (a call opened otherwise than the grammar writes it): that
    // stays unconstrained, and the watch goes on for the next trigger.
    spdlog::debug("sequence {}: a lazy grammar refused the text that fired it; watching on", s.id);
    s.grammar_waiting = true;
    s.trigger_watch.rearm();
    return;
  }
  s.grammar_masker = std::make_unique<GrammarMasker>(s.request.grammar, token_trie());
  s.grammar_state = std::move(state);
  s.grammar_done = grammar_is_done(s.grammar_state);
}

int32_t Engine::Impl::sample_constrained(Sequence& s, std::span<const float> row) {
  if (!s.request.logit_bias.empty()) {
    masked_logits_.assign(row.begin(), row.end());
    for (const auto& [id, bias] : s.request.logit_bias) {
      if (id < 0 || id >= n_vocab) continue;
      masked_logits_[size_t(id)] = bias <= -100.0f ? -INFINITY : masked_logits_[size_t(id)] + bias;
    }
    row = masked_logits_;
  }
  // No grammar (or a lazy one not fired yet, or one given up): the sampler
  // over the whole row.
  auto sample_free = [&]() -> int32_t {
    // Every token banned by logit_bias: greedy would still pick one (the
    // argmax of all -inf), sampling none.
    if (!s.request.logit_bias.empty() && std::none_of(row.begin(), row.end(), [](float l) { return l > -INFINITY; })) {
      return kBiasBansAll;
    }
    const int32_t token = s.sampler.sample(row, s.tokens);
    if (s.grammar_waiting) watch_for_trigger(s, token);
    return token;
  };
  if (!s.request.grammar || s.grammar_waiting) return sample_free();
  const CompiledGrammar& g = *s.request.grammar;
  if (!s.grammar_masker) {
    s.grammar_masker = std::make_unique<GrammarMasker>(s.request.grammar, token_trie());
    s.grammar_state = grammar_start(g);
  }
  const bool can_end = grammar_can_end(s.grammar_state) && !s.request.ignore_eos;
  const TokenMask& mask = s.grammar_masker->mask(s.grammar_state);
  allowed_ids_.clear();
  for (size_t w = 0; w < mask.size(); ++w) {
    for (uint64_t bits = mask[w]; bits != 0; bits &= bits - 1) {
      const int32_t id = int32_t(w * 64 + size_t(std::countr_zero(bits)));
      if (id < n_vocab) allowed_ids_.push_back(id);
    }
  }
  if (can_end) {
    // End-of-generation tokens are never in a mask (their piece is empty).
    const size_t n_masked = allowed_ids_.size();
    allowed_ids_.insert(allowed_ids_.end(), end_of_generation_ids_.begin(), end_of_generation_ids_.end());
    std::inplace_merge(allowed_ids_.begin(), allowed_ids_.begin() + long(n_masked), allowed_ids_.end());
    allowed_ids_.erase(std::unique(allowed_ids_.begin(), allowed_ids_.end()), allowed_ids_.end());
  }
  const bool bias_bans_allowed =
      !allowed_ids_.empty() && !s.request.logit_bias.empty() &&
      std::none_of(allowed_ids_.begin(), allowed_ids_.end(), [&](int32_t id) { return row[size_t(id)] > -INFINITY; });
  if ((allowed_ids_.empty() || bias_bans_allowed) && !s.request.grammar_triggers.empty()) {
    // A lazy grammar the vocabulary or logit_bias cannot go on with: the
    // model's own text goes on, unconstrained, rather than the request
    // failing on what was sampled (found in hostile testing: tools under
    // "auto" with a logit_bias banning "\n" were a 400 for some seeds).
    spdlog::debug("sequence {}: a lazy grammar has no allowed token left; unconstrained from here", s.id);
    s.request.grammar.reset();
    s.grammar_masker.reset();
    return sample_free();
  }
  if (allowed_ids_.empty()) return kGrammarDeadEnd;
  // Every allowed token banned by logit_bias: greedy would pick one the
  // grammar rules out (the argmax of all -inf).
  if (bias_bans_allowed) return kBiasBansAll;
  const int32_t token = s.sampler.sample_among(row, allowed_ids_, s.tokens);
  if (token < 0 || token >= n_vocab || tokenizer->is_end_of_generation(token)) return token;
  for (char c : tokenizer->token_to_piece(token)) s.grammar_state = grammar_advance(g, s.grammar_state, uint8_t(c));
  // The mask allowed it, so the state cannot be empty; done: nothing may follow.
  s.grammar_done = grammar_is_done(s.grammar_state);
  return token;
}

}  // namespace larder
