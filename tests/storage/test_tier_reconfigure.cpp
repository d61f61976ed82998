// Changing a live tier (POST /admin/reload): move_entries from one policy
// to another, set_policy on the host and disk tiers (entries, recency and
// pins kept; lfu counts start again), and the disk tier's set_ttl. Orders
// are worked out by hand in the comments.
#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include <catch2/catch.hpp>

#include "storage/eviction_policy.h"
#include "storage/memory_store.h"
#include "storage/rocksdb_store.h"
#include "tests/storage/store_test_util.h"
#include "tests/support/temp_dir.h"

using namespace larder;
using larder::testing::open_store;
using larder::testing::TempDir;

namespace {

PageKey k(char c) { return PageKey{0x5e7b000000000000ull, uint64_t(c)}; }

std::unique_ptr<EvictionPolicy> policy(std::string_view name) { return std::move(make_eviction_policy(name)).value(); }

template <typename Store>
std::string held(Store& s, std::string_view letters) {
  std::string out;
  for (char c : letters) {
    const PageKey key = k(c);
    if (s.contains_batch(std::span<const PageKey>(&key, 1))[0]) out.push_back(c);
  }
  return out;
}

std::unique_ptr<MemoryPageStore> host(int64_t budget, std::string name) {
  MemoryStoreOptions o;
  o.budget_bytes = budget;
  o.policy = std::move(name);
  return std::move(MemoryPageStore::create(o)).value();
}

}  // namespace

TEST_CASE("move_entries: ticks, sizes, holds and pins carry over; lfu counts restart", "[storage][policy]") {
  auto from = policy("lfu");
  from->insert(k('a'), EvictionEntry{100, 0, 1}, 1);
  from->insert(k('b'), EvictionEntry{200, 1, 2}, 2);
  from->insert(k('c'), EvictionEntry{300, 2, 1}, 3);
  from->touch(k('a'), 4);  // a: frequency 2, tick 4
  from->touch(k('a'), 5);  // a: frequency 3, tick 5
  from->hold(k('c'));
  from->pin(k('b'));
  from->pin(k('z'));  // not an entry: remembered
  // lfu before: b pinned, c held: a is the only victim.
  REQUIRE(from->victim() == k('a'));

  auto to = policy("lru");
  move_entries(*from, *to);
  CHECK(to->size() == 3);
  CHECK(to->bytes() == 600);
  CHECK(to->n_pinned() == 1);  // b (z is not an entry)
  CHECK(to->is_pinned(k('b')));
  CHECK(to->is_pinned(k('z')));
  CHECK(to->victim() == k('a'));  // b pinned, c still held
  to->release(k('c'));
  // lru by the carried ticks: c (3) before a (5).
  CHECK(to->victim() == k('c'));
  // `from` is unchanged.
  CHECK(from->size() == 3);
  CHECK(from->victim() == k('a'));
  // z, pinned in `to`, is pinned when it is inserted.
  to->insert(k('z'), EvictionEntry{1, 0, 1}, 9);
  CHECK(to->n_pinned() == 2);
}

TEST_CASE("host tier: set_policy keeps the records and their recency, restarts lfu counts", "[storage][host]") {
  // Three records of 100 bytes: 396 bytes each counted.
  constexpr int64_t kEntry = 100 + kHostEntryOverheadBytes;
  auto store = host(3 * kEntry, "lfu");
  for (char c : std::string("abc")) REQUIRE(store->put(k(c), std::string(100, c)).is_ok());  // ticks 1, 2, 3
  // Reads: a twice (frequency 3, tick 5), then b once (frequency 2, tick 6).
  const PageKey a = k('a'), b = k('b');
  (void)store->get_batch(std::span<const PageKey>(&a, 1), 0);
  (void)store->get_batch(std::span<const PageKey>(&a, 1), 0);
  (void)store->get_batch(std::span<const PageKey>(&b, 1), 0);
  // Under lfu the victims would go c (1 use), b (2), a (3). After the swap
  // to lfu again every count is one: the order is by last use, c (3), a
  // (5), b (6).
  REQUIRE(store->set_policy("lfu").is_ok());
  REQUIRE(store->set_budget(kEntry).is_ok());
  CHECK(held(*store, "abc") == "b");

  CHECK(store->set_policy("fifo").code() == StatusCode::kInvalidArgument);
  CHECK(held(*store, "abc") == "b");  // nothing changed
  const TierStats st = store->stats();
  CHECK(st.entries == 1);
  CHECK(st.bytes_used == kEntry);
  CHECK(st.evictions[size_t(EvictReason::kBudget)] == 2);
}

TEST_CASE("host tier: pins survive a policy change", "[storage][host]") {
  constexpr int64_t kEntry = 100 + kHostEntryOverheadBytes;
  auto store = host(3 * kEntry, "lru");
  store->pin(k('a'));
  for (char c : std::string("abc")) REQUIRE(store->put(k(c), std::string(100, c)).is_ok());
  store->pin(k('q'));  // not held yet
  REQUIRE(store->set_policy("priority_lfu").is_ok());
  CHECK(store->stats().pinned == 1);
  REQUIRE(store->set_budget(kEntry).is_ok());  // b and c go; a is pinned
  CHECK(held(*store, "abc") == "a");
  REQUIRE(store->set_budget(3 * kEntry).is_ok());
  REQUIRE(store->put(k('q'), std::string(100, 'q')).is_ok());
  CHECK(store->stats().pinned == 2);  // q's pin was remembered across the swap
}

TEST_CASE("disk tier: set_policy and set_ttl while open", "[storage][rocksdb][tier]") {
  TempDir tmp("tier-reconf");
  auto clock_ms = std::make_shared<std::atomic<int64_t>>(1'700'000'000'000);
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  o.ttl_sweep_interval_ms = 3'600'000;  // the thread (started by set_ttl) stays out of the way
  o.now_unix_ms = [clock_ms] { return clock_ms->load(); };
  auto store = open_store(o);
  // Counted: 16 key bytes + 1000 each.
  for (char c : std::string("abc")) REQUIRE(store->put(k(c), std::string(1000, c)).is_ok());  // ticks 1, 2, 3
  REQUIRE(store->get(k('a')).is_ok());  // a: tick 4
  REQUIRE(store->set_policy("lfu").is_ok());
  // One use each after the swap: by tick, b (2), c (3), a (4).
  REQUIRE(store->set_budget(2 * 1016).is_ok());
  CHECK(held(*store, "abc") == "ac");
  CHECK(store->set_policy("nope").code() == StatusCode::kInvalidArgument);

  // No ttl at open: sweeping does nothing until one is set.
  *clock_ms += 100'000;  // a and c are 100 s old
  CHECK(store->sweep_ttl() == 0);
  CHECK(store->set_ttl(-1).code() == StatusCode::kInvalidArgument);
  store->pin(k('c'));
  REQUIRE(store->set_ttl(60).is_ok());
  CHECK(store->sweep_ttl() == 1);  // a (100 s > 60 s); c is pinned
  CHECK(held(*store, "abc") == "c");
  REQUIRE(store->set_ttl(0).is_ok());
  store->unpin(k('c'));
  CHECK(store->sweep_ttl() == 0);
  CHECK(store->stats().evictions[size_t(EvictReason::kTtl)] == 1);
}

TEST_CASE("the host tier has no ttl", "[storage][host]") {
  auto store = host(1 << 20, "lru");
  CHECK(store->set_ttl(10).code() == StatusCode::kUnsupported);
}
