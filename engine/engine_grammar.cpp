// Constrained decoding on the engine thread: the logits of tokens the
// request's grammar does not allow next are set to -inf before the sampler
// chain runs (as llama.cpp's grammar sampler does), so every stage after
// it (penalties, temperature, top-k/p, min-p) sees only allowed tokens.
// logit_bias is added first, so a grammar still wins over a bias.
#include <cmath>

#include "engine/engine_impl.h"

namespace larder {

std::shared_ptr<const TokenTrie> Engine::Impl::token_trie() {
  if (trie_) return trie_;
  // What each token adds to the output; end-of-generation and control
  // tokens add nothing and are never in a mask (end of generation is
  // decided by the grammar state).
  std::vector<std::string> pieces(static_cast<size_t>(n_vocab));
  for (int32_t id = 0; id < n_vocab; ++id) {
    if (!tokenizer->is_end_of_generation(id)) pieces[size_t(id)] = tokenizer->token_to_piece(id);
  }
  trie_ = std::make_shared<const TokenTrie>(pieces);
  return trie_;
}

int32_t Engine::Impl::sample_next(Sequence& s, std::span<const float> row) {
  const int32_t token = sample_constrained(s, row);
  // Logprobs come from the raw row, before logit_bias and the grammar mask.
  if (s.request.logprobs >= 0 && token >= 0 && token < n_vocab) s.next_logprob = logprob_entry(s, row, token);
  return token;
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
  if (!s.request.grammar) return s.sampler.sample(row, s.tokens);
  const CompiledGrammar& g = *s.request.grammar;
  if (!s.grammar_masker) {
    s.grammar_masker = std::make_unique<GrammarMasker>(s.request.grammar, token_trie());
    s.grammar_state = grammar_start(g);
  }
  const bool can_end = grammar_can_end(s.grammar_state) && !s.request.ignore_eos;
  const TokenMask& mask = s.grammar_masker->mask(s.grammar_state);
  if (row.data() != masked_logits_.data()) masked_logits_.assign(row.begin(), row.end());
  int n_allowed = 0;
  for (int32_t id = 0; id < n_vocab; ++id) {
    const bool allowed = mask_allows(mask, id) || (can_end && tokenizer->is_end_of_generation(id));
    if (allowed) {
      ++n_allowed;
    } else {
      masked_logits_[size_t(id)] = -INFINITY;
    }
  }
  if (n_allowed == 0) return kGrammarDeadEnd;
  const int32_t token = s.sampler.sample(masked_logits_, s.tokens);
  if (token < 0 || token >= n_vocab || tokenizer->is_end_of_generation(token)) return token;
  for (char c : tokenizer->token_to_piece(token)) s.grammar_state = grammar_advance(g, s.grammar_state, uint8_t(c));
  // The mask allowed it, so the state cannot be empty; done: nothing may follow.
  s.grammar_done = grammar_is_done(s.grammar_state);
  return token;
}

}  // namespace larder
