// RocksDbPageStore's on-disk layout (storage/rocksdb_store.h, "On-disk
// layout"): records in "pages", bookkeeping in "meta", an open that reads
// no record value, and stores written in the legacy layout (everything in
// the default column family) that keep their pages after the upgrade.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "storage/page_record.h"
#include "storage/rocksdb_store.h"
#include "tests/storage/counting_fs.h"
#include "tests/storage/legacy_store.h"
#include "tests/storage/store_test_util.h"
#include "tests/support/temp_dir.h"

using namespace larder;
using larder::testing::CountingFs;
using larder::testing::LegacyEntry;
using larder::testing::RawStore;
using larder::testing::TempDir;
using larder::testing::get_ok;
using larder::testing::le64;
using larder::testing::open_store;

namespace {

PageKey key_n(uint64_t n) { return PageKey{0x1A70000000000000ull + n, n * 65537}; }

// A real page record of the test model's size: 16 tokens, 20 KiB of K/V
// (5 layers * 2 * 16 tokens * 32 kv_dim * 4 bytes), 20 620 bytes; `salt`
// changes the payload.
constexpr size_t kPagePayload = 5 * 2 * 16 * 32 * 4;
constexpr int64_t kPageRecord = 76 + 16 * 4 + int64_t(kPagePayload);
std::string record_n(uint64_t n, size_t payload_bytes = kPagePayload, uint8_t salt = 0) {
  PageRecordMeta meta;
  meta.page_size = 16;
  std::vector<int32_t> tokens(16);
  for (size_t i = 0; i < 16; ++i) tokens[i] = int32_t(n * 100 + i);
  std::vector<uint8_t> payload(payload_bytes);
  for (size_t i = 0; i < payload_bytes; ++i) payload[i] = uint8_t(n * 7 + i * 13 + salt);
  return encode_page_record(key_n(n), meta, tokens, payload);
}

bool has(RocksDbPageStore& s, uint64_t n) {
  const PageKey k = key_n(n);
  return s.contains_batch(std::span<const PageKey>(&k, 1))[0];
}
std::string held(RocksDbPageStore& s) {
  std::string out;
  for (uint64_t n = 1; n <= 9; ++n) {
    if (has(s, n)) out += char('0' + n);
  }
  return out;
}

struct FakeClock {
  std::shared_ptr<std::atomic<int64_t>> ms = std::make_shared<std::atomic<int64_t>>(1'700'000'000'000);
  std::function<int64_t()> fn() const {
    auto p = ms;
    return [p] { return p->load(); };
  }
  void advance_s(int64_t s) { *ms += s * 1000; }
};

// The 25-byte "meta" value, built by hand from the documented layout.
std::string meta_value(uint64_t bytes, uint64_t tick, int64_t last_use_ms, uint8_t flags) {
  return le64(bytes) + le64(tick) + le64(uint64_t(last_use_ms)) + std::string(1, char(flags));
}

}  // namespace

TEST_CASE("disk layout: records in \"pages\", bookkeeping in \"meta\", nothing in the default CF",
          "[storage][rocksdb][layout]") {
  TempDir tmp("layout");
  FakeClock clock;
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  o.now_unix_ms = clock.fn();
  const int64_t t0 = clock.ms->load();
  {
    auto store = open_store(o);
    REQUIRE(store->put(key_n(1), record_n(1)).is_ok());  // tick 1
    REQUIRE(store->put(key_n(2), "small").is_ok());      // tick 2
    clock.advance_s(5);
    CHECK(get_ok(*store, key_n(1)).has_value());  // tick 3, t0 + 5 s
  }
  RawStore raw(o.dir);
  CHECK(raw.get(RawStore::kPages, key_n(1).to_bytes()) == record_n(1));
  CHECK(raw.get(RawStore::kPages, key_n(2).to_bytes()) == std::string("small"));
  CHECK(raw.get(RawStore::kMeta, key_n(1).to_bytes()) == meta_value(uint64_t(kPageRecord), 3, t0 + 5000, 0));
  CHECK(raw.get(RawStore::kMeta, key_n(2).to_bytes()) == meta_value(5, 2, t0, 0));
  CHECK(raw.keys(RawStore::kDefault).empty());
}

TEST_CASE("disk layout: an open reads no record value", "[storage][rocksdb][layout]") {
  TempDir tmp("layout-open");
  auto fs = std::make_shared<CountingFs>();
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  o.hooks = larder::testing::hooks_for(fs);
  {
    auto store = open_store(o);
    for (uint64_t n = 1; n <= 30; ++n) REQUIRE(store->put(key_n(n), record_n(n)).is_ok());
    REQUIRE(store->flush().is_ok());  // the records are in blob files now
  }
  fs->reset();
  auto store = open_store(o);
  CHECK(store->n_records() == 30);
  CHECK(fs->bytes_read(CountingFs::kBlob) == 0);
  // Reading a record does read its blob file (the counter works).
  CHECK(get_ok(*store, key_n(7)) == record_n(7));
  CHECK(fs->bytes_read(CountingFs::kBlob) >= kPageRecord);
}

TEST_CASE("disk layout: a store in the legacy layout keeps its pages, sizes, order and ages",
          "[storage][rocksdb][layout]") {
  TempDir tmp("layout-legacy");
  FakeClock clock;
  const int64_t t0 = clock.ms->load();
  // Keys 1-4: 20 620-byte records (blob files); key 5: a 1 140-byte record
  // (inline in the table). Ticks give the lru order 4 2 1 5 3; key 4 has
  // the 16-byte bookkeeping of the oldest builds.
  const std::vector<LegacyEntry> entries{
      {key_n(1), record_n(1), 5, t0 - 50'000},
      {key_n(2), record_n(2), 3, t0 - 70'000},
      {key_n(3), record_n(3), 9, t0 - 10'000},
      {key_n(4), record_n(4), 1, std::nullopt},
      {key_n(5), record_n(5, 1000), 7, t0 - 30'000},
  };
  const std::string dir = tmp.sub("db");
  larder::testing::write_legacy_store(dir, entries);
  auto fs = std::make_shared<CountingFs>();
  RocksDbStoreOptions o;
  o.dir = dir;
  o.now_unix_ms = clock.fn();
  o.ttl_seconds = 60;
  o.ttl_sweep_interval_ms = 3'600'000;
  o.hooks = larder::testing::hooks_for(fs);
  const int64_t total = 4 * (16 + kPageRecord) + (16 + 76 + 64 + 1000);
  {
    auto store = open_store(o);
    CHECK(store->n_records() == 5);
    CHECK(store->size_bytes() == total);
    CHECK(fs->bytes_read(CountingFs::kBlob) == 0);  // the upgrade read no record
  }
  {
    // Only the bookkeeping moved: "s" entries are now 25-byte "meta" values
    // with the legacy flag (key 4 last used at the open, t0); the records
    // are where they were.
    RawStore raw(dir);
    CHECK(raw.keys(RawStore::kDefault, "s").empty());
    CHECK(raw.keys(RawStore::kDefault, "p").size() == 5);
    CHECK(raw.keys(RawStore::kPages).empty());
    CHECK(raw.get(RawStore::kMeta, key_n(1).to_bytes()) == meta_value(uint64_t(kPageRecord), 5, t0 - 50'000, 1));
    CHECK(raw.get(RawStore::kMeta, key_n(4).to_bytes()) == meta_value(uint64_t(kPageRecord), 1, t0, 1));
    CHECK(raw.get(RawStore::kMeta, key_n(5).to_bytes()) == meta_value(76 + 64 + 1000, 7, t0 - 30'000, 1));
  }
  clock.advance_s(15);  // t0 + 15 s: key 2 is 85 s old, key 1 65 s, key 5 45 s, key 3 25 s, key 4 15 s
  {
    auto store = open_store(o);
    CHECK(store->n_records() == 5);
    CHECK(store->sweep_ttl() == 2);  // 1 and 2: the stored last uses survived
    CHECK(held(*store) == "345");
    // The tick order survived: 4 (tick 1) is the least recently used.
    REQUIRE(store->set_budget(total - 3 * (16 + kPageRecord)).is_ok());
    CHECK(held(*store) == "35");
    // Read where they are.
    CHECK(get_ok(*store, key_n(3)) == record_n(3));
    CHECK(get_ok(*store, key_n(5)) == record_n(5, 1000));
    REQUIRE(store->set_budget(o.capacity_bytes).is_ok());
    // A put replaces a legacy record: the new one is in "pages".
    REQUIRE(store->put(key_n(3), record_n(3, kPagePayload, 99)).is_ok());
    CHECK(get_ok(*store, key_n(3)) == record_n(3, kPagePayload, 99));
    CHECK(store->size_bytes() == (16 + kPageRecord) + (16 + 76 + 64 + 1000));
    // And new keys go to "pages" as usual.
    REQUIRE(store->put(key_n(6), record_n(6)).is_ok());
  }
  {
    RawStore raw(dir);
    CHECK(raw.keys(RawStore::kDefault, "p") == std::vector<std::string>{"p" + key_n(5).to_bytes()});
    CHECK(raw.get(RawStore::kPages, key_n(3).to_bytes()) == record_n(3, kPagePayload, 99));
    CHECK(raw.get(RawStore::kMeta, key_n(3).to_bytes())->back() == '\0');  // not legacy any more
    CHECK(raw.get(RawStore::kMeta, key_n(5).to_bytes())->back() == '\1');
  }
  {
    // A third open: the migration is done, the legacy record still serves;
    // erasing it deletes it where it is.
    auto store = open_store(o);
    CHECK(held(*store) == "356");
    CHECK(get_ok(*store, key_n(5)) == record_n(5, 1000));
    REQUIRE(store->erase(key_n(5)).is_ok());
    CHECK_FALSE(get_ok(*store, key_n(5)).has_value());
  }
  RawStore raw(dir);
  CHECK(raw.keys(RawStore::kDefault).empty());
}

TEST_CASE("disk layout: a migration cut short resumes, \"meta\" wins over stray legacy entries",
          "[storage][rocksdb][layout]") {
  TempDir tmp("layout-resume");
  const std::string dir = tmp.sub("db");
  const int64_t t = 1'700'000'000'000;
  larder::testing::write_legacy_store(dir, {{key_n(1), record_n(1), 1, t}, {key_n(2), record_n(2), 2, t},
                                            {key_n(3), record_n(3), 3, t}});
  {
    // Key 1 was moved already (its "s" entry gone, its "meta" entry
    // flagged); key 3 was since replaced in "pages", but a stray "s" and
    // "p" of it are left; key 2 was not moved yet.
    RawStore raw(dir);
    REQUIRE(raw.keys(RawStore::kDefault, "s").size() == 3);
    raw.put(RawStore::kMeta, key_n(1).to_bytes(), meta_value(uint64_t(kPageRecord), 1, t, 1));
    raw.del(RawStore::kDefault, "s" + key_n(1).to_bytes());
    raw.put(RawStore::kPages, key_n(3).to_bytes(), "new three");
    raw.put(RawStore::kMeta, key_n(3).to_bytes(), meta_value(9, 4, t, 0));
  }
  RocksDbStoreOptions o;
  o.dir = dir;
  {
    auto store = open_store(o);
    CHECK(store->n_records() == 3);
    CHECK(store->size_bytes() == 2 * (16 + kPageRecord) + (16 + 9));
    CHECK(get_ok(*store, key_n(1)) == record_n(1));
    CHECK(get_ok(*store, key_n(2)) == record_n(2));
    CHECK(get_ok(*store, key_n(3)) == std::string("new three"));
  }
  RawStore raw(dir);
  CHECK(raw.keys(RawStore::kDefault, "s").empty());
  // Key 3's stray legacy record went; 1 and 2 stay where they are.
  CHECK(raw.keys(RawStore::kDefault, "p") ==
        std::vector<std::string>{"p" + key_n(1).to_bytes(), "p" + key_n(2).to_bytes()});
}

TEST_CASE("disk layout: malformed \"meta\" entries are erased with their records", "[storage][rocksdb][layout]") {
  TempDir tmp("layout-bad");
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  {
    auto store = open_store(o);
    for (uint64_t n = 1; n <= 3; ++n) REQUIRE(store->put(key_n(n), record_n(n)).is_ok());
  }
  {
    RawStore raw(o.dir);
    raw.put(RawStore::kMeta, key_n(1).to_bytes(), "short");  // wrong size
    raw.put(RawStore::kMeta, key_n(2).to_bytes(), meta_value(uint64_t(kPageRecord), 2, 0, 0x80));  // unknown flag
    raw.put(RawStore::kMeta, "not a 16-byte key", meta_value(1, 1, 0, 0));
  }
  {
    auto store = open_store(o);
    CHECK(store->n_records() == 1);
    CHECK(store->size_bytes() == 16 + kPageRecord);
    CHECK_FALSE(get_ok(*store, key_n(1)).has_value());
    CHECK_FALSE(get_ok(*store, key_n(2)).has_value());
    CHECK(get_ok(*store, key_n(3)) == record_n(3));
  }
  RawStore raw(o.dir);
  CHECK(raw.keys(RawStore::kPages) == std::vector<std::string>{key_n(3).to_bytes()});
  CHECK(raw.keys(RawStore::kMeta) == std::vector<std::string>{key_n(3).to_bytes()});
}
