// Lazy grammars through the engine on the real stories260K model
// (GenerationRequest::grammar_triggers): the output is the model's free
// greedy text (reference.json's, which llama.cpp agrees with) up to the
// trigger, then only what the grammar allows. Expected texts are the
// reference continuation of "Once upon a time" cut by hand, plus the
// grammar's one sentence.
#include <regex>
#include <string>

#include <catch2/catch.hpp>

#include "engine/engine.h"
#include "tests/engine/engine_test_util.h"
#include "tests/grammar/grammar_test_util.h"
#include "tests/support/skip.h"

using namespace larder;
using namespace larder::testing;

namespace {

// reference.json: "Once upon a time" -> its greedy continuation (48 tokens).
const std::string kFree =
    ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. "
    "She wanted to play with it,";

GenerationRequest lazy(const std::vector<int32_t>& prompt, std::string_view gbnf, GrammarTriggers triggers) {
  GenerationRequest r = greedy_request(prompt, 48);
  r.grammar = compile(gbnf);
  r.grammar_triggers = std::move(triggers);
  return r;
}

GrammarTriggers anywhere(std::string text, bool after = false) {
  GrammarTriggers t;
  t.triggers = {{std::move(text), false, after}};
  return t;
}

}  // namespace

TEST_CASE("lazy grammar: free text up to the trigger, then the grammar's", "[engine][grammar]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto engine = make_engine(options_for(model, ""));
  const std::vector<int32_t> prompt = reference_prompt("once_upon");
  REQUIRE(generate(*engine, greedy_request(prompt, 48)).text == kFree);

  // The trigger's own text is the grammar's first.
  Generated out = generate(*engine, lazy(prompt, R"(root ::= "little dog named Rex.")", anywhere("little")));
  CHECK(out.text == ", there was a little dog named Rex.");
  CHECK(out.final.finish == FinishReason::kStop);  // nothing may follow the grammar's end

  // A marker trigger: the grammar starts after it.
  out = generate(*engine, lazy(prompt, R"(root ::= " a cat.")", anywhere("there was", /*after=*/true)));
  CHECK(out.text == ", there was a cat.");

  // An at-start trigger fires on the output's first bytes only.
  GrammarTriggers start;
  start.triggers = {{",", /*at_start=*/true, false}};
  CHECK(generate(*engine, lazy(prompt, R"(root ::= ", the end.")", start)).text == ", the end.");
  start.triggers = {{"there", /*at_start=*/true, false}};
  CHECK(generate(*engine, lazy(prompt, R"(root ::= "there")", start)).text == kFree);

  // No trigger in the output: free text all along.
  CHECK(generate(*engine, lazy(prompt, R"(root ::= "x")", anywhere("dragon"))).text == kFree);

  // A grammar that refuses the text that fired it is dropped.
  CHECK(generate(*engine, lazy(prompt, R"(root ::= "big")", anywhere("little"))).text == kFree);
}

TEST_CASE("lazy grammar: a reasoning block is not searched for triggers", "[engine][grammar]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto engine = make_engine(options_for(model, ""));
  const std::vector<int32_t> prompt = reference_prompt("once_upon");
  // The output starts inside a "block" that ends at "Lily.": "little" in it
  // does not fire; "play" after it does.
  GrammarTriggers t;
  t.triggers = {{"little", false, false}, {"play", false, false}};
  t.block_open = "<think>";
  t.block_close = "Lily.";
  t.starts_in_block = true;
  Generated out = generate(*engine, lazy(prompt, R"(root ::= ("little" | "play") " chess.")", t));
  CHECK(out.text == ", there was a little girl named Lily. She loved to play chess.");
  // Outside a block the first trigger fires.
  t.starts_in_block = false;
  out = generate(*engine, lazy(prompt, R"(root ::= ("little" | "play") " chess.")", t));
  CHECK(out.text == ", there was a little chess.");
}

TEST_CASE("lazy grammar: sampled outputs keep the grammar from the trigger on", "[engine][grammar]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto engine = make_engine(options_for(model, ""));
  const std::vector<int32_t> prompt = reference_prompt("once_upon");
  // Checked by std::regex, not by the grammar matcher.
  const std::regex after(R"(named [A-Z][a-z]{1,8}\.)");
  int fired = 0;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    GenerationRequest r = lazy(prompt, R"(root ::= "named " [A-Z] [a-z]{1,8} ".")", anywhere("named"));
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    r.max_tokens = 30;
    Generated out = generate(*engine, r);
    INFO("seed " << seed << ": '" << out.text << "'");
    const size_t at = out.text.find("named");
    if (at == std::string::npos) continue;
    ++fired;
    CHECK(std::regex_match(out.text.substr(at), after));
    CHECK(out.final.finish == FinishReason::kStop);
  }
  CHECK(fired >= 4);  // the story names its hero in most seeds
}

// Found in hostile testing: a token that brought the trigger with more text
// than the grammar allows (a "<tool_call>{" token) dropped the grammar for
// the rest of the answer, so later calls went unchecked.
TEST_CASE("lazy grammar: a firing the grammar refuses leaves that text free, and the next trigger fires",
          "[engine][grammar]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto engine = make_engine(options_for(model, ""));
  const std::vector<int32_t> prompt = reference_prompt("once_upon");
  // "a" first comes inside " was" (the grammar refuses "as"), then as " a".
  Generated out = generate(*engine, lazy(prompt, R"(root ::= "a cat.")", anywhere("a")));
  CHECK(out.text == ", there was a cat.");
  CHECK(out.final.finish == FinishReason::kStop);
}

// Found in hostile testing: tools under "auto" with a logit_bias that banned
// what a fired call needed next ended some sampled answers with a 400.
TEST_CASE("lazy grammar: with no token left to allow, the answer goes on unconstrained", "[engine][grammar]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto engine = make_engine(options_for(model, ""));
  const std::vector<int32_t> prompt = reference_prompt("once_upon");
  // After "little" the grammar allows only text starting with "Z", and
  // logit_bias bans every such token.
  std::vector<std::pair<int32_t, float>> ban_z;
  for (int32_t id = 0; id < 512; ++id) {
    if (engine->token_piece(id).starts_with("Z")) ban_z.push_back({id, -100.0f});
  }
  REQUIRE_FALSE(ban_z.empty());
  GenerationRequest r = lazy(prompt, R"(root ::= "littleZ")", anywhere("little"));
  r.logit_bias = ban_z;
  Generated out = generate(*engine, r);
  CHECK(out.final.finish == FinishReason::kLength);
  CHECK_FALSE(out.final.request_fault);
  CHECK(out.text == kFree);  // no banned token was the model's choice anyway
  // Not lazy, the same is a request fault (test_engine_grammar.cpp).
}
