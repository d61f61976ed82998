// PageTier: one tier of the KV cache below the device page pool (host RAM,
// disk, and next a remote store shared by several daemons), behind one
// interface (DESIGN.md "Tiers and eviction"). A tier holds encoded page
// records (storage/page_record.h) under their PageKey, within a byte budget,
// and evicts by its EvictionPolicy (storage/eviction_policy.h) when a put
// takes it over budget.
//
// The interface is shaped so that a network store fits: reads are batched
// (one round trip for a whole prefix), take a timeout, and a failed or
// timed-out read is a miss, never an error: a lost node costs hits only.
// Writes return a Status the caller counts; they never throw.
//
// What each tier counts (TierStats) is what GET /admin/cache and /metrics
// show per tier.
//
// Implementations are thread-safe; calls may block on I/O, so the engine
// thread calls them only through the storage threads (storage_workers.h).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "storage/page_store.h"
#include "storage/status.h"

namespace larder {

// Why an entry left a tier.
enum class EvictReason : int {
  kBudget = 0,   // the tier was over its byte budget (a put, or a smaller budget)
  kTtl,          // not used for longer than the tier's ttl
  kAdmin,        // POST /admin/cache/evict
  kCorrupt,      // failed verification on a read
  kCount
};
const char* evict_reason_name(EvictReason r);  // "budget", "ttl", "admin", "corrupt"

struct TierStats {
  int64_t budget_bytes = 0;    // the byte budget (0: the tier holds nothing)
  int64_t bytes_used = 0;      // everything the tier holds, its metadata included
  int64_t entries = 0;         // records held
  int64_t pinned = 0;          // entries pinned
  int64_t hits = 0, misses = 0;         // keys read: found / not found (or failed)
  int64_t bytes_read = 0;               // record bytes returned by reads (restores)
  int64_t bytes_written = 0;            // record bytes accepted by puts (spills)
  int64_t puts_skipped = 0;             // puts of a record larger than the budget, or below a disk reserve
  int64_t writes_failed = 0;            // puts/erases that returned an error
  double read_seconds = 0, write_seconds = 0;  // time spent in reads / puts
  int64_t recoveries = 0;               // writes resumed after a fault, or a damaged store replaced
  int64_t records_lost = 0;             // records in stores moved aside after damage
  std::array<int64_t, size_t(EvictReason::kCount)> evictions{};  // by EvictReason
};

// Reads one record of a persistent tier as it opens: the record exactly
// as put, or nullopt (absent or unreadable).
using RecordReader = std::function<std::optional<std::string>(const PageKey& key)>;
// Given a reader of the tier being opened, the keys to pin there before it
// evicts anything for its budget (a store over its budget at open, lowered
// in the config or left so by a crash): the engine's stored pins, read
// from their record in that tier. Called at the tier's first successful
// open only (later its policy keeps the pins the engine made); null: none. Found in hostile testing: the eviction at open ran before the pins
// were read, and took pinned pages and the pin record.
using PinsAtOpen = std::function<std::vector<PageKey>(const RecordReader& read)>;

class PageTier : public PageStore {
 public:
  // "host", "disk", "remote": the tier's name in logs, metrics and config.
  virtual std::string_view name() const = 0;

  // One slot per key, in order: the record exactly as put, or nullopt when
  // the key is absent, its read failed, or `timeout_ms` passed (0: no
  // limit) before it arrived. Each key found is a use for the policy and
  // one more user of the page for the priority rule (a read serves another
  // request than the one whose page it was: the first restore makes a page
  // shared). Users are not kept across a restart, as lfu's use counts.
  virtual std::vector<std::optional<std::string>> get_batch(std::span<const PageKey> keys,
                                                            int64_t timeout_ms) = 0;
  // Whether each key is held, from the tier's index (no record is read; a
  // remote tier may answer from a stale view). Not a use for the policy.
  virtual std::vector<bool> contains_batch(std::span<const PageKey> keys) const = 0;

  // What an entry of a record of `record_bytes` costs against the budget:
  // the record and the tier's bookkeeping for it. Pins are checked with it
  // (a pinned entry is never evicted, so pins must fit the budget).
  virtual int64_t entry_bytes(size_t record_bytes) const { return int64_t(record_bytes); }

  // Changes the byte budget; a smaller one evicts (kBudget) at once.
  // Errors: kInvalidArgument for a negative budget.
  virtual Status set_budget(int64_t bytes) = 0;

  // Replaces the eviction policy (a make_eviction_policy() name) while the
  // tier runs, keeping its entries, their recency and its pins
  // (move_entries); nothing is evicted. Errors: kInvalidArgument for an
  // unknown name; kUnsupported where the tier cannot (the default).
  virtual Status set_policy(std::string_view policy) {
    return Status::unsupported(std::string(name()) + " tier: the eviction policy cannot change while it runs (" +
                               std::string(policy) + ")");
  }
  // Entries unused for longer than `seconds` are evicted (kTtl); 0: never.
  // Errors: kInvalidArgument for a negative value; kUnsupported for a tier
  // without a ttl (the default).
  virtual Status set_ttl(int64_t seconds) {
    return Status::unsupported(std::string(name()) + " tier has no ttl (asked for " + std::to_string(seconds) +
                               " s)");
  }

  // Pinned keys are never evicted for budget or ttl (EvictionPolicy::pin);
  // a pin may name a key not yet held. Admin eviction removes pinned
  // entries too.
  virtual void pin(const PageKey& key) = 0;
  virtual void unpin(const PageKey& key) = 0;

  // Removes every entry (keys empty) or the given keys, counted as kAdmin.
  // Returns the number of entries removed.
  virtual int64_t evict(std::span<const PageKey> keys) = 0;

  // Called, outside the tier's lock, with each record the tier evicts for
  // budget (so a chain can move it one tier down); null: dropped.
  using EvictSink = std::function<void(const PageKey& key, std::string record)>;
  virtual void set_evict_sink(EvictSink sink) = 0;

  virtual TierStats stats() const = 0;

  // False while the tier can neither read nor write (a disk tier whose
  // store could not be opened, or a fault that stops its writes); it tries
  // again on its own at later reads and writes.
  virtual bool available() const { return true; }
};

}  // namespace larder
