// PrefixCache's admin side: a page limit below the pool (a live device
// budget), pins, admin eviction without the evict hook, eviction counts by
// reason, and a policy swap that keeps the order. Orders worked by hand.
#include <vector>

#include <catch2/catch.hpp>

#include "engine/kv/prefix_cache.h"

using namespace larder;

namespace {

PageKey key(uint64_t n) { return PageKey{n, n * 7 + 1}; }

// Seals `n` pages under key(0..n-1) and releases them one by one: cached,
// least recently released first = key(0).
std::vector<int> seal_and_release(PrefixCache& cache, int n) {
  std::vector<int> pages;
  for (int i = 0; i < n; ++i) {
    const int p = *cache.allocate();
    REQUIRE(cache.seal(p, key(uint64_t(i)), true, i));
    pages.push_back(p);
  }
  for (int p : pages) cache.release(p);
  return pages;
}

}  // namespace

TEST_CASE("prefix cache: a lower page limit evicts at once and bounds allocation", "[kv]") {
  auto pool = PagePool::create(KvLayout{1, 4, 4, KvDtype::kF32}, 4).value();
  PrefixCache cache(*pool);
  std::vector<PageKey> evicted;
  cache.set_evict_hook([&](int, const PageKey& k, bool, bool) { evicted.push_back(k); });
  seal_and_release(cache, 3);
  CHECK(cache.n_in_use() == 3);
  CHECK(cache.n_available() == 4);  // 1 free + 3 cached

  cache.set_page_limit(2);  // 3 in use > 2: key(0), the oldest, goes now
  REQUIRE(evicted.size() == 1);
  CHECK(evicted[0] == key(0));
  CHECK(cache.n_in_use() == 2);
  CHECK(cache.n_available() == 2);  // limit 2 - in use 2 + cached 2

  const int a = *cache.allocate();  // at the limit: key(1) makes room
  CHECK(evicted.back() == key(1));
  CHECK(cache.n_available() == 1);  // key(2) cached
  const int b = *cache.allocate();  // key(2) goes
  CHECK(evicted.back() == key(2));
  CHECK(!cache.allocate());  // two active pages: the limit, though the pool has 2 free
  CHECK(cache.n_available() == 0);
  CHECK(cache.n_evicted(EvictReason::kBudget) == 3);
  CHECK(cache.n_evicted(EvictReason::kAdmin) == 0);

  cache.set_page_limit(4);  // grows back within the pool
  CHECK(cache.allocate().has_value());
  CHECK(cache.n_available() == 1);
  cache.release(a);
  cache.release(b);
}

TEST_CASE("prefix cache: a limit below the active pages waits for them", "[kv]") {
  auto pool = PagePool::create(KvLayout{1, 4, 4, KvDtype::kF32}, 4).value();
  PrefixCache cache(*pool);
  const int a = *cache.allocate(), b = *cache.allocate(), c = *cache.allocate();
  cache.set_page_limit(2);  // nothing to evict: three active pages stay
  CHECK(cache.n_in_use() == 3);
  CHECK(cache.n_available() == 0);
  CHECK(!cache.allocate());
  cache.release(a);  // unsealed: back to the pool, 2 in use
  CHECK(!cache.allocate());  // still at the limit
  cache.release(b);
  CHECK(cache.allocate().has_value());
  cache.release(c);
}

TEST_CASE("prefix cache: pins, admin eviction and a policy swap", "[kv]") {
  auto pool = PagePool::create(KvLayout{1, 4, 4, KvDtype::kF32}, 3).value();
  PrefixCache cache(*pool);
  int n_hook = 0;
  // Counts the evictions that hand a page down (admin ones drop it).
  cache.set_evict_hook([&](int, const PageKey&, bool, bool hand_down) { n_hook += hand_down ? 1 : 0; });
  cache.pin(key(1));  // before it is sealed: applies when it is
  const std::vector<int> pages = seal_and_release(cache, 3);
  CHECK(cache.policy().n_pinned() == 1);
  CHECK(cache.n_available() == 2);  // key(1) is pinned

  // lfu after the swap: one use each, so the order is the carried recency:
  // key(0), then key(2); key(1) stays pinned.
  cache.set_policy(std::move(make_eviction_policy("lfu")).value());
  CHECK(cache.policy().name() == "lfu");
  CHECK(cache.policy().is_pinned(key(1)));
  CHECK(cache.policy().victim() == key(0));

  // Admin eviction takes pinned pages too, and never hands a page down.
  CHECK(cache.evict_admin(key(1)));
  CHECK(!cache.find(key(1)));
  CHECK(!cache.evict_admin(key(1)));  // gone
  const int held = *cache.allocate();  // the free page (key(1)'s): no eviction
  CHECK(n_hook == 0);
  CHECK(cache.seal(held, key(7), true));
  CHECK(!cache.evict_admin(key(7)));  // active
  CHECK(cache.evict_all_admin() == 2);  // key(0), key(2)
  CHECK(cache.n_sealed() == 1);         // key(7), active
  CHECK(cache.n_evicted(EvictReason::kAdmin) == 3);
  CHECK(cache.n_evicted(EvictReason::kBudget) == 0);
  CHECK(n_hook == 0);
  // The pin of key(1) is still in force: sealed again, it is pinned again.
  cache.release(held);
  const int again = *cache.allocate();
  CHECK(cache.seal(again, key(1), true));
  cache.release(again);
  CHECK(cache.policy().n_pinned() == 1);
  cache.unpin(key(1));
  CHECK(cache.policy().n_pinned() == 0);
}
