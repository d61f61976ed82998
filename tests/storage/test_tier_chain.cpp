// TierChain over two in-memory tiers: a "host" one and one standing for disk
// (marked persistent). Expected contents and orders are worked out by hand.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <catch2/catch.hpp>

#include "storage/memory_store.h"
#include "storage/tier_chain.h"
#include "tests/support/delegating_tier.h"

using namespace larder;

namespace {

PageKey key(uint64_t n) { return PageKey{n, n ^ 0xabcdefull}; }

std::shared_ptr<MemoryPageStore> tier(int64_t budget) {
  MemoryStoreOptions o;
  o.budget_bytes = budget;
  return std::shared_ptr<MemoryPageStore>(MemoryPageStore::create(o).value());
}

bool holds(PageTier& t, uint64_t k) {
  PageKey key_k = key(k);
  return t.contains_batch(std::span<const PageKey>(&key_k, 1))[0];
}

// lookup_prefix_async, waited for.
std::vector<TierChain::Found> lookup(TierChain& chain, std::vector<PageKey> keys) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::vector<TierChain::Found> out;
  chain.lookup_prefix_async(std::move(keys), [&](std::vector<TierChain::Found> found) {
    std::lock_guard<std::mutex> lock(mu);
    out = std::move(found);
    done = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  REQUIRE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return done; }));
  return out;
}

// A tier whose reads of one key fail (a lost node): it says it holds the
// key but get_batch returns nothing for it.
class FlakyTier : public larder::testing::DelegatingTier {
 public:
  FlakyTier(std::shared_ptr<MemoryPageStore> inner, PageKey bad) : DelegatingTier(std::move(inner), "remote"), bad_(bad) {}
  std::vector<std::optional<std::string>> get_batch(std::span<const PageKey> keys, int64_t timeout_ms) override {
    auto out = inner().get_batch(keys, timeout_ms);
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == bad_) out[i].reset();
    }
    return out;
  }

 private:
  PageKey bad_;
};

}  // namespace

TEST_CASE("lookup reads each key from the fastest tier holding it and stops at the first miss", "[tier_chain]") {
  auto host = tier(1 << 20), disk = tier(1 << 20);
  // host: k0, k2; disk: k1, k2 (older copy), k3. k4 nowhere, k5 on disk.
  REQUIRE(host->put(key(0), "h0").is_ok());
  REQUIRE(host->put(key(2), "h2").is_ok());
  REQUIRE(disk->put(key(1), "d1").is_ok());
  REQUIRE(disk->put(key(2), "d2").is_ok());
  REQUIRE(disk->put(key(3), "d3").is_ok());
  REQUIRE(disk->put(key(5), "d5").is_ok());
  TierChain chain({{host, false}, {disk, true}}, TierChainOptions{});
  auto found = lookup(chain, {key(0), key(1), key(2), key(3), key(4), key(5)});
  // k0 host, k1 disk, k2 host (fastest), k3 disk; k4 ends the prefix.
  REQUIRE(found.size() == 4);
  CHECK(found[0].record == "h0");
  CHECK(found[0].tier == 0);
  CHECK(found[1].record == "d1");
  CHECK(found[1].tier == 1);
  CHECK(found[2].record == "h2");
  CHECK(found[2].tier == 0);
  CHECK(found[3].record == "d3");
  CHECK(lookup(chain, {key(4), key(0)}).empty());
}

TEST_CASE("a failed read ends the prefix: a lost node costs hits only", "[tier_chain]") {
  auto inner = tier(1 << 20);
  for (uint64_t k = 0; k < 4; ++k) REQUIRE(inner->put(key(k), std::string(1, 'r').append(std::to_string(k))).is_ok());
  auto flaky = std::make_shared<FlakyTier>(inner, key(2));
  TierChain chain({{flaky, true}}, TierChainOptions{});
  auto found = lookup(chain, {key(0), key(1), key(2), key(3)});
  REQUIRE(found.size() == 2);  // k0, k1; the failed k2 ends it
  CHECK(found[1].record == "r1");
}

TEST_CASE("write_through: sealed pages go to the persistent tiers, demoted ones to the host, host evictions are dropped",
          "[tier_chain]") {
  // Host budget for exactly 2 records of 4 bytes: 2 * (4 + 296) = 600.
  auto host = tier(600), disk = tier(1 << 20);
  {
    TierChain chain({{host, false}, {disk, true}}, TierChainOptions{/*write_through=*/true});
    CHECK(chain.spill_sealed(key(1), "rec1"));
    chain.demote(key(1), "rec1", /*persisted=*/true);
    chain.demote(key(2), "rec2", true);
    chain.demote(key(3), "rec3", true);  // host over budget: evicts k1 (lru), dropped
    chain.flush();
    CHECK(holds(*disk, 1));
    CHECK_FALSE(holds(*disk, 2));  // never spilled: write_through spills at seal only
    CHECK_FALSE(holds(*host, 1));
    CHECK(holds(*host, 2));
    CHECK(holds(*host, 3));
    CHECK(host->stats().evictions[size_t(EvictReason::kBudget)] == 1);
  }
  CHECK_FALSE(holds(*disk, 3));  // nothing more at shutdown
}

TEST_CASE("write_back: host evictions move down to disk, and what the host still holds is written at shutdown",
          "[tier_chain]") {
  auto host = tier(600), disk = tier(1 << 20);
  {
    TierChain chain({{host, false}, {disk, true}}, TierChainOptions{/*write_through=*/false});
    CHECK_FALSE(chain.spill_sealed(key(1), "rec1"));  // write_back: nothing at seal
    chain.demote(key(1), "rec1", /*persisted=*/false);
    chain.demote(key(2), "rec2", false);
    chain.flush();
    CHECK_FALSE(holds(*disk, 1));
    chain.demote(key(3), "rec3", false);  // host evicts k1 -> disk
    chain.flush();
    CHECK(holds(*disk, 1));
    CHECK_FALSE(holds(*disk, 2));
    CHECK_FALSE(holds(*disk, 3));
    // A page already on disk is not written again when the host evicts it.
    chain.demote(key(4), "rec4", /*persisted=*/true);  // evicts k2 -> disk
    chain.flush();
    CHECK(holds(*disk, 2));
    CHECK(disk->stats().bytes_written == 8);  // rec1 + rec2
  }
  // Shutdown drained the host's unwritten k3 (k4 was on disk already).
  CHECK(holds(*disk, 3));
  CHECK_FALSE(holds(*disk, 4));
  CHECK(disk->get(key(3)).value() == std::optional<std::string>("rec3"));
}

TEST_CASE("without a host tier, write_back demotion writes straight to disk", "[tier_chain]") {
  auto disk = tier(1 << 20);
  TierChain chain({{disk, true}}, TierChainOptions{/*write_through=*/false});
  chain.demote(key(7), "rec7", false);
  chain.demote(key(8), "rec8", true);  // already there: nothing
  chain.flush();
  CHECK(holds(*disk, 7));
  CHECK_FALSE(holds(*disk, 8));
  CHECK(chain.get_now(key(7)) == std::optional<std::string>("rec7"));
  chain.erase(key(7));
  chain.flush();
  CHECK_FALSE(chain.get_now(key(7)));
}

namespace {

// A persistent tier whose puts fail while `full` is set (a full disk).
class FullTier : public larder::testing::DelegatingTier {
 public:
  explicit FullTier(std::shared_ptr<MemoryPageStore> inner) : DelegatingTier(std::move(inner), "disk") {}
  Status put(const PageKey& key, std::string_view record) override {
    if (full) return Status::io_error("disk full");
    return inner().put(key, record);
  }
  std::atomic<bool> full{false};
};

}  // namespace

TEST_CASE("lost writes: a failed persistent put is remembered until one works, handed out once the tier takes writes",
          "[tier_chain]") {
  auto disk = std::make_shared<FullTier>(tier(1 << 20));
  TierChainOptions o;
  o.retry_interval_ms = 0;
  TierChain chain({{disk, true}}, o);
  disk->full = true;
  chain.put_persistent(key(1), "one");
  chain.put_persistent(key(2), "two");
  chain.flush();
  CHECK(chain.write_lost(key(1)));
  CHECK(chain.write_lost(key(2)));
  CHECK_FALSE(chain.write_lost(key(3)));
  CHECK(chain.take_lost_writes(10).empty());  // nothing has worked since: not yet
  // Key 1 written again by hand: no longer lost, and a put worked.
  disk->full = false;
  chain.put_persistent(key(1), "one");
  chain.flush();
  CHECK_FALSE(chain.write_lost(key(1)));
  std::vector<PageKey> again = chain.take_lost_writes(10);
  REQUIRE(again.size() == 1);
  CHECK(again[0] == key(2));
  CHECK_FALSE(chain.write_lost(key(2)));  // handed out: the caller writes it
  CHECK(chain.take_lost_writes(10).empty());
  // An erase forgets a lost key.
  disk->full = true;
  chain.put_persistent(key(4), "four");
  chain.flush();
  CHECK(chain.write_lost(key(4)));
  chain.erase(key(4));
  chain.flush();
  CHECK_FALSE(chain.write_lost(key(4)));
}

TEST_CASE("lost writes are handed out at most max at a time and once per retry interval", "[tier_chain]") {
  auto disk = std::make_shared<FullTier>(tier(1 << 20));
  TierChainOptions o;
  o.retry_interval_ms = 60000;
  TierChain chain({{disk, true}}, o);
  disk->full = true;
  for (uint64_t n = 1; n <= 5; ++n) chain.put_persistent(key(n), "x");
  chain.flush();
  disk->full = false;
  chain.put_persistent(key(9), "nine");
  chain.flush();
  CHECK(chain.take_lost_writes(3).size() == 3);
  chain.put_persistent(key(10), "ten");  // a put works again, but the interval has not passed
  chain.flush();
  CHECK(chain.take_lost_writes(3).empty());
  CHECK(chain.write_lost(key(1)) + chain.write_lost(key(2)) + chain.write_lost(key(3)) + chain.write_lost(key(4)) +
            chain.write_lost(key(5)) == 2);
}
