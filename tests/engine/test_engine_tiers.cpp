// The tier chain under the real engine (stories260K, 20480-byte pages): a
// page evicted from the device pool moves to the host tier and comes back
// from it bit-exact; under write_back it reaches disk through the host.
#include <condition_variable>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <mutex>
#include <thread>

#include <catch2/catch.hpp>

#include "engine/engine.h"
#include "storage/memory_store.h"
#include "storage/page_record.h"
#include "storage/rocksdb_store.h"
#include "storage/tier_chain.h"
#include "storage/cache_sim.h"
#include "tests/engine/engine_test_util.h"
#include "tests/support/delegating_tier.h"
#include "tests/support/skip.h"

using namespace larder;
using namespace larder::testing;

namespace {

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

namespace {

// A tier whose reads block until the test opens the gate: a deliberately
// slow store, to show what the engine does while a restore is pending.
class GatedTier : public larder::testing::DelegatingTier {
 public:
  explicit GatedTier(std::shared_ptr<MemoryPageStore> inner) : DelegatingTier(std::move(inner), "disk") {}
  void open_gate() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool reader_waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_ > 0;
  }
  std::vector<std::optional<std::string>> get_batch(std::span<const PageKey> keys, int64_t timeout_ms) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++waiting_;
      cv_.wait(lock, [&] { return open_; });
      --waiting_;
    }
    return inner().get_batch(keys, timeout_ms);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int waiting_ = 0;
};

}  // namespace

TEST_CASE("other sequences decode while a restore from a slow tier is pending", "[engine][tiers]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> p = reference_prompt("long");
  const std::vector<int32_t> other(p.rbegin(), p.rend());
  MemoryStoreOptions mo;
  mo.budget_bytes = int64_t(64) << 20;
  std::shared_ptr<MemoryPageStore> store(MemoryPageStore::create(mo).value());

  EngineOptions o = options_for(model, "");
  Generated cold;
  {
    // A persistent stand-in for disk: the first engine spills p's 18 pages.
    o.open_tiers = [store](const CacheOptions& c, PinsAtOpen) -> Result<std::shared_ptr<TierChain>> {
      return std::make_shared<TierChain>(std::vector<TierSlot>{{store, true}}, TierChainOptions{c.write_through});
    };
    auto first = make_engine(o);
    cold = generate(*first, greedy_request(p, 4));
  }
  REQUIRE(store->stats().entries == 18);

  auto gated = std::make_shared<GatedTier>(store);
  o.open_tiers = [gated](const CacheOptions& c, PinsAtOpen) -> Result<std::shared_ptr<TierChain>> {
    return std::make_shared<TierChain>(std::vector<TierSlot>{{gated, true}}, TierChainOptions{c.write_through});
  };
  auto engine = make_engine(o);
  auto waiting = std::make_shared<CollectSink>();
  engine->submit(greedy_request(p, 4), waiting);  // its pages are behind the gate
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!gated->reader_waiting() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(gated->reader_waiting());
  // Another request runs to its end (60 tokens) while the read is stuck.
  Generated meanwhile = generate(*engine, greedy_request(other, 60));
  CHECK(meanwhile.final.finish == FinishReason::kLength);
  CHECK(meanwhile.tokens.size() == 60);
  CHECK(gated->reader_waiting());  // still pending: the engine never waited on it
  gated->open_gate();
  REQUIRE(waiting->wait());
  CHECK(waiting->final_.cached_tokens == 288);
  CHECK(same_bits(cold.final.prompt_logits, waiting->final_.prompt_logits));
  // Both requests looked their pages up (the other found none: no read
  // reached the gate for it); nothing was measured yet, so both restore.
  CHECK(engine->stats().chose_restore == 2);
  CHECK(engine->stats().chose_recompute == 0);
}

namespace {

// A tier that reports a measured read bandwidth of 1 MiB per 100 s.
class SlowStatsTier : public GatedTier {
 public:
  using GatedTier::GatedTier;
  TierStats stats() const override {
    TierStats t = GatedTier::stats();
    t.bytes_read = 1 << 20;
    t.read_seconds = 100;
    return t;
  }
};

}  // namespace

TEST_CASE("restore or recompute: pages on a tier slower than prefill are prefilled", "[engine][tiers]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> p = reference_prompt("long");
  const std::vector<int32_t> other(p.rbegin(), p.rend());
  MemoryStoreOptions mo;
  mo.budget_bytes = int64_t(64) << 20;
  std::shared_ptr<MemoryPageStore> store(MemoryPageStore::create(mo).value());
  EngineOptions o = options_for(model, "");
  Generated cold;
  {
    o.open_tiers = [store](const CacheOptions& c, PinsAtOpen) -> Result<std::shared_ptr<TierChain>> {
      return std::make_shared<TierChain>(std::vector<TierSlot>{{store, true}}, TierChainOptions{c.write_through});
    };
    cold = generate(*make_engine(o), greedy_request(p, 4));
  }
  auto slow = std::make_shared<SlowStatsTier>(store);
  slow->open_gate();
  o.open_tiers = [slow](const CacheOptions& c, PinsAtOpen) -> Result<std::shared_ptr<TierChain>> {
    return std::make_shared<TierChain>(std::vector<TierSlot>{{slow, true}}, TierChainOptions{c.write_through});
  };
  auto engine = make_engine(o);
  // A first prefill measures the prefill rate (its lookup finds nothing on
  // the tier and still counts as a decision to restore: no rate yet).
  REQUIRE(generate(*engine, greedy_request(other, 2)).final.finish == FinishReason::kLength);
  CHECK(engine->stats().chose_restore == 1);
  // 18 records of 20,620 bytes (68 + 8 header, 64 token ids, 20480 page
  // bytes) at 1 MiB / 100 s: ~35 s to restore, against
  // 288 positions at thousands per second: prefill wins.
  Generated g = generate(*engine, greedy_request(p, 4));
  CHECK(engine->stats().chose_recompute == 1);
  CHECK(g.final.cached_tokens == 0);
  CHECK(g.tokens == cold.tokens);
  // The admin report (/admin/cache, /metrics) carries both counts.
  const Result<CacheReport> rep = engine->cache_report();
  REQUIRE(rep.is_ok());
  CHECK(rep.value().chose_restore == 1);
  CHECK(rep.value().chose_recompute == 1);
}

TEST_CASE("the simulator replays a recorded trace to the hit rates the engine measured live", "[engine][tiers][cache_sim]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> p = reference_prompt("long");
  std::vector<int32_t> r(p.rbegin(), p.rend());
  // Seven prompts: three sharing a head (p's first 150, 200, 299 tokens) and
  // four of 150 tokens elsewhere.
  std::vector<std::vector<int32_t>> prompts = {
      {p.begin(), p.begin() + 150}, {p.begin(), p.begin() + 200}, p,
      {p.begin() + 40, p.begin() + 190}, {r.begin(), r.begin() + 150},
      {r.begin() + 60, r.begin() + 210}, {p.begin() + 100, p.begin() + 250}};
  TempDir dir;
  const std::string trace_path = dir.str() + "/trace.txt";
  EngineOptions o = options_for(model, dir.str() + "/store");
  o.cache.device.budget_bytes = 40 * kPageBytes;  // fewer pages than the working set
  o.cache.trace_file = trace_path;
  {
    auto engine = make_engine(o);
    std::mt19937 rng(7);
    for (int i = 0; i < 40; ++i) {
      const auto& prompt = prompts[rng() % prompts.size()];
      REQUIRE(generate(*engine, greedy_request(prompt, 3)).final.finish == FinishReason::kLength);
    }
  }  // the trace is complete once the engine is gone
  std::ifstream in(trace_path);
  REQUIRE(in.good());
  SimResult sim = simulate_trace(in, o.cache).value();
  INFO(format_sim_result(sim, true));
  CHECK(sim.requests == 40);
  REQUIRE(sim.pages_looked_up > 0);
  CHECK(sim.live_hits[2] > 0);  // the workload does restore from disk
  for (size_t tier : {0, 2}) {
    INFO("tier " << tier);
    CHECK(std::abs(sim.hit_rate(tier) - sim.live_hit_rate(tier)) <= 2.0);
  }
  CHECK(sim.live_hits[1] == 0);  // no host tier
}
