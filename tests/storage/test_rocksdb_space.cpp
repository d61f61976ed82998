// RocksDbPageStore: sync mode really fsyncs the WAL (counted by a file
// system wrapper), and evicted records give their space on disk back (blob
// GC and the background compaction, storage/rocksdb_store.h "Space").
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "storage/page_record.h"
#include "storage/rocksdb_store.h"
#include "tests/storage/counting_fs.h"
#include "tests/storage/store_test_util.h"
#include "tests/support/temp_dir.h"

using namespace larder;
using larder::testing::CountingFs;
using larder::testing::TempDir;
using larder::testing::get_ok;
using larder::testing::open_store;
namespace fs = std::filesystem;

namespace {

PageKey key_n(uint64_t n) { return PageKey{0x5ACE000000000000ull + n, n * 2654435761u}; }

// A page record of the test model's size: 16 tokens, 20 KiB of K/V,
// 76 + 64 + 20480 = 20 620 bytes.
std::string record_n(uint64_t n) {
  PageRecordMeta meta;
  meta.page_size = 16;
  std::vector<int32_t> tokens(16);
  for (size_t i = 0; i < 16; ++i) tokens[i] = int32_t(n * 16 + i);
  std::vector<uint8_t> payload(20480);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = uint8_t((n * 131 + i * 7) >> 1);
  return encode_page_record(key_n(n), meta, tokens, payload);
}
constexpr int64_t kCounted = 16 + 20620;

// What the directory takes on disk: allocated blocks of its files (as du
// counts them; RocksDB preallocates WAL and table files).
int64_t dir_bytes_on_disk(const std::string& dir) {
  int64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    struct stat st {};
    if (e.is_regular_file() && ::stat(e.path().c_str(), &st) == 0) {
      total += std::max<int64_t>(int64_t(st.st_blocks) * 512, int64_t(st.st_size));
    }
  }
  return total;
}

// "name size, ..." of the directory's files, for failure messages.
std::string dir_listing(const std::string& dir) {
  std::string out;
  for (const auto& e : fs::directory_iterator(dir)) {
    struct stat st {};
    if (e.is_regular_file() && ::stat(e.path().c_str(), &st) == 0) {
      out += e.path().filename().string() + " " + std::to_string(st.st_size) + "/" +
             std::to_string(int64_t(st.st_blocks) * 512) + ", ";
    }
  }
  return out;
}

// The documented bound (rocksdb_store.h, "Space"): budget * 1.5 + 4 "pages"
// memtables (budget / 16, at least 1 MiB) + 2 MiB.
int64_t space_bound(int64_t budget) {
  const int64_t memtable = std::max<int64_t>(budget / 16, int64_t(1) << 20);
  return budget + budget / 2 + 4 * memtable + (int64_t(2) << 20);
}

}  // namespace

TEST_CASE("sync_writes: every put and erase fsyncs the WAL, gets do not; without it nothing does",
          "[storage][rocksdb][sync]") {
  TempDir tmp("sync");
  auto cfs = std::make_shared<CountingFs>();
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  o.hooks = larder::testing::hooks_for(cfs);
  SECTION("sync") {
    o.sync_writes = true;
    auto store = open_store(o);
    const int64_t s0 = cfs->syncs(CountingFs::kWal);
    for (uint64_t n = 1; n <= 10; ++n) REQUIRE(store->put(key_n(n), record_n(n)).is_ok());
    CHECK(cfs->syncs(CountingFs::kWal) - s0 >= 10);
    const int64_t s1 = cfs->syncs(CountingFs::kWal);
    for (uint64_t n = 1; n <= 10; ++n) CHECK(get_ok(*store, key_n(n)).has_value());
    CHECK(cfs->syncs(CountingFs::kWal) == s1);  // the bookkeeping rewrite of a get is not synced
    REQUIRE(store->erase(key_n(1)).is_ok());
    CHECK(cfs->syncs(CountingFs::kWal) - s1 >= 1);
  }
  SECTION("no sync") {
    auto store = open_store(o);
    const int64_t s0 = cfs->syncs(CountingFs::kWal);
    for (uint64_t n = 1; n <= 10; ++n) REQUIRE(store->put(key_n(n), record_n(n)).is_ok());
    REQUIRE(store->erase(key_n(1)).is_ok());
    CHECK(cfs->syncs(CountingFs::kWal) == s0);
  }
}

TEST_CASE("space: many puts over a small budget keep the directory within the bound",
          "[storage][rocksdb][space]") {
  TempDir tmp("space-puts");
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  o.capacity_bytes = int64_t(4) << 20;  // ~200 records
  o.compaction_interval_ms = 0;
  auto store = open_store(o);
  // 2 000 records, 41 MB: ten times the budget.
  for (uint64_t n = 0; n < 2000; ++n) REQUIRE(store->put(key_n(n), record_n(n)).is_ok());
  CHECK(store->size_bytes() <= o.capacity_bytes);
  CHECK(store->n_records() == o.capacity_bytes / kCounted);
  REQUIRE(store->flush().is_ok());
  REQUIRE(store->wait_for_compactions(120000));
  CHECK(store->n_compactions() >= 1);
  const int64_t on_disk = dir_bytes_on_disk(o.dir);
  INFO("on disk " << on_disk << " bytes, bound " << space_bound(o.capacity_bytes) << ": " << dir_listing(o.dir));
  CHECK(on_disk <= space_bound(o.capacity_bytes));
  // The newest records are the ones kept, intact.
  CHECK(get_ok(*store, key_n(1999)) == record_n(1999));
}

TEST_CASE("space: a budget cut with no writes after it gives the space back", "[storage][rocksdb][space]") {
  TempDir tmp("space-cut");
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  o.capacity_bytes = int64_t(16) << 20;
  o.compaction_interval_ms = 0;
  auto store = open_store(o);
  for (uint64_t n = 0; n < 700; ++n) REQUIRE(store->put(key_n(n), record_n(n)).is_ok());  // 14.4 MB
  REQUIRE(store->flush().is_ok());
  REQUIRE(store->wait_for_compactions(120000));
  const int64_t full = dir_bytes_on_disk(o.dir);
  CHECK(full >= 700 * 20620);
  // Down to 1 MiB: 650+ records evicted, and nothing written after: only
  // the store's own compaction can drop their blob files.
  const int64_t small = int64_t(1) << 20;
  REQUIRE(store->set_budget(small).is_ok());
  CHECK(store->n_records() == small / kCounted);
  REQUIRE(store->wait_for_compactions(120000));
  CHECK(store->n_compactions() >= 1);
  const int64_t on_disk = dir_bytes_on_disk(o.dir);
  // The bound of the new budget, with the memtables of the old one (16 MiB / 16).
  const int64_t bound = small + small / 2 + 4 * (int64_t(1) << 20) + (int64_t(2) << 20);
  INFO("on disk " << on_disk << " bytes (" << full << " before the cut), bound " << bound << ": " << dir_listing(o.dir));
  CHECK(on_disk <= bound);
  CHECK(get_ok(*store, key_n(699)) == record_n(699));
}
