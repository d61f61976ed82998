// Engine: start-up, and the engine thread's loop: each step it builds the
// scheduler's state, calls schedule() (engine/scheduler.h) and carries out
// the plan (preempt, decode, prefill chunks, admit), with the KV cache
// manager (engine/kv/kv_cache_manager.h) doing every page operation. See
// engine/engine_impl.h for how the engine's files divide the work, and
// DESIGN.md "Data flow of one request" (steps 3-7).
#include "engine/engine.h"

#include <algorithm>
#include <filesystem>
#include <future>

#include <spdlog/spdlog.h>

#include "engine/engine_impl.h"
#include "engine/kv/prefix_hash.h"

namespace larder {

// ---- engine thread ---------------------------------------------------------

void Engine::Impl::run() {
  for (;;) {
    std::deque<std::unique_ptr<Sequence>> new_seqs;
    std::deque<RestoreResult> results;
    std::deque<std::function<void()>> work;
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] {
        return stop_requested || !inbox.empty() || !restore_results.empty() || !control.empty() || runnable;
      });
      if (stop_requested) break;
      new_seqs.swap(inbox);
      results.swap(restore_results);
      work.swap(control);
    }
    for (auto& fn : work) fn();
    for (auto& s : new_seqs) accept(std::move(s));
    for (auto& r : results) apply_restore(r);
    // Cancelled requests leave at once, queued or running (a sequence
    // waiting for a restore leaves when the read is back).
    for (auto& s : seqs) {
      if (s->state != SeqState::kFinished && s->state != SeqState::kWaitingDisk && s->sink->cancelled()) {
        finish(*s, FinishReason::kCancelled);
      }
    }
    for (auto& s : queued) {
      if (s->sink->cancelled()) finish(*s, FinishReason::kCancelled);
    }
    std::erase_if(queued, [](const auto& s) { return s->state == SeqState::kFinished; });
    std::erase_if(seqs, [](const auto& s) { return s->state == SeqState::kFinished; });
    fork_choices();  // engine/engine_choices.cpp: n > 1 choices whose prompt was prefilled last step
    std::erase_if(seqs, [](const auto& s) { return s->state == SeqState::kFinished; });

    const size_t n_before = seqs.size();
    const StepPlan plan = schedule(sched_state());
    carry_out(plan);
    kv->flush_spills();     // the pages sealed this step: one copy out of the device
    kv->flush_demotions();  // and those evicted (most went in ensure_pages already)
    kv->retry_lost_writes();  // spills a full disk refused, once it takes writes again

    std::erase_if(seqs, [](const auto& s) { return s->state == SeqState::kFinished; });
    // Pages and running slots freed this step may admit the queue's head.
    const bool freed = seqs.size() + plan.preempt.size() < n_before + plan.admit.size();
    // Sleep until new input unless a sequence can go on, or the plan
    // admitted someone (whose prefill starts next step). A queue head that
    // waits for pages is woken by the step that frees them.
    runnable = std::any_of(seqs.begin(), seqs.end(), [](const auto& s) {
      return s->state == SeqState::kPrefill || s->state == SeqState::kDecode;
    }) || !plan.admit.empty() || !plan.preempt.empty() || (!queued.empty() && freed);
    publish_stats();
  }
  shutdown_sequences();
  {
    // Work posted before the stop still runs (its callers may wait for it).
    std::deque<std::function<void()>> work;
    {
      std::lock_guard<std::mutex> lk(mu);
      work.swap(control);
    }
    for (auto& fn : work) fn();
  }
  kv->write_back_all();  // write_back: what is only in memory goes to disk now
  publish_stats();
}

bool Engine::Impl::post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lk(mu);
    if (stopped) return false;
    control.push_back(std::move(fn));
  }
  cv.notify_one();
  return true;
}

void Engine::Impl::shutdown_sequences() {
  // Everything still in flight ends as cancelled.
  for (auto& s : seqs) {
    if (s->state != SeqState::kFinished) finish(*s, FinishReason::kCancelled);
  }
  seqs.clear();
  std::deque<std::unique_ptr<Sequence>> left;
  left.swap(queued);
  {
    std::lock_guard<std::mutex> lk(mu);
    for (auto& s : inbox) left.push_back(std::move(s));
    inbox.clear();
  }
  for (auto& s : left) finish(*s, FinishReason::kCancelled);
}

void Engine::Impl::publish_stats() {
  stats.pages_free = kv->n_free();
  stats.pages_resident = kv->n_resident();
}

Sequence* Engine::Impl::find_seq(uint64_t id) {
  for (auto& s : seqs) {
    if (s->id == id) return s.get();
  }
  return nullptr;
}

namespace {

// Full pages of s a cache hit may cover: a first run always prefills its
// last prompt token (its logits give the first generated token); a resumed
// sequence needs no logits, so every full page of its target counts.
int n_cacheable_pages(const Sequence& s, int page_size) {
  // Echo with logprobs needs the logits of every prompt position.
  if (needs_prompt_logits(s)) return 0;
  return s.resumed ? s.n_target / page_size : (s.n_target - 1) / page_size;
}

}  // namespace

void Engine::Impl::accept(std::unique_ptr<Sequence> seq) {
  Sequence& s = *seq;
  s.tokens = s.request.prompt_tokens;
  s.n_prompt = int(s.tokens.size());
  s.n_target = s.n_prompt;
  if (s.n_prompt == 0) return finish(s, FinishReason::kError, "empty prompt");
  if (s.request.n < 1 || s.request.n > kMaxChoices) {
    return finish(s, FinishReason::kError, "n = " + std::to_string(s.request.n) + ": must lie in [1, " +
                                               std::to_string(kMaxChoices) + "]");
  }
  // A prompt that generates leaves room for a token; one that is only
  // scored (max_tokens 0: echo) may fill the whole context.
  if (s.n_prompt > n_ctx || (s.n_prompt == n_ctx && s.request.max_tokens != 0)) {
    return finish(s, FinishReason::kError,
                  "prompt has " + std::to_string(s.n_prompt) + " tokens; the context holds " + std::to_string(n_ctx));
  }
  for (int32_t t : s.tokens) {
    if (t < 0 || t >= n_vocab) return finish(s, FinishReason::kError, "token id " + std::to_string(t) + " out of range");
  }
  queued.push_back(std::move(seq));
}

SchedState Engine::Impl::sched_state() {
  SchedState st;
  const int ps = layout.page_size;
  // Unclamped: after the budget shrank under running sequences it is
  // negative, and the scheduler preempts until the rest fit.
  st.n_available_pages = kv->headroom();
  st.n_pool_pages = kv->n_pages();
  st.page_size = ps;
  st.max_running = opt.max_running;
  st.token_budget = kStepTokenBudget;
  for (const auto& s : seqs) {
    SchedSeq q;
    q.id = s->id;
    q.phase = s->state == SeqState::kWaitingDisk ? SchedPhase::kWaitingRestore
              : s->state == SeqState::kDecode    ? SchedPhase::kDecode
                                                 : SchedPhase::kPrefill;
    q.n_target = s->n_target;
    q.n_computed = s->n_computed;
    q.n_pages_held = int(s->pages.block_table.size());
    q.n_pages_exclusive = kv->n_exclusive(s->pages);
    st.running.push_back(q);
  }
  // Only the queue's head can be admitted this step: the first
  // max_running requests at most (admission stops at the first that waits).
  const size_t n_look = std::min(queued.size(), size_t(std::max(1, opt.max_running)));
  for (size_t i = 0; i < n_look; ++i) {
    Sequence& s = *queued[i];
    if (s.cacheable_keys.empty() && n_cacheable_pages(s, ps) > 0) {
      s.cacheable_keys = kv->chain_keys(s.pages.root, s.tokens, n_cacheable_pages(s, ps));
    }
    const KvCacheManager::Match m = kv->match_prefix(s.cacheable_keys);
    // Prefetch: the head of the queue has its lower-tier pages read while
    // the running sequences keep decoding.
    if (tiers && !s.lookup_issued && !s.lookup_skipped && size_t(m.n_device) < s.cacheable_keys.size()) {
      issue_lookup(s, m.n_device);
    }
    SchedSeq q;
    q.id = s.id;
    q.phase = SchedPhase::kQueued;
    q.n_target = s.n_target;
    // Pages to hold its target and first decode position, minus the
    // resident prefix, plus the evictable part of that prefix.
    q.n_pages_to_take = pages_for(s.n_target + 1, ps) - m.n_device + m.n_evictable;
    st.queued.push_back(q);
  }
  return st;
}

void Engine::Impl::carry_out(const StepPlan& plan) {
  for (uint64_t id : plan.preempt) {
    if (Sequence* s = find_seq(id)) preempt(*s);
  }
  // Preempted sequences go back to the queue's front, the oldest first.
  std::vector<std::unique_ptr<Sequence>> back;
  for (auto it = plan.preempt.rbegin(); it != plan.preempt.rend(); ++it) {
    for (auto& s : seqs) {
      if (s && s->id == *it) back.push_back(std::move(s));
    }
  }
  std::erase_if(seqs, [](const auto& s) { return s == nullptr; });
  for (auto it = back.rbegin(); it != back.rend(); ++it) queued.push_front(std::move(*it));

  if (!plan.decode.empty()) {
    std::vector<Sequence*> batch;
    for (uint64_t id : plan.decode) {
      if (Sequence* s = find_seq(id); s && s->state == SeqState::kDecode) batch.push_back(s);
    }
    // Free pages the plan's prefill chunks will not need: draft tokens
    // (engine_decode.cpp) may take these and no others (none without drafts).
    int64_t spare = opt.draft_tokens > 0 ? kv->n_free() : 0;
    for (const PrefillChunk& c : plan.prefill) {
      if (spare <= 0) break;
      if (const Sequence* s = find_seq(c.id)) {
        const int64_t need = (int64_t(s->n_computed) + c.n_tokens + kv->page_size() - 1) / kv->page_size();
        spare -= std::max<int64_t>(0, need - int64_t(s->pages.block_table.size()));
      }
    }
    run_decode(batch, int(std::max<int64_t>(0, spare)));
  }
  for (const PrefillChunk& c : plan.prefill) {
    if (Sequence* s = find_seq(c.id); s && s->state == SeqState::kPrefill) run_prefill(*s, c.n_tokens);
  }
  for (const Refusal& r : plan.refuse) {
    for (auto& s : queued) {
      if (s->id == r.id) finish(*s, FinishReason::kError, "KV cache too small: " + r.reason);
    }
  }
  std::erase_if(queued, [](const auto& s) { return s->state == SeqState::kFinished; });
  for (uint64_t id : plan.admit) {
    auto it = std::find_if(queued.begin(), queued.end(), [&](const auto& s) { return s->id == id; });
    if (it == queued.end()) continue;
    std::unique_ptr<Sequence> s = std::move(*it);
    queued.erase(it);
    admit(std::move(s));
  }
}

void Engine::Impl::preempt(Sequence& s) {
  // Its pages stay in the cache (a hit when it resumes), the partial tail
  // among them. A decoding sequence resumes by recomputing every
  // token but its last, which the next decode step feeds.
  kv->commit(s.pages, s.tokens, s.n_computed);
  kv->release(s.pages, s.tokens, s.n_computed);
  if (s.state == SeqState::kDecode) {
    s.n_target = int(s.tokens.size()) - 1;
    s.resumed = true;
  }
  s.n_computed = 0;
  s.cacheable_keys.clear();
  s.lookup_issued = s.lookup_done = s.lookup_skipped = false;
  s.prefetched.clear();
  s.state = SeqState::kQueued;
  ++stats.preemptions;
  spdlog::debug("request {}: preempted (KV pages ran out), resumes at {} of {} positions", s.id, 0, s.n_target);
}

void Engine::Impl::admit(std::unique_ptr<Sequence> seq) {
  Sequence& s = *seq;
  seqs.push_back(std::move(seq));
  const KvCacheManager::Match m = kv->match_prefix(s.cacheable_keys);
  kv->acquire_prefix(s.pages, s.cacheable_keys, m.n_device);
  s.n_computed = int(s.pages.block_table.size()) * layout.page_size;
  s.key_where.assign(s.pages.block_table.size(), 'd');
  if (size_t(m.n_device) < s.cacheable_keys.size() && tiers) {
    if (!s.lookup_issued) issue_lookup(s, m.n_device);
    if (s.lookup_issued) {
      s.state = SeqState::kWaitingDisk;
      if (s.lookup_done) restore_prefetched(s);
      return;
    }
  }
  start_prefill(s);
}

void Engine::Impl::start_prefill(Sequence& s) {
  // Token granularity: part of the next page may match a resident page (a
  // prompt that diverges inside a page, or one whose every page is cached
  // but its last token). A first run keeps its last prompt token to
  // prefill, for the logits of the first generated token.
  const int limit = s.resumed ? s.n_target : s.n_target - 1;
  if (!needs_prompt_logits(s)) s.n_computed += kv->reuse_partial(s.pages, s.tokens, s.n_computed, limit - s.n_computed);
  if (!s.resumed) {
    if (trace) {
      trace->request(s.id, s.cacheable_keys, s.key_where);
      s.traced = true;
    }
    s.n_cached = s.n_computed;
    explain_cache_miss(s);
  }
  s.state = s.n_computed >= s.n_target ? SeqState::kDecode : SeqState::kPrefill;
}

void Engine::Impl::run_prefill(Sequence& s, int n_tokens) {
  const int n = std::min(n_tokens, s.n_target - s.n_computed);
  if (!kv->ensure_pages(s.pages, s.n_computed + n)) {
    return finish(s, FinishReason::kError, "KV cache is full: no free page for the prompt (raise cache.device.budget)");
  }
  // Logits only for the last prompt position of a first run.
  const bool first_token = !s.resumed && s.n_computed + n == s.n_target;
  std::vector<BatchToken> batch;
  batch.reserve(size_t(n));
  for (int pos = s.n_computed; pos < s.n_computed + n; ++pos) {
    batch.push_back(BatchToken{s.tokens[size_t(pos)], pos, 0, first_token && pos == s.n_target - 1});
  }
  SeqBlockTable table{std::span<const int32_t>(s.pages.block_table)};
  logits.resize(size_t(n_vocab));
  const auto t0 = Sequence::Clock::now();
  // Echo with logprobs: every position's logits (engine_logprobs.cpp).
  Status st = needs_prompt_logits(s)
                  ? forward_every_row(s, batch, table)
                  : backend->forward(batch, std::span<const SeqBlockTable>(&table, 1), /*prefill=*/true, logits.data());
  if (!st.is_ok()) return finish(s, FinishReason::kError, st.to_string());
  if (const double secs = std::chrono::duration<double>(Sequence::Clock::now() - t0).count(); n >= 16 && secs > 0) {
    const double rate = n / secs;
    prefill_rate = prefill_rate == 0 ? rate : 0.8 * prefill_rate + 0.2 * rate;
  }
  s.n_computed += n;
  stats.prefill_tokens += n;
  kv->commit(s.pages, s.tokens, s.n_computed);
  if (s.n_computed < s.n_target) return;
  s.state = SeqState::kDecode;
  if (!first_token) return;  // resumed: the next decode step feeds its last token
  s.t_first_token = Sequence::Clock::now();
  s.have_first_token = true;
  if (s.request.return_prompt_logits) s.prompt_logits = logits;
  if (s.request.echo) emit_echo(s, s);
  if (s.request.n > 1) {
    // The choices fork before the next step is planned (fork_choices);
    // each echoes the prompt and, with max_tokens 0, ends there.
    s.fork_logits = logits;
    s.fork_pending = true;
    return;
  }
  if (s.request.max_tokens == 0) return finish(s, FinishReason::kLength);
  handle_token(s, sample_next(s, logits));
}

// ---- Engine ------------------------------------------------------------------

Engine::Engine() : impl_(std::make_unique<Impl>()) {}

Engine::~Engine() { stop(); }

Result<std::unique_ptr<Engine>> Engine::create(const EngineOptions& options) {
  std::unique_ptr<Engine> engine(new Engine());
  Impl& m = *engine->impl_;
  m.opt = options;
  if (options.model_path.empty()) return Status::invalid_argument("no model path given");
  if (!options.draft_model.empty() && options.draft_tokens <= 0) {
    return Status::invalid_argument("engine.draft_model is set but engine.draft_tokens is 0: set draft_tokens "
                                    "(1-32) to draft with it");
  }
  LARDER_ASSIGN_OR_RETURN(m.model, Model::load(options.model_path));
  LARDER_ASSIGN_OR_RETURN(m.tokenizer, Tokenizer::from_gguf(m.model->gguf()));
  LARDER_ASSIGN_OR_RETURN(m.chat, ChatFormat::load(m.model->gguf()));
  const LlamaHparams& hp = m.model->hparams();
  m.n_vocab = hp.n_vocab;
  if (m.tokenizer->n_vocab() != hp.n_vocab) {
    return Status::corruption(options.model_path + ": tokenizer has " +
                              std::to_string(m.tokenizer->n_vocab()) + " tokens, the model " +
                              std::to_string(hp.n_vocab));
  }
  m.n_ctx = options.n_ctx > 0 ? options.n_ctx : hp.n_ctx_train;
  {
    // A render stops once it cannot fit the context (render_chat_text).
    tmpl::RenderOptions render;
    if (options.strftime_now) render.strftime_now = options.strftime_now;
    m.info.max_prompt_bytes = max_prompt_bytes(m.n_ctx, m.tokenizer->max_token_bytes());
    if (const size_t max_bytes = m.info.max_prompt_bytes; max_bytes > 0) {
      render.max_output_bytes = max_bytes;
      render.max_memory_bytes = std::max<int64_t>(render.max_memory_bytes, 16 * static_cast<int64_t>(max_bytes));
    }
    m.chat->set_render_options(std::move(render));
  }
  if (options.max_running < 1) return Status::invalid_argument("engine.max_running must be >= 1");
  if (m.n_ctx > hp.n_ctx_train && hp.n_ctx_train > 0) {
    spdlog::warn("context length {} is longer than the {} tokens the model was trained for; "
                 "output past {} tokens may degrade",
                 m.n_ctx, hp.n_ctx_train, hp.n_ctx_train);
  }
  if (m.n_ctx <= 1) return Status::invalid_argument("context length must be > 1");

  const int ps = options.cache.page_size;
  if (ps <= 0 || ps > 1024 || (ps & (ps - 1)) != 0) {
    return Status::invalid_argument("cache.page_size = " + std::to_string(ps) +
                                    ": must be a power of two between 1 and 1024");
  }
  const std::optional<KvDtype> named = kv_dtype_from_name(options.cache.kv_dtype);
  if (!named) {
    return Status::invalid_argument("cache.kv_dtype = '" + options.cache.kv_dtype + "': must be f32, f16 or q8_0");
  }
  const KvDtype dtype = *named;
  if (dtype == KvDtype::kQ8_0 && hp.kv_dim() % 32 != 0) {
    return Status::invalid_argument("cache.kv_dtype = 'q8_0' needs the model's K/V width (n_head_kv x head_dim = " +
                                    std::to_string(hp.kv_dim()) + ") to be a multiple of 32; use f16");
  }
  m.layout = KvLayout{hp.n_layer, hp.kv_dim(), ps, dtype};
  const int64_t page_bytes = int64_t(m.layout.page_bytes());
  const int64_t n_pages = options.cache.device.budget_bytes / page_bytes;
  const int64_t min_pages = (m.n_ctx + ps - 1) / ps + 1;
  if (n_pages < min_pages) {
    return Status::invalid_argument(
        "cache.device.budget = " + std::to_string(options.cache.device.budget_bytes) +
        " bytes holds " + std::to_string(n_pages) + " KV pages of " + std::to_string(page_bytes) +
        " bytes; one full context of " + std::to_string(m.n_ctx) + " tokens needs " +
        std::to_string(min_pages) + " (" + std::to_string(min_pages * page_bytes) + " bytes)");
  }
  BackendOptions bopt;
  bopt.device = options.device;
  bopt.device_check = options.device_check;
  bopt.layout = m.layout;
  bopt.n_pages = int(std::min<int64_t>(n_pages, 1 << 30));
  bopt.n_threads = options.n_threads;
  bopt.max_batch_tokens = std::max(kStepTokenBudget, options.max_running);
  LARDER_ASSIGN_OR_RETURN(m.backend, create_backend(*m.model, bopt));
  if (!options.draft_model.empty()) {
    // Every running sequence's window and drafts, no more positions than
    // the served model's pool holds.
    const int64_t draft_pages = std::min<int64_t>(
        DraftModel::pages_for(m.n_ctx, options.max_running, options.draft_tokens, ps), bopt.n_pages);
    LARDER_ASSIGN_OR_RETURN(m.draft, DraftModel::load(options.draft_model, *m.tokenizer, dtype, ps,
                                                      int(draft_pages), options.n_threads));
  }

  m.meta.fingerprint = m.model->fingerprint();
  m.meta.kv_dtype = uint32_t(dtype);
  m.meta.n_layers = uint32_t(hp.n_layer);
  m.meta.page_size = uint32_t(ps);
  m.meta.kv_dim = uint32_t(hp.kv_dim());
  m.root = prefix_root(m.meta.fingerprint, m.layout, m.backend->numerics_id(), options.cache.salt);

  Result<std::unique_ptr<EvictionPolicy>> device_policy = make_eviction_policy(options.cache.device.policy);
  if (!device_policy.is_ok()) return Status::invalid_argument("cache.device.policy: " + device_policy.status().message());
  if (options.open_tiers) {
    LARDER_ASSIGN_OR_RETURN(m.tiers, options.open_tiers(options.cache, stored_pin_keys(m.root)));
  }
  m.kv = std::make_unique<KvCacheManager>(*m.backend, m.meta, m.tiers.get(), options.cache.write_through,
                                          std::move(*device_policy));
  if (!options.cache.trace_file.empty()) {
    LARDER_ASSIGN_OR_RETURN(
        m.trace, AccessTrace::open(options.cache.trace_file, page_bytes,
                                   int64_t(page_record_size(size_t(ps), m.layout.page_bytes())), ps));
    m.kv->set_trace(m.trace.get());
    spdlog::info("KV cache: page-access trace to {}", options.cache.trace_file);
  }
  m.live_cache = options.cache;
  m.load_pins();  // engine/engine_admin.cpp

  m.info.id = options.model_id.empty() ? std::filesystem::path(options.model_path).stem().string()
                                       : options.model_id;
  m.info.n_ctx = m.n_ctx;
  m.info.fingerprint = prefix_root(m.meta.fingerprint, m.layout, m.backend->numerics_id(), "").to_hex();
  m.info.n_vocab = m.n_vocab;
  m.info.created = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  spdlog::info("model {}: {} layers, n_embd {}, {} heads ({} kv), vocab {}, context {}; chat format {}, tool calls {}",
               m.info.id, hp.n_layer, hp.n_embd, hp.n_head, hp.n_head_kv, hp.n_vocab, m.n_ctx,
               m.chat->name(), tool_call_syntax_name(m.chat->tool_call_syntax()));
  std::string below;
  for (size_t i = 0; m.tiers && i < m.tiers->n_tiers(); ++i) {
    below += (below.empty() ? "" : " -> ") + std::string(m.tiers->tier(i).name());
  }
  spdlog::info("KV cache: device tier {} pages of {} tokens ({} bytes each, {}); below: {}", m.kv->n_pages(), ps,
               page_bytes, kv_dtype_name(dtype), below.empty() ? "nothing (memory only)" : below);
  spdlog::info("backend: {}", m.backend->describe());
  if (m.draft) spdlog::info("draft model (up to {} draft tokens a step): {}", options.draft_tokens, m.draft->describe());
  m.thread = std::thread([impl = &m] { impl->run(); });
  return engine;
}

void Engine::stop() {
  Impl& m = *impl_;
  m.stop_pin_watch();  // engine/engine_admin.cpp: runs the last resync
  {
    std::lock_guard<std::mutex> lk(m.mu);
    if (m.stopped) return;
    m.stop_requested = true;
    m.stopped = true;
  }
  m.cv.notify_all();
  if (m.thread.joinable()) m.thread.join();
  if (m.tiers) {
    m.tiers->drain_write_back();
    m.tiers->flush();  // a failure is logged by the tier, never fatal
    // The chain (and the disk's lock) lives as long as the engine, so that
    // stats() still reads the tiers' counters after stop().
  }
}

const ModelInfo& Engine::model_info() const { return impl_->info; }

void Engine::submit(GenerationRequest request, std::shared_ptr<GenerationSink> sink) {
  std::vector<std::pair<GenerationRequest, std::shared_ptr<GenerationSink>>> one;
  one.emplace_back(std::move(request), std::move(sink));
  submit_batch(std::move(one));
}

void Engine::submit_batch(std::vector<std::pair<GenerationRequest, std::shared_ptr<GenerationSink>>> batch) {
  Impl& m = *impl_;
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (auto& [request, sink] : batch) {
    auto seq = std::make_unique<Sequence>(m.next_id++, std::move(request), std::move(sink), *m.tokenizer, m.n_vocab);
    seq->pages.id = seq->id;
    seq->pages.root = salted_root(m.root, seq->request.cache_salt);
    ++m.stats.requests_total;
    seqs.push_back(std::move(seq));
  }
  {
    // One lock: the engine thread takes the whole batch in one step.
    std::lock_guard<std::mutex> lk(m.mu);
    if (!m.stopped) {
      for (auto& seq : seqs) m.inbox.push_back(std::move(seq));
      m.cv.notify_one();
      return;
    }
  }
  for (auto& seq : seqs) {
    GenerationEvent ev;
    ev.done = true;
    ev.choice = seq->request.first_choice;
    ev.finish = FinishReason::kCancelled;
    ev.error = "the engine is shutting down";
    ev.prompt_tokens = int(seq->request.prompt_tokens.size());
    seq->sink->on_event(std::move(ev));
  }
}

void Engine::flush_storage() {
  Impl& m = *impl_;
  if (!m.tiers) return;
  // Pages sealed in the step that is running now are copied out at its end:
  // a round trip through the engine thread queues them first.
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> queued = done->get_future();
  if (m.post([&m, done] {
        m.kv->flush_spills();
        m.kv->flush_demotions();
        done->set_value();
      })) {
    queued.wait();
  }
  m.tiers->flush();
}

Engine::Stats Engine::stats() const {
  const auto& s = impl_->stats;
  Stats out;
  out.pages_resident = s.pages_resident;
  out.pages_free = s.pages_free;
  const KvCacheStats& k = impl_->kv->stats();
  out.pages_written = k.pages_spilled;
  out.pages_rewritten = k.pages_respilled;
  out.pages_restored_disk = k.pages_restored;
  out.pages_reused_memory = k.pages_reused_device;
  out.records_rejected = k.records_rejected + s.records_rejected_answers;
  out.requests_total = s.requests_total;
  out.preemptions = s.preemptions;
  out.chose_restore = s.chose_restore;
  out.chose_recompute = s.chose_recompute;
  out.prefill_tokens = s.prefill_tokens;
  out.draft_tokens = s.draft_tokens;
  out.draft_tokens_accepted = s.draft_tokens_accepted;
  out.draft_model_tokens = s.draft_model_tokens;
  out.draft_model_tokens_accepted = s.draft_model_tokens_accepted;
  out.choice_pages_shared = k.pages_shared_fork;
  out.choice_pages_copied = k.pages_copied_fork;
  if (const TierChain* chain = impl_->tiers.get()) {
    for (size_t i = 0; i < chain->n_tiers(); ++i) {
      if (!chain->persistent(i)) continue;
      const TierStats t = chain->tier(i).stats();
      out.disk_writes_failed += t.writes_failed;
      out.disk_recoveries += t.recoveries;
      out.disk_records_moved_aside += t.records_lost;
    }
  }
  return out;
}

}  // namespace larder
