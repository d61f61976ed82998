#include "engine/kv/prefix_cache.h"

#include <cassert>

namespace larder {

PrefixCache::PrefixCache(PagePool& pool, std::unique_ptr<EvictionPolicy> policy)
    : pool_(pool), policy_(std::move(policy)), pages_(size_t(pool.n_pages())), page_limit_(pool.n_pages()) {
  if (!policy_) policy_ = std::move(make_eviction_policy("lru")).value();
}

std::optional<int> PrefixCache::allocate() {
  // Within the page limit, a victim makes room first (the pool has free
  // pages beyond a lowered limit).
  while (n_in_use() >= page_limit_ || pool_.n_free() == 0) {
    std::optional<PageKey> victim = policy_->victim();
    if (!victim) return std::nullopt;
    auto it = index_.find(*victim);
    assert(it != index_.end());
    evict(it->second);
  }
  std::optional<int> page = pool_.allocate();
  assert(page);
  PageState& s = pages_[size_t(*page)];
  s = PageState{};
  s.ref = 1;
  return page;
}

void PrefixCache::evict(int page, EvictReason reason, bool hook) {
  PageState& s = pages_[size_t(page)];
  assert(s.ref == 0 && s.sealed);
  ++evicted_[size_t(reason)];
  if (evict_hook_) evict_hook_(page, s.key, s.persisted, /*hand_down=*/hook);
  policy_->erase(s.key);
  index_.erase(s.key);
  s.sealed = false;
  --n_cached_;
  pool_.release(page);
}

std::optional<int> PrefixCache::find(const PageKey& key) const {
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

void PrefixCache::acquire(int page) {
  PageState& s = pages_[size_t(page)];
  if (s.sealed) {
    if (s.ref == 0) --n_cached_;
    policy_->hold(s.key);
    policy_->add_user(s.key);
  }
  ++s.ref;
}

void PrefixCache::release_at(int page, uint64_t tick) {
  PageState& s = pages_[size_t(page)];
  assert(s.ref > 0);
  if (--s.ref > 0) {
    if (s.sealed) policy_->release(s.key);
    return;
  }
  if (s.sealed) {
    policy_->release(s.key);
    policy_->touch(s.key, tick);
    ++n_cached_;
  } else {
    pool_.release(page);
  }
}

void PrefixCache::release(int page) { release_at(page, ++tick_); }

void PrefixCache::release_batch(std::span<const int> pages) {
  const uint64_t tick = ++tick_;
  for (int page : pages) release_at(page, tick);
}

bool PrefixCache::seal(int page, const PageKey& key, bool persisted, int depth) {
  PageState& s = pages_[size_t(page)];
  assert(s.ref > 0);
  if (s.sealed) return s.key == key;
  if (index_.count(key)) return false;
  s.sealed = true;
  s.key = key;
  s.persisted = persisted;
  index_.emplace(key, page);
  EvictionEntry entry;
  entry.bytes = int64_t(pool_.layout().page_bytes());
  entry.depth = depth;
  entry.n_users = 1;
  policy_->insert(key, entry, ++tick_);
  // One hold per reference the page has now (its sealing sequence).
  for (int i = 0; i < s.ref; ++i) policy_->hold(key);
  return true;
}

void PrefixCache::mark_persisted(int page) { pages_[size_t(page)].persisted = true; }

int PrefixCache::n_cached_pinned() const {
  // Pinned pages are never evicted; only the cached ones matter here, and
  // pins are rare (admin pins of shared prompts): count them directly.
  if (policy_->n_pinned() == 0) return 0;
  int n = 0;
  for (const auto& [key, page] : index_) {
    if (pages_[size_t(page)].ref == 0 && policy_->is_pinned(key)) ++n;
  }
  return n;
}

void PrefixCache::clear_cached() {
  while (std::optional<PageKey> victim = policy_->victim()) evict(index_.at(*victim));
}

void PrefixCache::set_page_limit(int n) {
  assert(n >= 1 && n <= pool_.n_pages());
  page_limit_ = n;
  while (n_in_use() > page_limit_) {
    std::optional<PageKey> victim = policy_->victim();
    if (!victim) break;  // only active and pinned pages left: they go as they are released
    evict(index_.at(*victim));
  }
}

void PrefixCache::set_policy(std::unique_ptr<EvictionPolicy> policy) {
  move_entries(*policy_, *policy);
  policy_ = std::move(policy);
}

bool PrefixCache::evict_admin(const PageKey& key) {
  auto it = index_.find(key);
  if (it == index_.end() || pages_[size_t(it->second)].ref != 0) return false;
  evict(it->second, EvictReason::kAdmin, /*hook=*/false);
  return true;
}

int PrefixCache::evict_all_admin() {
  std::vector<PageKey> cached;
  for (const auto& [key, page] : index_) {
    if (pages_[size_t(page)].ref == 0) cached.push_back(key);
  }
  for (const PageKey& key : cached) evict_admin(key);
  return int(cached.size());
}

}  // namespace larder
