// TierChain: the tiers below the device page pool, fastest first (host RAM,
// then disk; a remote store shared by several daemons goes after disk), and
// the storage threads that do their I/O (DESIGN.md "Tiers and eviction",
// "Threads"). The daemon builds the tiers and the chain; the engine sees only
// this class and PageTier, never a concrete store.
//
// How pages move (the write policy, CacheOptions::write_through):
//   seal     write_through: a sealed page is put into every persistent tier
//            at once (spill), so a crash loses nothing. write_back: nothing.
//   demote   a page leaves the device: it goes into the first tier (host)
//            when the chain has one; write_back also puts it into the
//            persistent tiers when no tier above holds it. A tier over its
//            budget evicts by its policy: under write_back a record the host
//            evicts is put one tier down (disk); under write_through it is
//            already there and is dropped.
//   lookup   the longest prefix of a key chain that some tier holds, each
//            key read from the fastest tier holding it: one contains_batch
//            per tier (index only), then one get_batch per tier for the keys
//            it serves. A key no tier holds ends the prefix; a failed read
//            does too (the rest is prefilled): a lost node costs hits only.
//
// Ordering: writes of one key to one tier run in the order queued, and a
// lookup sees a write queued before it (StorageWorkers' read-your-writes).
//
// Thread-safe: any thread may call any method; every method but flush() and
// get_now() returns without waiting on I/O.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "storage/page_tier.h"
#include "storage/storage_workers.h"

namespace larder {

struct TierSlot {
  std::shared_ptr<PageTier> tier;
  bool persistent = false;  // survives a restart (disk, remote): spills go here
};

struct TierChainOptions {
  bool write_through = true;
  int n_threads_per_tier = 2;  // storage threads of each tier
  // Reads of a remote tier give up after this long (0: no limit): PageTier::get_batch.
  int64_t read_timeout_ms = 0;
  // take_lost_writes hands out keys at most this often.
  int64_t retry_interval_ms = 2000;
};

class TierChain {
 public:
  // tiers: fastest first; none may be null. Starts the storage threads.
  TierChain(std::vector<TierSlot> tiers, TierChainOptions options);
  // Finishes every queued write and read, then joins the threads.
  ~TierChain();
  TierChain(const TierChain&) = delete;
  TierChain& operator=(const TierChain&) = delete;

  bool empty() const { return slots_.empty(); }
  bool has_persistent() const;
  bool write_through() const { return options_.write_through; }

  struct Found {
    std::string record;  // as put
    int tier = 0;        // index into tiers(), fastest first
  };
  // Reads the longest prefix of `keys` held by the chain (see the top of
  // this file) and calls done(records, in key order) on a storage thread;
  // done must not throw and must not call flush().
  void lookup_prefix_async(std::vector<PageKey> keys, std::function<void(std::vector<Found>)> done);

  // write_through: queues the record to every persistent tier; write_back:
  // nothing (see demote). Returns whether anything was queued.
  bool spill_sealed(const PageKey& key, std::string record);
  // The page left the device; `persisted`: a persistent tier has it already.
  void demote(const PageKey& key, std::string record, bool persisted);
  // Queues a put to every persistent tier (small records: chat answers).
  void put_persistent(const PageKey& key, std::string record);
  // Queues an erase in every tier (a record that failed verification).
  void erase(const PageKey& key);

  // A point read on the caller's thread, fastest tier first (a queued write
  // counts): for small records read off the engine thread (chat answers).
  std::optional<std::string> get_now(const PageKey& key);

  // Blocks until every write queued before the call is in its tier, then
  // flushes each tier (errors are logged, never fatal).
  void flush();
  // write_back, at shutdown: puts every page demoted into a non-persistent
  // tier and not yet written down into the persistent tiers (queued; flush()
  // waits for them). Also run by the destructor.
  void drain_write_back();

  size_t n_tiers() const { return slots_.size(); }
  bool persistent(size_t i) const { return slots_[i].persistent; }
  PageTier& tier(size_t i) { return *slots_[i].tier; }
  const PageTier& tier(size_t i) const { return *slots_[i].tier; }
  // Writes queued or running, all tiers.
  int64_t pending() const;

  // Lost writes: keys whose put into a persistent tier failed or was
  // skipped (disk full, below its reserve, store reopening) with no later
  // put of them that worked. The device still counts such a page as
  // spilled, so it asks here before it drops one (KvCacheManager) and
  // writes it again. At most kMaxLostWrites keys are remembered.
  static constexpr size_t kMaxLostWrites = size_t(1) << 18;
  bool write_lost(const PageKey& key) const;
  // Up to `max` lost keys, forgotten here, to be written again: only once a
  // put into a persistent tier worked after they were lost (there is room
  // again), and at most once per retry_interval_ms; else none.
  std::vector<PageKey> take_lost_writes(size_t max);

 private:
  struct Slot {
    std::shared_ptr<PageTier> tier;
    bool persistent = false;
    std::unique_ptr<StorageWorkers> workers;
  };
  void lookup_now(const std::vector<PageKey>& keys, std::vector<Found>& out);

  TierChainOptions options_;
  std::vector<Slot> slots_;
  // write_back: keys demoted into a non-persistent tier that no persistent
  // tier has yet.
  std::mutex unpersisted_mu_;
  std::unordered_set<PageKey, PageKeyHash> unpersisted_;
  // Lost writes (write_lost): the keys, whether a persistent put worked
  // since one was lost, and when take_lost_writes last handed keys out.
  void note_put(const PageKey& key, bool ok);
  mutable std::mutex lost_mu_;
  std::unordered_set<PageKey, PageKeyHash> lost_;
  std::atomic<size_t> n_lost_{0};
  bool put_worked_since_loss_ = false;  // guarded by lost_mu_
  int64_t last_retry_ms_ = 0;           // guarded by lost_mu_
};

}  // namespace larder
