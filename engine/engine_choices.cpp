// n > 1 choices of one prompt (GenerationRequest::n): the prompt is
// prefilled once by the request's own sequence (choice 0); when its prefill
// is done the other choices fork from it, sharing its full pages by
// reference and copying its partial last page (KvCacheManager::fork), and
// every choice samples its first token from the prompt's last logits with
// its own sampler. From then on each choice is a sequence like any other:
// decoded, preempted and finished on its own (engine/engine_impl.h).
#include <spdlog/spdlog.h>

#include "engine/engine_impl.h"

namespace larder {

std::unique_ptr<Sequence> Engine::Impl::make_choice(const Sequence& s, int j) {
  GenerationRequest r = s.request;
  r.n = 1;
  r.first_choice = s.request.first_choice + j;
  if (r.sampling.seed) r.sampling.seed = *r.sampling.seed + uint64_t(j);  // else: a random seed of its own
  r.return_prompt_logits = false;
  auto c = std::make_unique<Sequence>(next_id++, std::move(r), s.sink, *tokenizer, n_vocab);
  c->pages.id = c->id;
  c->pages.root = s.pages.root;
  c->tokens = c->request.prompt_tokens;
  c->n_prompt = s.n_prompt;
  c->n_target = s.n_prompt;
  c->t_admit = s.t_admit;
  return c;
}

void Engine::Impl::fork_choices() {
  const size_t n_seqs = seqs.size();  // the choices forked below are appended
  for (size_t i = 0; i < n_seqs; ++i) {
    Sequence& s = *seqs[i];
    if (!s.fork_pending) continue;
    s.fork_pending = false;
    const std::vector<float> row = std::move(s.fork_logits);
    s.fork_logits.clear();
    if (s.state != SeqState::kDecode) continue;  // finished (cancelled) meanwhile
    std::vector<Sequence*> forked = {&s};
    std::vector<std::unique_ptr<Sequence>> waiting;
    for (int j = 1; j < s.request.n; ++j) {
      std::unique_ptr<Sequence> c = make_choice(s, j);
      // A choice is a running sequence: within max_running, and with a page
      // for its copy of the partial last page.
      if (int(seqs.size()) >= opt.max_running || !kv->fork(s.pages, c->pages, s.n_computed)) {
        // Its echo (the prompt's text and logprobs) is s's, sent now: its
        // own run then needs no logits at every prompt position, and with
        // max_tokens 0 no run at all. Found in hostile testing: 8 prompts of
        // 2048 tokens with n = 8, echo and logprobs prefilled each queued
        // choice's prompt again, every row's logits included, and stalled
        // every other request for 20 s.
        c->n_cached = s.n_cached;
        if (c->request.echo) {
          emit_echo(*c, s);
          c->request.echo = false;
        }
        if (c->request.max_tokens == 0) {
          c->t_first_token = s.t_first_token;
          c->have_first_token = true;
          finish(*c, FinishReason::kLength);
          continue;
        }
        spdlog::debug("request {}: choice {} cannot fork (max_running or no page); queued as a request of its own",
                      s.id, j);
        waiting.push_back(std::move(c));
        continue;
      }
      c->n_computed = s.n_computed;
      c->n_cached = s.n_cached;
      c->state = SeqState::kDecode;
      c->t_first_token = s.t_first_token;
      c->have_first_token = true;
      forked.push_back(c.get());
      seqs.push_back(std::move(c));
    }
    // At the queue's front, in order: they belong to a running request.
    queued.insert(queued.begin(), std::make_move_iterator(waiting.begin()), std::make_move_iterator(waiting.end()));
    for (Sequence* c : forked) {
      if (c != &s && c->request.echo) emit_echo(*c, s);  // s echoed at its prefill
      // max_tokens 0 (echo): the prompt only.
      if (c->request.max_tokens == 0) {
        finish(*c, FinishReason::kLength);
      } else {
        handle_token(*c, sample_next(*c, row));
      }
    }
    s.prompt_logprobs.clear();
  }
}

}  // namespace larder
