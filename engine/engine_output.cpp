// Engine: a sampled token's way to the client: end of generation, stop
// strings, the detokenizer, the finish event, remembered answers, and the
// debug line explaining a cache miss (engine/engine_impl.h).
#include <algorithm>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "engine/engine_impl.h"

namespace larder {

namespace {

double ms_between(Sequence::Clock::time_point a, Sequence::Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// A token's text for a log line: control characters as \n, \t, \xNN.
std::string escaped_for_log(const std::string& piece) {
  std::string out;
  for (unsigned char c : piece) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(char(c));
    }
  }
  return out;
}

}  // namespace

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "?";
}

void Engine::Impl::explain_cache_miss(Sequence& s) {
  const int ps = layout.page_size;
  const int n_full = (s.n_prompt - 1) / ps;
  const int hit = s.n_cached / ps;
  if (hit == 0 || hit >= n_full) return;
  // The first page's key: sealed already, or (when the hit came from a copy
  // of a page another sequence sealed meanwhile, reuse_partial, which is
  // sealed only at the next commit) the one its prompt determines.
  const PageKey* first = !s.pages.keys.empty()       ? &s.pages.keys[0]
                         : !s.cacheable_keys.empty() ? &s.cacheable_keys[0]
                                                     : nullptr;
  if (first == nullptr) return;
  auto it = recent_by_first_page.find(*first);
  if (it == recent_by_first_page.end()) return;
  const std::vector<int32_t>& earlier = it->second;
  const size_t n = std::min(earlier.size(), s.tokens.size());
  size_t d = 0;
  while (d < n && earlier[d] == s.tokens[d]) ++d;
  if (d >= n || d >= size_t(n_full) * size_t(ps)) return;  // not what ended the hit
  s.cache_divergence_pos = int(d);
  spdlog::debug("request {}: prefix cache hit {} of {} full pages; the prompt differs from an earlier "
                "request with the same start at token {}: earlier {} '{}', now {} '{}'",
                s.id, hit, n_full, d, earlier[d], escaped_for_log(tokenizer->token_to_piece(earlier[d])), s.tokens[d],
                escaped_for_log(tokenizer->token_to_piece(s.tokens[d])));
}

void Engine::Impl::handle_token(Sequence& s, int32_t token) {
  if (token == kGrammarDeadEnd) {
    return finish(s, FinishReason::kError,
                  "grammar: no token of the model's vocabulary can continue the output here (the grammar needs text "
                  "this vocabulary cannot write, or is too ambiguous: more than " +
                      std::to_string(kMaxGrammarStacks) + " readings of the text so far)",
                  /*request_fault=*/true);
  }
  if (token == kBiasBansAll) {
    return finish(s, FinishReason::kError,
                  "logit_bias bans every token that may come next (every token the grammar allows here, or the "
                  "whole vocabulary)",
                  /*request_fault=*/true);
  }
  if (token < 0 || token >= n_vocab) {
    // The sampler finds no candidate only when every logit is NaN/inf.
    return finish(s, FinishReason::kError,
                  "the model produced non-finite logits (NaN or inf); its weights may be corrupt");
  }
  s.tokens.push_back(token);
  s.n_generated += 1;
  if (!s.request.ignore_eos && tokenizer->is_end_of_generation(token)) {
    return finish(s, FinishReason::kStop);
  }
  if (s.next_logprob) {
    s.logprob_queue.push(std::move(*s.next_logprob));
    s.next_logprob.reset();
  }
  std::string piece = s.detok.push(token);
  s.logprob_queue.wrote(piece.size());
  StopMatcher::Output out = s.stop.push(std::move(piece));
  if (out.stopped) s.cut_by_stop = true;
  if (!out.text.empty()) emit(s, std::move(out.text), {token});
  if (out.stopped) {
    s.stop = StopMatcher({});  // nothing after the stop string is sent
    return finish(s, FinishReason::kStop);
  }
  if (s.grammar_done) return finish(s, FinishReason::kStop);  // nothing more may follow
  if (s.request.max_tokens > 0 && s.n_generated >= s.request.max_tokens) {
    return finish(s, FinishReason::kLength);
  }
  if (int(s.tokens.size()) >= n_ctx) return finish(s, FinishReason::kLength);
  if (s.sink->cancelled()) return finish(s, FinishReason::kCancelled);
}

void Engine::Impl::emit(Sequence& s, std::string text, std::vector<int32_t> tokens) {
  s.emitted_text += text;
  GenerationEvent ev;
  ev.choice = s.request.first_choice;
  ev.text = std::move(text);
  ev.tokens = std::move(tokens);
  if (!s.logprob_queue.empty()) ev.logprobs = s.logprob_queue.release(s.emitted_text.size());
  s.sink->on_event(std::move(ev));
}

// The answer's ids (without the end-of-generation token that closed it) when
// they give exactly the text the client received: not after a stop string
// cut the text inside a token.
void Engine::Impl::remember_answer(const Sequence& s) {
  if (!s.request.remember_answer || int(s.tokens.size()) <= s.n_prompt || s.emitted_text.empty()) return;
  std::span<const int32_t> ids(s.tokens.data() + s.n_prompt, s.tokens.size() - size_t(s.n_prompt));
  if (tokenizer->is_end_of_generation(ids.back())) ids = ids.first(ids.size() - 1);
  if (ids.empty()) return;
  const int32_t prev = s.tokens[size_t(s.n_prompt) - 1];
  if (tokenizer->decode_text(ids, prev) != s.emitted_text) return;
  answers.remember(s.emitted_text, ids, answer_scope(s.pages.root));
  if (tiers) tiers->put_persistent(answer_key(s.pages.root, s.emitted_text), encode_answer_record(s.emitted_text, ids));
}

void Engine::Impl::finish(Sequence& s, FinishReason reason, std::string error, bool request_fault) {
  if (s.state == SeqState::kFinished) return;
  if ((reason == FinishReason::kStop || reason == FinishReason::kLength) && !s.cut_by_stop) {
    // Text held by the detokenizer (an unfinished character) and by the stop
    // matcher (a possible stop-string start) is real output after all;
    // not after a stop string (found in hostile testing: the character held
    // after it was sent).
    std::string held = s.detok.flush();
    // Cut by max_tokens or the context, an unfinished character is dropped,
    // not sent as U+FFFD (found in hostile testing: a grammar of CJK
    // characters cut after one byte answered "\ufffd", outside the grammar).
    // The model's own end inside a character keeps it: that text is broken.
    if (reason == FinishReason::kLength) held.clear();
    s.logprob_queue.wrote(held.size());
    StopMatcher::Output out = s.stop.push(std::move(held));
    if (out.stopped) s.cut_by_stop = true;
    std::string tail = std::move(out.text);
    if (!out.stopped) tail += s.stop.flush();
    if (!tail.empty()) emit(s, std::move(tail), {});
  }
  if (reason == FinishReason::kStop || reason == FinishReason::kLength) remember_answer(s);
  auto now = Sequence::Clock::now();
  GenerationEvent ev;
  ev.choice = s.request.first_choice;
  ev.done = true;
  ev.finish = reason;
  ev.stopped_by_string = reason == FinishReason::kStop && s.cut_by_stop;
  ev.error = std::move(error);
  ev.request_fault = request_fault;
  ev.prompt_tokens = int(s.request.prompt_tokens.size());
  ev.cached_tokens = s.n_cached;
  ev.completion_tokens = s.n_generated;
  if (s.have_first_token) {
    ev.prefill_ms = ms_between(s.t_admit, s.t_first_token);
    ev.decode_ms = ms_between(s.t_first_token, now);
  }
  ev.prompt_logits = std::move(s.prompt_logits);
  // Entries whose text is still to come ("" pieces at the end) go with the
  // final event, unless a stop string cut the output before them.
  if (!s.cut_by_stop && (reason == FinishReason::kStop || reason == FinishReason::kLength)) {
    ev.logprobs = s.logprob_queue.release_all();
  }
  if (int(s.tokens.size()) > s.n_prompt) ev.output_tokens.assign(s.tokens.begin() + s.n_prompt, s.tokens.end());
  if (reason == FinishReason::kError) spdlog::warn("request {} failed: {}", s.id, ev.error);
  if (!s.pages.keys.empty()) {
    if (recent_by_first_page.size() >= 1024) recent_by_first_page.clear();
    const size_t n = std::min(s.tokens.size(), size_t(s.n_computed));
    recent_by_first_page[s.pages.keys[0]].assign(s.tokens.begin(), s.tokens.begin() + long(n));
  }
  ev.cache_divergence_pos = s.cache_divergence_pos;
  if (trace && s.traced) trace->finished(s.id);
  kv->release(s.pages, s.tokens, s.n_computed);
  s.state = SeqState::kFinished;
  s.sink->on_event(std::move(ev));
}

}  // namespace larder
