// MemoryPageStore: the host tier ("host"). Page records live in RAM, under
// their PageKey, within a byte budget; over budget the store evicts by its
// EvictionPolicy (storage/eviction_policy.h) and hands each record evicted
// for budget to the evict sink (so a tier chain moves it down to disk).
// Nothing survives a restart.
//
// Accounting: bytes_used counts, per entry, record.size() plus
// kHostEntryOverheadBytes, what the entry costs beyond its record bytes:
//   the store's hash map node (next pointer 8 + key 16 + std::string 32 =
//   56 bytes, a glibc malloc chunk of 64), its share of the bucket array
//   (16), the record buffer's malloc header and rounding (at most 24), and
//   the policy's bookkeeping (kEvictionPolicyEntryBytes, 192):
//   64 + 16 + 24 + 192 = 296 bytes (x86-64 / arm64, libstdc++, glibc;
//   memory_store.cpp checks the sizes at compile time). So a budget of B
//   bytes holds at most B / (296 + record size) records.
//
// Puts:
//   - a record whose entry (record + 296) alone exceeds the budget is
//     skipped: counted in puts_skipped, one rate-limited log line, and the
//     put returns OK (a cache skip is not an error); an older record under
//     the same key is dropped so no stale copy stays;
//   - otherwise the record is stored (replacing one under the same key),
//     counted as a use, and while the store is over budget the policy's
//     victims other than the record just put are evicted (kBudget). Pinned
//     entries are never evicted for budget: pins alone can keep the store
//     over budget; then the record just put is evicted itself unless it is
//     pinned too.
// Each record evicted for budget goes to the evict sink, called after the
// store's lock is released, on the thread that caused the eviction (the
// put or the set_budget). Erased, admin-evicted and skipped records do not.
//
// Reads (get, get_batch) count hits, misses, bytes_read and read_seconds
// and are uses for the policy. The policy sees every entry as depth 0 with
// one user: PageStore::put carries no chain position (the tail-first and
// priority rules order pages only where the caller tells the policy more).
//
// Thread-safe: one mutex guards everything; records are copied out under
// it. flush() is a no-op (nothing to make durable).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "storage/eviction_policy.h"
#include "storage/log_limiter.h"
#include "storage/page_tier.h"

namespace larder {

// Bytes one entry costs the host tier beyond its record (see above).
inline constexpr int64_t kHostEntryOverheadBytes = 296;

struct MemoryStoreOptions {
  int64_t budget_bytes = int64_t(4) << 30;  // bound on bytes_used (>= 0; 0 holds nothing)
  std::string policy = "lru";               // make_eviction_policy() name
  int64_t log_interval_ms = 10000;          // least time between two lines about skipped puts
};

class MemoryPageStore final : public PageTier {
 public:
  // Errors: kInvalidArgument for a negative budget or an unknown policy
  // (the message lists the known ones).
  static Result<std::unique_ptr<MemoryPageStore>> create(const MemoryStoreOptions& options);

  std::string_view name() const override { return "host"; }

  // Stores the record (see "Puts" above). Always OK.
  Status put(const PageKey& key, std::string_view record) override;
  // The record exactly as put, or nullopt. Never an error.
  Result<std::optional<std::string>> get(const PageKey& key) override;
  // Removes the record (not counted as an eviction); absent keys are OK.
  Status erase(const PageKey& key) override;
  Status flush() override { return Status::ok(); }

  // Reads in order; keys after `timeout_ms` (0: no limit) has passed are
  // misses (in RAM that takes an enormous batch).
  std::vector<std::optional<std::string>> get_batch(std::span<const PageKey> keys,
                                                    int64_t timeout_ms) override;
  std::vector<bool> contains_batch(std::span<const PageKey> keys) const override;
  int64_t entry_bytes(size_t record_bytes) const override { return int64_t(record_bytes) + kHostEntryOverheadBytes; }
  Status set_budget(int64_t bytes) override;
  Status set_policy(std::string_view policy) override;
  void pin(const PageKey& key) override;
  void unpin(const PageKey& key) override;
  int64_t evict(std::span<const PageKey> keys) override;
  void set_evict_sink(EvictSink sink) override;
  TierStats stats() const override;

  // Use create(); the tag keeps construction private.
  class PrivateTag {
    friend class MemoryPageStore;
    PrivateTag() = default;
  };
  MemoryPageStore(PrivateTag, const MemoryStoreOptions& options, std::unique_ptr<EvictionPolicy> policy);

 private:
  using Evicted = std::vector<std::pair<PageKey, std::string>>;

  // Requires mu_. Removes key's entry; returns its record.
  std::string remove_locked(const PageKey& key);
  // Requires mu_. Evicts victims (kBudget) while over budget, `keep` last.
  void shrink_locked(const PageKey* keep, Evicted& out);
  // Calls the sink (copied under mu_) with each evicted record, unlocked.
  void hand_down(EvictSink sink, Evicted evicted);
  std::optional<std::string> read_locked(const PageKey& key);

  mutable std::mutex mu_;
  int64_t budget_bytes_;                      // guarded by mu_
  std::unique_ptr<EvictionPolicy> policy_;    // guarded by mu_
  std::unordered_map<PageKey, std::string, PageKeyHash> records_;  // guarded by mu_
  uint64_t next_tick_ = 1;                    // guarded by mu_
  EvictSink sink_;                            // guarded by mu_
  TierStats stats_;                           // guarded by mu_ (bytes_used etc. filled in stats())
  LogLimiter log_;
};

}  // namespace larder
