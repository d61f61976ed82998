// The scheduler in the real engine (stories260K): requests wait for pages
// instead of failing, and preempted sequences resume with the tokens they
// would have produced alone.
#include <catch2/catch.hpp>

#include "engine/engine.h"
#include "tests/engine/engine_test_util.h"
#include "tests/support/skip.h"

using namespace larder;
using namespace larder::testing;

namespace {

// 150 tokens of the "long" reference prompt, starting at `from`.
std::vector<int32_t> slice(const std::vector<int32_t>& all, size_t from) {
  return std::vector<int32_t>(all.begin() + long(from), all.begin() + long(from + 150));
}

}  // namespace

TEST_CASE("requests wait for KV pages instead of failing, and preempted ones resume bit-exact", "[engine][scheduler]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> all = reference_prompt("long");
  REQUIRE(all.size() == 299);
  const std::vector<std::vector<int32_t>> prompts = {slice(all, 0), slice(all, 49), slice(all, 98), slice(all, 149)};
  constexpr int kMaxTokens = 250;

  // Alone, each request has the whole pool.
  std::vector<std::vector<int32_t>> solo;
  {
    auto engine = make_engine(options_for(model, ""));
    for (const auto& p : prompts) {
      Generated g = generate(*engine, greedy_request(p, kMaxTokens));
      REQUIRE(g.final.finish == FinishReason::kLength);
      solo.push_back(g.tokens);
    }
  }

  // A pool of one context (512 / 16 + 1 = 33 pages of 20480 bytes). Each
  // request needs pages_for(150 + 250) = 25 pages at its end, four of them
  // 100: three are admitted at first (pages_for(151) = 10 each), the fourth
  // waits; as they decode the pool runs out and the youngest are preempted.
  EngineOptions small = options_for(model, "");
  small.cache.device.budget_bytes = 33 * 20480;
  small.max_running = 4;
  auto engine = make_engine(small);
  std::vector<std::shared_ptr<CollectSink>> sinks;
  for (const auto& p : prompts) {
    auto sink = std::make_shared<CollectSink>();
    engine->submit(greedy_request(p, kMaxTokens), sink);
    sinks.push_back(sink);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    INFO("request " << i);
    REQUIRE(sinks[i]->wait());
    CHECK(sinks[i]->final_.finish == FinishReason::kLength);
    CHECK(sinks[i]->final_.error.empty());
    CHECK(sinks[i]->final_.output_tokens == solo[i]);
    CHECK(sinks[i]->text_.size() > 0);
  }
  CHECK(engine->stats().preemptions > 0);
}
