// The engine's cache admin calls on the real test model (stories260K:
// 20480-byte pages of 16 tokens, a 512-token context, so one full context
// needs 512 / 16 + 1 = 33 device pages): the report's counters, pins that
// survive pressure on the device and on disk and a restart, admin
// eviction, and live budget and policy changes.
#include <algorithm>
#include <thread>

#include <filesystem>

#include <catch2/catch.hpp>

#include "engine/engine.h"
#include "storage/page_record.h"
#include "storage/rocksdb_store.h"
#include "tests/engine/engine_test_util.h"
#include "tests/support/skip.h"

using namespace larder;
using namespace larder::testing;

namespace {

constexpr int64_t kPageBytes = 20480;  // 5 layers * (K, V) 2 * 16 tokens * kv_dim 32 * 4 bytes
// The disk tier counts 16 key bytes + the record (header, 16 token ids, page).
constexpr int64_t kDiskPageBytes = 16 + int64_t(page_record_size(16, kPageBytes));
// The pin record of one prefix of 18 pages: magic 8 + count 4 + root 16 +
// key count 4 + 18 keys * 16 + checksum 8 = 328 bytes, + 16 key bytes.
constexpr int64_t kDiskPinRecordBytes = 16 + 328;

// a rotated left by n: every page differs from a's.
std::vector<int32_t> rotated(std::vector<int32_t> a, int n) {
  std::rotate(a.begin(), a.begin() + n, a.end());
  return a;
}

CacheReport report_of(Engine& e) {
  Result<CacheReport> r = e.cache_report();
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

const CacheTierReport& tier(const CacheReport& r, const std::string& name) {
  for (const CacheTierReport& t : r.tiers) {
    if (t.name == name) return t;
  }
  FAIL("no tier " << name);
  return r.tiers.front();
}

}  // namespace

TEST_CASE("cache report: device hits and misses, entries and bytes, tiers in order", "[engine][admin]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> a = reference_prompt("long");
  REQUIRE(a.size() == 299);  // (299 - 1) / 16 = 18 cacheable pages
  EngineOptions o = options_for(model, "");
  o.cache.device.budget_bytes = 40 * kPageBytes;
  o.cache.host.budget_bytes = 1 << 20;
  auto engine = make_engine(o);

  CacheReport r0 = report_of(*engine);
  REQUIRE(r0.tiers.size() == 2);
  CHECK(r0.tiers[0].name == "device");
  CHECK(r0.tiers[1].name == "host");
  CHECK(r0.tiers[0].budget_bytes == 40 * kPageBytes);
  CHECK(r0.pool_pages == 40);
  CHECK(r0.budget_pages == 40);
  CHECK(r0.page_size == 16);
  CHECK(r0.page_bytes == kPageBytes);

  REQUIRE(generate(*engine, greedy_request(a, 4)).final.finish == FinishReason::kLength);
  CacheReport r1 = report_of(*engine);
  const CacheTierReport& d1 = tier(r1, "device");
  CHECK(d1.hits == 0);
  CHECK(d1.misses == 18);
  // 299 + 3 fed tokens = 302 positions: 18 sealed pages and the partial
  // 19th (14 positions) stay cached.
  CHECK(d1.entries == 19);
  CHECK(d1.bytes_used == 19 * kPageBytes);
  CHECK(d1.policy == "lru");
  CHECK(r1.free_pages == 40);  // 21 free + 19 evictable
  CHECK(r1.queue_length == 0);
  CHECK(r1.running == 0);

  // All but the last prompt token: 18 pages, then 10 of the partial page.
  REQUIRE(generate(*engine, greedy_request(a, 4)).final.cached_tokens == 298);
  const CacheTierReport d2 = tier(report_of(*engine), "device");
  CHECK(d2.hits == 18);  // whole pages only
  CHECK(d2.misses == 18);
}

TEST_CASE("a pinned prefix stays through device and disk pressure and a restart", "[engine][admin]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> a = reference_prompt("long");
  TempDir dir;
  EngineOptions o = options_for(model, dir.str());
  // 52 pages: 33 for one full context, so up to 19 may be pinned.
  o.cache.device.budget_bytes = 52 * kPageBytes;
  {
    auto engine = make_engine(o);
    Result<PinResult> pin = engine->pin(a, "");
    INFO(pin.status().to_string());
    REQUIRE(pin.is_ok());
    CHECK(pin->n_pages == 18);  // 299 / 16 full pages
    CHECK(pin->n_tokens == 288);
    CHECK(pin->n_prompt_tokens == 299);
    CHECK(pin->n_cached_tokens == 0);
    CHECK(pin->changed);
    // Pinning again changes nothing, and finds it cached.
    Result<PinResult> again = engine->pin(a, "");
    REQUIRE(again.is_ok());
    CHECK_FALSE(again->changed);
    CHECK(again->n_cached_tokens == 298);  // 18 pages + 10 of the partial tail the pin left

    // Four other prompts of 19 pages each need more than the 52 - 18 = 34
    // unpinned pages: under lru a's pages, released first, would go first.
    for (int n = 1; n <= 4; ++n) {
      REQUIRE(generate(*engine, greedy_request(rotated(a, n), 4)).final.finish == FinishReason::kLength);
    }
    CacheReport r = report_of(*engine);
    CHECK(tier(r, "device").pinned == 18);
    CHECK(tier(r, "device").evictions[size_t(EvictReason::kBudget)] > 0);
    CHECK(tier(r, "disk").pinned == 19);  // a's 18 pages and the pin record
    CHECK(r.pinned_prefixes == 1);
    CHECK(r.pinned_pages == 18);
    const int64_t restored_before = engine->stats().pages_restored_disk;
    Generated warm = generate(*engine, greedy_request(a, 4));
    CHECK(warm.final.cached_tokens == 288);
    CHECK(engine->stats().pages_restored_disk == restored_before);  // all 18 from the device
  }
  // A restart: the pins are read back; a's pages come from disk.
  auto engine = make_engine(o);
  CacheReport r = report_of(*engine);
  CHECK(r.pinned_prefixes == 1);
  CHECK(r.pinned_pages == 18);
  CHECK(tier(r, "disk").pinned == 19);
  // 5 prompts of 18 pages and the pin record on disk; shrink it to just
  // the pinned records: every unpinned page goes.
  CHECK(tier(r, "disk").entries == 5 * 18 + 1);
  CacheOptions smaller = o.cache;
  smaller.disk.budget_bytes = 18 * kDiskPageBytes + kDiskPinRecordBytes;
  REQUIRE(engine->reconfigure(smaller).is_ok());
  r = report_of(*engine);
  CHECK(tier(r, "disk").entries == 19);
  CHECK(tier(r, "disk").bytes_used == 18 * kDiskPageBytes + kDiskPinRecordBytes);
  CHECK(tier(r, "disk").evictions[size_t(EvictReason::kBudget)] == 4 * 18);
  Generated warm = generate(*engine, greedy_request(a, 4));
  CHECK(warm.final.cached_tokens == 288);
  CHECK(engine->stats().pages_restored_disk == 18);
  CHECK(tier(report_of(*engine), "device").pinned == 18);  // pinned again once restored

  // Unpinned, they go like any other page.
  Result<PinResult> un = engine->unpin(a, "");
  REQUIRE(un.is_ok());
  CHECK(un->n_pages == 18);
  r = report_of(*engine);
  CHECK(r.pinned_prefixes == 0);
  CHECK(tier(r, "device").pinned == 0);
  CHECK(tier(r, "disk").pinned == 0);
  CHECK(engine->unpin(a, "").status().code() == StatusCode::kNotFound);
}

TEST_CASE("pin under write_back writes the pages to disk at once", "[engine][admin]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> a = reference_prompt("long");
  TempDir dir;
  EngineOptions o = options_for(model, dir.str());
  o.cache.write_through = false;
  o.cache.device.budget_bytes = 52 * kPageBytes;
  auto engine = make_engine(o);
  REQUIRE(generate(*engine, greedy_request(rotated(a, 1), 4)).final.finish == FinishReason::kLength);
  engine->flush_storage();
  CHECK(tier(report_of(*engine), "disk").entries == 0);  // write_back: on the device only
  REQUIRE(engine->pin(a, "").is_ok());
  CacheReport r = report_of(*engine);
  CHECK(tier(r, "disk").entries == 19);  // a's 18 pages and the pin record
  CHECK(tier(r, "disk").pinned == 19);
}

// Found in hostile testing: a store over its budget at open (lowered in
// the config, or left so by a kill -9) evicted before the pins were read,
// taking pinned pages and the pin record with it.
TEST_CASE("a disk tier over its budget at a restart keeps the pinned pages and their record", "[engine][admin]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> a = reference_prompt("long");
  TempDir dir;
  EngineOptions o = options_for(model, dir.str());
  o.cache.device.budget_bytes = 52 * kPageBytes;
  {
    auto engine = make_engine(o);
    REQUIRE(engine->pin(a, "").is_ok());
    for (int n = 1; n <= 4; ++n) {
      REQUIRE(generate(*engine, greedy_request(rotated(a, n), 4)).final.finish == FinishReason::kLength);
    }
  }  // stop writes every page: 5 x 18 and the pin record (the test above)
  // Lowered in the config: room for the pins and 10 more pages. The pinned
  // ones were spilled first, so lru alone would take them first.
  o.cache.disk.budget_bytes = 28 * kDiskPageBytes + kDiskPinRecordBytes;
  auto engine = make_engine(o);
  CacheReport r = report_of(*engine);
  CHECK(r.pinned_prefixes == 1);
  CHECK(r.pinned_pages == 18);
  CHECK(tier(r, "disk").pinned == 19);
  CHECK(tier(r, "disk").entries == 29);
  CHECK(tier(r, "disk").evictions[size_t(EvictReason::kBudget)] == 4 * 18 - 10);
  CHECK(generate(*engine, greedy_request(a, 4)).final.cached_tokens == 288);
  CHECK(engine->stats().pages_restored_disk == 18);
}

TEST_CASE("pins that cannot fit, and prompts that cannot be pinned, are refused", "[engine][admin]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> a = reference_prompt("long");
  EngineOptions o = options_for(model, "");
  o.cache.device.budget_bytes = 40 * kPageBytes;  // room for 40 - 33 = 7 pinned pages
  auto engine = make_engine(o);
  Result<PinResult> big = engine->pin(a, "");
  CHECK(big.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(big.status().message(), Catch::Contains("at most 7 may be pinned"));
  CHECK(report_of(*engine).pinned_prefixes == 0);

  const std::vector<int32_t> seven(a.begin(), a.begin() + 7 * 16 + 5);  // 7 full pages
  Result<PinResult> fits = engine->pin(seven, "");
  REQUIRE(fits.is_ok());
  CHECK(fits->n_pages == 7);
  // The same prompt under a salt is another prefix: no room left.
  CHECK(engine->pin(seven, "tenant-b").status().code() == StatusCode::kResourceExhausted);

  CHECK(engine->pin({}, "").status().code() == StatusCode::kInvalidArgument);
  const std::vector<int32_t> short_prompt(a.begin(), a.begin() + 15);  // no full page
  CHECK(engine->pin(short_prompt, "").status().code() == StatusCode::kInvalidArgument);
  std::vector<int32_t> too_long;
  while (too_long.size() < 600) too_long.insert(too_long.end(), a.begin(), a.end());
  too_long.resize(512);  // the context holds 512: no room for a generated token
  CHECK(engine->pin(too_long, "").status().code() == StatusCode::kOutOfRange);
  CHECK(engine->pin({1, 2, 100000}, "").status().code() == StatusCode::kInvalidArgument);
  CHECK(report_of(*engine).pinned_prefixes == 1);
}

// Found in hostile testing: pinned pages, never evicted, kept the disk
// tier past a smaller budget.
TEST_CASE("pins must fit the host and disk budgets, and a reload cannot shrink those below the pins",
          "[engine][admin]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> a = reference_prompt("long");  // 18 full pages
  TempDir dir;
  EngineOptions o = options_for(model, dir.str());
  o.cache.device.budget_bytes = 100 * kPageBytes;  // room for 67 pinned pages: not the limit here
  o.cache.disk.budget_bytes = 40 * kDiskPageBytes;
  {
    auto engine = make_engine(o);
    REQUIRE(engine->pin(a, "").is_ok());
    REQUIRE(engine->pin(rotated(a, 1), "").is_ok());  // 36 pinned pages
    Result<PinResult> third = engine->pin(rotated(a, 2), "");
    CHECK(third.status().code() == StatusCode::kResourceExhausted);
    CHECK_THAT(third.status().message(),
               Catch::Contains("54 pinned pages take " + std::to_string(54 * kDiskPageBytes) +
                               " bytes of the disk tier") &&
                   Catch::Contains("budget of " + std::to_string(40 * kDiskPageBytes)) &&
                   Catch::Contains("cache.disk.budget"));
    CacheReport r = report_of(*engine);
    CHECK(r.pinned_prefixes == 2);
    CHECK(r.pinned_pages == 36);

    CacheOptions smaller = o.cache;
    smaller.disk.budget_bytes = 35 * kDiskPageBytes;
    Status st = engine->reconfigure(smaller);
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(st.message(), Catch::Contains("36 pinned pages") && Catch::Contains("nothing was applied"));
    CHECK(tier(report_of(*engine), "disk").budget_bytes == 40 * kDiskPageBytes);
    CHECK(tier(report_of(*engine), "disk").pinned == 37);  // 36 pages and the pin record, all kept
    REQUIRE(engine->unpin(rotated(a, 1), "").is_ok());
    REQUIRE(engine->reconfigure(smaller).is_ok());  // 18 pinned pages fit 35
    CHECK(tier(report_of(*engine), "disk").budget_bytes == 35 * kDiskPageBytes);
  }
  // The host tier: an entry costs the record and 296 bytes of bookkeeping
  // (kHostEntryOverheadBytes): 1 MiB holds 50 pinned pages of 20,916 bytes
  // (a record of 76 header and checksum bytes, 16 token ids of 4 bytes and
  // the 20,480-byte page, then 296).
  EngineOptions h = options_for(model, "");
  h.cache.device.budget_bytes = 100 * kPageBytes;
  h.cache.host.budget_bytes = 1 << 20;
  auto engine = make_engine(h);
  const int64_t host_entry = int64_t(page_record_size(16, kPageBytes)) + 296;
  REQUIRE(host_entry == 20916);
  REQUIRE(engine->pin(a, "").is_ok());
  REQUIRE(engine->pin(rotated(a, 1), "").is_ok());
  Result<PinResult> third = engine->pin(rotated(a, 2), "");
  CHECK(third.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(third.status().message(),
             Catch::Contains(std::to_string(54 * host_entry) + " bytes of the host tier") &&
                 Catch::Contains("cache.host.budget"));
  // 14 pages of a shorter prompt fit (36 + 14 = 50); one more does not.
  const std::vector<int32_t> r3 = rotated(a, 3);
  CHECK(engine->pin(std::vector<int32_t>(r3.begin(), r3.begin() + 14 * 16 + 1), "").is_ok());
  CHECK(report_of(*engine).pinned_pages == 50);
  const std::vector<int32_t> r4 = rotated(a, 4);
  CHECK(engine->pin(std::vector<int32_t>(r4.begin(), r4.begin() + 16 + 1), "").status().code() ==
        StatusCode::kResourceExhausted);
}

TEST_CASE("admin eviction removes a prompt's pages, or everything, from every tier", "[engine][admin]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> a = reference_prompt("long");
  const std::vector<int32_t> b = rotated(a, 1);
  TempDir dir;
  auto engine = make_engine(options_for(model, dir.str()));
  REQUIRE(generate(*engine, greedy_request(a, 4)).final.finish == FinishReason::kLength);
  REQUIRE(generate(*engine, greedy_request(b, 4)).final.finish == FinishReason::kLength);

  Result<EvictResult> one = engine->evict(&a, "");
  REQUIRE(one.is_ok());
  REQUIRE(one->evicted.size() == 2);
  CHECK(one->evicted[0] == std::pair<std::string, int64_t>{"device", 19});  // 18 pages + the partial tail
  CHECK(one->evicted[1] == std::pair<std::string, int64_t>{"disk", 18});  // 299 / 16 keys, all on disk
  CHECK(one->active_skipped == 0);
  CHECK(generate(*engine, greedy_request(a, 4)).final.cached_tokens == 0);  // gone everywhere
  CHECK(generate(*engine, greedy_request(b, 4)).final.cached_tokens == 298);  // b untouched: 18 pages + 10

  Result<EvictResult> all = engine->evict(nullptr, "");
  REQUIRE(all.is_ok());
  // a's and b's 18 pages and partial tails (b's second run left the same
  // tail as its first: kept once).
  CHECK(all->evicted[0] == std::pair<std::string, int64_t>{"device", 38});
  CHECK(all->evicted[1] == std::pair<std::string, int64_t>{"disk", 36});
  CacheReport r = report_of(*engine);
  CHECK(tier(r, "device").entries == 0);
  CHECK(tier(r, "disk").entries == 0);
  CHECK(tier(r, "device").evictions[size_t(EvictReason::kAdmin)] == 19 + 38);
  CHECK(tier(r, "disk").evictions[size_t(EvictReason::kAdmin)] == 18 + 36);
  CHECK(tier(r, "device").evictions[size_t(EvictReason::kBudget)] == 0);
  CHECK(generate(*engine, greedy_request(b, 4)).final.cached_tokens == 0);
}

TEST_CASE("evicting everything keeps the pins and their record", "[engine][admin]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> a = reference_prompt("long");
  TempDir dir;
  EngineOptions o = options_for(model, dir.str());
  o.cache.device.budget_bytes = 52 * kPageBytes;
  {
    auto engine = make_engine(o);
    REQUIRE(engine->pin(a, "").is_ok());
    REQUIRE(engine->evict(nullptr, "").is_ok());
    CacheReport r = report_of(*engine);
    CHECK(tier(r, "disk").entries == 1);  // the pin record, written again
    CHECK(r.pinned_prefixes == 1);
  }
  auto engine = make_engine(o);
  CHECK(report_of(*engine).pinned_prefixes == 1);
}

TEST_CASE("reconfigure: the device budget shrinks at once, within limits; restart keys are refused",
          "[engine][admin]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> a = reference_prompt("long");
  const std::vector<int32_t> b = rotated(a, 1);
  EngineOptions o = options_for(model, "");  // memory only: what the device evicts is gone
  o.cache.device.budget_bytes = 64 * kPageBytes;
  auto engine = make_engine(o);
  REQUIRE(generate(*engine, greedy_request(a, 4)).final.finish == FinishReason::kLength);
  REQUIRE(generate(*engine, greedy_request(b, 4)).final.finish == FinishReason::kLength);
  // Each left 18 sealed pages and its partial tail page (299 + 4 - 1 = 302
  // positions: 18 pages + 14).
  CHECK(tier(report_of(*engine), "device").entries == 38);

  // 34 pages: 38 cached - 34 = 4 go at once, a's (released first), deepest
  // first (its partial tail, then its 18th, 17th and 16th pages).
  CacheOptions c = o.cache;
  c.device.budget_bytes = 34 * kPageBytes;
  REQUIRE(engine->reconfigure(c).is_ok());
  CacheReport r = report_of(*engine);
  const CacheTierReport& d = tier(r, "device");
  CHECK(d.budget_bytes == 34 * kPageBytes);
  CHECK(d.bytes_used == 34 * kPageBytes);
  CHECK(d.evictions[size_t(EvictReason::kBudget)] == 4);
  CHECK(r.budget_pages == 34);
  CHECK(r.pool_pages == 64);
  CHECK(generate(*engine, greedy_request(a, 4)).final.cached_tokens == 15 * 16);
  // a took 4 more pages at the limit (19 for 302 positions): b's partial
  // tail and its deepest three pages went. Held now: a's 18 and its partial
  // tail, b's 15.
  r = report_of(*engine);
  CHECK(tier(r, "device").entries == 34);
  CHECK(tier(r, "device").evictions[size_t(EvictReason::kBudget)] == 8);

  // Refused, with nothing applied: past the pool, below one full context,
  // and keys that need a restart.
  CacheOptions grow = c;
  grow.device.budget_bytes = 65 * kPageBytes;
  Status st = engine->reconfigure(grow);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(st.message(), Catch::Contains("cache.device.budget") && Catch::Contains("needs a restart"));
  CacheOptions tiny = c;
  tiny.device.budget_bytes = 32 * kPageBytes;
  st = engine->reconfigure(tiny);
  CHECK_THAT(st.message(), Catch::Contains("one full context") && Catch::Contains("need 33"));
  CacheOptions restart = c;
  restart.page_size = 32;
  restart.device.budget_bytes = 40 * kPageBytes;
  st = engine->reconfigure(restart);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(st.message(), Catch::Contains("cache.page_size changed (16 -> 32)"));
  CacheOptions host_on = c;
  host_on.host.budget_bytes = 1 << 20;
  CHECK_THAT(engine->reconfigure(host_on).message(), Catch::Contains("cache.host.budget"));
  CHECK(report_of(*engine).budget_pages == 34);

  // Growing back within the pool, and another policy.
  CacheOptions back = c;
  back.device.budget_bytes = 64 * kPageBytes;
  back.device.policy = "lfu";
  REQUIRE(engine->reconfigure(back).is_ok());
  r = report_of(*engine);
  CHECK(r.budget_pages == 64);
  CHECK(tier(r, "device").policy == "lfu");
  CHECK(tier(r, "device").entries == 34);  // nothing evicted by the swap or the growth
}

// Found in hostile testing: the same cache dir spelled otherwise in a
// reloaded config ("/c/", "/x/../c") was refused as a change of directory.
TEST_CASE("reconfigure: the disk dir spelled otherwise is no change; another dir needs a restart",
          "[engine][admin]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  TempDir dir;
  EngineOptions o = options_for(model, dir.str());
  auto engine = make_engine(o);
  const CacheOptions c = o.cache;
  const std::filesystem::path p(c.disk.dir);
  for (const std::string& same : {c.disk.dir + "/", c.disk.dir + "/./", (p / ".." / p.filename()).string()}) {
    CacheOptions spelled = c;
    spelled.disk.dir = same;
    INFO(same);
    CHECK(engine->reconfigure(spelled).is_ok());
  }
  CacheOptions moved = c;
  moved.disk.dir = c.disk.dir + "-elsewhere";
  CHECK_THAT(engine->reconfigure(moved).message(), Catch::Contains("cache.disk.dir changed"));
}

// Found by the second hostile pass of the draft model (it predates it):
// shrinking the device budget while requests ran failed some of them with
// "KV cache is full" where a daemon started that small only preempts.
TEST_CASE("reconfigure: a device budget shrunk under running requests preempts them, fails none",
          "[engine][admin]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> a = reference_prompt("long");
  EngineOptions o = options_for(model, "");
  o.cache.device.budget_bytes = 256 * kPageBytes;
  auto engine = make_engine(o);
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    std::vector<std::shared_ptr<CollectSink>> sinks;
    for (int i = 0; i < 8; ++i) {
      sinks.push_back(std::make_shared<CollectSink>());
      engine->submit(greedy_request(rotated(std::vector<int32_t>(a.begin(), a.begin() + 100), i + 8 * round), 150),
                     sinks.back());
    }
    CacheOptions c = o.cache;
    for (int k = 0; k < 6; ++k) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      c.device.budget_bytes = (k % 2 == 0 ? 34 : 256) * kPageBytes;
      REQUIRE(engine->reconfigure(c).is_ok());
    }
    c.device.budget_bytes = 34 * kPageBytes;
    REQUIRE(engine->reconfigure(c).is_ok());
    for (auto& s : sinks) {
      REQUIRE(s->wait());
      INFO(s->final_.error);
      CHECK(s->final_.finish == FinishReason::kLength);
    }
    c.device.budget_bytes = 256 * kPageBytes;
    REQUIRE(engine->reconfigure(c).is_ok());
  }
  CHECK(engine->stats().preemptions > 0);
}

// Found in hostile testing: with the disk tier not running (its directory
// locked by another store at start, on_error = memory_only), a reload that
// changed its budget, policy or ttl was reported as applied.
TEST_CASE("reconfigure: disk settings of a disk tier that is not running are refused", "[engine][admin]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  TempDir dir;
  RocksDbStoreOptions lock;
  lock.dir = dir.str();
  auto holder = RocksDbPageStore::open(lock);  // holds the LOCK: the engine's disk tier cannot open
  REQUIRE(holder.is_ok());
  EngineOptions o = options_for(model, dir.str());
  auto engine = make_engine(o);
  CHECK(report_of(*engine).tiers.size() == 1);  // the device only
  for (int what = 0; what < 3; ++what) {
    CacheOptions c = o.cache;
    if (what == 0) c.disk.budget_bytes /= 2;
    if (what == 1) c.disk.policy = "lfu";
    if (what == 2) c.disk.ttl_seconds = 60;
    Status st = engine->reconfigure(c);
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(st.message(), Catch::Contains("the disk tier is not running") && Catch::Contains("nothing was applied"));
  }
  CacheOptions device_only = o.cache;
  device_only.device.budget_bytes -= kPageBytes;
  CHECK(engine->reconfigure(device_only).is_ok());
}
