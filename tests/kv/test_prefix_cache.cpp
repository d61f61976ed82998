// PrefixCache state machine: free -> active -> cached -> evicted (LRU).
#include <catch2/catch.hpp>

#include "engine/kv/prefix_cache.h"

using namespace larder;

namespace {
PageKey key(uint64_t n) { return PageKey{n, n * 7 + 1}; }
}  // namespace

TEST_CASE("page pool hands out every page once", "[kv]") {
  auto pool = PagePool::create(KvLayout{2, 8, 4, KvDtype::kF32}, 3).value();
  // page bytes = n_layer 2 * (K,V) 2 * page_size 4 * kv_dim 8 * 4 bytes = 512
  CHECK(pool->layout().page_bytes() == 512);
  CHECK(pool->layout().block_bytes() == 128);
  auto a = pool->allocate(), b = pool->allocate(), c = pool->allocate();
  REQUIRE((a && b && c));
  CHECK(!pool->allocate());
  CHECK(static_cast<uint8_t*>(pool->v_block(*a, 1)) - pool->page_data(*a) == 3 * 128);
  pool->release(*b);
  CHECK(pool->allocate() == b);
  CHECK(!PagePool::create(KvLayout{2, 8, 3, KvDtype::kF32}, 3).is_ok());  // page_size not a power of two
}

TEST_CASE("prefix cache reuses sealed pages and evicts least recently released first", "[kv]") {
  auto pool = PagePool::create(KvLayout{1, 4, 4, KvDtype::kF32}, 3).value();
  PrefixCache cache(*pool);
  std::vector<std::pair<int, PageKey>> evicted;
  cache.set_evict_hook([&](int page, const PageKey& k, bool) { evicted.push_back({page, k}); });

  int p0 = *cache.allocate(), p1 = *cache.allocate(), p2 = *cache.allocate();
  CHECK(!cache.allocate());  // all three active
  CHECK(cache.seal(p0, key(0), true));
  CHECK(cache.seal(p1, key(1), true));
  CHECK(!cache.seal(p2, key(0), true));  // key(0) is held by p0
  CHECK(cache.find(key(1)) == p1);

  cache.release(p1);  // cached (LRU: p1)
  cache.release(p0);  // cached (LRU: p1, p0)
  cache.release(p2);  // unsealed: back to the free list
  CHECK(cache.n_available() == 3);
  CHECK(cache.n_cached() == 2);

  // A hit makes p1 active again, and releasing it makes it most recent.
  cache.acquire(*cache.find(key(1)));
  cache.release(p1);  // LRU order now p0, p1

  int q = *cache.allocate();  // the free page first: no eviction
  CHECK(q == p2);
  CHECK(evicted.empty());
  int r = *cache.allocate();  // evicts p0, the least recently released
  CHECK(r == p0);
  REQUIRE(evicted.size() == 1);
  CHECK(evicted[0].second == key(0));
  CHECK(!cache.find(key(0)));
  CHECK(cache.find(key(1)) == p1);
  CHECK(cache.ref_count(p1) == 0);
}
