// One request's state inside the engine thread: its tokens, block table,
// sampler, detokenizer and stop matcher. Private to engine/.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/generation.h"
#include "engine/grammar/token_mask.h"
#include "engine/kv/kv_cache_manager.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/stop_matcher.h"
#include "engine/tokenizer/tokenizer.h"
#include "storage/page_store.h"

namespace larder {

enum class SeqState {
  kQueued,        // waiting for admission (engine/scheduler.h), also after a preemption
  kWaitingDisk,   // prefix pages being read from a lower tier by the storage threads
  kPrefill,       // positions [n_computed, n_target) still to compute
  kDecode,        // one token per step
  kFinished,
};

struct Sequence {
  using Clock = std::chrono::steady_clock;

  Sequence(uint64_t id_, GenerationRequest req, std::shared_ptr<GenerationSink> sink_,
           const Tokenizer& tok, int n_vocab)
      : id(id_),
        request(std::move(req)),
        sink(std::move(sink_)),
        sampler(request.sampling, n_vocab),
        // The piece after a BOS loses its leading space, as SentencePiece
        // decodes the start of a text (reference.json's convention too).
        detok(tok, request.prompt_tokens.empty() ? -1 : request.prompt_tokens.back()),
        stop(request.stop),
        trigger_watch(&request.grammar_triggers),
        grammar_waiting(request.grammar && !request.grammar_triggers.empty()) {}
  // trigger_watch points into request.
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  uint64_t id;
  GenerationRequest request;
  std::shared_ptr<GenerationSink> sink;
  Sampler sampler;
  IncrementalDetokenizer detok;
  StopMatcher stop;

  SeqState state = SeqState::kQueued;
  std::vector<int32_t> tokens;       // prompt + generated, (n_tokens)
  int n_prompt = 0;
  // Positions to compute before decoding: n_prompt at first; after a
  // preemption, every token but the last (which the next decode step feeds).
  int n_target = 0;
  bool resumed = false;              // preempted at least once: no first token to sample
  int n_computed = 0;                // positions whose K/V are in the pages
  int n_cached = 0;                  // prompt positions restored from memory or disk (first admission)
  int n_generated = 0;
  // Speculative decoding (engine_decode.cpp): drafts proposed next step at
  // most; 0 before the first draft.
  int draft_len = 0;
  // Draft-model drafts whose first token was rejected, in a row, and the
  // decode steps still to go without asking the draft model (back-off).
  int draft_model_misses = 0;
  int draft_model_wait = 0;
  SeqPages pages;                    // block table and sealed keys (engine/kv/kv_cache_manager.h)
  std::vector<PageKey> cacheable_keys;  // keys of the full pages a cache hit may cover (computed once per admission)
  // Lookup in the lower tiers (prefetch), issued while queued near the
  // head or at admission: keys cacheable_keys[lookup_from ..) were asked
  // for; `prefetched` holds the records found once lookup_done.
  bool lookup_issued = false;
  bool lookup_done = false;
  bool lookup_skipped = false;  // prefilling was estimated faster than restoring
  int lookup_from = 0;
  std::vector<TierChain::Found> prefetched;
  std::vector<char> key_where;  // per cacheable key: where it came from (access trace)
  bool traced = false;          // its R line is in the access trace (an F line follows)
  FinishReason finish = FinishReason::kNone;
  std::string error;
  std::vector<float> prompt_logits;  // (n_vocab) when request.return_prompt_logits
  std::string emitted_text;          // all text sent to the sink so far
  int cache_divergence_pos = -1;     // see GenerationEvent::cache_divergence_pos
  // request.grammar: where the output is in it, and the masks of its states
  // (created at the first sampled token).
  GrammarState grammar_state;
  std::unique_ptr<GrammarMasker> grammar_masker;
  bool grammar_done = false;         // the last token completed the grammar: stop after it
  // A lazy grammar (request.grammar_triggers): the watch over the output
  // until a trigger fires it, then grammar_masker and grammar_state as above.
  TriggerWatch trigger_watch;
  bool grammar_waiting = false;      // lazy and not fired yet: unconstrained
  // request.n > 1 (engine/engine_choices.cpp): the prompt's prefill is done
  // and its last logits wait in fork_logits (n_vocab) for the choices to
  // fork and sample their first tokens, at the start of the next step.
  bool fork_pending = false;
  std::vector<float> fork_logits;
  // request.logprobs >= 0 (engine/engine_logprobs.cpp): the entry of the
  // token sample_next just chose, the entries waiting for their text, and
  // (echo) the prompt's entries by position.
  std::optional<TokenLogprob> next_logprob;
  LogprobQueue logprob_queue;
  std::vector<TokenLogprob> prompt_logprobs;
  bool cut_by_stop = false;          // a stop string ended the output: entries after it are dropped

  Clock::time_point t_admit = Clock::now();
  Clock::time_point t_first_token;
  bool have_first_token = false;
};

// True while s must compute logits at every prompt position (echo with
// logprobs, first run): no cached page may stand in for them.
inline bool needs_prompt_logits(const Sequence& s) {
  return !s.resumed && s.request.echo && s.request.logprobs >= 0;
}

}  // namespace larder
