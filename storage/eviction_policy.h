// EvictionPolicy: the one interface every cache tier (device page pool,
// host RAM, disk) uses to choose what to evict when it is over budget
// (DESIGN.md "Tiers and eviction"). A tier tells its policy which entries
// are evictable and when they are used; the policy answers which one goes
// next. The tier does the evicting (and the moving down the chain).
//
// Entries are pages, named by their PageKey, with what the priority rule
// needs to know about them (EvictionEntry). Policies:
//   lru           least recently used first (the default).
//   lfu           least frequently used first; ties: least recently used.
//   priority_lru  the priority rule on top of lru: single-use pages go
//   priority_lfu  before shared ones (shared: used by two or more
//                 sequences, e.g. a common system prompt); within each
//                 class, the inner policy's order.
// In every policy:
//   - a pinned entry is never a victim (pin() / unpin());
//   - entries made evictable at the same time go tail first: when two
//     entries have the same recency (same tick) and frequency, the one
//     deeper in its chain (larger depth) is the victim first, as vLLM frees
//     a finished request's blocks tail-first.
//
// Time is a caller-supplied logical tick (monotonic, e.g. a counter the tier
// bumps per access), so eviction orders are reproducible in tests and in
// the what-if simulator. Not thread-safe: each tier guards its own policy.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "storage/page_store.h"
#include "storage/status.h"

namespace larder {

// What a policy knows about an entry when it becomes evictable.
struct EvictionEntry {
  int64_t bytes = 0;   // the entry's size in its tier (metadata included)
  int32_t depth = 0;   // page index in its prefix chain: 0 = the first page
  int32_t n_users = 1; // sequences that have used the page so far (>= 1)
};

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;

  // "lru", "lfu", "priority_lru" or "priority_lfu".
  virtual std::string_view name() const = 0;

  // Adds `key` as an entry (one use at `tick`: lfu frequency 1). Inserting
  // a key already present (a record put again) updates its bytes and depth,
  // keeps the larger n_users (users are never forgotten while the entry
  // lives) and counts as a use at `tick`.
  virtual void insert(const PageKey& key, const EvictionEntry& entry, uint64_t tick) = 0;
  // Records a use at `tick` (a hit): most recent under lru, frequency + 1
  // under lfu. Unknown keys are ignored.
  virtual void touch(const PageKey& key, uint64_t tick) = 0;
  // The page gained a user (another sequence shares it): n_users + 1.
  // Unknown keys are ignored.
  virtual void add_user(const PageKey& key) = 0;
  // A held entry is in use (e.g. in a running sequence's block table, or
  // being read) and is no victim until every hold is released; holds count.
  // The entry keeps its recency and frequency meanwhile. Unknown keys are
  // ignored; release() of an entry not held is a no-op.
  virtual void hold(const PageKey& key) = 0;
  virtual void release(const PageKey& key) = 0;
  // Removes the entry (evicted or erased by the tier); its history (tick,
  // frequency, users, holds) is forgotten, a pin is not (a pinned key
  // inserted again is pinned again). Unknown keys are ignored.
  virtual void erase(const PageKey& key) = 0;

  // Pinned keys are never victims. Pinning a key that is not (yet) an entry
  // is remembered: it applies when the key is inserted. unpin() of a key not
  // pinned is a no-op.
  virtual void pin(const PageKey& key) = 0;
  virtual void unpin(const PageKey& key) = 0;
  virtual bool is_pinned(const PageKey& key) const = 0;

  // The entry to evict next, without removing it; nullopt when no entry is
  // evictable (empty, or every entry pinned or held).
  virtual std::optional<PageKey> victim() const = 0;

  virtual bool contains(const PageKey& key) const = 0;
  // Entries (pinned and held ones included) and the sum of their bytes.
  virtual size_t size() const = 0;
  virtual int64_t bytes() const = 0;
  // Entries that are pinned (pins of keys not inserted do not count).
  virtual size_t n_pinned() const = 0;

  // What the policy holds, for moving a live tier to another policy
  // (move_entries below): every entry with its last-use tick and holds, in
  // no particular order, and every pinned key (inserted or not).
  struct EntryState {
    PageKey key;
    EvictionEntry entry;
    uint64_t tick = 0;
    int32_t holds = 0;
  };
  virtual std::vector<EntryState> entries() const = 0;
  virtual std::vector<PageKey> pinned_keys() const = 0;
};

// Moves what `from` holds into `to` (an empty policy), for a tier whose
// policy changes while it runs (POST /admin/reload): each entry is inserted
// with its last-use tick, bytes, depth and users, its holds are taken again,
// and every pin is applied. So the recency order carries over; use counts
// (lfu) start again at one, as after a restart. `from` is left unchanged.
void move_entries(const EvictionPolicy& from, EvictionPolicy& to);

// Memory one entry costs the policy's own bookkeeping, for the tiers'
// byte accounting (x86-64 / arm64 with libstdc++ and glibc malloc): a hash
// map node (next pointer + key + node state: 8 + 16 + 40 = 64 bytes, a
// malloc chunk of 80), its share of the bucket array (8 bytes a bucket, up
// to two buckets an entry: 16) and an ordered-set node (red-black header
// 32 + rank 48 = 80 bytes, a malloc chunk of 96): 80 + 16 + 96 = 192.
// eviction_policy.cpp checks the sizes against this at compile time.
inline constexpr int64_t kEvictionPolicyEntryBytes = 192;

// The policy named `name` (see the top of this file). Errors:
// kInvalidArgument listing the known names.
Result<std::unique_ptr<EvictionPolicy>> make_eviction_policy(std::string_view name);

// The known names, for config error messages: "lru, lfu, priority_lru, priority_lfu".
std::string_view eviction_policy_names();

}  // namespace larder
