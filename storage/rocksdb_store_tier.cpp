// RocksDbPageStore as a PageTier (storage/page_tier.h): batched reads, the
// index lookups, budget, pins, admin eviction, stats, and the ttl sweep.
#include <algorithm>
#include <chrono>
#include <vector>

#include <spdlog/spdlog.h>

#include "storage/rocksdb_store_impl.h"

namespace larder {

using namespace rocksdb_detail;

std::vector<std::optional<std::string>> RocksDbPageStore::get_batch(std::span<const PageKey> keys,
                                                                    int64_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<std::optional<std::string>> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (timeout_ms > 0 && std::chrono::steady_clock::now() >= deadline) {
      impl_->n_misses += int64_t(keys.size() - i);
      break;
    }
    Result<std::optional<std::string>> r = get(keys[i]);  // counts; an error is logged there
    if (r.is_ok()) out[i] = std::move(r).value();
  }
  return out;
}

std::vector<bool> RocksDbPageStore::contains_batch(std::span<const PageKey> keys) const {
  std::vector<bool> out(keys.size());
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (size_t i = 0; i < keys.size(); ++i) out[i] = impl_->index.count(keys[i]) != 0;
  return out;
}

Status RocksDbPageStore::set_budget(int64_t bytes) {
  if (bytes < 0) {
    return Status::invalid_argument("page store: budget must be >= 0, got " + std::to_string(bytes));
  }
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  std::shared_lock<std::shared_mutex> db_lock(m.db_mu);
  m.budget = bytes;
  if (m.db) m.evict_locked(nullptr);
  return Status::ok();
}

void RocksDbPageStore::pin(const PageKey& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->policy->pin(key);
}

void RocksDbPageStore::unpin(const PageKey& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->policy->unpin(key);
}

int64_t RocksDbPageStore::evict(std::span<const PageKey> keys) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  std::shared_lock<std::shared_mutex> db_lock(m.db_mu);
  if (!m.db) return 0;
  std::vector<PageKey> held;
  if (keys.empty()) {
    held.reserve(m.index.size());
    for (const auto& [key, entry] : m.index) held.push_back(key);
  } else {
    for (const PageKey& key : keys) {
      if (m.index.count(key) != 0) held.push_back(key);
    }
  }
  std::sort(held.begin(), held.end(), [](const PageKey& a, const PageKey& b) {
    return a.hi != b.hi ? a.hi < b.hi : a.lo < b.lo;
  });
  held.erase(std::unique(held.begin(), held.end()), held.end());  // a key named twice
  // Batches of 4096 records: a whole-store eviction is no single huge write.
  constexpr size_t kBatch = 4096;
  int64_t n = 0;
  for (size_t i = 0; i < held.size(); i += kBatch) {
    std::vector<PageKey> part(held.begin() + ptrdiff_t(i), held.begin() + ptrdiff_t(std::min(held.size(), i + kBatch)));
    if (!m.erase_records_locked(part, EvictReason::kAdmin)) break;
    n += int64_t(part.size());
  }
  if (n > 0) spdlog::info("page store {}: evicted {} records on request", m.options.dir, n);
  return n;
}

void RocksDbPageStore::set_evict_sink(EvictSink /*sink*/) {}

int64_t RocksDbPageStore::entry_bytes(size_t record_bytes) const { return kKeyBytes + int64_t(record_bytes); }

TierStats RocksDbPageStore::stats() const {
  const Impl& m = *impl_;
  TierStats s;
  s.budget_bytes = m.budget.load();
  s.bytes_used = m.size_bytes.load();
  s.entries = m.n_records.load();
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    s.pinned = int64_t(m.policy->n_pinned());
  }
  s.hits = m.n_hits.load();
  s.misses = m.n_misses.load();
  s.bytes_read = m.bytes_read.load();
  s.bytes_written = m.bytes_written.load();
  s.puts_skipped = m.n_puts_skipped.load();
  s.writes_failed = m.n_writes_failed.load();
  s.read_seconds = double(m.read_ns.load()) * 1e-9;
  s.write_seconds = double(m.write_ns.load()) * 1e-9;
  s.recoveries = n_recoveries();
  s.records_lost = n_records_moved_aside();
  for (size_t r = 0; r < s.evictions.size(); ++r) s.evictions[r] = m.n_evictions[r].load();
  return s;
}

int64_t RocksDbPageStore::sweep_ttl() {
  Impl& m = *impl_;
  const int64_t ttl_seconds = m.ttl_seconds.load();
  if (ttl_seconds <= 0) return 0;
  std::lock_guard<std::mutex> lock(m.mu);
  std::shared_lock<std::shared_mutex> db_lock(m.db_mu);
  if (!m.db || m.bg_errors->any()) return 0;
  const int64_t cutoff = m.options.now_unix_ms() - ttl_seconds * 1000;
  std::vector<PageKey> expired;
  for (const auto& [key, entry] : m.index) {
    if (entry.last_use_ms < cutoff && !m.policy->is_pinned(key)) expired.push_back(key);
  }
  if (expired.empty() || !m.erase_records_locked(expired, EvictReason::kTtl)) return 0;
  spdlog::info("page store {}: erased {} records unused for over {} s", m.options.dir, expired.size(),
               ttl_seconds);
  return int64_t(expired.size());
}

void RocksDbPageStore::Impl::sweep_loop(RocksDbPageStore& store) {
  std::unique_lock<std::mutex> lock(sweep_mu);
  while (!sweep_cv.wait_for(lock, std::chrono::milliseconds(options.ttl_sweep_interval_ms),
                            [this] { return sweep_stop; })) {
    lock.unlock();
    (void)store.sweep_ttl();
    lock.lock();
  }
}

Status RocksDbPageStore::set_policy(std::string_view policy) {
  Result<std::unique_ptr<EvictionPolicy>> next = make_eviction_policy(policy);
  if (!next.is_ok()) return Status::invalid_argument("page store: " + next.status().message());
  std::lock_guard<std::mutex> lock(impl_->mu);
  move_entries(*impl_->policy, **next);
  impl_->policy = std::move(*next);
  return Status::ok();
}

Status RocksDbPageStore::set_ttl(int64_t seconds) {
  if (seconds < 0) {
    return Status::invalid_argument("page store: ttl must be >= 0 (0: no ttl), got " + std::to_string(seconds));
  }
  if (seconds > 0 && impl_->options.ttl_sweep_interval_ms <= 0) {
    return Status::invalid_argument("page store: ttl_sweep_interval_ms must be > 0");
  }
  impl_->ttl_seconds = seconds;
  if (seconds > 0) impl_->start_sweeper(*this);
  return Status::ok();
}

void RocksDbPageStore::Impl::start_sweeper(RocksDbPageStore& store) {
  std::lock_guard<std::mutex> lock(sweep_mu);
  if (sweeper.joinable() || sweep_stop) return;
  sweeper = std::thread([this, &store] { sweep_loop(store); });
}

void RocksDbPageStore::Impl::stop_sweeper() {
  {
    std::lock_guard<std::mutex> lock(sweep_mu);
    sweep_stop = true;
  }
  sweep_cv.notify_all();
  if (sweeper.joinable()) sweeper.join();
}

}  // namespace larder
