// tool_choice "auto": the request the router hands the engine carries the
// tool calls' grammar, lazy (engine GenerationRequest::grammar_triggers),
// so that a call the model opens is kept inside the tools' schemas; the
// engine side is tested on the real model in
// tests/engine/test_engine_lazy_grammar.cpp. Calls are written by hand.
#include <catch2/catch.hpp>

#include "tests/api/test_client.h"
#include "tests/grammar/grammar_test_util.h"

using nlohmann::json;
using namespace larder;
using namespace larder::testing;

namespace {

const std::string kTools =
    R"([{"type":"function","function":{"name":"get_weather",)"
    R"("parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])";

std::string chat_body(const std::string& extra) {
  return R"({"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":)" + kTools + extra + "}";
}

// The request the engine got for `body` (answered 200).
GenerationRequest sent(TestServer& ts, const std::string& body) {
  auto r = http(ts.port(), "POST", "/v1/chat/completions", body);
  REQUIRE(r);
  INFO(r->body);
  REQUIRE(r->status == 200);
  REQUIRE_FALSE(ts.fake().requests().empty());
  return ts.fake().requests().back();
}

}  // namespace

TEST_CASE("tool_choice auto: a Hermes call the model opens is held to the tools' schemas", "[api][tools]") {
  TestServer ts;
  ts.fake().set_n_ctx(4096);
  GenerationRequest req = sent(ts, chat_body(""));
  REQUIRE(req.grammar);
  REQUIRE(req.grammar_triggers.triggers.size() == 1);
  CHECK(req.grammar_triggers.triggers[0].text == "<tool_call>");
  CHECK_FALSE(req.grammar_triggers.triggers[0].at_start);
  CHECK(req.grammar_triggers.block_open.empty());  // the fake has no reasoning syntax
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  CHECK(accepts(*req.grammar, call));
  CHECK(accepts(*req.grammar, call + "\n" + call));  // parallel_tool_calls defaults to true
  CHECK_FALSE(accepts(*req.grammar, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
  CHECK_FALSE(accepts(*req.grammar, "<tool_call>\n{\"name\": \"rm\", \"arguments\": {}}\n</tool_call>"));
  // The same tools again: the same compiled grammar (agents resend them every turn).
  CHECK(sent(ts, chat_body("")).grammar == req.grammar);
  // parallel_tool_calls false: one call.
  req = sent(ts, chat_body(R"(,"parallel_tool_calls":false)"));
  REQUIRE(req.grammar);
  CHECK(accepts(*req.grammar, call));
  CHECK_FALSE(accepts(*req.grammar, call + "\n" + call));
}

TEST_CASE("tool_choice auto: triggers by syntax, and where nothing is constrained", "[api][tools]") {
  TestServer ts;
  ts.fake().set_n_ctx(4096);
  // Llama 3: a bare call opening the answer.
  ts.fake().set_tool_call_syntax(ToolCallSyntax::kLlama3Json);
  GenerationRequest req = sent(ts, chat_body(""));
  REQUIRE(req.grammar);
  REQUIRE_FALSE(req.grammar_triggers.triggers.empty());
  for (const GrammarTrigger& t : req.grammar_triggers.triggers) CHECK(t.at_start);
  CHECK(req.grammar_triggers.triggers[0].text == "{\"name\"");
  CHECK(accepts(*req.grammar, R"({"name": "get_weather", "parameters": {"city": "Oslo"}})"));
  // Mistral: after its [TOOL_CALLS] marker.
  ts.fake().set_tool_call_syntax(ToolCallSyntax::kMistral);
  req = sent(ts, chat_body(""));
  REQUIRE(req.grammar);
  CHECK(req.grammar_triggers.triggers[0].text == "[TOOL_CALLS]");
  CHECK(req.grammar_triggers.triggers[0].grammar_after);
  CHECK(req.grammar_triggers.triggers[0].at_start);  // where the parser takes the tag
  CHECK(accepts(*req.grammar, R"([{"name": "get_weather", "arguments": {"city": "Oslo"}}])"));
  // A reasoning model: the thinking is not searched for calls, and is still
  // split off (the grammar is lazy, not over the whole answer).
  ts.fake().set_tool_call_syntax(ToolCallSyntax::kHermes);
  ts.fake().set_reasoning(ReasoningSyntax::kThinkTags, /*opens=*/true);
  req = sent(ts, chat_body(""));
  REQUIRE(req.grammar);
  CHECK(req.grammar_triggers.block_open == "<think>");
  CHECK(req.grammar_triggers.block_close == "</think>");
  CHECK(req.grammar_triggers.starts_in_block);
  FakeScript think;
  think.pieces = {"I should call it.</think>", "Checking."};
  ts.fake().set_script(think);
  auto r = http(ts.port(), "POST", "/v1/chat/completions", chat_body(""));
  REQUIRE(r);
  CHECK(r->json()["choices"][0]["message"]["reasoning_content"] == "I should call it.");
  CHECK(r->json()["choices"][0]["message"]["content"] == "Checking.");
  ts.fake().set_reasoning(ReasoningSyntax::kNone);
  ts.fake().set_script(FakeScript{});

  // No grammar: tool_choice none, the generic JSON envelope (a model whose
  // template cannot show tools), or a schema keyword the grammar cannot
  // enforce (the call is then left free, not refused).
  CHECK_FALSE(sent(ts, chat_body(R"(,"tool_choice":"none")")).grammar);
  ts.fake().set_tool_call_syntax(ToolCallSyntax::kNone);
  CHECK_FALSE(sent(ts, chat_body("")).grammar);
  ts.fake().set_tool_call_syntax(ToolCallSyntax::kHermes);
  const std::string odd = R"({"messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":)"
                          R"({"name":"f","parameters":{"type":"object","properties":{"s":{"type":"string",)"
                          R"("contentMediaType":"text/html"}}}}}]})";
  CHECK_FALSE(sent(ts, odd).grammar);

  // A forced call is constrained from the first token: no triggers. The
  // client's own response_format stays the only grammar, not lazy.
  req = sent(ts, chat_body(R"(,"tool_choice":"required")"));
  CHECK(req.grammar);
  CHECK(req.grammar_triggers.empty());
  req = sent(ts, chat_body(R"(,"response_format":{"type":"json_object"})"));
  REQUIRE(req.grammar);
  CHECK(req.grammar_triggers.empty());
  CHECK(accepts(*req.grammar, R"({"a": 1})"));
}
