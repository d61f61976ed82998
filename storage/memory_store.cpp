#include "storage/memory_store.h"

#include <chrono>
#include <utility>

#include <spdlog/spdlog.h>

namespace larder {
namespace {

// The accounting of kHostEntryOverheadBytes (memory_store.h): glibc malloc
// chunks are the request plus an 8-byte header, rounded up to 16.
constexpr int64_t malloc_chunk(size_t n) { return int64_t((n + 8 + 15) / 16 * 16); }
constexpr int64_t kStoreNodeBytes = malloc_chunk(sizeof(void*) + sizeof(std::pair<const PageKey, std::string>));
constexpr int64_t kStoreBucketBytes = 2 * sizeof(void*);
constexpr int64_t kRecordMallocSlackBytes = 24;
static_assert(kStoreNodeBytes + kStoreBucketBytes + kRecordMallocSlackBytes + kEvictionPolicyEntryBytes ==
                  kHostEntryOverheadBytes,
              "kHostEntryOverheadBytes no longer matches the node sizes: recompute it");

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Result<std::unique_ptr<MemoryPageStore>> MemoryPageStore::create(const MemoryStoreOptions& options) {
  if (options.budget_bytes < 0) {
    return Status::invalid_argument("host tier: budget_bytes must be >= 0, got " +
                                    std::to_string(options.budget_bytes));
  }
  LARDER_ASSIGN_OR_RETURN(std::unique_ptr<EvictionPolicy> policy, make_eviction_policy(options.policy));
  return std::make_unique<MemoryPageStore>(PrivateTag(), options, std::move(policy));
}

MemoryPageStore::MemoryPageStore(PrivateTag, const MemoryStoreOptions& options,
                                 std::unique_ptr<EvictionPolicy> policy)
    : budget_bytes_(options.budget_bytes), policy_(std::move(policy)), log_(options.log_interval_ms) {}

std::string MemoryPageStore::remove_locked(const PageKey& key) {
  std::string record;
  auto it = records_.find(key);
  if (it == records_.end()) return record;
  record = std::move(it->second);
  records_.erase(it);
  policy_->erase(key);
  return record;
}

void MemoryPageStore::shrink_locked(const PageKey* keep, Evicted& out) {
  if (keep) policy_->hold(*keep);
  while (policy_->bytes() > budget_bytes_) {
    std::optional<PageKey> v = policy_->victim();
    if (!v) break;
    out.emplace_back(*v, remove_locked(*v));
    ++stats_.evictions[size_t(EvictReason::kBudget)];
  }
  if (!keep) return;
  policy_->release(*keep);
  // Only pinned entries were left to evict: the new record goes instead.
  if (policy_->bytes() > budget_bytes_ && !policy_->is_pinned(*keep)) {
    out.emplace_back(*keep, remove_locked(*keep));
    ++stats_.evictions[size_t(EvictReason::kBudget)];
  }
}

void MemoryPageStore::hand_down(EvictSink sink, Evicted evicted) {
  if (!sink) return;
  for (auto& [key, record] : evicted) sink(key, std::move(record));
}

Status MemoryPageStore::put(const PageKey& key, std::string_view record) {
  const auto t0 = std::chrono::steady_clock::now();
  Evicted evicted;
  EvictSink sink;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t bytes = entry_bytes(record.size());
    if (bytes > budget_bytes_) {
      remove_locked(key);  // no stale copy under the key
      ++stats_.puts_skipped;
      log_.log(spdlog::level::warn, "skip",
               "host tier: a record of " + std::to_string(record.size()) + " bytes (+" +
                   std::to_string(kHostEntryOverheadBytes) + " bookkeeping) exceeds its budget of " +
                   std::to_string(budget_bytes_) + " bytes; not cached in RAM");
      return Status::ok();
    }
    records_[key] = std::string(record);  // a new buffer: a replaced larger one is freed
    policy_->insert(key, EvictionEntry{bytes, 0, 1}, next_tick_++);
    stats_.bytes_written += int64_t(record.size());
    shrink_locked(&key, evicted);
    sink = sink_;
    stats_.write_seconds += seconds_since(t0);
  }
  hand_down(std::move(sink), std::move(evicted));
  return Status::ok();
}

std::optional<std::string> MemoryPageStore::read_locked(const PageKey& key) {
  auto it = records_.find(key);
  if (it == records_.end()) {
    ++stats_.misses;
    return std::nullopt;
  }
  ++stats_.hits;
  stats_.bytes_read += int64_t(it->second.size());
  policy_->touch(key, next_tick_++);
  policy_->add_user(key);  // a read serves another request than the one that wrote it
  return it->second;
}

Result<std::optional<std::string>> MemoryPageStore::get(const PageKey& key) {
  const auto t0 = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<std::string> out = read_locked(key);
  stats_.read_seconds += seconds_since(t0);
  return out;
}

std::vector<std::optional<std::string>> MemoryPageStore::get_batch(std::span<const PageKey> keys,
                                                                   int64_t timeout_ms) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + std::chrono::milliseconds(timeout_ms);
  std::vector<std::optional<std::string>> out(keys.size());
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (timeout_ms > 0 && std::chrono::steady_clock::now() >= deadline) {
      stats_.misses += int64_t(keys.size() - i);
      break;
    }
    out[i] = read_locked(keys[i]);
  }
  stats_.read_seconds += seconds_since(t0);
  return out;
}

std::vector<bool> MemoryPageStore::contains_batch(std::span<const PageKey> keys) const {
  std::vector<bool> out(keys.size());
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < keys.size(); ++i) out[i] = records_.count(keys[i]) != 0;
  return out;
}

Status MemoryPageStore::erase(const PageKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  remove_locked(key);
  return Status::ok();
}

Status MemoryPageStore::set_budget(int64_t bytes) {
  if (bytes < 0) {
    return Status::invalid_argument("host tier: budget must be >= 0, got " + std::to_string(bytes));
  }
  Evicted evicted;
  EvictSink sink;
  {
    std::lock_guard<std::mutex> lock(mu_);
    budget_bytes_ = bytes;
    shrink_locked(nullptr, evicted);
    sink = sink_;
  }
  if (!evicted.empty()) {
    spdlog::info("host tier: budget now {} bytes, evicted {} records", bytes, evicted.size());
  }
  hand_down(std::move(sink), std::move(evicted));
  return Status::ok();
}

Status MemoryPageStore::set_policy(std::string_view policy) {
  Result<std::unique_ptr<EvictionPolicy>> next = make_eviction_policy(policy);
  if (!next.is_ok()) return Status::invalid_argument("host tier: " + next.status().message());
  std::lock_guard<std::mutex> lock(mu_);
  move_entries(*policy_, **next);
  policy_ = std::move(*next);
  return Status::ok();
}

void MemoryPageStore::pin(const PageKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  policy_->pin(key);
}

void MemoryPageStore::unpin(const PageKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  policy_->unpin(key);
}

int64_t MemoryPageStore::evict(std::span<const PageKey> keys) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  if (keys.empty()) {
    std::vector<PageKey> all;
    all.reserve(records_.size());
    for (const auto& [key, record] : records_) all.push_back(key);
    for (const PageKey& key : all) policy_->erase(key);
    n = int64_t(records_.size());
    records_.clear();
  } else {
    for (const PageKey& key : keys) {
      if (records_.count(key) == 0) continue;
      remove_locked(key);
      ++n;
    }
  }
  stats_.evictions[size_t(EvictReason::kAdmin)] += n;
  return n;
}

void MemoryPageStore::set_evict_sink(EvictSink sink) {
  std::lock_guard<std::mutex> lock(mu_);
  sink_ = std::move(sink);
}

TierStats MemoryPageStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  TierStats s = stats_;
  s.budget_bytes = budget_bytes_;
  s.bytes_used = policy_->bytes();
  s.entries = int64_t(records_.size());
  s.pinned = int64_t(policy_->n_pinned());
  return s;
}

}  // namespace larder
