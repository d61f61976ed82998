// Engine::Impl: the engine's state, shared by its source files:
//   engine.cpp         start-up, the engine thread's loop (carrying out the
//                      scheduler's StepPlan) and the cross-thread queues;
//   engine_choices.cpp n > 1: the choices of one prompt fork after its
//                      prefill, sharing its pages;
//   engine_output.cpp  a sampled token's way to the client (stop strings,
//                      detokenizer, finish events, remembered answers);
//   engine_restore.cpp lower-tier lookups (prefetch), restore or recompute,
//                      and restoring what a lookup found;
//   engine_chat.cpp    the Generator calls that run on other threads
//                      (tokenize, chat rendering, chat prompts);
//   engine_admin.cpp   the cache admin calls of other threads (report,
//                      pins, admin eviction), engine_reconfigure.cpp the
//                      live cache options.
// Private to engine/.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/backend.h"
#include "engine/draft_model.h"
#include "engine/engine.h"
#include "engine/kv/kv_cache_manager.h"
#include "engine/kv/pin_record.h"
#include "engine/model/model.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/tokenizer/answer_memo.h"
#include "engine/tokenizer/chat_format.h"
#include "engine/tokenizer/tokenizer.h"
#include "storage/access_trace.h"
#include "storage/log_limiter.h"
#include "storage/page_record.h"
#include "storage/tier_chain.h"

namespace larder {

// Positions computed per engine step (decode tokens + prefill chunks), so
// that running sequences keep decoding while a long prompt is prefilled.
constexpr int kStepTokenBudget = 512;
// Most choices one request may ask for (GenerationRequest::n); the API's
// limit ([server] max_n) is lower.
constexpr int kMaxChoices = 1024;

// A rendering longer than this cannot fit the context: no token covers more
// than max_token_bytes of text (Tokenizer::max_token_bytes), and a prompt of
// n_ctx tokens or more is refused (api/router.cpp). 0: no bound known.
inline size_t max_prompt_bytes(int n_ctx, size_t max_token_bytes) {
  if (n_ctx <= 1 || max_token_bytes == 0) return 0;
  return static_cast<size_t>(n_ctx - 1) * max_token_bytes;
}

struct Engine::Impl {
  struct RestoreResult {
    uint64_t seq_id = 0;
    std::vector<TierChain::Found> found;
  };

  EngineOptions opt;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatFormat> chat;
  ModelInfo info;
  KvLayout layout;
  int n_ctx = 0;
  int n_vocab = 0;
  PageRecordMeta meta;
  PageKey root;

  std::unique_ptr<Backend> backend;   // forward pass + page bytes (host or device)
  std::shared_ptr<TierChain> tiers;   // below the device; may be null (memory only)
  std::unique_ptr<KvCacheManager> kv;
  std::unique_ptr<DraftModel> draft;  // engine.draft_model; null: prompt lookup only
  std::unique_ptr<AccessTrace> trace;  // cache.trace_file; null: off

  // Cross-thread state (guarded by mu).
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Sequence>> inbox;
  std::deque<RestoreResult> restore_results;
  // Work for the engine thread from other threads (admin calls: pins,
  // evictions, budget changes), run at the start of its next step.
  std::deque<std::function<void()>> control;
  bool stop_requested = false;
  bool stopped = false;

  std::thread thread;
  std::atomic<uint64_t> next_id{1};

  // Engine thread only.
  std::deque<std::unique_ptr<Sequence>> queued;  // not admitted, in arrival order
  std::vector<std::unique_ptr<Sequence>> seqs;   // admitted, oldest first
  std::vector<float> logits;      // (n_rows, n_vocab)
  // Measured prefill speed (positions per second, exponential moving
  // average over prefill chunks of 16 positions or more); 0: none yet.
  double prefill_rate = 0;
  bool runnable = false;          // a sequence can make progress without new input
  LogLimiter log_limited{10000};  // repeated warnings: one line per kind per 10 s

  struct AtomicStats {
    std::atomic<int64_t> requests_total{0}, preemptions{0};
    std::atomic<int64_t> chose_restore{0}, chose_recompute{0};
    std::atomic<int64_t> pages_resident{0}, pages_free{0};
    std::atomic<int64_t> records_rejected_answers{0};
    std::atomic<int64_t> prefill_tokens{0};  // positions computed by prefill passes
    std::atomic<int64_t> draft_tokens{0}, draft_tokens_accepted{0};  // speculative decoding
    std::atomic<int64_t> draft_model_tokens{0}, draft_model_tokens_accepted{0};  // of those, the draft model's
  } stats;

  // engine.cpp: the loop.
  void run();
  // Queues fn to run on the engine thread (before its next step, or at
  // shutdown when the engine stops first); returns false (fn dropped) once
  // the engine stopped. fn must not block.
  bool post(std::function<void()> fn);
  // A submitted request: checked (empty, too long, bad ids: finished with
  // an error) and queued.
  void accept(std::unique_ptr<Sequence> seq);
  SchedState sched_state();
  void carry_out(const StepPlan& plan);
  void admit(std::unique_ptr<Sequence> seq);
  void preempt(Sequence& s);
  void apply_restore(RestoreResult& r);
  // Starts the lower-tier lookup of s's cacheable keys after the first
  // `from` (which the device holds), unless prefilling them is estimated to
  // be faster (restore_or_recompute).
  void issue_lookup(Sequence& s, int from);
  // Restores what s's finished lookup found after the pages it holds, then
  // starts its prefill; looks up again when the device lost pages since.
  void restore_prefetched(Sequence& s);
  // True when restoring n_pages from the lower tiers is estimated to be
  // faster than prefilling them (measured bandwidth vs measured prefill
  // rate); counts the decision.
  bool restore_or_recompute(int n_pages);
  Sequence* find_queued(uint64_t id);
  void start_prefill(Sequence& s);
  void run_prefill(Sequence& s, int n_tokens);
  // engine_choices.cpp: forks the choices of every sequence whose prefill
  // ended with fork_pending (before the step is scheduled, so that the
  // scheduler sees their pages), then samples each choice's first token
  // from the prompt's logits. A choice that would pass max_running, or gets
  // no page for its copy of the partial last page, is queued (at the
  // front) as a request of its own instead: its full pages are then
  // prefix-cache hits.
  void fork_choices();
  // Choice j of s (1 <= j < s.request.n): the same request with its own
  // seed and choice index, nothing computed yet.
  std::unique_ptr<Sequence> make_choice(const Sequence& s, int j);
  // engine_decode.cpp: one decode step of every sequence in batch, each
  // with the draft tokens prompt lookup finds for it (verified in the same
  // forward pass); drafts may take up to spare_pages free pages.
  void run_decode(const std::vector<Sequence*>& batch, int spare_pages);
  Sequence* find_seq(uint64_t id);
  void publish_stats();
  void shutdown_sequences();

  // engine_output.cpp
  void handle_token(Sequence& s, int32_t token);
  // engine_grammar.cpp: the next token from one row of logits [n_vocab]:
  // the sampler's choice, among the tokens s.request.grammar allows when it
  // has one (then the grammar state moves past it). kGrammarDeadEnd when
  // the grammar allows no token of the vocabulary; kBiasBansAll when
  // logit_bias bans every token that may come next (all, or all the
  // grammar allows).
  int32_t sample_next(Sequence& s, std::span<const float> row);
  // sample_next without the logprobs: logit_bias, grammar mask, sampler.
  int32_t sample_constrained(Sequence& s, std::span<const float> row);
  // A lazy grammar not fired yet: feeds the token just sampled freely to
  // s.trigger_watch and, on a trigger, starts the grammar over the text
  // from it (or drops the grammar when it refuses that text).
  void watch_for_trigger(Sequence& s, int32_t token);
  static constexpr int32_t kGrammarDeadEnd = -2;
  static constexpr int32_t kBiasBansAll = -3;
  // The vocabulary's byte trie for token masks, built on first use.
  std::shared_ptr<const TokenTrie> token_trie();
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<int32_t> end_of_generation_ids_;  // ascending; filled with trie_
  std::vector<float> masked_logits_;  // (n_vocab): the row with logit_bias added
  std::vector<int32_t> allowed_ids_;  // scratch: the ids a grammar mask allows, ascending
  void emit(Sequence& s, std::string text, std::vector<int32_t> tokens);
  // engine_logprobs.cpp (request.logprobs / request.echo).
  // The entry of `token` at a position with raw logits `row` [n_vocab],
  // with s.request.logprobs alternatives and the pieces filled in as the
  // text has them after `prev` (the token before; -1: none): piece_in_text.
  TokenLogprob logprob_entry(const Sequence& s, std::span<const float> row, int32_t token, int32_t prev);
  // A prefill chunk of s (batch: consecutive positions of its prompt) with
  // the logits of every position: forward calls of at most 64 MiB of logits
  // each (the split does not change the arithmetic, engine/cpu/forward.h),
  // each row's entry recorded in s.prompt_logprobs, and the last prompt
  // position's row (when in the batch) left in `logits` [n_vocab].
  Status forward_every_row(Sequence& s, std::span<BatchToken> batch, const SeqBlockTable& table);
  // Rows [n_rows][n_vocab] are the logits of prompt positions first_pos..:
  // the entries of the prompt tokens they predict (s.prompt_logprobs).
  void record_prompt_logprobs(Sequence& s, int first_pos, int n_rows, const float* rows);
  // The echo event of `to`: the prompt's decoded text and (logprobs >= 0)
  // the prompt entries of `from` (to itself, or the choice it forked from;
  // n == 1: they are dropped afterwards, n > 1: after fork_choices).
  void emit_echo(Sequence& to, Sequence& from);
  // request_fault: a kError the request itself leads to (GenerationEvent::request_fault).
  void finish(Sequence& s, FinishReason reason, std::string error = {}, bool request_fault = false);
  void remember_answer(const Sequence& s);
  void explain_cache_miss(Sequence& s);
  // The tokens of the most recent finished sequence per first page key, so
  // that a prompt which shares the start of an earlier one but misses the
  // cache part-way can say where it differs (bounded: cleared past 1024).
  std::unordered_map<PageKey, std::vector<int32_t>, PageKeyHash> recent_by_first_page;

  // engine_admin.cpp / engine_reconfigure.cpp (called on other threads).
  // Runs fn on the engine thread (post) and waits for it at most `timeout`;
  // false when the engine stopped or the time ran out (fn may still run
  // later: it must own what it touches, e.g. through shared_ptrs).
  bool run_sync(std::function<void()> fn, std::chrono::milliseconds timeout);
  // How long admin and control calls wait for the engine thread (run_sync).
  static constexpr std::chrono::milliseconds kControlTimeout{30000};
  // kCancelled: the engine stopped or did not answer within kControlTimeout.
  static Status engine_busy() {
    return Status::cancelled("the engine is stopped or did not answer within " +
                             std::to_string(kControlTimeout.count() / 1000) + " s");
  }
  // Applies the pins kept in the persistent tiers (create(), before the
  // engine thread starts) and starts the pin watch.
  void load_pins();
  // Requires admin_mu (or no engine thread yet). Adds the stored prefixes
  // not pinned yet to pins / pin_counts and pins their keys in every tier
  // below. Returns the keys to pin on the device: those of the prefixes
  // that fit its room for pins (pin()'s rule: one full context stays free)
  // and are not pinned there yet; the others are logged.
  std::vector<PageKey> adopt_pins(std::vector<PinnedPrefix> stored);
  // Requires admin_mu, not on the engine thread. Writes each of `keys` that
  // a persistent tier lacks to the persistent tiers: from the device where
  // resident (KvCacheManager::persist), else from a tier above that holds
  // it. Returns how many were held nowhere (written when next computed);
  // engine_busy when the engine thread did not answer.
  Result<int> persist_missing(const std::vector<PageKey>& keys);
  // The pin watch: a thread that calls resync_pins every kPinWatchInterval,
  // so that pins wait for the disk tier's return, not for the next admin
  // call (found in hostile testing). stop_pin_watch joins it and runs the
  // last resync (Engine::stop, before the engine thread stops).
  void start_pin_watch();
  void stop_pin_watch();
  std::thread pin_watch;
  std::mutex pin_watch_mu;
  std::condition_variable pin_watch_cv;
  bool pin_watch_stop = false;  // guarded by pin_watch_mu
  // Writes the pin list to the persistent tiers (or erases it when empty).
  void save_pins();
  // Whether every persistent tier is available (PageTier::available).
  bool persistent_tiers_available() const;
  // Requires admin_mu, not on the engine thread. Once the persistent tiers
  // are available again after they were not: applies the pins stored there
  // that load_pins could not read (merged with those made since), writes
  // the pin list that could not be written, and the pinned pages they lack
  // (persist_missing). Found in hostile testing: pins made while the disk
  // tier was down were lost at the next restart, and the stored ones were
  // not applied when it came back.
  void resync_pins();
  // Requires admin_mu, not on the engine thread. While stored_pins_unread:
  // once the persistent tiers are available, reads the stored pins and
  // adopts them (adopt_pins). False while they still cannot be read.
  bool merge_stored_pins();
  bool stored_pins_unread = false;  // guarded by admin_mu: load_pins found a persistent tier unavailable
  bool pins_unsaved = false;        // guarded by admin_mu: save_pins ran while one was unavailable
  // The prefix of `prompt`'s full pages under `cache_salt`; errors for an
  // empty prompt, bad ids, no full page, or (need_fit) one that cannot fit
  // the context.
  Result<PinnedPrefix> prefix_of(const std::vector<int32_t>& prompt, const std::string& cache_salt,
                                 bool need_fit) const;
  // The tiers below the device keep every pinned page (never evicted for
  // budget), so `n_pages` pinned pages must fit each one's budget (entries
  // of PageTier::entry_bytes each). "" when they do, else a message naming
  // the first tier too small and the key to raise. `budget_of` gives the
  // budget to check a tier against (reconfigure: the new one); null: its
  // current one. Found in hostile testing: pins kept the disk tier past a
  // smaller budget.
  std::string pins_overflow(size_t n_pages,
                            const std::function<int64_t(const PageTier&)>& budget_of = nullptr) const;
  // Pages one full context needs on the device: what pins must leave free.
  int min_device_pages() const { return (n_ctx + layout.page_size - 1) / layout.page_size + 1; }
  std::mutex admin_mu;              // one pin / unpin / evict / reconfigure at a time
  std::vector<PinnedPrefix> pins;   // guarded by admin_mu: the prefixes pinned
  std::unordered_map<PageKey, int, PageKeyHash> pin_counts;  // guarded by admin_mu: prefixes per key
  // pins.size() and pin_counts.size(), for the report (which takes no admin_mu:
  // a pin holds it while its prompt is computed).
  std::atomic<int64_t> n_pinned_prefixes{0}, n_pinned_keys{0};
  void publish_pin_counts() {
    n_pinned_prefixes = int64_t(pins.size());
    n_pinned_keys = int64_t(pin_counts.size());
  }
  mutable std::mutex live_mu;
  CacheOptions live_cache;          // guarded by live_mu: the cache options in force

  // engine_chat.cpp (called on other threads).
  // Ids of finished answers by their text, for chat prompts (answer_memo.h).
  AnswerMemo answers;
  // The ids of a remembered answer under the chain root of its request.
  std::optional<std::vector<int32_t>> find_answer(const std::string& text, const PageKey& chain_root);
  // AnswerMemo scope of a chain root: "" for the engine's own root (unsalted
  // requests), the root's bytes for a salted one.
  std::string answer_scope(const PageKey& chain_root) const {
    return chain_root == root ? std::string() : chain_root.to_bytes();
  }
  // The chat rendering with the client's byte ranges, or an error; refuses
  // one that cannot fit the context (Engine::chat_prompt).
  Result<tmpl::Rendered> render_chat_text(const ChatRequest& request) const;
};

}  // namespace larder
