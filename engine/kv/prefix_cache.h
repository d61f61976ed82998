// PrefixCache: reference counts, the in-memory prefix index and LRU eviction
// over a PagePool (after vLLM v1's block_pool.py: a map from block hash to
// block, ref counts, and a free queue kept in eviction order).
//
// A page is in one of three states:
//   free     in the pool's free list
//   active   ref_count > 0: part of at least one running sequence's block table
//   cached   ref_count == 0 but sealed with a key: reusable by a later
//            request, evicted least-recently-released first when a new page
//            is needed and the pool has no free page.
// Only sealed (full) pages are ever shared; a sequence writes only into its
// own unsealed pages. Not thread-safe: owned by the engine thread.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/kv/page_pool.h"
#include "storage/page_store.h"

namespace larder {

class PrefixCache {
 public:
  // Called just before a cached page is evicted and its memory reused, e.g. to
  // spill it to disk under the write_back policy. `persisted` tells whether
  // the page was already written (write_through).
  using EvictHook = std::function<void(int page, const PageKey& key, bool persisted)>;

  explicit PrefixCache(PagePool& pool) : pool_(pool), pages_(size_t(pool.n_pages())) {}
  void set_evict_hook(EvictHook hook) { evict_hook_ = std::move(hook); }

  // A page for a sequence's own use (ref_count 1, unsealed): a free page, or
  // the least recently used cached page (evicted). nullopt when every page is
  // active.
  std::optional<int> allocate();

  // The page sealed under `key`, if resident. Does not change its state.
  std::optional<int> find(const PageKey& key) const;
  // Adds a reference (a cached page becomes active).
  void acquire(int page);
  // Drops a reference; at zero a sealed page becomes cached (most recently
  // used end), an unsealed one goes back to the pool.
  void release(int page);

  // Registers an active page under `key` once it is full. Returns false (and
  // leaves the page unsealed) when another page already holds that key.
  bool seal(int page, const PageKey& key, bool persisted);
  void mark_persisted(int page);
  bool is_sealed(int page) const { return pages_[size_t(page)].sealed; }
  bool is_persisted(int page) const { return pages_[size_t(page)].persisted; }
  const PageKey& key_of(int page) const { return pages_[size_t(page)].key; }
  int ref_count(int page) const { return pages_[size_t(page)].ref; }

  // Pages a new allocation can get: free + cached.
  int n_available() const { return pool_.n_free() + int(lru_.size()); }
  int n_cached() const { return int(lru_.size()); }
  int n_sealed() const { return int(index_.size()); }

  // Drops every cached page (tests, memory pressure).
  void clear_cached();

 private:
  struct PageState {
    int ref = 0;
    bool sealed = false;
    bool persisted = false;
    PageKey key;
    std::list<int>::iterator lru_pos;
    bool in_lru = false;
  };
  void evict(int page);

  PagePool& pool_;
  std::vector<PageState> pages_;
  std::unordered_map<PageKey, int, PageKeyHash> index_;
  std::list<int> lru_;  // cached pages, least recently used first
  EvictHook evict_hook_;
};

}  // namespace larder
