// Cache hits at token granularity (stories260K): a prompt whose pages are
// all cached recomputes only its last token, and one that diverges inside a
// page reuses that page's matching tokens; the output stays bit-identical
// to a cold prefill.
#include <cstring>

#include <catch2/catch.hpp>

#include "engine/engine.h"
#include "tests/engine/engine_test_util.h"
#include "tests/support/skip.h"

using namespace larder;
using namespace larder::testing;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && !a.empty() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

Generated cold_run(const std::string& model, const std::vector<int32_t>& prompt, int max_tokens) {
  auto engine = make_engine(options_for(model, ""));
  return generate(*engine, greedy_request(prompt, max_tokens));
}

}  // namespace

TEST_CASE("a prompt whose every page is cached prefills only its last token", "[engine][partial]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  std::vector<int32_t> prompt = reference_prompt("long");
  REQUIRE(prompt.size() == 299);
  // 320 tokens: 20 full pages. (320 - 1) / 16 = 19 of them count as whole
  // pages for a hit; page 19 (tokens 304..319) is sealed by the first run
  // and then gives its first 15 tokens, so 319 are cached: all but the last.
  for (int i = 0; i < 21; ++i) prompt.push_back(prompt[size_t(i) + 1]);
  REQUIRE(prompt.size() == 320);
  const Generated cold = cold_run(model, prompt, 6);

  auto engine = make_engine(options_for(model, ""));
  Generated first = generate(*engine, greedy_request(prompt, 6));
  Generated again = generate(*engine, greedy_request(prompt, 6));
  CHECK(first.final.cached_tokens == 0);
  CHECK(again.final.cached_tokens == 319);
  CHECK(same_bits(cold.final.prompt_logits, again.final.prompt_logits));
  CHECK(again.tokens == cold.tokens);
}

TEST_CASE("a prompt that diverges inside a page reuses the page's matching tokens bit-exact", "[engine][partial]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> prompt = reference_prompt("long");
  for (int edit_at : {100, 111, 112, 5}) {
    INFO("edit at " << edit_at);
    std::vector<int32_t> edited = prompt;
    edited[size_t(edit_at)] = edited[size_t(edit_at)] == 300 ? 301 : 300;
    const Generated cold = cold_run(model, edited, 5);

    auto engine = make_engine(options_for(model, ""));
    REQUIRE(generate(*engine, greedy_request(prompt, 2)).final.finish == FinishReason::kLength);
    Generated warm = generate(*engine, greedy_request(edited, 5));
    // Everything before the edit is reused: whole pages up to the edit's
    // page, then that page's tokens before the edit (100 -> pages 0..5 + 4
    // tokens; 111 -> 6 pages + 15; 112 -> exactly 7 pages; 5 -> 5 tokens of
    // page 0).
    CHECK(warm.final.cached_tokens == edit_at);
    CHECK(same_bits(cold.final.prompt_logits, warm.final.prompt_logits));
    CHECK(warm.tokens == cold.tokens);
  }
}

TEST_CASE("a returning chat reuses the partial tail page its last turn left, bit-exact", "[engine][partial]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> prompt = reference_prompt("long");
  REQUIRE(prompt.size() == 299);
  auto engine = make_engine(options_for(model, ""));
  // Turn 1: 299 prompt tokens + 12 generated. The last generated token is
  // never fed, so 299 + 11 = 310 positions hold K/V: 19 sealed pages (304
  // tokens) and a partial tail of 6 (positions 304..309).
  Generated first = generate(*engine, greedy_request(prompt, 12));
  REQUIRE(first.tokens.size() == 12);
  // Turn 2: the whole first turn, its answer and 20 more tokens.
  std::vector<int32_t> turn2 = prompt;
  turn2.insert(turn2.end(), first.tokens.begin(), first.tokens.end());
  for (int i = 0; i < 20; ++i) turn2.push_back(prompt[size_t(40 + i)]);
  REQUIRE(turn2.size() == 331);
  const Generated cold = cold_run(model, turn2, 5);
  Generated warm = generate(*engine, greedy_request(turn2, 5));
  // 304 from whole pages + the 6 positions of the kept tail page.
  CHECK(warm.final.cached_tokens == 310);
  CHECK(same_bits(cold.final.prompt_logits, warm.final.prompt_logits));
  CHECK(warm.tokens == cold.tokens);

  // The same prompt again: its tail (331 - 1 = 330 positions: 20 pages + 10)
  // is the kept page of turn 2, so all but the last token are cached.
  Generated third = generate(*engine, greedy_request(turn2, 5));
  CHECK(third.final.cached_tokens == 330);
  CHECK(same_bits(cold.final.prompt_logits, third.final.prompt_logits));
}

// Seen by a new user: a resent 20-token prompt had 16 tokens cached, not
// 19, and 72 had 64: commit() took the parent key by reference into the key
// vector it then grew, so pages 1, 2, 4, 8, ... were filed under a freed
// key and partial reuse could not find them.
TEST_CASE("a resent prompt of any length has all but its last token cached", "[engine][partial]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> base = reference_prompt("long");
  auto engine = make_engine(options_for(model, ""));
  for (int n = 17; n <= 140; n += 3) {
    INFO("prompt of " << n << " tokens");
    // A distinct first token per length, so earlier lengths share nothing.
    std::vector<int32_t> prompt(base.begin(), base.begin() + n);
    prompt[0] = 3 + n;
    REQUIRE(generate(*engine, greedy_request(prompt, 1)).final.cached_tokens == 0);
    CHECK(generate(*engine, greedy_request(prompt, 1)).final.cached_tokens == n - 1);
  }
}
