// StorageWorkers: queued puts reach the store, flush waits for them, reads
// stop at the first miss or error, the destructor drains the queues.
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "storage/page_record.h"
#include "storage/rocksdb_store.h"
#include "storage/storage_workers.h"
#include "tests/support/log_capture.h"
#include "tests/support/temp_dir.h"

using namespace larder;
using larder::testing::TempDir;

namespace {

PageKey key_n(uint64_t n) { return PageKey{n, ~n}; }
std::string value_n(uint64_t n) { return "record-" + std::to_string(n) + std::string(n % 7 * 100, 'v'); }

// In-memory PageStore with injectable read failures and a slow put.
class FakeStore : public PageStore {
 public:
  Status put(const PageKey& key, std::string_view record) override {
    if (put_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(put_delay_ms));
    std::lock_guard<std::mutex> lock(mu);
    data[key.to_hex()] = std::string(record);
    ++n_puts;
    return Status::ok();
  }
  Result<std::optional<std::string>> get(const PageKey& key) override {
    std::lock_guard<std::mutex> lock(mu);
    if (failing.count(key.to_hex())) return Status::io_error("injected read failure");
    auto it = data.find(key.to_hex());
    if (it == data.end()) return std::optional<std::string>();
    return std::optional<std::string>(it->second);
  }
  Status erase(const PageKey& key) override {
    std::lock_guard<std::mutex> lock(mu);
    data.erase(key.to_hex());
    return Status::ok();
  }
  Status flush() override {
    std::lock_guard<std::mutex> lock(mu);
    ++n_flushes;
    return flush_fails ? Status::io_error("injected flush failure") : Status::ok();
  }
  std::mutex mu;
  std::map<std::string, std::string> data;
  std::set<std::string> failing;
  int n_puts = 0;
  int n_flushes = 0;
  int put_delay_ms = 0;
  bool flush_fails = false;
};

std::vector<std::string> get_prefix_sync(StorageWorkers& w, std::vector<PageKey> keys) {
  std::promise<std::vector<std::string>> p;
  auto f = p.get_future();
  w.get_prefix_async(std::move(keys), [&p](std::vector<std::string> r) { p.set_value(std::move(r)); });
  REQUIRE(f.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  return f.get();
}

}  // namespace

TEST_CASE("workers: many put_async then flush, every record is in the store", "[storage][workers]") {
  TempDir tmp("workers");
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  auto store = std::move(RocksDbPageStore::open(o)).value();
  constexpr int kN = 300;
  {
    StorageWorkers workers(*store, 3);
    for (int i = 0; i < kN; ++i) workers.put_async(key_n(uint64_t(i)), value_n(uint64_t(i)));
    workers.flush();
    CHECK(workers.pending() == 0);
    CHECK(workers.n_failed_writes() == 0);
    for (int i = 0; i < kN; ++i) {
      auto r = store->get(key_n(uint64_t(i)));
      REQUIRE(r.is_ok());
      REQUIRE(r->has_value());
      CHECK(**r == value_n(uint64_t(i)));
    }
    CHECK(store->n_records() == kN);
  }
}

TEST_CASE("workers: flush waits for slow writes and flushes the store", "[storage][workers]") {
  FakeStore store;
  store.put_delay_ms = 20;
  StorageWorkers workers(store, 2);
  for (int i = 0; i < 10; ++i) workers.put_async(key_n(uint64_t(i)), value_n(uint64_t(i)));
  CHECK(workers.pending() > 0);  // 10 puts of 20 ms on 2 threads take >= 100 ms
  workers.flush();
  std::lock_guard<std::mutex> lock(store.mu);
  CHECK(store.n_puts == 10);
  CHECK(store.n_flushes == 1);
}

TEST_CASE("workers: get_prefix_async stops at the first missing key", "[storage][workers]") {
  FakeStore store;
  for (uint64_t n : {0, 1, 3}) REQUIRE(store.put(key_n(n), value_n(n)).is_ok());
  StorageWorkers workers(store, 2);
  CHECK(get_prefix_sync(workers, {key_n(0), key_n(1), key_n(2), key_n(3)}) ==
        std::vector<std::string>{value_n(0), value_n(1)});
  CHECK(get_prefix_sync(workers, {key_n(2), key_n(0)}).empty());
  CHECK(get_prefix_sync(workers, {}).empty());
  CHECK(get_prefix_sync(workers, {key_n(3), key_n(0), key_n(1)}) ==
        std::vector<std::string>{value_n(3), value_n(0), value_n(1)});
}

TEST_CASE("workers: a read error ends the prefix", "[storage][workers]") {
  FakeStore store;
  for (uint64_t n : {0, 1, 2}) REQUIRE(store.put(key_n(n), value_n(n)).is_ok());
  store.failing.insert(key_n(1).to_hex());
  StorageWorkers workers(store, 1);
  CHECK(get_prefix_sync(workers, {key_n(0), key_n(1), key_n(2)}) ==
        std::vector<std::string>{value_n(0)});
}

TEST_CASE("workers: reads see writes queued before them", "[storage][workers]") {
  FakeStore store;
  store.put_delay_ms = 50;  // the writes are still queued when the read runs
  StorageWorkers workers(store, 1);
  workers.put_async(key_n(0), value_n(0));
  workers.put_async(key_n(1), value_n(1));
  workers.put_async(key_n(2), value_n(2));
  workers.erase_async(key_n(2));
  CHECK(get_prefix_sync(workers, {key_n(0), key_n(1), key_n(2)}) ==
        std::vector<std::string>{value_n(0), value_n(1)});
  workers.flush();
  std::lock_guard<std::mutex> lock(store.mu);
  // Same-key put then erase ran in order: 2 is absent.
  CHECK(store.data.size() == 2);
  CHECK(store.data.count(key_n(2).to_hex()) == 0);
}

TEST_CASE("workers: put/erase of one key keep their order", "[storage][workers]") {
  FakeStore store;
  StorageWorkers workers(store, 4);
  for (int round = 0; round < 50; ++round) {
    workers.put_async(key_n(7), std::to_string(round));
    if (round % 2 == 1) workers.erase_async(key_n(7));
  }
  workers.put_async(key_n(8), "a");
  workers.put_async(key_n(8), "b");
  workers.flush();
  std::lock_guard<std::mutex> lock(store.mu);
  CHECK(store.data.count(key_n(7).to_hex()) == 0);  // last op on 7 was an erase
  CHECK(store.data.at(key_n(8).to_hex()) == "b");
}

TEST_CASE("workers: destructor drains pending writes", "[storage][workers]") {
  TempDir tmp("drain");
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  constexpr int kN = 60;
  {
    auto store = std::move(RocksDbPageStore::open(o)).value();
    StorageWorkers workers(*store, 2);
    for (int i = 0; i < kN; ++i) workers.put_async(key_n(uint64_t(i)), value_n(uint64_t(i)) + std::string(20000, 'p'));
    // No flush: ~StorageWorkers must finish the queue before the store closes.
  }
  auto store = std::move(RocksDbPageStore::open(o)).value();
  CHECK(store->n_records() == kN);
  for (int i = 0; i < kN; ++i) {
    auto r = store->get(key_n(uint64_t(i)));
    REQUIRE(r.is_ok());
    REQUIRE(r->has_value());
    CHECK(**r == value_n(uint64_t(i)) + std::string(20000, 'p'));
  }
}

// Found in hostile testing: a failing flush logged a warning each time,
// three in a millisecond (one per tier and caller).
TEST_CASE("workers: a failing flush logs one warning per 10 s", "[storage][workers]") {
  FakeStore store;
  store.flush_fails = true;
  StorageWorkers w(store, 2);
  larder::testing::LogCapture cap;
  for (int i = 0; i < 5; ++i) w.flush();
  CHECK(store.n_flushes == 5);
  CHECK(cap.count("storage workers: flush: ") == 1);
}
