#include "engine/kv/prefix_cache.h"

#include <cassert>

namespace larder {

std::optional<int> PrefixCache::allocate() {
  std::optional<int> page = pool_.allocate();
  if (!page) {
    if (lru_.empty()) return std::nullopt;
    int victim = lru_.front();
    evict(victim);
    page = pool_.allocate();
    assert(page);
  }
  PageState& s = pages_[size_t(*page)];
  s = PageState{};
  s.ref = 1;
  return page;
}

void PrefixCache::evict(int page) {
  PageState& s = pages_[size_t(page)];
  assert(s.in_lru && s.ref == 0 && s.sealed);
  if (evict_hook_) evict_hook_(page, s.key, s.persisted);
  lru_.erase(s.lru_pos);
  s.in_lru = false;
  index_.erase(s.key);
  s.sealed = false;
  pool_.release(page);
}

std::optional<int> PrefixCache::find(const PageKey& key) const {
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

void PrefixCache::acquire(int page) {
  PageState& s = pages_[size_t(page)];
  if (s.in_lru) {
    lru_.erase(s.lru_pos);
    s.in_lru = false;
  }
  ++s.ref;
}

void PrefixCache::release(int page) {
  PageState& s = pages_[size_t(page)];
  assert(s.ref > 0);
  if (--s.ref > 0) return;
  if (s.sealed) {
    s.lru_pos = lru_.insert(lru_.end(), page);
    s.in_lru = true;
  } else {
    pool_.release(page);
  }
}

bool PrefixCache::seal(int page, const PageKey& key, bool persisted) {
  PageState& s = pages_[size_t(page)];
  assert(s.ref > 0);
  if (s.sealed) return s.key == key;
  if (index_.count(key)) return false;
  s.sealed = true;
  s.key = key;
  s.persisted = persisted;
  index_.emplace(key, page);
  return true;
}

void PrefixCache::mark_persisted(int page) { pages_[size_t(page)].persisted = true; }

void PrefixCache::clear_cached() {
  while (!lru_.empty()) evict(lru_.front());
}

}  // namespace larder
