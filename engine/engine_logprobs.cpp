// Engine: token log-probabilities (GenerationRequest::logprobs) and the
// echoed prompt (GenerationRequest::echo), engine/engine_impl.h. The
// values come from engine/sampling/logprobs.h; this file adds the token
// pieces and the prompt's text offsets.
#include <algorithm>

#include "engine/engine_impl.h"

namespace larder {

TokenLogprob Engine::Impl::logprob_entry(const Sequence& s, std::span<const float> row, int32_t token,
                                         int32_t prev) {
  TokenLogprob e = logprobs::of_token(row, token, s.request.logprobs);
  // As the text has them (found in hostile testing: after BOS the token
  // was ' Once' and so was its top_logprobs key, in a text that starts
  // 'Once'; an echoed token's key kept the space its token had lost).
  e.piece = piece_in_text(*tokenizer, prev, token);
  for (TopLogprob& t : e.top) t.piece = piece_in_text(*tokenizer, prev, t.id);
  return e;
}

Status Engine::Impl::forward_every_row(Sequence& s, std::span<BatchToken> batch, const SeqBlockTable& table) {
  const int n = int(batch.size());
  const int rows_per_call = std::max(1, int((size_t(64) << 20) / (sizeof(float) * size_t(n_vocab))));
  logits.resize(size_t(std::min(n, rows_per_call)) * size_t(n_vocab));
  for (BatchToken& t : batch) t.want_logits = true;
  for (int b = 0; b < n; b += rows_per_call) {
    const int nb = std::min(rows_per_call, n - b);
    LARDER_RETURN_IF_ERROR(backend->forward(batch.subspan(size_t(b), size_t(nb)),
                                            std::span<const SeqBlockTable>(&table, 1), /*prefill=*/true,
                                            logits.data()));
    record_prompt_logprobs(s, batch[size_t(b)].pos, nb, logits.data());
  }
  if (batch.back().pos == s.n_prompt - 1) {
    const size_t last = size_t((n - 1) % rows_per_call);
    std::copy_n(logits.begin() + long(last * size_t(n_vocab)), size_t(n_vocab), logits.begin());
  }
  logits.resize(size_t(n_vocab));
  return Status::ok();
}

void Engine::Impl::record_prompt_logprobs(Sequence& s, int first_pos, int n_rows, const float* rows) {
  s.prompt_logprobs.resize(size_t(s.n_prompt));
  for (int r = 0; r < n_rows; ++r) {
    const int next = first_pos + r + 1;  // the prompt token this row predicts
    if (next >= s.n_prompt) break;       // the last row: the first generated token's
    std::span<const float> row(rows + size_t(r) * size_t(n_vocab), size_t(n_vocab));
    s.prompt_logprobs[size_t(next)] = logprob_entry(s, row, s.tokens[size_t(next)], s.tokens[size_t(next) - 1]);
  }
}

void Engine::Impl::emit_echo(Sequence& to, Sequence& from) {
  GenerationEvent ev;
  ev.choice = to.request.first_choice;
  ev.echo = true;
  const std::vector<int32_t>& prompt = from.request.prompt_tokens;
  const bool with_logprobs = to.request.logprobs >= 0 && from.prompt_logprobs.size() == prompt.size();
  if (with_logprobs) {
    TokenLogprob& first = from.prompt_logprobs[0];  // no distribution predicts it
    first = TokenLogprob{};
    first.id = prompt[0];
    first.has_logprob = false;
    first.piece = piece_in_text(*tokenizer, -1, prompt[0]);
  }
  IncrementalDetokenizer detok(*tokenizer);
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (with_logprobs) from.prompt_logprobs[i].text_offset = ev.text.size();
    ev.text += detok.push(prompt[i]);
  }
  ev.text += detok.flush();
  if (with_logprobs) ev.logprobs = from.prompt_logprobs;
  if (from.request.n <= 1) from.prompt_logprobs.clear();
  ev.tokens = prompt;
  to.sink->on_event(std::move(ev));
}

}  // namespace larder
