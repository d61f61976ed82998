// The engine over a disk tier that fails: started on a full disk it serves
// from memory, page writes resume by themselves when space returns, and a
// stop while the disk is full flushes without aborting.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "tests/engine/engine_test_util.h"
#include "tests/support/fault_fs.h"
#include "tests/support/log_capture.h"

using namespace larder;
using namespace larder::testing;

namespace {

// Options whose disk tier runs on `ffs`, with no disk reserve: these tests
// take the write-failure path, which a reserve would skip by not writing.
EngineOptions fault_options(const std::string& model, const TempDir& dir, const std::shared_ptr<FaultFs>& ffs) {
  EngineOptions o = options_for(model, dir.str());
  o.cache.disk.min_free_bytes = 0;
  o.open_tiers = tier_factory(hooks_for(ffs));
  return o;
}

// The long prompt with its second token replaced: another chain of page keys.
std::vector<int32_t> variant(int32_t second) {
  std::vector<int32_t> p = reference_prompt("long");
  p[1] = second;
  return p;
}

}  // namespace

TEST_CASE("with the disk reserve (the default min_free), pages are not written to a full disk at all",
          "[engine][faults]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  TempDir dir;
  auto ffs = std::make_shared<FaultFs>();
  EngineOptions o = options_for(model, dir.str());
  REQUIRE(o.cache.disk.min_free_bytes == int64_t(1) << 30);
  o.open_tiers = tier_factory(hooks_for(ffs));
  auto engine = make_engine(o);  // opened with room
  ffs->full = true;              // now GetFreeSpace says 0: below the reserve
  std::vector<int32_t> prompt = reference_prompt("long");
  Generated cold = generate(*engine, greedy_request(prompt, 4));
  REQUIRE(cold.final.finish == FinishReason::kLength);
  engine->flush_storage();
  CHECK(engine->stats().disk_writes_failed == 0);  // no write was tried
  const CacheReport report = engine->cache_report().value();
  int64_t skipped = -1;
  for (const auto& t : report.tiers) {
    if (t.name == "disk") skipped = t.puts_skipped;
  }
  CHECK(skipped == 18);  // (299 - 1) / 16 full pages
  Generated warm = generate(*engine, greedy_request(prompt, 4));
  CHECK(warm.final.cached_tokens == 298);  // served from memory meanwhile
}

TEST_CASE("engine started on a full disk serves from memory and writes pages once space returns",
          "[engine][faults]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  TempDir dir;
  auto ffs = std::make_shared<FaultFs>();
  EngineOptions o = fault_options(model, dir, ffs);
  ffs->full = true;
  std::vector<int32_t> prompt = reference_prompt("long");
  REQUIRE(prompt.size() == 299);  // (299 - 1) / 16 = 18 full pages
  {
    auto engine = make_engine(o);  // no error: the disk tier waits for space
    Generated cold = generate(*engine, greedy_request(prompt, 4));
    REQUIRE(cold.final.finish == FinishReason::kLength);
    engine->flush_storage();
    CHECK(engine->stats().disk_writes_failed == 18);
    Generated warm = generate(*engine, greedy_request(prompt, 4));
    CHECK(warm.final.cached_tokens == 298);  // from memory: 18 pages + 10 of the kept tail
    CHECK(warm.tokens == cold.tokens);

    ffs->full = false;
    // The store retries every 2 s or more: new pages keep coming until one
    // attempt finds room (60 s is only an upper bound).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int32_t second = 1;
    while (engine->stats().disk_recoveries == 0 && std::chrono::steady_clock::now() < deadline) {
      REQUIRE(generate(*engine, greedy_request(variant(++second), 1)).final.finish == FinishReason::kLength);
      engine->flush_storage();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    REQUIRE(engine->stats().disk_recoveries == 1);
    const int64_t failed = engine->stats().disk_writes_failed;
    REQUIRE(generate(*engine, greedy_request(variant(400), 1)).final.finish == FinishReason::kLength);
    engine->flush_storage();
    CHECK(engine->stats().disk_writes_failed == failed);
    // The 18 pages of the first prompt, whose spills failed while the disk
    // was full, are spilled again now that it takes writes, while the
    // engine runs (found in hostile testing: they never were, and a restart
    // lost them). A step after a put that worked retries them.
    const auto retry_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (engine->stats().pages_rewritten < failed && std::chrono::steady_clock::now() < retry_deadline) {
      REQUIRE(generate(*engine, greedy_request(variant(400), 1)).final.finish == FinishReason::kLength);
      engine->flush_storage();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // (each page whose write failed, those of the prompts the loop above
    // sent before the store came back too)
    CHECK(engine->stats().pages_rewritten == failed);
    CHECK(engine->stats().disk_writes_failed == failed);
  }
  // After a restart (plain file system) the pages written after the
  // recovery come back from disk, the first prompt's too.
  o.open_tiers = tier_factory();
  auto engine = make_engine(o);
  Generated again = generate(*engine, greedy_request(variant(400), 1));
  CHECK(again.final.cached_tokens == 288);
  CHECK(engine->stats().pages_restored_disk == 18);
  Generated first = generate(*engine, greedy_request(prompt, 1));
  CHECK(first.final.cached_tokens == 288);
  CHECK(engine->stats().pages_restored_disk == 36);
}

TEST_CASE("engine stop while the disk is full ends cleanly and keeps what was written",
          "[engine][faults]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  TempDir dir;
  auto ffs = std::make_shared<FaultFs>();
  EngineOptions o = fault_options(model, dir, ffs);
  {
    auto engine = make_engine(o);
    REQUIRE(generate(*engine, greedy_request(reference_prompt("long"), 1)).final.finish == FinishReason::kLength);
    engine->flush_storage();
    ffs->full = true;
    Generated g = generate(*engine, greedy_request(variant(7), 1));
    REQUIRE(g.final.finish == FinishReason::kLength);  // served, pages not written
    LogCapture cap;
    engine->stop();                                    // the flush fails: logged, no abort
    // The 18 spills failed, and again at the stop (the disk still full).
    CHECK(engine->stats().disk_writes_failed == 36);
    CHECK(engine->stats().pages_rewritten == 18);
    engine.reset();  // the tiers go: a warning counts the pages lost
    CHECK(cap.count("18 page(s) could not be written to disk before the stop") == 1);
  }
  ffs->full = false;
  auto engine = make_engine(o);
  CHECK(generate(*engine, greedy_request(reference_prompt("long"), 1)).final.cached_tokens == 288);
  // Nothing of variant(7)'s pages reached disk; only its first token (the
  // same BOS as long_prompt's resident page 0) is reused.
  CHECK(generate(*engine, greedy_request(variant(7), 1)).final.cached_tokens == 1);
}

// Found in hostile testing: pages whose spill failed on a full disk were
// never written, not even at a stop after space came back.
TEST_CASE("engine stop after the disk has room again writes the pages whose spill failed", "[engine][faults]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  TempDir dir;
  auto ffs = std::make_shared<FaultFs>();
  EngineOptions o = fault_options(model, dir, ffs);
  {
    auto engine = make_engine(o);
    ffs->full = true;
    REQUIRE(generate(*engine, greedy_request(reference_prompt("long"), 1)).final.finish == FinishReason::kLength);
    engine->flush_storage();
    CHECK(engine->stats().disk_writes_failed == 18);
    ffs->full = false;
    engine->stop();  // no request since: the stop writes them
    CHECK(engine->stats().pages_rewritten == 18);
  }
  auto engine = make_engine(o);
  CHECK(generate(*engine, greedy_request(reference_prompt("long"), 1)).final.cached_tokens == 288);
}

// Found in hostile testing: with the disk tier down at start (a read-only or
// full disk), the pins stored there were not applied when it came back, and a
// pin made meanwhile was lost at the next restart; later, that the daemon had
// to be used (a page write, an admin call) for either to happen, and that the
// pages of the pin made meanwhile were never written to disk.
TEST_CASE("pins stored on a disk that was down at start are applied when it returns, merged with new ones, "
          "and the new ones' pages written, with no request or admin call",
          "[engine][faults]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  TempDir dir;
  auto ffs = std::make_shared<FaultFs>();
  EngineOptions o = fault_options(model, dir, ffs);
  o.cache.device.budget_bytes = 80 * 20480;  // room for a full context and two pinned prefixes
  const std::vector<int32_t> a = reference_prompt("long"), b = variant(5);
  {
    auto engine = make_engine(o);
    REQUIRE(engine->pin(a, "").is_ok());
  }
  ffs->full = true;
  {
    auto engine = make_engine(o);  // the disk tier waits for space: a's pin is not read
    CHECK(engine->cache_report().value().pinned_prefixes == 0);
    REQUIRE(engine->pin(b, "").is_ok());  // neither its record nor its pages can be written now
    CHECK(engine->cache_report().value().pinned_prefixes == 1);
    engine->flush_storage();  // the spills of b's pages are queued: they fail (the disk is still full)
    CHECK(engine->stats().disk_writes_failed > 0);
    LogCapture cap;
    ffs->full = false;  // from here on, nothing calls the engine until the pin watch has run
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (cap.count("the disk tier is available again") == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    REQUIRE(cap.count("the disk tier is available again: 1 pinned prefix(es) stored there applied, 2 in all "
                      "written back") == 1);
    CHECK(engine->stats().disk_recoveries == 1);
    CacheReport r = engine->cache_report().value();
    CHECK(r.pinned_prefixes == 2);
    CHECK(r.pinned_pages == 36);
  }
  // After a restart both come back (the merged list was written), and b's
  // pages, computed while the disk was full, are restored from disk.
  o.open_tiers = tier_factory();
  auto engine = make_engine(o);
  CacheReport r = engine->cache_report().value();
  CHECK(r.pinned_prefixes == 2);
  CHECK(r.pinned_pages == 36);
  Generated again = generate(*engine, greedy_request(b, 1));
  CHECK(again.final.cached_tokens == 288);
  CHECK(engine->stats().pages_restored_disk == 18);
}

// Found in hostile testing: the stored pin list was lost when the disk tier
// came back under an admin call rather than under the pin watch: an evict
// of everything just after the return erased it unread, and a stop just
// after the return wrote the list but not the pinned pages; while the disk
// was down, an unpin of a stored pin said "not pinned".
TEST_CASE("pins across a disk tier's return: unpin while unread, evict and stop at the return",
          "[engine][faults]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  TempDir dir;
  auto ffs = std::make_shared<FaultFs>();
  EngineOptions o = fault_options(model, dir, ffs);
  o.cache.device.budget_bytes = 80 * 20480;  // room for a full context and two pinned prefixes
  const std::vector<int32_t> a = reference_prompt("long"), b = variant(5);
  {
    auto engine = make_engine(o);
    REQUIRE(engine->pin(a, "").is_ok());
  }
  ffs->full = true;
  {
    auto engine = make_engine(o);  // a's pin is stored but cannot be read
    Result<PinResult> un = engine->unpin(a, "");
    REQUIRE_FALSE(un.is_ok());
    CHECK(un.status().code() == StatusCode::kCancelled);  // a 503 "try again", not a 404
    CHECK_THAT(un.status().message(), Catch::Contains("not read yet"));
    ffs->full = false;
    engine->flush_storage();  // the disk tier reopens here, under no pin watch
    Result<EvictResult> ev = engine->evict(nullptr, "");
    REQUIRE(ev.is_ok());
    CHECK(engine->cache_report().value().pinned_prefixes == 1);
  }
  o.open_tiers = tier_factory();
  {
    auto engine = make_engine(o);
    CHECK(engine->cache_report().value().pinned_prefixes == 1);  // the evict kept the stored list
  }
  o.open_tiers = tier_factory(hooks_for(ffs));
  ffs->full = true;
  {
    auto engine = make_engine(o);
    REQUIRE(engine->pin(b, "").is_ok());  // b's pages and the list cannot be written now
    // a pinned again and unpinned while the stored list is unread: the
    // unpin would be undone by the merge (found in review), so it waits.
    REQUIRE(engine->pin(a, "").is_ok());
    CHECK(engine->unpin(a, "").status().code() == StatusCode::kCancelled);
    ffs->full = false;
  }  // stopped at once: the stop itself reopens the disk tier and writes both
  o.open_tiers = tier_factory();
  auto engine = make_engine(o);
  CacheReport r = engine->cache_report().value();
  CHECK(r.pinned_prefixes == 2);
  Generated again = generate(*engine, greedy_request(b, 1));
  CHECK(again.final.cached_tokens == 288);
  CHECK(engine->stats().pages_restored_disk == 18);
}

// Found in review: every reopen of the disk tier pinned again what the
// stored pin record listed, so a prefix unpinned while the disk was down
// came back pinned there (never evicted, and a second unpin said 404).
TEST_CASE("a prefix unpinned while the disk tier is faulted stays unpinned when it reopens", "[engine][faults]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  TempDir dir;
  auto ffs = std::make_shared<FaultFs>();
  EngineOptions o = fault_options(model, dir, ffs);
  o.cache.device.budget_bytes = 80 * 20480;
  const std::vector<int32_t> a = reference_prompt("long"), b = variant(5);
  auto engine = make_engine(o);
  REQUIRE(engine->pin(a, "").is_ok());
  ffs->full = true;
  REQUIRE(generate(*engine, greedy_request(b, 4)).final.finish == FinishReason::kLength);
  engine->flush_storage();  // b's pages cannot be written: the disk tier faults
  REQUIRE(engine->unpin(a, "").is_ok());  // the stored list was read at start
  ffs->full = false;
  engine->flush_storage();  // the disk tier reopens
  const auto disk_pinned = [&] {
    const CacheReport report = engine->cache_report().value();
    for (const CacheTierReport& t : report.tiers) {
      if (t.name == "disk") return t.pinned;
    }
    return int64_t(-1);
  };
  CHECK(disk_pinned() == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // the pin watch writes the list
  CHECK(disk_pinned() == 0);
  CHECK(engine->cache_report().value().pinned_prefixes == 0);
  CHECK(engine->unpin(a, "").status().code() == StatusCode::kNotFound);
}
