#include "engine/kv/kv_cache_manager.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "engine/kv/prefix_hash.h"

namespace larder {

namespace {

int64_t elapsed_ns(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

KvCacheManager::KvCacheManager(Backend& backend, const PageRecordMeta& meta, TierChain* chain, bool write_through,
                               std::unique_ptr<EvictionPolicy> device_policy)
    : backend_(backend),
      pool_(backend.pages()),
      layout_(backend.kv_layout()),
      meta_(meta),
      chain_(chain != nullptr && !chain->empty() ? chain : nullptr),
      write_through_(write_through),
      cache_(backend.pages(), std::move(device_policy)),
      page_tokens_(size_t(backend.n_pages())),
      partial_(size_t(backend.n_pages()), 0),
      page_buf_(layout_.page_bytes()) {
  cache_.set_evict_hook([this](int page, const PageKey& key, bool persisted, bool hand_down) {
    // A page sealed this step and not yet copied out: copy the batch now,
    // before the page's memory is reused.
    for (const auto& queued : spill_queue_) {
      if (queued.first == page) {
        flush_spills();
        break;
      }
    }
    forget_child(page);
    if (partial_[size_t(page)] != 0) {  // part of a page: nothing to hand down
      partial_[size_t(page)] = 0;
      return;
    }
    // Nothing to hand down: no tier would take it, or the only tiers are
    // persistent ones that have it already. A page whose spill was lost
    // (disk full, below its reserve) is handed down as never spilled (found
    // in hostile testing: such pages were never written, and a restart
    // lost them).
    if (persisted && chain_ != nullptr && chain_->write_lost(key)) persisted = false;
    if (chain_ == nullptr || !hand_down || (persisted && chain_->persistent(0))) return;
    demote_queue_.push_back(Demotion{page, key, persisted, std::move(page_tokens_[size_t(page)])});
    page_tokens_[size_t(page)].clear();
  });
}

void KvCacheManager::add_child(int page, const PageKey& parent) {
  parent_of_[page] = parent;
  children_[parent].push_back(page);
}

void KvCacheManager::forget_child(int page) {
  auto it = parent_of_.find(page);
  if (it == parent_of_.end()) return;
  auto c = children_.find(it->second);
  if (c != children_.end()) {
    std::erase(c->second, page);
    if (c->second.empty()) children_.erase(c);
  }
  parent_of_.erase(it);
}

int KvCacheManager::reuse_partial(SeqPages& seq, std::span<const int32_t> tokens, int n_computed, int max_reuse) {
  const int ps = layout_.page_size;
  if (max_reuse <= 0 || n_computed != int(seq.block_table.size()) * ps || n_computed % ps != 0) return 0;
  max_reuse = std::min({max_reuse, ps, int(tokens.size()) - n_computed});
  const PageKey& parent = seq.keys.empty() ? seq.root : seq.keys.back();
  auto c = children_.find(parent);
  if (c == children_.end()) return 0;
  // The resident page after this prefix that shares the most leading tokens.
  int best = -1, best_len = 0;
  for (int page : c->second) {
    const std::vector<int32_t>& pt = page_tokens_[size_t(page)];
    int n = 0;
    while (n < max_reuse && n < int(pt.size()) && pt[size_t(n)] == tokens[size_t(n_computed + n)]) ++n;
    if (n > best_len) best = page, best_len = n;
  }
  if (best < 0) return 0;
  // Copy it into a page of the sequence's own (the source stays shared and
  // sealed); held meanwhile so that the allocation cannot evict it.
  cache_.acquire(best);
  std::optional<int> mine = cache_.allocate();
  flush_demotions();  // before `mine` is written
  Status st = mine ? backend_.read_page(best, page_buf_) : Status::resource_exhausted("no free page");
  if (st.is_ok()) st = backend_.write_page(*mine, page_buf_);
  cache_.release(best);
  if (!st.is_ok()) {
    if (mine) cache_.release(*mine);
    spdlog::debug("partial page reuse skipped: {}", st.to_string());
    return 0;
  }
  seq.block_table.push_back(*mine);
  stats_.tokens_reused_partial += best_len;
  return best_len;
}

bool KvCacheManager::fork(const SeqPages& parent, SeqPages& child, int n_positions) {
  const int ps = layout_.page_size;
  const size_t n_full = size_t(n_positions / ps);
  const bool tail = n_positions % ps != 0;
  if (!child.block_table.empty() || parent.block_table.size() < n_full + (tail ? 1 : 0) ||
      parent.keys.size() < n_full) {
    return false;
  }
  std::optional<int> copy;
  if (tail) {
    copy = cache_.allocate();  // never one of parent's pages: they are held
    if (!copy) return false;
    flush_demotions();  // before `copy` is written
    Status st = backend_.read_page(parent.block_table[n_full], page_buf_);
    if (st.is_ok()) st = backend_.write_page(*copy, page_buf_);
    if (!st.is_ok()) {
      cache_.release(*copy);
      spdlog::debug("fork: the partial page could not be copied: {}", st.to_string());
      return false;
    }
  }
  for (size_t i = 0; i < n_full; ++i) {
    cache_.acquire(parent.block_table[i]);
    child.block_table.push_back(parent.block_table[i]);
  }
  child.keys.assign(parent.keys.begin(), parent.keys.begin() + long(n_full));
  if (copy) child.block_table.push_back(*copy);
  stats_.pages_shared_fork += int64_t(n_full);
  stats_.pages_copied_fork += copy ? 1 : 0;
  return true;
}

std::vector<PageKey> KvCacheManager::chain_keys(const PageKey& root, std::span<const int32_t> tokens,
                                                int n_pages) const {
  return prefix_chain(root, tokens, layout_.page_size, n_pages);
}

KvCacheManager::Match KvCacheManager::match_prefix(std::span<const PageKey> keys) const {
  Match m;
  for (const PageKey& key : keys) {
    std::optional<int> page = cache_.find(key);
    if (!page) break;
    ++m.n_device;
    if (cache_.ref_count(*page) == 0) ++m.n_evictable;
  }
  return m;
}

void KvCacheManager::acquire_prefix(SeqPages& seq, std::span<const PageKey> keys, int n) {
  for (int i = 0; i < n && size_t(i) < keys.size(); ++i) {
    std::optional<int> page = cache_.find(keys[size_t(i)]);
    if (!page) break;
    cache_.acquire(*page);
    seq.block_table.push_back(*page);
    seq.keys.push_back(keys[size_t(i)]);
    ++stats_.pages_reused_device;
  }
  stats_.pages_missed_device += int64_t(keys.size()) - std::min<int64_t>(n, int64_t(keys.size()));
}

int KvCacheManager::restore(SeqPages& seq, std::span<const int32_t> tokens, std::span<const PageKey> keys,
                            std::vector<TierChain::Found>& found, std::vector<char>* where) {
  const int ps = layout_.page_size;
  const size_t page_bytes = layout_.page_bytes();
  // Decode every record into one host buffer, then one copy to the device.
  std::vector<int32_t> pages;
  std::vector<PageKey> page_keys;
  std::vector<bool> page_persisted;  // the tier it came from survives a restart
  int restored = 0;
  for (size_t j = 0; j < found.size() && j < keys.size(); ++j) {
    const PageKey& key = keys[j];
    const size_t index = seq.block_table.size() + pages.size();
    if ((index + 1) * size_t(ps) > tokens.size()) break;
    // Another sequence may have computed this page while the read was in
    // flight: take the resident one (only before any page of this batch,
    // so the block table stays in order).
    if (pages.empty()) {
      if (std::optional<int> resident = cache_.find(key)) {
        cache_.acquire(*resident);
        seq.block_table.push_back(*resident);
        seq.keys.push_back(key);
        ++restored;
        if (where) where->push_back('d');
        continue;
      }
    }
    std::optional<int> page = cache_.allocate();
    if (!page) break;  // no memory for more restored pages: prefill the rest
    batch_buf_.resize((pages.size() + 1) * page_bytes);
    std::span<const int32_t> page_tokens = tokens.subspan(index * size_t(ps), size_t(ps));
    Status st = decode_page_record(found[j].record, key, meta_, page_tokens,
                                   std::span<uint8_t>(batch_buf_.data() + pages.size() * page_bytes, page_bytes));
    if (!st.is_ok()) {
      log_limited_.log(spdlog::level::warn, "verify",
                       "page " + key.to_hex() + " from the " + std::string(chain_ ? chain_->tier(size_t(found[j].tier)).name() : "?") +
                           " tier failed verification and was dropped: " + st.message());
      ++stats_.records_rejected;
      if (size_t(found[j].tier) < stats_.records_rejected_by_tier.size()) {
        ++stats_.records_rejected_by_tier[size_t(found[j].tier)];
      }
      cache_.release(*page);
      if (chain_) chain_->erase(key);
      break;
    }
    pages.push_back(*page);
    page_keys.push_back(key);
    page_persisted.push_back(chain_ != nullptr && chain_->persistent(size_t(found[j].tier)));
    page_tokens_[size_t(*page)].assign(page_tokens.begin(), page_tokens.end());
  }
  flush_demotions();  // pages the allocations above evicted, before they are overwritten
  if (!pages.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    Status st = backend_.write_pages(pages, std::span<const uint8_t>(batch_buf_.data(), pages.size() * page_bytes));
    stats_.restore_ns += elapsed_ns(t0);
    if (!st.is_ok()) {
      log_limited_.log(spdlog::level::warn, "copy in", "restored pages could not be copied to the device: " + st.to_string());
      for (int p : pages) cache_.release(p);
      return restored;
    }
    for (size_t i = 0; i < pages.size(); ++i) {
      // A page from a persistent tier is there already; one from the host
      // may not be (write_back): it is handed down again on eviction.
      cache_.seal(pages[i], page_keys[i], page_persisted[i], int(seq.block_table.size()));
      add_child(pages[i], seq.keys.empty() ? seq.root : seq.keys.back());
      seq.block_table.push_back(pages[i]);
      seq.keys.push_back(page_keys[i]);
      if (where) where->push_back(page_persisted[i] ? 'k' : 'h');
    }
    restored += int(pages.size());
    stats_.pages_restored += int64_t(pages.size());
    stats_.bytes_restored += int64_t(pages.size() * page_bytes);
  }
  return restored;
}

bool KvCacheManager::ensure_pages(SeqPages& seq, int n_positions) {
  const size_t need = size_t((n_positions + layout_.page_size - 1) / layout_.page_size);
  bool ok = true;
  while (ok && seq.block_table.size() < need) {
    std::optional<int> page = cache_.allocate();
    if (page) seq.block_table.push_back(*page);
    ok = page.has_value();
  }
  flush_demotions();  // before the forward pass writes into the new pages
  return ok;
}

void KvCacheManager::commit(SeqPages& seq, std::span<const int32_t> tokens, int n_computed) {
  const int ps = layout_.page_size;
  while (int(seq.keys.size()) < n_computed / ps) {
    const size_t i = seq.keys.size();
    // A copy: the push_back below may move seq.keys.
    const PageKey parent = i == 0 ? seq.root : seq.keys[i - 1];
    std::span<const int32_t> page_tokens = tokens.subspan(i * size_t(ps), size_t(ps));
    const PageKey key = prefix_next(parent, page_tokens);
    seq.keys.push_back(key);
    const int page = seq.block_table[i];
    const bool spill = write_through_ && chain_ != nullptr && chain_->has_persistent();
    // Another sequence sealed the same prefix first: this copy stays private.
    if (!cache_.seal(page, key, spill, int(i))) continue;
    page_tokens_[size_t(page)].assign(page_tokens.begin(), page_tokens.end());
    add_child(page, parent);
    if (trace_) trace_->sealed(seq.id, key, int(i));
    if (spill) spill_queue_.push_back({page, key});
  }
}

void KvCacheManager::flush_spills() {
  if (spill_queue_.empty()) return;
  const size_t page_bytes = layout_.page_bytes();
  std::vector<int32_t> pages;
  pages.reserve(spill_queue_.size());
  for (const auto& [page, key] : spill_queue_) pages.push_back(page);
  batch_buf_.resize(pages.size() * page_bytes);
  Status st = backend_.read_pages(pages, std::span<uint8_t>(batch_buf_.data(), batch_buf_.size()));
  if (!st.is_ok()) {
    log_limited_.log(spdlog::level::warn, "copy out",
                     std::to_string(pages.size()) + " sealed pages could not be copied out for writing: " + st.to_string());
  } else {
    for (size_t i = 0; i < spill_queue_.size(); ++i) {
      const auto& [page, key] = spill_queue_[i];
      std::span<const uint8_t> bytes(batch_buf_.data() + i * page_bytes, page_bytes);
      chain_->spill_sealed(key, encode_page_record(key, meta_, page_tokens_[size_t(page)], bytes));
      ++stats_.pages_spilled;
    }
  }
  spill_queue_.clear();
}

void KvCacheManager::release(SeqPages& seq, std::span<const int32_t> tokens, int n_computed) {
  const int ps = layout_.page_size;
  const size_t tail = seq.keys.size();
  const int n_tail = n_computed - int(tail) * ps;
  if (n_tail > 0 && n_tail < ps && tail < seq.block_table.size() && size_t(n_computed) <= tokens.size()) {
    const int page = seq.block_table[tail];
    const PageKey& parent = tail == 0 ? seq.root : seq.keys[tail - 1];
    std::span<const int32_t> tail_tokens = tokens.subspan(tail * size_t(ps), size_t(n_tail));
    // Sealed as already persisted, so that write_back never writes it;
    // another sequence may have kept the same tail already (then it is freed).
    if (cache_.ref_count(page) == 1 && !cache_.is_sealed(page) &&
        cache_.seal(page, prefix_partial(parent, tail_tokens), /*persisted=*/true, int(tail))) {
      page_tokens_[size_t(page)].assign(tail_tokens.begin(), tail_tokens.end());
      partial_[size_t(page)] = 1;
      add_child(page, parent);
      ++stats_.partial_pages_kept;
    }
  }
  // One tick for the whole sequence: ties go to the deepest page first.
  std::vector<int> tail_first(seq.block_table.rbegin(), seq.block_table.rend());
  cache_.release_batch(tail_first);
  seq.block_table.clear();
  seq.keys.clear();
}

int KvCacheManager::n_exclusive(const SeqPages& seq) const {
  int n = 0;
  for (int page : seq.block_table) n += cache_.ref_count(page) == 1 ? 1 : 0;
  return n;
}

std::string KvCacheManager::record_of(int page, const PageKey& key) {
  const auto t0 = std::chrono::steady_clock::now();
  Status st = backend_.read_page(page, page_buf_);
  stats_.copy_out_ns += elapsed_ns(t0);
  if (!st.is_ok()) {
    log_limited_.log(spdlog::level::warn, "copy out",
                     "page " + key.to_hex() + " could not be copied out for writing: " + st.to_string());
    return {};
  }
  std::string record = encode_page_record(key, meta_, page_tokens_[size_t(page)], page_buf_);
  stats_.bytes_copied_out += int64_t(record.size());
  return record;
}

bool KvCacheManager::persist(const PageKey& key, bool rewrite) {
  std::optional<int> page = cache_.find(key);
  if (!page) return false;
  if ((cache_.is_persisted(*page) && !rewrite) || chain_ == nullptr || !chain_->has_persistent()) return true;
  std::string record = record_of(*page, key);
  if (record.empty()) return false;
  chain_->put_persistent(key, std::move(record));
  cache_.mark_persisted(*page);
  ++stats_.pages_spilled;
  return true;
}

int KvCacheManager::evict_partials_after(const PageKey& parent) {
  auto c = children_.find(parent);
  if (c == children_.end()) return 0;
  std::vector<PageKey> keys;
  for (int page : c->second) {
    if (partial_[size_t(page)] != 0 && cache_.ref_count(page) == 0) keys.push_back(cache_.key_of(page));
  }
  int n = 0;
  for (const PageKey& key : keys) n += cache_.evict_admin(key) ? 1 : 0;  // the hook forgets the child
  return n;
}

void KvCacheManager::flush_demotions() {
  if (demote_queue_.empty()) return;
  const size_t page_bytes = layout_.page_bytes();
  std::vector<int32_t> pages;
  pages.reserve(demote_queue_.size());
  for (const Demotion& d : demote_queue_) pages.push_back(d.page);
  demote_buf_.resize(pages.size() * page_bytes);
  const auto t0 = std::chrono::steady_clock::now();
  Status st = backend_.read_pages(pages, std::span<uint8_t>(demote_buf_.data(), demote_buf_.size()));
  stats_.copy_out_ns += elapsed_ns(t0);
  if (!st.is_ok()) {
    log_limited_.log(spdlog::level::warn, "copy out",
                     std::to_string(pages.size()) + " evicted pages could not be copied out to go down the tiers: " +
                         st.to_string());
  } else {
    for (size_t i = 0; i < demote_queue_.size(); ++i) {
      const Demotion& d = demote_queue_[i];
      std::span<const uint8_t> bytes(demote_buf_.data() + i * page_bytes, page_bytes);
      std::string record = encode_page_record(d.key, meta_, d.tokens, bytes);
      stats_.bytes_copied_out += int64_t(record.size());
      chain_->demote(d.key, std::move(record), d.persisted);
      // Straight onto a persistent tier (write_back without a host tier) is
      // a spill; into the host tier a demotion.
      ++(chain_->persistent(0) ? stats_.pages_spilled : stats_.pages_demoted);
    }
  }
  demote_queue_.clear();
}

void KvCacheManager::retry_lost_writes() {
  if (chain_ == nullptr) return;
  // Keys no longer on the device were handed down when they left (the
  // evict hook above): nothing to do for them.
  for (const PageKey& key : chain_->take_lost_writes(kLostWritesPerRetry)) {
    if (persist(key, /*rewrite=*/true)) ++stats_.pages_respilled;
  }
}

void KvCacheManager::write_back_all() {
  flush_spills();
  flush_demotions();
  if (chain_ == nullptr || !chain_->has_persistent()) return;
  // The flush waits for the spills queued so far, so that every lost one
  // is known; and a store that a failed write stopped retries its recovery
  // only every few seconds, but at once in a flush, so that the writes
  // below find it open (found in hostile testing: lost spills failed again
  // at a stop).
  chain_->flush();
  for (int page = 0; page < pool_.n_pages(); ++page) {
    if (!cache_.is_sealed(page)) continue;
    const PageKey& key = cache_.key_of(page);
    // write_back: what no persistent tier has; write_through: spills that
    // were lost.
    const bool lost = chain_->write_lost(key);
    if (!lost && (write_through_ || cache_.is_persisted(page))) continue;
    std::string record = record_of(page, key);
    if (record.empty()) continue;
    chain_->put_persistent(key, std::move(record));
    cache_.mark_persisted(page);
    ++stats_.pages_spilled;
    if (lost) ++stats_.pages_respilled;
  }
}

}  // namespace larder
