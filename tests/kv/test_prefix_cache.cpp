// PrefixCache state machine: free -> active -> cached -> evicted (LRU).
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

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
  // In memory a layer's blocks of every page sit together: layer l of page p
  // at (l * n_pages 3 + p) * 2 blocks of 128 bytes, its V block 128 after.
  const auto* base = static_cast<const uint8_t*>(pool->k_block(0, 0));
  const auto at = [&](const void* q) { return static_cast<const uint8_t*>(q) - base; };
  CHECK(*a == 0);
  CHECK(*c == 2);
  CHECK(at(pool->k_block(*a, 1)) == (1 * 3 + 0) * 2 * 128);
  CHECK(at(pool->v_block(*a, 1)) == (1 * 3 + 0) * 2 * 128 + 128);
  CHECK(at(pool->k_block(*c, 0)) == (0 * 3 + 2) * 2 * 128);
  CHECK(at(pool->v_block(*c, 1)) == (1 * 3 + 2) * 2 * 128 + 128);
  // A page record's bytes are [layer][K block, V block]: read_page gathers
  // them, write_page scatters them back.
  for (int l = 0; l < 2; ++l) {
    std::memset(pool->k_block(*b, l), 0x10 + l, 128);
    std::memset(pool->v_block(*b, l), 0x20 + l, 128);
  }
  std::vector<uint8_t> record(512);
  pool->read_page(*b, record.data());
  for (int l = 0; l < 2; ++l)
    for (int i = 0; i < 128; ++i) {
      CHECK(record[size_t(l) * 256 + size_t(i)] == 0x10 + l);
      CHECK(record[size_t(l) * 256 + 128 + size_t(i)] == 0x20 + l);
    }
  std::vector<uint8_t> in(512);  // a different byte pattern in each of the four blocks
  for (size_t i = 0; i < in.size(); ++i) in[i] = uint8_t(0x40 * (i / 128) + i % 61);
  pool->write_page(*c, in.data());
  for (int l = 0; l < 2; ++l) {
    CHECK(std::memcmp(pool->k_block(*c, l), in.data() + size_t(l) * 256, 128) == 0);
    CHECK(std::memcmp(pool->v_block(*c, l), in.data() + size_t(l) * 256 + 128, 128) == 0);
  }
  CHECK(static_cast<const uint8_t*>(pool->k_block(*b, 0))[0] == 0x10);  // b untouched
  pool->release(*b);
  CHECK(pool->allocate() == b);
  CHECK(!PagePool::create(KvLayout{2, 8, 3, KvDtype::kF32}, 3).is_ok());  // page_size not a power of two
}

TEST_CASE("prefix cache reuses sealed pages and evicts least recently released first", "[kv]") {
  auto pool = PagePool::create(KvLayout{1, 4, 4, KvDtype::kF32}, 3).value();
  PrefixCache cache(*pool);
  std::vector<std::pair<int, PageKey>> evicted;
  cache.set_evict_hook([&](int page, const PageKey& k, bool, bool) { evicted.push_back({page, k}); });

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

namespace {

// A cache of n pages of 512 bytes under `policy`.
struct DeviceTier {
  std::unique_ptr<PagePool> pool;
  std::unique_ptr<PrefixCache> cache;
  std::vector<PageKey> evicted;
  DeviceTier(int n, const char* policy) {
    pool = PagePool::create(KvLayout{1, 4, 4, KvDtype::kF32}, n).value();
    cache = std::make_unique<PrefixCache>(*pool, make_eviction_policy(policy).value());
    cache->set_evict_hook([this](int, const PageKey& k, bool, bool) { evicted.push_back(k); });
  }
  // A sealed page holding `k` at chain position `depth`, still active.
  int sealed(uint64_t k, int depth = 0) {
    int p = *cache->allocate();
    REQUIRE(cache->seal(p, key(k), true, depth));
    return p;
  }
  // Evicts everything evictable, in the policy's order.
  std::vector<PageKey> drain() {
    while (cache->n_available() > pool->n_free()) {
      // Each allocation evicts one cached page once the free list is empty.
      if (!cache->allocate()) break;
    }
    return evicted;
  }
};

}  // namespace

TEST_CASE("device tier: a sequence released at once goes tail first", "[kv]") {
  DeviceTier t(3, "lru");
  // One sequence's pages at depths 0, 1, 2 released in one batch (one tick):
  // lru ties break by depth, deepest first -> 2, 1, 0.
  int p0 = t.sealed(10, 0), p1 = t.sealed(11, 1), p2 = t.sealed(12, 2);
  std::vector<int> tail_first{p2, p1, p0};
  t.cache->release_batch(tail_first);
  CHECK(t.drain() == std::vector<PageKey>{key(12), key(11), key(10)});
}

TEST_CASE("device tier: lfu keeps the page hit most, lru the page used last", "[kv]") {
  for (const char* policy : {"lru", "lfu"}) {
    INFO(policy);
    DeviceTier t(2, policy);
    int a = t.sealed(1), b = t.sealed(2);
    t.cache->release(a);  // a@tick3 (seals took ticks 1, 2)
    t.cache->release(b);  // b@4
    // Two later hits on a (acquire + release: ticks 5, 6), then one on b (7).
    for (int i = 0; i < 2; ++i) {
      t.cache->acquire(a);
      t.cache->release(a);
    }
    t.cache->acquire(b);
    t.cache->release(b);
    // lru: a last used at 6, b at 7 -> a goes first.
    // lfu: uses are the seal plus each release to zero: a 1 + 3 = 4, b 1 +
    // 2 = 3 -> b goes first.
    const std::vector<PageKey> order = t.drain();
    if (std::string(policy) == "lru") CHECK(order == std::vector<PageKey>{key(1), key(2)});
    else CHECK(order == std::vector<PageKey>{key(2), key(1)});
  }
}

TEST_CASE("device tier: priority_lru keeps shared pages over single-use ones", "[kv]") {
  for (const char* policy : {"lru", "priority_lru"}) {
    INFO(policy);
    DeviceTier t(2, policy);
    int shared = t.sealed(1), single = t.sealed(2);
    t.cache->acquire(shared);  // a second sequence uses it: 2 users
    t.cache->release(shared);
    t.cache->release(shared);  // cached, released before `single`
    t.cache->release(single);
    // lru: shared was released first -> evicted first. priority_lru:
    // single-use pages go before shared ones -> single first.
    const std::vector<PageKey> order = t.drain();
    if (std::string(policy) == "lru") CHECK(order == std::vector<PageKey>{key(1), key(2)});
    else CHECK(order == std::vector<PageKey>{key(2), key(1)});
  }
}
