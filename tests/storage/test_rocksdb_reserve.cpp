// RocksDbPageStore's disk reserve (rocksdb_store.h, "Disk space"): below
// min_free_bytes free on its file system it caps itself and evicts by the
// shortfall, takes no new pages past the cap, lowers the cap only by what
// something else took, and lifts it once there is room. The file system's
// free space is a fake the tests set.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "storage/rocksdb_store.h"
#include "tests/storage/store_test_util.h"
#include "tests/support/temp_dir.h"

using namespace larder;
using larder::testing::TempDir;
using larder::testing::get_ok;
using larder::testing::key_n;
using larder::testing::open_store;
using larder::testing::record_n;

namespace {

// A store with a 5000-byte disk reserve whose file system's free space is
// what *free_bytes says (the budget never binds); free space looked at on
// every put unless check_interval_ms says otherwise.
RocksDbStoreOptions reserve_options(const std::string& dir, std::atomic<int64_t>* free_bytes,
                                    int64_t check_interval_ms = 0) {
  RocksDbStoreOptions o;
  o.dir = dir;
  o.capacity_bytes = 100000;
  o.min_free_bytes = 5000;
  o.free_check_interval_ms = check_interval_ms;
  o.free_space_bytes = [free_bytes] { return free_bytes->load(); };
  return o;
}

}  // namespace

TEST_CASE("store keeps min_free bytes free on its file system: evicts by the shortfall, lifts the cap once free",
          "[storage][rocksdb]") {
  TempDir tmp("min_free");
  std::atomic<int64_t> free_bytes{100000};
  auto store = open_store(reserve_options(tmp.sub("db"), &free_bytes));
  auto held = [&store](std::vector<uint64_t> ns) {
    for (uint64_t n = 1; n <= 12; ++n) {
      const bool want = std::find(ns.begin(), ns.end(), n) != ns.end();
      INFO("record " << n);
      CHECK(get_ok(*store, key_n(n)).has_value() == want);
    }
  };
  // Each record counts 1108 bytes (see the capacity test in test_rocksdb_store.cpp).
  for (uint64_t n = 1; n <= 5; ++n) REQUIRE(store->put(key_n(n), record_n(n, 4, 1000)).is_ok());
  CHECK(store->size_bytes() == 5 * 1108);
  // 3000 free, 2000 short: the cap is 5540 - 2000 = 3540 bytes; 1 and 2 go,
  // and 6 is not written (it would take the store past the cap).
  free_bytes = 3000;
  CHECK(store->put(key_n(6), record_n(6, 4, 1000)).code() == StatusCode::kResourceExhausted);
  CHECK(store->size_bytes() == 3 * 1108);
  held({3, 4, 5});
  // The same free space again (the erased bytes not back yet): the cap
  // holds, and the store takes nothing new.
  CHECK(store->put(key_n(7), record_n(7, 4, 1000)).code() == StatusCode::kResourceExhausted);
  held({3, 4, 5});
  // 1000 fewer free: the cap falls by 1000 to 2540: 3 goes (the gets above
  // made 3, 4, 5 the order). Looks skip while the compaction the eviction
  // asked for runs, so wait for it.
  REQUIRE(store->wait_for_compactions(120000));
  free_bytes = 2000;
  CHECK(store->put(key_n(8), record_n(8, 4, 1000)).code() == StatusCode::kResourceExhausted);
  CHECK(store->size_bytes() == 2 * 1108);
  held({4, 5});
  // Room again: the cap is lifted, puts are written, nothing is evicted.
  free_bytes = 6000;
  for (uint64_t n = 9; n <= 12; ++n) REQUIRE(store->put(key_n(n), record_n(n, 4, 1000)).is_ok());
  CHECK(store->size_bytes() == 6 * 1108);
  held({4, 5, 9, 10, 11, 12});
  CHECK(store->stats().puts_skipped == 3);
  // An unknown free space (< 0) changes nothing.
  free_bytes = -1;
  REQUIRE(store->put(key_n(1), record_n(1, 4, 1000)).is_ok());
  CHECK(store->n_records() == 7);
}

TEST_CASE("store under a space cap: its own writes under the cap do not lower the cap, others' do",
          "[storage][rocksdb]") {
  // Found in review: every page written under the cap lowered it by its
  // size at the next look, so the cap ratcheted down (evicting) while the
  // disk stayed as full as the cap allowed.
  TempDir tmp("min_free_own");
  std::atomic<int64_t> free_bytes{100000};
  auto store = open_store(reserve_options(tmp.sub("db"), &free_bytes));
  for (uint64_t n = 1; n <= 5; ++n) REQUIRE(store->put(key_n(n), record_n(n, 4, 1000)).is_ok());
  // 4500 free, 500 short: the cap is 5 * 1108 - 500 = 5040; 1 goes (4432 held).
  free_bytes = 4500;
  CHECK(store->put(key_n(6), record_n(6, 4, 1000)).code() == StatusCode::kResourceExhausted);
  CHECK(store->n_records() == 4);
  REQUIRE(store->wait_for_compactions(120000));
  // A 500-byte record fits under the cap (4432 + 508 <= 5040) and takes
  // its bytes of the disk, as the file system then says.
  REQUIRE(store->put(key_n(7), record_n(7, 4, 400)).is_ok());
  const int64_t held = store->size_bytes();
  CHECK(held == 4 * 1108 + 508);
  free_bytes = 4500 - 400;
  // The next look sees only the store's own write: the cap stays 5040,
  // nothing is evicted (a 1108-byte page would not fit; it is skipped).
  CHECK(store->put(key_n(8), record_n(8, 4, 1000)).code() == StatusCode::kResourceExhausted);
  CHECK(store->size_bytes() == held);
  CHECK(store->n_records() == 5);
  // Something else takes 1000 more: the cap falls by 1000 to 4040, and the
  // oldest record goes (2), leaving 3 * 1108 + 508 = 3832.
  free_bytes = 4500 - 400 - 1000;
  CHECK(store->put(key_n(9), record_n(9, 4, 1000)).code() == StatusCode::kResourceExhausted);
  CHECK(store->size_bytes() == 3 * 1108 + 508);
  CHECK_FALSE(get_ok(*store, key_n(2)).has_value());
  CHECK(get_ok(*store, key_n(7)).has_value());
}

TEST_CASE("store with a space cap looks at the free space on every put, so room coming back is seen at once",
          "[storage][rocksdb]") {
  // Found by the disk-full recovery test: a page written just after space
  // came back was evicted by a cap set up to a second before.
  TempDir tmp("min_free_lift");
  std::atomic<int64_t> free_bytes{0};
  // An hour between looks: only the first put would look, but for the cap.
  auto store = open_store(reserve_options(tmp.sub("db"), &free_bytes, 3600 * 1000));
  CHECK(store->put(key_n(1), record_n(1, 4, 1000)).code() == StatusCode::kResourceExhausted);  // capped at 0
  CHECK(store->n_records() == 0);
  free_bytes = 50000;
  REQUIRE(store->put(key_n(2), record_n(2, 4, 1000)).is_ok());  // looked again: the cap is lifted
  REQUIRE(store->put(key_n(3), record_n(3, 4, 1000)).is_ok());
  CHECK(store->n_records() == 2);
}

TEST_CASE("store without a reserve (min_free_bytes 0) never looks at the free space", "[storage][rocksdb]") {
  TempDir tmp("no_reserve");
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  o.capacity_bytes = 100000;
  o.free_check_interval_ms = 0;
  std::atomic<int> looks{0};
  o.free_space_bytes = [&looks] {
    ++looks;
    return int64_t(0);
  };
  auto store = open_store(o);
  for (uint64_t n = 1; n <= 4; ++n) REQUIRE(store->put(key_n(n), record_n(n, 4, 1000)).is_ok());
  CHECK(store->n_records() == 4);
  CHECK(looks == 0);
}

TEST_CASE("a put that comes while another put looks at free space waits for that look's cap",
          "[storage][rocksdb]") {
  TempDir tmp("min_free_race");
  std::atomic<int64_t> free_bytes{0};  // below the 5000-byte reserve from the start
  std::atomic<int> looks{0};
  std::atomic<bool> second_done{false};
  RocksDbStoreOptions o = reserve_options(tmp.sub("db"), &free_bytes, /*check_interval_ms=*/60000);
  // The first look holds on until the second put has returned (or 300 ms,
  // which is what it takes when the second put rightly waits for it).
  o.free_space_bytes = [&] {
    if (looks.fetch_add(1) == 0) {
      for (int i = 0; i < 300 && !second_done.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return free_bytes.load();
  };
  auto store = open_store(o);
  std::thread first([&] { CHECK(store->put(key_n(1), record_n(1, 4, 1000)).code() == StatusCode::kResourceExhausted); });
  while (looks.load() == 0) std::this_thread::yield();
  // The look is in progress: this put must not write on the cap before it.
  CHECK(store->put(key_n(2), record_n(2, 4, 1000)).code() == StatusCode::kResourceExhausted);
  second_done = true;
  first.join();
  CHECK(store->size_bytes() == 0);
  CHECK(store->stats().puts_skipped == 2);
  CHECK(looks.load() == 2);  // under a cap every put looks, the second after the first
}
