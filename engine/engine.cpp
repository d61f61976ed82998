// Engine: the engine thread's scheduler. See engine/engine.h and DESIGN.md
// "Data flow of one request" (steps 3-7).
#include "engine/engine.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "engine/backend.h"
#include "engine/kv/page_pool.h"
#include "engine/kv/prefix_cache.h"
#include "engine/kv/prefix_hash.h"
#include "engine/model/model.h"
#include "engine/sequence.h"
#include "engine/tokenizer/answer_memo.h"
#include "engine/tokenizer/chat_format.h"
#include "engine/tokenizer/chat_prompt.h"
#include "engine/tokenizer/tokenizer.h"
#include "storage/log_limiter.h"
#include "storage/page_record.h"
#include "storage/rocksdb_store.h"
#include "storage/storage_workers.h"

namespace larder {

namespace {

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

namespace {

// Prompt tokens run per prefill step, so that running sequences keep decoding
// while a long prompt is prefilled (chunked prefill).
constexpr int kMaxPrefillChunk = 512;

double ms_between(Sequence::Clock::time_point a, Sequence::Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

struct Engine::Impl {
  struct DiskResult {
    uint64_t seq_id = 0;
    std::vector<std::string> records;
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
  PagePool* pool = nullptr;           // backend's page free list
  std::unique_ptr<PrefixCache> cache;
  std::vector<uint8_t> page_buf;      // (page_bytes) one page on the host

  // Cross-thread state (guarded by mu). Declared before the storage objects
  // so that storage callbacks still find them while the workers drain.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Sequence>> inbox;
  std::deque<DiskResult> disk_results;
  bool stop_requested = false;
  bool stopped = false;

  std::unique_ptr<RocksDbPageStore> store;
  std::unique_ptr<StorageWorkers> workers;

  std::thread thread;
  std::atomic<uint64_t> next_id{1};

  // Engine thread only.
  std::deque<std::unique_ptr<Sequence>> waiting;  // submitted, not admitted (max_running)
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<float> logits;      // (n_rows, n_vocab)
  bool runnable = false;          // a sequence can make progress without new input
  // write_back only: token ids of sealed pages not yet written, by page id.
  std::unordered_map<int, std::vector<int32_t>> unwritten_tokens;
  LogLimiter log_limited{10000};  // repeated warnings: one line per kind per 10 s

  struct AtomicStats {
    std::atomic<int64_t> pages_written{0}, pages_restored_disk{0}, pages_reused_memory{0};
    std::atomic<int64_t> records_rejected{0}, requests_total{0};
    std::atomic<int64_t> pages_resident{0}, pages_free{0};
  } stats;

  void run();
  void admit(std::unique_ptr<Sequence> seq);
  void apply_disk(DiskResult& r);
  bool step_prefill();
  bool step_decode();
  bool ensure_page(Sequence& s, int pos);
  void seal_full_pages(Sequence& s);
  void handle_token(Sequence& s, int32_t token, Sequence::Clock::time_point now);
  void emit(Sequence& s, std::string text, std::vector<int32_t> tokens);
  void finish(Sequence& s, FinishReason reason, std::string error = {});
  void remember_answer(const Sequence& s);
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
  void explain_cache_miss(Sequence& s);
  // The tokens of the most recent finished sequence per first page key, so
  // that a prompt which shares the start of an earlier one but misses the
  // cache part-way can say where it differs (bounded: cleared past 1024).
  std::unordered_map<PageKey, std::vector<int32_t>, PageKeyHash> recent_by_first_page;
  // Ids of finished answers by their text, for chat prompts (answer_memo.h).
  AnswerMemo answers;
  Sequence* find_seq(uint64_t id);
  void write_back(int page, const PageKey& key);
};

void Engine::Impl::write_back(int page, const PageKey& key) {
  auto it = unwritten_tokens.find(page);
  if (it == unwritten_tokens.end() || !workers) return;
  Status st = backend->read_page(page, page_buf);
  if (!st.is_ok()) {
    log_limited.log(spdlog::level::warn, "copy out",
                    "page " + key.to_hex() + " could not be copied out for writing: " + st.to_string());
    unwritten_tokens.erase(it);
    return;
  }
  workers->put_async(key, encode_page_record(key, meta, it->second, page_buf));
  cache->mark_persisted(page);
  unwritten_tokens.erase(it);
  ++stats.pages_written;
}

// ---- engine thread ---------------------------------------------------------

void Engine::Impl::run() {
  for (;;) {
    std::deque<std::unique_ptr<Sequence>> new_seqs;
    std::deque<DiskResult> results;
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] {
        return stop_requested || !inbox.empty() || !disk_results.empty() || runnable;
      });
      if (stop_requested) break;
      new_seqs.swap(inbox);
      results.swap(disk_results);
    }
    for (auto& s : new_seqs) waiting.push_back(std::move(s));
    for (auto& r : results) apply_disk(r);
    while (!waiting.empty() && int(seqs.size()) < opt.max_running) {
      std::unique_ptr<Sequence> s = std::move(waiting.front());
      waiting.pop_front();
      admit(std::move(s));
    }
    for (auto& s : seqs) {
      if (s->state != SeqState::kFinished && s->state != SeqState::kWaitingDisk &&
          s->sink->cancelled()) {
        finish(*s, FinishReason::kCancelled);
      }
    }
    step_prefill();
    step_decode();
    std::erase_if(seqs, [](const auto& s) { return s->state == SeqState::kFinished; });
    runnable = std::any_of(seqs.begin(), seqs.end(), [](const auto& s) {
      return s->state == SeqState::kPrefill || s->state == SeqState::kDecode;
    }) || (!waiting.empty() && int(seqs.size()) < opt.max_running);
    stats.pages_free = pool->n_free();
    stats.pages_resident = cache->n_sealed();
  }
  // Shutdown: everything still in flight ends as cancelled.
  for (auto& s : seqs) {
    if (s->state != SeqState::kFinished) finish(*s, FinishReason::kCancelled);
  }
  seqs.clear();
  std::deque<std::unique_ptr<Sequence>> left;
  left.swap(waiting);
  {
    std::lock_guard<std::mutex> lk(mu);
    for (auto& s : inbox) left.push_back(std::move(s));
    inbox.clear();
  }
  for (auto& s : left) finish(*s, FinishReason::kCancelled);
  // write_back: what is still only in memory goes to disk now.
  std::vector<int> pending;
  for (const auto& [page, tokens] : unwritten_tokens) pending.push_back(page);
  for (int page : pending) write_back(page, cache->key_of(page));
}

Sequence* Engine::Impl::find_seq(uint64_t id) {
  for (auto& s : seqs) {
    if (s->id == id) return s.get();
  }
  return nullptr;
}

void Engine::Impl::admit(std::unique_ptr<Sequence> seq) {
  Sequence& s = *seq;
  seqs.push_back(std::move(seq));
  s.tokens = s.request.prompt_tokens;
  s.n_prompt = int(s.tokens.size());
  if (s.n_prompt == 0) return finish(s, FinishReason::kError, "empty prompt");
  if (s.n_prompt >= n_ctx) {
    return finish(s, FinishReason::kError,
                  "prompt has " + std::to_string(s.n_prompt) + " tokens; the context holds " +
                      std::to_string(n_ctx));
  }
  for (int32_t t : s.tokens) {
    if (t < 0 || t >= n_vocab) {
      return finish(s, FinishReason::kError, "token id " + std::to_string(t) + " out of range");
    }
  }
  // Full pages that may come from the cache: at least one prompt token is
  // always prefilled so that the first generated token has logits.
  const int n_full = (s.n_prompt - 1) / layout.page_size;
  std::vector<PageKey> keys = prefix_chain(s.root, s.tokens, layout.page_size, n_full);
  int i = 0;
  for (; i < n_full; ++i) {
    auto page = cache->find(keys[size_t(i)]);
    if (!page) break;
    cache->acquire(*page);
    s.block_table.push_back(*page);
    s.page_keys.push_back(keys[size_t(i)]);
  }
  stats.pages_reused_memory += i;
  s.n_computed = s.n_cached = i * layout.page_size;
  if (i < n_full && workers) {
    s.disk_keys.assign(keys.begin() + i, keys.end());
    s.state = SeqState::kWaitingDisk;
    uint64_t id = s.id;
    workers->get_prefix_async(s.disk_keys, [this, id](std::vector<std::string> records) {
      std::lock_guard<std::mutex> lk(mu);
      disk_results.push_back(DiskResult{id, std::move(records)});
      cv.notify_one();
    });
    return;
  }
  explain_cache_miss(s);
  s.state = SeqState::kPrefill;
}

void Engine::Impl::apply_disk(DiskResult& r) {
  Sequence* sp = find_seq(r.seq_id);
  if (sp == nullptr || sp->state != SeqState::kWaitingDisk) return;
  Sequence& s = *sp;
  const size_t page_bytes = layout.page_bytes();
  for (size_t j = 0; j < r.records.size() && j < s.disk_keys.size(); ++j) {
    const PageKey& key = s.disk_keys[j];
    const size_t page_index = s.block_table.size();
    // Another sequence may have computed this page while the read was in flight.
    if (auto resident = cache->find(key)) {
      cache->acquire(*resident);
      s.block_table.push_back(*resident);
      s.page_keys.push_back(key);
      s.n_computed += layout.page_size;
      continue;
    }
    auto page = cache->allocate();
    if (!page) break;  // no memory for more restored pages: prefill the rest
    std::span<const int32_t> page_tokens(s.tokens.data() + page_index * size_t(layout.page_size),
                                         size_t(layout.page_size));
    Status st = decode_page_record(r.records[j], key, meta, page_tokens,
                                   std::span<uint8_t>(page_buf.data(), page_bytes));
    if (st.is_ok()) st = backend->write_page(*page, page_buf);
    if (!st.is_ok()) {
      log_limited.log(spdlog::level::warn, "verify",
                      "page " + key.to_hex() + " from disk failed verification and was dropped: " + st.message());
      ++stats.records_rejected;
      cache->release(*page);
      if (workers) workers->erase_async(key);
      break;
    }
    cache->seal(*page, key, /*persisted=*/true);
    s.block_table.push_back(*page);
    s.page_keys.push_back(key);
    s.n_computed += layout.page_size;
    ++stats.pages_restored_disk;
  }
  s.n_cached = s.n_computed;
  s.disk_keys.clear();
  if (s.sink->cancelled()) return finish(s, FinishReason::kCancelled);
  explain_cache_miss(s);
  s.state = SeqState::kPrefill;
}

void Engine::Impl::explain_cache_miss(Sequence& s) {
  const int ps = layout.page_size;
  const int n_full = (s.n_prompt - 1) / ps;
  const int hit = s.n_cached / ps;
  if (hit == 0 || hit >= n_full) return;
  auto it = recent_by_first_page.find(s.page_keys[0]);
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

bool Engine::Impl::ensure_page(Sequence& s, int pos) {
  size_t index = size_t(pos / layout.page_size);
  while (s.block_table.size() <= index) {
    auto page = cache->allocate();
    if (!page) return false;
    s.block_table.push_back(*page);
  }
  return true;
}

void Engine::Impl::seal_full_pages(Sequence& s) {
  const int ps = layout.page_size;
  while (int(s.page_keys.size()) < s.n_computed / ps) {
    size_t i = s.page_keys.size();
    const PageKey& parent = i == 0 ? s.root : s.page_keys[i - 1];
    std::span<const int32_t> page_tokens(s.tokens.data() + i * size_t(ps), size_t(ps));
    PageKey key = prefix_next(parent, page_tokens);
    s.page_keys.push_back(key);
    int page = s.block_table[i];
    const bool write_now = opt.cache.write_through && workers != nullptr;
    if (!cache->seal(page, key, write_now)) continue;
    if (write_now) {
      Status st = backend->read_page(page, page_buf);
      if (!st.is_ok()) {
        log_limited.log(spdlog::level::warn, "copy out",
                        "page " + key.to_hex() + " could not be copied out for writing: " + st.to_string());
        continue;
      }
      workers->put_async(key, encode_page_record(key, meta, page_tokens, page_buf));
      ++stats.pages_written;
    } else if (workers) {
      unwritten_tokens[page].assign(page_tokens.begin(), page_tokens.end());
    }
  }
}

bool Engine::Impl::step_prefill() {
  Sequence* sp = nullptr;
  for (auto& s : seqs) {
    if (s->state == SeqState::kPrefill) {
      sp = s.get();
      break;
    }
  }
  if (sp == nullptr) return false;
  Sequence& s = *sp;
  const int n = std::min(s.n_prompt - s.n_computed, kMaxPrefillChunk);
  std::vector<BatchToken> batch;
  batch.reserve(size_t(n));
  for (int pos = s.n_computed; pos < s.n_computed + n; ++pos) {
    if (!ensure_page(s, pos)) {
      finish(s, FinishReason::kError, "KV cache is full: no free page for the prompt (raise cache.device.budget)");
      return true;
    }
    batch.push_back(BatchToken{s.tokens[size_t(pos)], pos, 0, pos == s.n_prompt - 1});
  }
  SeqBlockTable table{std::span<const int32_t>(s.block_table)};
  logits.resize(size_t(n_vocab));
  Status st = backend->forward(batch, std::span<const SeqBlockTable>(&table, 1), /*prefill=*/true,
                               logits.data());
  if (!st.is_ok()) {
    finish(s, FinishReason::kError, st.to_string());
    return true;
  }
  s.n_computed += n;
  seal_full_pages(s);
  if (s.n_computed == s.n_prompt) {
    s.state = SeqState::kDecode;
    auto now = Sequence::Clock::now();
    s.t_first_token = now;
    s.have_first_token = true;
    if (s.request.return_prompt_logits) s.prompt_logits = logits;
    int32_t tok = s.sampler.sample(logits, s.tokens);
    handle_token(s, tok, now);
  }
  return true;
}

bool Engine::Impl::step_decode() {
  std::vector<Sequence*> active;
  for (auto& s : seqs) {
    if (s->state == SeqState::kDecode) active.push_back(s.get());
  }
  if (active.empty()) return false;
  std::vector<BatchToken> batch;
  std::vector<SeqBlockTable> tables;
  std::vector<Sequence*> in_batch;
  for (Sequence* s : active) {
    const int pos = int(s->tokens.size()) - 1;
    if (!ensure_page(*s, pos)) {
      finish(*s, FinishReason::kError, "KV cache is full (raise cache.device.budget)");
      continue;
    }
    batch.push_back(BatchToken{s->tokens.back(), pos, int32_t(in_batch.size()), true});
    in_batch.push_back(s);
  }
  if (in_batch.empty()) return true;
  for (Sequence* s : in_batch) tables.push_back(SeqBlockTable{std::span<const int32_t>(s->block_table)});
  logits.resize(in_batch.size() * size_t(n_vocab));
  Status st = backend->forward(batch, tables, /*prefill=*/false, logits.data());
  if (!st.is_ok()) {
    for (Sequence* s : in_batch) finish(*s, FinishReason::kError, st.to_string());
    return true;
  }
  auto now = Sequence::Clock::now();
  for (size_t i = 0; i < in_batch.size(); ++i) {
    Sequence& s = *in_batch[i];
    s.n_computed += 1;
    seal_full_pages(s);
    std::span<const float> row(logits.data() + i * size_t(n_vocab), size_t(n_vocab));
    handle_token(s, s.sampler.sample(row, s.tokens), now);
  }
  return true;
}

void Engine::Impl::handle_token(Sequence& s, int32_t token, Sequence::Clock::time_point now) {
  (void)now;
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
  StopMatcher::Output out = s.stop.push(s.detok.push(token));
  if (!out.text.empty()) emit(s, std::move(out.text), {token});
  if (out.stopped) {
    s.stop = StopMatcher({});  // nothing after the stop string is sent
    return finish(s, FinishReason::kStop);
  }
  if (s.request.max_tokens > 0 && s.n_generated >= s.request.max_tokens) {
    return finish(s, FinishReason::kLength);
  }
  if (int(s.tokens.size()) >= n_ctx) return finish(s, FinishReason::kLength);
  if (s.sink->cancelled()) return finish(s, FinishReason::kCancelled);
}

void Engine::Impl::emit(Sequence& s, std::string text, std::vector<int32_t> tokens) {
  s.emitted_text += text;
  GenerationEvent ev;
  ev.text = std::move(text);
  ev.tokens = std::move(tokens);
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
  answers.remember(s.emitted_text, ids, answer_scope(s.root));
  if (workers) workers->put_async(answer_key(s.root, s.emitted_text), encode_answer_record(s.emitted_text, ids));
}

// Memory first, then the disk tier (a synchronous point read of a small
// record, on the caller's thread: a returning chat after a restart).
std::optional<std::vector<int32_t>> Engine::Impl::find_answer(const std::string& text, const PageKey& chain_root) {
  const std::string scope = answer_scope(chain_root);
  if (auto ids = answers.find(text, scope)) return ids;
  if (!store) return std::nullopt;
  const PageKey key = answer_key(chain_root, text);
  Result<std::optional<std::string>> record = store->get(key);
  if (!record.is_ok() || !*record) return std::nullopt;
  std::optional<std::vector<int32_t>> ids = decode_answer_record(**record, text, n_vocab);
  if (!ids) {
    ++stats.records_rejected;
    log_limited.log(spdlog::level::warn, "verify",
                    "dropping a damaged answer record " + key.to_hex() + " from the disk tier");
    if (workers) workers->erase_async(key);
    return std::nullopt;
  }
  answers.remember(text, *ids, scope);
  return ids;
}

void Engine::Impl::finish(Sequence& s, FinishReason reason, std::string error) {
  if (s.state == SeqState::kFinished) return;
  if (reason == FinishReason::kStop || reason == FinishReason::kLength) {
    // Text held by the detokenizer (an unfinished character) and by the stop
    // matcher (a possible stop-string start) is real output after all.
    StopMatcher::Output out = s.stop.push(s.detok.flush());
    std::string tail = std::move(out.text);
    if (!out.stopped) tail += s.stop.flush();
    if (!tail.empty()) emit(s, std::move(tail), {});
  }
  if (reason == FinishReason::kStop || reason == FinishReason::kLength) remember_answer(s);
  auto now = Sequence::Clock::now();
  GenerationEvent ev;
  ev.done = true;
  ev.finish = reason;
  ev.error = std::move(error);
  ev.prompt_tokens = int(s.request.prompt_tokens.size());
  ev.cached_tokens = s.n_cached;
  ev.completion_tokens = s.n_generated;
  if (s.have_first_token) {
    ev.prefill_ms = ms_between(s.t_admit, s.t_first_token);
    ev.decode_ms = ms_between(s.t_first_token, now);
  }
  ev.prompt_logits = std::move(s.prompt_logits);
  if (int(s.tokens.size()) > s.n_prompt) ev.output_tokens.assign(s.tokens.begin() + s.n_prompt, s.tokens.end());
  if (reason == FinishReason::kError) spdlog::warn("request {} failed: {}", s.id, ev.error);
  if (!s.page_keys.empty()) {
    if (recent_by_first_page.size() >= 1024) recent_by_first_page.clear();
    const size_t n = std::min(s.tokens.size(), size_t(s.n_computed));
    recent_by_first_page[s.page_keys[0]].assign(s.tokens.begin(), s.tokens.begin() + long(n));
  }
  ev.cache_divergence_pos = s.cache_divergence_pos;
  for (int page : s.block_table) cache->release(page);
  s.block_table.clear();
  s.state = SeqState::kFinished;
  s.sink->on_event(std::move(ev));
}

namespace {

// A rendering longer than this cannot fit the context: no token covers more
// than max_token_bytes of text (Tokenizer::max_token_bytes), and a prompt of
// n_ctx tokens or more is refused (api/router.cpp). 0: no bound known.
size_t max_prompt_bytes(int n_ctx, size_t max_token_bytes) {
  if (n_ctx <= 1 || max_token_bytes == 0) return 0;
  return static_cast<size_t>(n_ctx - 1) * max_token_bytes;
}

Status too_long_for_context(int n_ctx, size_t max_bytes) {
  return Status::out_of_range("the chat prompt cannot fit the model's context of " + std::to_string(n_ctx) +
                                  " tokens: its rendering passes " + std::to_string(max_bytes) +
                                  " bytes (no token covers more than " + std::to_string(max_bytes / (n_ctx - 1)) +
                                  " bytes); shorten the conversation");
}

}  // namespace

// ---- Engine ------------------------------------------------------------------

Engine::Engine() : impl_(std::make_unique<Impl>()) {}

Engine::~Engine() { stop(); }

Result<std::unique_ptr<Engine>> Engine::create(const EngineOptions& options) {
  std::unique_ptr<Engine> engine(new Engine());
  Impl& m = *engine->impl_;
  m.opt = options;
  if (options.model_path.empty()) return Status::invalid_argument("no model path given");
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
  KvDtype dtype;
  if (options.cache.kv_dtype == "f32") {
    dtype = KvDtype::kF32;
  } else if (options.cache.kv_dtype == "f16") {
    dtype = KvDtype::kF16;
  } else {
    return Status::invalid_argument("cache.kv_dtype = '" + options.cache.kv_dtype + "': must be f32 or f16");
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
  bopt.layout = m.layout;
  bopt.n_pages = int(std::min<int64_t>(n_pages, 1 << 30));
  bopt.n_threads = options.n_threads;
  bopt.max_batch_tokens = std::max(kMaxPrefillChunk, options.max_running);
  LARDER_ASSIGN_OR_RETURN(m.backend, create_backend(*m.model, bopt));
  m.pool = &m.backend->pages();
  m.cache = std::make_unique<PrefixCache>(*m.pool);
  m.page_buf.resize(m.layout.page_bytes());

  m.meta.fingerprint = m.model->fingerprint();
  m.meta.kv_dtype = uint32_t(dtype);
  m.meta.n_layers = uint32_t(hp.n_layer);
  m.meta.page_size = uint32_t(ps);
  m.meta.kv_dim = uint32_t(hp.kv_dim());
  m.root = prefix_root(m.meta.fingerprint, m.layout, m.backend->numerics_id(), options.cache.salt);

  if (!options.cache.disk.dir.empty()) {
    RocksDbStoreOptions sopt;
    sopt.dir = options.cache.disk.dir;
    sopt.capacity_bytes = options.cache.disk.budget_bytes;
    sopt.hooks = options.disk_hooks;
    LARDER_ASSIGN_OR_RETURN(m.store, RocksDbPageStore::open(sopt));
    m.workers = std::make_unique<StorageWorkers>(*m.store, std::max(1, options.cache.n_storage_threads));
    if (!options.cache.write_through) {
      // write_back: a sealed page reaches disk only when it is evicted from
      // memory, or at shutdown.
      Impl* impl = &m;
      m.cache->set_evict_hook([impl](int page, const PageKey& key, bool persisted) {
        if (!persisted) impl->write_back(page, key);
      });
    }
  }

  m.info.id = options.model_id.empty() ? std::filesystem::path(options.model_path).stem().string()
                                       : options.model_id;
  m.info.n_ctx = m.n_ctx;
  m.info.n_vocab = m.n_vocab;
  m.info.created = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  spdlog::info("model {}: {} layers, n_embd {}, {} heads ({} kv), vocab {}, context {}; chat format {}, tool calls {}",
               m.info.id, hp.n_layer, hp.n_embd, hp.n_head, hp.n_head_kv, hp.n_vocab, m.n_ctx,
               m.chat->name(), tool_call_syntax_name(m.chat->tool_call_syntax()));
  spdlog::info("KV cache: {} pages of {} tokens ({} bytes each, {}), disk tier {}", m.pool->n_pages(), ps,
               page_bytes, kv_dtype_name(dtype), options.cache.disk.dir.empty() ? "off" : options.cache.disk.dir);
  spdlog::info("backend: {}", m.backend->describe());
  m.thread = std::thread([impl = &m] { impl->run(); });
  return engine;
}

void Engine::stop() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    if (m.stopped) return;
    m.stop_requested = true;
    m.stopped = true;
  }
  m.cv.notify_all();
  if (m.thread.joinable()) m.thread.join();
  if (m.workers) {
    m.workers->flush();  // then store->flush(); a failure is logged there, never fatal
    m.workers.reset();
  }
}

const ModelInfo& Engine::model_info() const { return impl_->info; }

std::vector<int32_t> Engine::tokenize(const std::string& text, bool parse_special) const {
  const Tokenizer& tok = *impl_->tokenizer;
  std::vector<int32_t> ids = tok.encode(text, /*add_bos=*/false, parse_special);
  if (tok.add_bos() && tok.bos_id() >= 0 && (ids.empty() || ids.front() != tok.bos_id())) {
    ids.insert(ids.begin(), tok.bos_id());
  }
  return ids;
}

Result<std::string> Engine::render_chat(const ChatRequest& request) const {
  Result<tmpl::Rendered> r = impl_->render_chat_text(request);
  if (!r.is_ok()) return r.status();
  return std::move(r->text);
}

// The rendering with the client's byte ranges; a rendering that cannot fit
// the context is refused here, before anything is tokenized (the template's
// output limit, RenderOptions::max_output_bytes, is the same bound, so a
// Jinja render stops as soon as it passes it).
Result<tmpl::Rendered> Engine::Impl::render_chat_text(const ChatRequest& request) const {
  const Impl& m = *this;
  const size_t max_bytes = m.info.max_prompt_bytes;
  Result<tmpl::Rendered> r = m.chat->render_text(request);
  if (!r.is_ok()) {
    if (r.status().code() == StatusCode::kOutOfRange && max_bytes > 0) return too_long_for_context(m.n_ctx, max_bytes);
    if (r.status().code() == StatusCode::kOutOfRange) return Status::invalid_argument(r.status().message());
    return r.status();
  }
  if (max_bytes > 0 && r->text.size() > max_bytes) return too_long_for_context(m.n_ctx, max_bytes);
  return r;
}

Result<std::vector<int32_t>> Engine::chat_prompt(const ChatRequest& request) const {
  Impl& m = *impl_;
  Result<tmpl::Rendered> rendered = m.render_chat_text(request);
  if (!rendered.is_ok()) return rendered.status();
  const std::string& text = rendered->text;
  // The plain format has no control tokens of its own; parse_special still
  // parses control-token text in its contents.
  const bool special = chat_uses_special_tokens() || request.special_in_content;
  // Earlier answers the template kept whole: the ids we remember for them
  // (looked up once per distinct text, and only for those), under the chain
  // root of the request's cache salt.
  const PageKey chain_root = salted_root(m.root, request.cache_salt);
  std::unordered_map<std::string_view, std::optional<std::vector<int32_t>>> answer_ids;
  std::vector<ChatSplice> splices;
  for (const tmpl::TextSpan& sp : rendered->spans) {
    if (sp.origin < 0 || static_cast<size_t>(sp.origin) >= request.messages.size()) continue;
    const ChatMessage& msg = request.messages[static_cast<size_t>(sp.origin)];
    if (msg.role != "assistant" || msg.content_null || msg.content.empty()) continue;
    if (std::string_view(text).substr(sp.begin, sp.end - sp.begin) != msg.content) continue;
    auto [it, fresh] = answer_ids.try_emplace(msg.content);
    if (fresh) it->second = m.find_answer(msg.content, chain_root);
    if (it->second) splices.push_back({sp.begin, sp.end, &*it->second});
  }
  ChatPromptIds out = tokenize_chat(*m.tokenizer, text, rendered->spans, splices, m.tokenizer->add_bos(), special,
                                    request.special_in_content);
  if (out.n_spliced > 0) spdlog::debug("chat prompt: {} earlier answer(s) use the ids the model sampled", out.n_spliced);
  return std::move(out.ids);
}

ToolCallSyntax Engine::tool_call_syntax() const { return impl_->chat->tool_call_syntax(); }

bool Engine::chat_uses_special_tokens() const { return impl_->chat->uses_special_tokens(); }

void Engine::submit(GenerationRequest request, std::shared_ptr<GenerationSink> sink) {
  Impl& m = *impl_;
  auto seq = std::make_unique<Sequence>(m.next_id++, std::move(request), std::move(sink),
                                        *m.tokenizer, m.n_vocab);
  seq->root = salted_root(m.root, seq->request.cache_salt);
  ++m.stats.requests_total;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    if (!m.stopped) {
      m.inbox.push_back(std::move(seq));
      m.cv.notify_one();
      return;
    }
  }
  GenerationEvent ev;
  ev.done = true;
  ev.finish = FinishReason::kCancelled;
  ev.error = "the engine is shutting down";
  ev.prompt_tokens = int(seq->request.prompt_tokens.size());
  seq->sink->on_event(std::move(ev));
}

void Engine::flush_storage() {
  if (impl_->workers) impl_->workers->flush();
}

Engine::Stats Engine::stats() const {
  const auto& s = impl_->stats;
  Stats out;
  out.pages_resident = s.pages_resident;
  out.pages_free = s.pages_free;
  out.pages_written = s.pages_written;
  out.pages_restored_disk = s.pages_restored_disk;
  out.pages_reused_memory = s.pages_reused_memory;
  out.records_rejected = s.records_rejected;
  out.requests_total = s.requests_total;
  if (const RocksDbPageStore* store = impl_->store.get()) {
    out.disk_writes_failed = store->n_writes_failed();
    out.disk_recoveries = store->n_recoveries();
    out.disk_records_moved_aside = store->n_records_moved_aside();
  }
  return out;
}

}  // namespace larder
