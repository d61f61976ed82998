// PrefixCache: the device tier's index — reference counts, the prefix index
// and eviction over a PagePool (after vLLM v1's block_pool.py: a map from
// block hash to block, ref counts, and the free blocks kept in eviction
// order). Eviction order comes from the EvictionPolicy every tier shares
// (storage/eviction_policy.h: lru, lfu, priority rules, pins).
//
// A page is in one of three states:
//   free     in the pool's free list
//   active   ref_count > 0: part of at least one running sequence's block table
//   cached   ref_count == 0 but sealed with a key: reusable by a later
//            request, evicted in the policy's order when a new page is
//            needed and the pool has no free page.
// Sealed pages are the policy's entries (held while active); unsealed pages
// never are. Only sealed (full) pages are ever shared; a sequence writes only
// into its own unsealed pages. Not thread-safe: owned by the engine thread.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/kv/page_pool.h"
#include "storage/eviction_policy.h"
#include "storage/page_store.h"
#include "storage/page_tier.h"

namespace larder {

class PrefixCache {
 public:
  // Called just before a cached page is evicted and its memory reused, e.g. to
  // hand it down the tier chain. `persisted` tells whether a persistent tier
  // has it already (write_through).
  // hand_down: false for an admin eviction (the page is dropped, not moved
  // down the tiers); the hook runs for every eviction either way.
  using EvictHook = std::function<void(int page, const PageKey& key, bool persisted, bool hand_down)>;

  // policy: null means lru.
  explicit PrefixCache(PagePool& pool, std::unique_ptr<EvictionPolicy> policy = nullptr);
  void set_evict_hook(EvictHook hook) { evict_hook_ = std::move(hook); }

  // A page for a sequence's own use (ref_count 1, unsealed): a free page, or
  // the policy's victim among the cached pages (evicted). nullopt when every
  // page is active or pinned.
  std::optional<int> allocate();

  // The page sealed under `key`, if resident. Does not change its state.
  std::optional<int> find(const PageKey& key) const;
  // Adds a reference (a cached page becomes active); a sealed page gains a
  // user for the policy (another sequence shares it).
  void acquire(int page);
  // Drops a reference; at zero a sealed page becomes cached (a use at a new
  // tick), an unsealed one goes back to the pool.
  void release(int page);
  // Releases several pages at one tick, in the given order: under lru the
  // policy breaks the tie by depth, so a sequence's tail goes first.
  void release_batch(std::span<const int> pages);

  // Registers an active page under `key` once it is full; depth: its index
  // in the prefix chain. Returns false (and leaves the page unsealed) when
  // another page already holds that key.
  bool seal(int page, const PageKey& key, bool persisted, int depth = 0);
  void mark_persisted(int page);
  bool is_sealed(int page) const { return pages_[size_t(page)].sealed; }
  bool is_persisted(int page) const { return pages_[size_t(page)].persisted; }
  const PageKey& key_of(int page) const { return pages_[size_t(page)].key; }
  int ref_count(int page) const { return pages_[size_t(page)].ref; }

  // Pages a new allocation can get: free + cached (not pinned), within the
  // page limit.
  int n_available() const { return std::max(0, headroom()); }
  // n_available() before the clamp: negative by the pages that active
  // sequences hold past the limit (after set_page_limit shrank it under
  // them), which must be given back before anything can be allocated.
  int headroom() const { return page_limit_ - n_in_use() + n_cached_ - n_cached_pinned(); }
  int n_cached() const { return n_cached_; }
  int n_sealed() const { return int(index_.size()); }
  // Pages taken from the pool: active and cached ones.
  int n_in_use() const { return pool_.n_pages() - pool_.n_free(); }
  const EvictionPolicy& policy() const { return *policy_; }

  // Drops every cached page that is not pinned (tests, memory pressure).
  void clear_cached();

  // ---- admin (POST /admin/cache/*, /admin/reload) -------------------------
  // The most pages in use at once (the device tier's budget, within the
  // pool; initially the whole pool). A smaller limit evicts cached pages
  // (kBudget, through the evict hook) at once until n_in_use() fits or only
  // active and pinned ones are left; allocate() keeps to it from then on.
  // n must lie in [1, pool pages].
  void set_page_limit(int n);
  int page_limit() const { return page_limit_; }
  // Pins `key` (resident or not) in the policy: a pinned page is never
  // evicted for budget (EvictionPolicy::pin).
  void pin(const PageKey& key) { policy_->pin(key); }
  void unpin(const PageKey& key) { policy_->unpin(key); }
  // Replaces the policy, moving every entry, hold and pin over
  // (move_entries): the recency order is kept.
  void set_policy(std::unique_ptr<EvictionPolicy> policy);
  // Admin eviction: drops the cached page sealed under `key`, pinned or not
  // (false when it is absent or active), without calling the evict hook:
  // the caller removes it from the tiers below too. Counted kAdmin.
  bool evict_admin(const PageKey& key);
  // Admin eviction of every cached page; returns how many.
  int evict_all_admin();
  // Pages evicted since start, by storage/page_tier.h EvictReason
  // (kBudget: for a new page or a smaller limit; kAdmin).
  int64_t n_evicted(EvictReason reason) const { return evicted_[size_t(reason)]; }

 private:
  struct PageState {
    int ref = 0;
    bool sealed = false;
    bool persisted = false;
    PageKey key;
  };
  void evict(int page, EvictReason reason = EvictReason::kBudget, bool hook = true);
  void release_at(int page, uint64_t tick);
  int n_cached_pinned() const;

  PagePool& pool_;
  std::unique_ptr<EvictionPolicy> policy_;
  std::vector<PageState> pages_;
  std::unordered_map<PageKey, int, PageKeyHash> index_;
  int n_cached_ = 0;   // sealed pages with ref 0
  uint64_t tick_ = 0;  // the policy's clock: one per release (batch) and seal
  EvictHook evict_hook_;
  int page_limit_ = 0;  // most pages in use (set_page_limit)
  std::array<int64_t, size_t(EvictReason::kCount)> evicted_{};
};

}  // namespace larder
