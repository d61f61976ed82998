// RocksDbPageStore as the disk tier (storage/page_tier.h): options, the ttl
// sweep on a fake clock, lfu and pins on disk, budget changes, admin
// eviction, batched reads, and what survives a restart (access order,
// last-use times, the oldest builds' 16-byte bookkeeping).
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "storage/rocksdb_store.h"
#include "tests/storage/legacy_store.h"
#include "tests/storage/store_test_util.h"
#include "tests/support/temp_dir.h"

using namespace larder;
using larder::testing::TempDir;
using larder::testing::get_ok;
using larder::testing::open_store;

namespace {

PageKey key_n(uint64_t n) { return PageKey{0x7153000000000000ull + n, n * 31337}; }

// 1092 bytes: 1108 counted with the 16 key bytes, as in test_rocksdb_store.
constexpr int64_t kCounted = 16 + 1092;
std::string value_n(uint64_t n) { return std::string(1092, char('A' + n)); }

bool has(RocksDbPageStore& s, uint64_t n) {
  const PageKey k = key_n(n);
  return s.contains_batch(std::span<const PageKey>(&k, 1))[0];
}

// Which of keys 1..9 the store holds, as digits.
std::string held(RocksDbPageStore& s) {
  std::string out;
  for (uint64_t n = 1; n <= 9; ++n) {
    if (has(s, n)) out += char('0' + n);
  }
  return out;
}

// A clock the test moves by hand: Unix ms.
struct FakeClock {
  std::shared_ptr<std::atomic<int64_t>> ms = std::make_shared<std::atomic<int64_t>>(1'700'000'000'000);
  std::function<int64_t()> fn() const {
    auto p = ms;
    return [p] { return p->load(); };
  }
  void advance_s(int64_t s) { *ms += s * 1000; }
};

}  // namespace

TEST_CASE("disk tier: options are validated", "[storage][rocksdb][tier]") {
  TempDir tmp("tier-opts");
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  o.policy = "random";
  auto r = RocksDbPageStore::open(o);
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(r.status().message(), Catch::Matchers::Contains("lru, lfu, priority_lru, priority_lfu"));
  o.policy = "lfu";
  o.ttl_seconds = -1;
  CHECK(RocksDbPageStore::open(o).status().code() == StatusCode::kInvalidArgument);
  o.ttl_seconds = 10;
  o.ttl_sweep_interval_ms = 0;
  CHECK(RocksDbPageStore::open(o).status().code() == StatusCode::kInvalidArgument);
  o.ttl_sweep_interval_ms = 1000;
  auto store = open_store(o);
  CHECK(store->name() == "disk");
  CHECK(store->set_budget(-1).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("disk tier: lfu chooses the least used record", "[storage][rocksdb][tier]") {
  TempDir tmp("tier-lfu");
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  o.policy = "lfu";
  o.capacity_bytes = 3400;  // three records of 1108
  auto store = open_store(o);
  for (uint64_t n = 1; n <= 3; ++n) REQUIRE(store->put(key_n(n), value_n(n)).is_ok());
  CHECK(get_ok(*store, key_n(1)).has_value());
  CHECK(get_ok(*store, key_n(1)).has_value());
  CHECK(get_ok(*store, key_n(2)).has_value());
  // uses: 1 three, 2 two, 3 one
  REQUIRE(store->put(key_n(4), value_n(4)).is_ok());  // evicts 3
  CHECK(held(*store) == "124");
  CHECK(get_ok(*store, key_n(4)).has_value());
  // uses (last): 1 three (@5), 2 two (@6), 4 two (@8). The new 5 (one use)
  // would rank first, but is not its own victim: 2 goes.
  REQUIRE(store->put(key_n(5), value_n(5)).is_ok());
  CHECK(held(*store) == "145");
  CHECK(store->stats().evictions[size_t(EvictReason::kBudget)] == 2);
  CHECK(store->size_bytes() == 3 * kCounted);
}

TEST_CASE("disk tier: priority_lru keeps records read back (shared) over single-use ones",
          "[storage][rocksdb][tier]") {
  for (const char* policy : {"lru", "priority_lru"}) {
    INFO(policy);
    TempDir tmp("tier-prio");
    RocksDbStoreOptions o;
    o.dir = tmp.sub("db");
    o.policy = policy;
    o.capacity_bytes = 3400;  // three records of 1108
    auto store = open_store(o);
    REQUIRE(store->put(key_n(1), value_n(1)).is_ok());  // tick 1
    CHECK(get_ok(*store, key_n(1)).has_value());        // tick 2: a second user of 1
    REQUIRE(store->put(key_n(2), value_n(2)).is_ok());  // tick 3
    REQUIRE(store->put(key_n(3), value_n(3)).is_ok());  // tick 4
    CHECK(get_ok(*store, key_n(2)).has_value());        // tick 5: 2 shared
    REQUIRE(store->put(key_n(4), value_n(4)).is_ok());  // tick 6: one goes
    // lru: the oldest use, 1 (2). priority_lru: the only single-use one
    // before 4, 3 (4).
    CHECK(held(*store) == (std::string(policy) == "lru" ? "234" : "124"));
  }
}

TEST_CASE("disk tier: pins survive budget pressure", "[storage][rocksdb][tier]") {
  TempDir tmp("tier-pin");
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  o.capacity_bytes = 3400;
  auto store = open_store(o);
  store->pin(key_n(1));  // before it is stored
  for (uint64_t n = 1; n <= 3; ++n) REQUIRE(store->put(key_n(n), value_n(n)).is_ok());
  REQUIRE(store->put(key_n(4), value_n(4)).is_ok());  // 1 is oldest but pinned: 2 goes
  CHECK(held(*store) == "134");
  CHECK(store->stats().pinned == 1);
  REQUIRE(store->set_budget(kCounted).is_ok());  // room for one: 3 and 4 go
  CHECK(held(*store) == "1");
  // Only the pinned 1 could make room for 5: 5 itself goes, the put is OK.
  REQUIRE(store->put(key_n(5), value_n(5)).is_ok());
  CHECK(held(*store) == "1");
  CHECK(store->stats().evictions[size_t(EvictReason::kBudget)] == 4);
  store->unpin(key_n(1));
  REQUIRE(store->put(key_n(5), value_n(5)).is_ok());  // now 1 goes
  CHECK(held(*store) == "5");
}

TEST_CASE("disk tier: a smaller budget evicts at once", "[storage][rocksdb][tier]") {
  TempDir tmp("tier-budget");
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  o.capacity_bytes = 10000;
  auto store = open_store(o);
  for (uint64_t n = 1; n <= 5; ++n) REQUIRE(store->put(key_n(n), value_n(n)).is_ok());
  CHECK(get_ok(*store, key_n(1)).has_value());  // order now 2 3 4 5 1
  REQUIRE(store->set_budget(2300).is_ok());     // two records (2216) fit
  CHECK(held(*store) == "15");
  TierStats st = store->stats();
  CHECK(st.budget_bytes == 2300);
  CHECK(st.bytes_used == 2 * kCounted);
  CHECK(st.entries == 2);
  CHECK(st.evictions[size_t(EvictReason::kBudget)] == 3);
  // A record larger than the new budget is refused and counted.
  CHECK(store->put(key_n(6), std::string(2300, 'x')).code() == StatusCode::kResourceExhausted);
  CHECK(store->stats().puts_skipped == 1);
  REQUIRE(store->set_budget(0).is_ok());
  CHECK(held(*store) == "");
  CHECK(store->size_bytes() == 0);
}

TEST_CASE("disk tier: admin eviction of some keys and of all, pinned ones too", "[storage][rocksdb][tier]") {
  TempDir tmp("tier-evict");
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  {
    auto store = open_store(o);
    for (uint64_t n = 1; n <= 4; ++n) REQUIRE(store->put(key_n(n), value_n(n)).is_ok());
    store->pin(key_n(2));
    const std::vector<PageKey> some{key_n(1), key_n(99), key_n(1)};
    CHECK(store->evict(some) == 1);
    CHECK(held(*store) == "234");
    CHECK(store->evict({}) == 3);
    CHECK(held(*store) == "");
    TierStats st = store->stats();
    CHECK(st.evictions[size_t(EvictReason::kAdmin)] == 4);
    CHECK(st.evictions[size_t(EvictReason::kBudget)] == 0);
    CHECK(st.entries == 0);
    CHECK(st.bytes_used == 0);
    CHECK(st.pinned == 0);
    REQUIRE(store->put(key_n(5), value_n(5)).is_ok());
  }
  auto store = open_store(o);  // the evictions were written
  CHECK(held(*store) == "5");
}

TEST_CASE("disk tier: get_batch and contains_batch with absent keys", "[storage][rocksdb][tier]") {
  TempDir tmp("tier-batch");
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  o.capacity_bytes = 3400;
  auto store = open_store(o);
  for (uint64_t n : {1, 3, 4}) REQUIRE(store->put(key_n(n), value_n(n)).is_ok());
  const std::vector<PageKey> keys{key_n(1), key_n(2), key_n(3)};
  CHECK(store->contains_batch(keys) == std::vector<bool>{true, false, true});
  auto got = store->get_batch(keys, 0);
  REQUIRE(got.size() == 3);
  CHECK(got[0] == value_n(1));
  CHECK_FALSE(got[1].has_value());
  CHECK(got[2] == value_n(3));
  TierStats st = store->stats();
  CHECK(st.hits == 2);
  CHECK(st.misses == 1);
  CHECK(st.bytes_read == 2 * 1092);
  CHECK(st.bytes_written == 3 * 1092);
  CHECK(st.writes_failed == 0);
  // The batch read was a use of 1 and 3 (contains_batch was none): 4 is
  // the least recently used, and 5 evicts it.
  REQUIRE(store->put(key_n(5), value_n(5)).is_ok());
  CHECK(held(*store) == "135");
  auto generous = store->get_batch(keys, 60000);
  CHECK(generous[0] == value_n(1));
  CHECK(generous[2] == value_n(3));
}

TEST_CASE("disk tier: the ttl sweep erases records unused for longer than the ttl", "[storage][rocksdb][tier]") {
  TempDir tmp("tier-ttl");
  FakeClock clock;
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  o.ttl_seconds = 60;
  o.ttl_sweep_interval_ms = 3'600'000;  // the thread stays out of the way: sweep_ttl() by hand
  o.now_unix_ms = clock.fn();
  auto store = open_store(o);
  REQUIRE(store->put(key_n(1), value_n(1)).is_ok());  // last use t0
  store->pin(key_n(3));
  REQUIRE(store->put(key_n(3), value_n(3)).is_ok());  // t0, pinned
  clock.advance_s(30);
  REQUIRE(store->put(key_n(2), value_n(2)).is_ok());  // t0 + 30
  clock.advance_s(30);                                 // t0 + 60: 1 is exactly 60 s old
  CHECK(store->sweep_ttl() == 0);
  clock.advance_s(1);  // t0 + 61: 1 is 61 s old, 2 31 s
  CHECK(store->sweep_ttl() == 1);
  CHECK(held(*store) == "23");
  CHECK(get_ok(*store, key_n(2)).has_value());  // a use at t0 + 61
  clock.advance_s(40);                          // t0 + 101: 2 would be 71 s old, but was used 40 s ago
  CHECK(store->sweep_ttl() == 0);
  clock.advance_s(21);  // t0 + 122: 61 s since the use
  CHECK(store->sweep_ttl() == 1);
  CHECK(held(*store) == "3");  // pinned: never swept
  TierStats st = store->stats();
  CHECK(st.evictions[size_t(EvictReason::kTtl)] == 2);
  CHECK(st.evictions[size_t(EvictReason::kBudget)] == 0);
  store->unpin(key_n(3));
  CHECK(store->sweep_ttl() == 1);
  CHECK(store->n_records() == 0);
}

TEST_CASE("disk tier: the background thread sweeps by itself", "[storage][rocksdb][tier]") {
  TempDir tmp("tier-ttl-thread");
  FakeClock clock;
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  o.ttl_seconds = 5;
  o.ttl_sweep_interval_ms = 10;
  o.now_unix_ms = clock.fn();
  auto store = open_store(o);
  REQUIRE(store->put(key_n(1), value_n(1)).is_ok());
  clock.advance_s(6);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (store->n_records() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(store->n_records() == 0);
  CHECK(store->stats().evictions[size_t(EvictReason::kTtl)] == 1);
  // Without a ttl no thread sweeps and sweep_ttl() does nothing.
  RocksDbStoreOptions plain;
  plain.dir = tmp.sub("plain");
  plain.now_unix_ms = clock.fn();
  auto other = open_store(plain);
  REQUIRE(other->put(key_n(1), value_n(1)).is_ok());
  clock.advance_s(1'000'000);
  CHECK(other->sweep_ttl() == 0);
  CHECK(other->n_records() == 1);
}

TEST_CASE("disk tier: a restart keeps the access order and the last-use times", "[storage][rocksdb][tier]") {
  TempDir tmp("tier-restart");
  FakeClock clock;
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  o.ttl_seconds = 60;
  o.ttl_sweep_interval_ms = 3'600'000;
  o.now_unix_ms = clock.fn();
  {
    auto store = open_store(o);
    REQUIRE(store->put(key_n(1), value_n(1)).is_ok());  // t0
    clock.advance_s(10);
    REQUIRE(store->put(key_n(2), value_n(2)).is_ok());  // t0 + 10
    clock.advance_s(10);
    REQUIRE(store->put(key_n(3), value_n(3)).is_ok());  // t0 + 20
    REQUIRE(store->put(key_n(4), value_n(4)).is_ok());  // t0 + 20
    clock.advance_s(10);
    CHECK(get_ok(*store, key_n(1)).has_value());  // t0 + 30; order 2 3 4 1
  }
  clock.advance_s(45);  // t0 + 75: 2 is 65 s old, 3 and 4 55 s, 1 45 s
  auto store = open_store(o);
  CHECK(store->n_records() == 4);
  CHECK(store->sweep_ttl() == 1);  // only 2: the times survived the restart
  CHECK(held(*store) == "134");
  REQUIRE(store->set_budget(2 * kCounted).is_ok());  // the order survived too: 3 goes
  CHECK(held(*store) == "14");
  REQUIRE(store->set_budget(kCounted).is_ok());
  CHECK(held(*store) == "1");
}

TEST_CASE("disk tier: old 16-byte bookkeeping counts as last used at the open", "[storage][rocksdb][tier]") {
  TempDir tmp("tier-old");
  FakeClock clock;
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  o.ttl_seconds = 60;
  o.ttl_sweep_interval_ms = 3'600'000;
  o.now_unix_ms = clock.fn();
  // As the oldest builds wrote it (the legacy layout, tests/storage/
  // legacy_store.h): record bytes and tick only, order 2 1.
  larder::testing::write_legacy_store(o.dir, {{key_n(1), value_n(1), 4, std::nullopt},
                                              {key_n(2), value_n(2), 2, std::nullopt}});
  clock.advance_s(1000);  // t1: whatever time the records had would be long expired
  {
    auto store = open_store(o);
    CHECK(store->n_records() == 2);
    clock.advance_s(30);  // t1 + 30
    CHECK(store->sweep_ttl() == 0);
  }
  {
    // A second open at t1 + 30 reads the time the first open wrote (t1).
    auto store = open_store(o);
    clock.advance_s(31);  // t1 + 61
    REQUIRE(store->set_budget(kCounted).is_ok());  // the tick order was kept: 2 goes
    CHECK(held(*store) == "1");
    CHECK(store->sweep_ttl() == 1);
    CHECK(store->n_records() == 0);
  }
}

// Found by the kill -9 test (test_rocksdb_crash.cpp): a crash between a
// put and its eviction, or a budget lowered in the config, left a store
// over its budget after the restart until the next put.
TEST_CASE("disk tier: a store over its budget at open evicts down to it, in lru order", "[storage][rocksdb][tier]") {
  TempDir tmp("tier-open-budget");
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  {
    auto store = open_store(o);
    for (uint64_t n = 1; n <= 4; ++n) REQUIRE(store->put(key_n(n), value_n(n)).is_ok());
    CHECK(get_ok(*store, key_n(1)).has_value());  // order 2 3 4 1
  }
  o.capacity_bytes = 2 * kCounted + 100;
  {
    auto store = open_store(o);
    CHECK(store->size_bytes() == 2 * kCounted);
    CHECK(held(*store) == "14");
    CHECK(store->stats().evictions[size_t(EvictReason::kBudget)] == 2);
  }
  o.capacity_bytes = int64_t(1) << 30;
  auto store = open_store(o);  // erased on disk, not only forgotten
  CHECK(held(*store) == "14");
}
