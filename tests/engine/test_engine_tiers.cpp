// The tier chain under the real engine (stories260K, 20480-byte pages): a
// page evicted from the device pool moves to the host tier and comes back
// from it bit-exact; under write_back it reaches disk through the host.
#include <cstring>

#include <catch2/catch.hpp>

#include "engine/engine.h"
#include "storage/memory_store.h"
#include "storage/page_record.h"
#include "storage/rocksdb_store.h"
#include "tests/engine/engine_test_util.h"
#include "tests/support/skip.h"

using namespace larder;
using namespace larder::testing;

namespace {

std::vector<int32_t> reference_prompt(const std::string& name) {
  const nlohmann::json ref = load_reference();
  for (const auto& c : ref["cases"]) {
    if (c["name"] == name) return c["prompt_tokens"].get<std::vector<int32_t>>();
  }
  return {};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && !a.empty() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

constexpr int64_t kPageBytes = 20480;  // 5 layers * (K, V) 2 * 16 tokens * kv_dim 32 * 4 bytes
// A page record: its header, 16 token ids and the page bytes.
constexpr int64_t kRecordBytes = int64_t(page_record_size(16, kPageBytes));

}  // namespace

TEST_CASE("pages evicted from the device go to the host tier and restore bit-exact", "[engine][tiers]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> a = reference_prompt("long");
  REQUIRE(a.size() == 299);  // (299 - 1) / 16 = 18 cacheable pages
  std::vector<int32_t> b(a.rbegin(), a.rend());

  EngineOptions o = options_for(model, "");  // no disk tier
  o.cache.device.budget_bytes = 33 * kPageBytes;          // one context: 512 / 16 + 1
  o.cache.host.budget_bytes = 40 * (kRecordBytes + kHostEntryOverheadBytes);  // 40 records
  o.open_tiers = tier_factory();
  auto engine = make_engine(o);

  Generated cold = generate(*engine, greedy_request(a, 4));
  REQUIRE(cold.final.finish == FinishReason::kLength);
  // a computed 299 + 3 fed tokens = 302 positions: 19 pages, 18 sealed
  // (cached) and the partial one freed, so 33 - 18 = 15 are free. b takes 19
  // pages: the 15 free and 4 of a's, evicted least recently used first (the
  // tail: a's pages were released at one tick, deepest first).
  REQUIRE(generate(*engine, greedy_request(b, 4)).final.finish == FinishReason::kLength);
  engine->flush_storage();
  const int64_t restored_before = engine->stats().pages_restored_disk;
  Generated warm = generate(*engine, greedy_request(a, 4));
  CHECK(warm.final.cached_tokens == 288);  // all 18 pages: device + host
  CHECK(engine->stats().pages_restored_disk - restored_before == 4);
  CHECK(warm.tokens == cold.tokens);
  CHECK(same_bits(cold.final.prompt_logits, warm.final.prompt_logits));
}

TEST_CASE("write_back with a host tier: pages reach disk through the host, and at shutdown", "[engine][tiers]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> a = reference_prompt("long");
  std::vector<int32_t> b(a.rbegin(), a.rend());
  TempDir dir;
  EngineOptions o = options_for(model, dir.str());
  o.cache.write_through = false;
  o.cache.device.budget_bytes = 33 * kPageBytes;
  o.cache.host.budget_bytes = 4 * (kRecordBytes + kHostEntryOverheadBytes);  // 4 records
  Generated cold;
  {
    auto engine = make_engine(o);
    cold = generate(*engine, greedy_request(a, 4));
    REQUIRE(generate(*engine, greedy_request(b, 4)).final.finish == FinishReason::kLength);
    engine->flush_storage();
    engine->stop();  // what the device and the host hold goes down to disk
  }
  {
    // Every page of a (18) and of b (302 computed -> 18) is on disk now.
    auto store = RocksDbPageStore::open(RocksDbStoreOptions{dir.str()}).value();
    CHECK(store->n_records() == 36);
  }
  auto engine = make_engine(o);
  Generated warm = generate(*engine, greedy_request(a, 4));
  CHECK(warm.final.cached_tokens == 288);
  CHECK(same_bits(cold.final.prompt_logits, warm.final.prompt_logits));
}

TEST_CASE("a disk tier another daemon holds: memory_only serves without it, fail refuses to start", "[engine][tiers]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> a = reference_prompt("long");
  TempDir dir;
  EngineOptions o = options_for(model, dir.str());
  auto first = make_engine(o);  // holds the directory's LOCK

  o.cache.disk.on_error = DiskOnError::kFail;
  auto refused = Engine::create(o);
  REQUIRE_FALSE(refused.is_ok());
  CHECK_THAT(refused.status().message(), Catch::Contains("in use by another process") &&
                                             Catch::Contains("cache.disk.on_error"));

  o.cache.disk.on_error = DiskOnError::kMemoryOnly;
  auto second = make_engine(o);
  Generated g = generate(*second, greedy_request(a, 2));
  CHECK(g.final.finish == FinishReason::kLength);
  second->flush_storage();
  CHECK(second->stats().pages_written == 0);  // no disk tier: nothing spilled
  // The first engine's tier is untouched and still works.
  Generated h = generate(*first, greedy_request(a, 2));
  first->flush_storage();
  CHECK(first->stats().pages_written == 18);
}
