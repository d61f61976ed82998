// Forced tool calls: the grammar for each template syntax accepts calls
// written by hand in that syntax (and refuses others), and what it accepts
// is what the tool-call parser (api/tool_calls.h) reads back as the call.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "api/tool_call_grammar.h"
#include "api/tool_calls.h"
#include "tests/grammar/grammar_test_util.h"

using namespace larder;
using namespace larder::testing;
using ojson = nlohmann::ordered_json;

namespace {

const ojson kTools = ojson::parse(R"([
  {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
    "properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city"]}}},
  {"type":"function","function":{"name":"get_time","parameters":{"type":"object",
    "properties":{"tz":{"type":"string"}},"required":["tz"]}}},
  {"type":"function","function":{"name":"ping"}}
])");

std::shared_ptr<CompiledGrammar> grammar(ToolCallSyntax syntax, const std::string& forced, bool parallel) {
  Result<std::string> gbnf = tool_call_gbnf(syntax, kTools, forced, parallel);
  INFO(gbnf.status().to_string());
  REQUIRE(gbnf.is_ok());
  INFO(*gbnf);
  return compile(*gbnf);
}

ToolCallParse parse(ToolCallSyntax syntax, std::string_view text) {
  ToolCallOptions o;
  o.syntax = syntax;
  o.tool_names = {"get_weather", "get_time", "ping"};
  return parse_tool_calls(o, text);
}

}  // namespace

TEST_CASE("forced tool calls: Hermes blocks, one or several", "[api][tools]") {
  auto g = grammar(ToolCallSyntax::kHermes, "", /*parallel=*/true);
  const std::string one = "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"unit\":\"c\"}}\n</tool_call>";
  const std::string two = one + "\n<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>";
  CHECK(accepts(*g, one));
  CHECK(accepts(*g, two));
  CHECK_FALSE(accepts(*g, "Sure! " + one));  // nothing but calls
  // Up to 3 spaces or newlines around the call, as the parser takes them
  // (a lazy grammar fired by a "<tool_call>{" token must take it).
  const std::string tight = "<tool_call>{\"name\": \"ping\", \"arguments\": {}}</tool_call>";
  CHECK(accepts(*g, tight));
  CHECK(accepts(*g, "<tool_call>\n\n{\"name\": \"ping\", \"arguments\": {}} \n</tool_call>"));
  CHECK_FALSE(accepts(*g, "<tool_call>\n\n\n\n{\"name\": \"ping\", \"arguments\": {}}</tool_call>"));
  CHECK(parse(ToolCallSyntax::kHermes, tight).calls.size() == 1);
  CHECK_FALSE(accepts(*g, "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{}}\n</tool_call>"));  // city required
  CHECK_FALSE(accepts(*g, "<tool_call>\n{\"name\":\"rm\",\"arguments\":{}}\n</tool_call>"));  // not offered
  ToolCallParse p = parse(ToolCallSyntax::kHermes, two);
  REQUIRE(p.calls.size() == 2);
  CHECK(p.calls[0].name == "get_weather");
  CHECK(nlohmann::json::parse(p.calls[0].arguments) == nlohmann::json::parse(R"({"city":"Paris","unit":"c"})"));
  CHECK(p.calls[1].name == "ping");
  auto single = grammar(ToolCallSyntax::kHermes, "", /*parallel=*/false);
  CHECK(accepts(*single, one));
  CHECK_FALSE(accepts(*single, two));
}

TEST_CASE("forced tool calls: a named function, and the other syntaxes", "[api][tools]") {
  auto named = grammar(ToolCallSyntax::kLlama3Json, "get_time", true);
  const std::string call = R"({"name":"get_time","parameters":{"tz":"UTC"}})";
  CHECK(accepts(*named, call));
  CHECK_FALSE(accepts(*named, R"({"name":"get_weather","parameters":{"city":"Oslo"}})"));
  CHECK_FALSE(accepts(*named, R"({"name":"get_time","arguments":{"tz":"UTC"}})"));  // Llama 3 says parameters
  ToolCallParse p = parse(ToolCallSyntax::kLlama3Json, call);
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].name == "get_time");

  auto mistral = grammar(ToolCallSyntax::kMistral, "", true);
  const std::string list = R"([{"name":"ping","arguments":{}}, {"name":"get_time","arguments":{"tz":"CET"}}])";
  CHECK(accepts(*mistral, list));
  CHECK_FALSE(accepts(*mistral, R"({"name":"ping","arguments":{}})"));
  CHECK(parse(ToolCallSyntax::kMistral, list).calls.size() == 2);

  auto generic = grammar(ToolCallSyntax::kGeneric, "", true);
  CHECK(accepts(*generic, R"({"name":"ping","arguments":{}})"));
  CHECK(parse(ToolCallSyntax::kGeneric, R"({"name":"ping","arguments":{}})").calls.size() == 1);
}

TEST_CASE("forced tool calls: the generic tool prompt's JSON envelope", "[api][tools]") {
  // parallel_tool_calls false: exactly one {"tool_call": ...}.
  auto one = grammar(ToolCallSyntax::kJsonEnvelope, "", false);
  const std::string call = R"({"tool_call": {"name":"get_weather","arguments":{"city":"Oslo","unit":"c"}}})";
  CHECK(accepts(*one, call));
  CHECK_FALSE(accepts(*one, R"({"tool_call": {"name":"get_weather","arguments":{"unit":"c"}}})"));  // city required
  CHECK_FALSE(accepts(*one, R"({"tool_calls": [{"name":"ping","arguments":{}}]})"));
  CHECK_FALSE(accepts(*one, R"({"response": "hello"})"));  // a reply is not a call
  ToolCallParse p = parse(ToolCallSyntax::kJsonEnvelope, call);
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].name == "get_weather");
  CHECK(p.calls[0].arguments == R"({"city":"Oslo","unit":"c"})");

  // Parallel: a list of one or more; a named function only.
  auto many = grammar(ToolCallSyntax::kJsonEnvelope, "", true);
  const std::string two = R"({"tool_calls": [{"name":"ping","arguments":{}}, {"name":"get_time","arguments":{"tz":"CET"}}]})";
  CHECK(accepts(*many, two));
  CHECK_FALSE(accepts(*many, R"({"tool_calls": []})"));
  CHECK(parse(ToolCallSyntax::kJsonEnvelope, two).calls.size() == 2);
  auto named = grammar(ToolCallSyntax::kJsonEnvelope, "get_time", false);
  CHECK(accepts(*named, R"({"tool_call": {"name":"get_time","arguments":{"tz":"UTC"}}})"));
  CHECK_FALSE(accepts(*named, R"({"tool_call": {"name":"ping","arguments":{}}})"));
}

TEST_CASE("forced tool calls: all the tools' patterns share one work budget", "[api][tools]") {
  // Each tool alone converts (its automaton takes a fraction of the
  // budget); 300 distinct ones together would take seconds: refused.
  ojson tools = ojson::array();
  for (int i = 0; i < 300; ++i) {
    std::string pattern = "^[a-z]{0,1000}[0-9]{0,1000}";
    pattern.append(std::to_string(i)).append("$");
    tools.push_back({{"type", "function"},
                     {"function", {{"name", std::string("f").append(std::to_string(i))},
                                   {"parameters", {{"type", "object"},
                                                   {"properties", {{"s", {{"type", "string"}, {"pattern", pattern}}}}}}}}}});
  }
  ojson one = ojson::array({tools[0]});
  CHECK(tool_call_gbnf(ToolCallSyntax::kHermes, one, "", true).is_ok());
  Result<std::string> all = tool_call_gbnf(ToolCallSyntax::kHermes, tools, "", true);
  REQUIRE_FALSE(all.is_ok());
  CHECK_THAT(all.status().message(), Catch::Contains("too complex"));
}

TEST_CASE("forced tool calls: what cannot be forced is refused, naming the tool", "[api][tools]") {
  const ojson bad = ojson::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object",
      "properties":{"n":{"type":"integer","multipleOf":2}}}}}])");
  Result<std::string> r = tool_call_gbnf(ToolCallSyntax::kHermes, bad, "", true);
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("tool \"f\"") && Catch::Contains("multipleOf") &&
                                       Catch::Contains("parameters #/properties/n"));
  CHECK_FALSE(tool_call_gbnf(ToolCallSyntax::kHermes, kTools, "nope", true).is_ok());
  CHECK_FALSE(tool_call_gbnf(ToolCallSyntax::kNone, kTools, "", true).is_ok());
}

// Found in hostile testing: parameters {} (or an anyOf of strings) let a
// forced call write "arguments": "Yes!", which the parser then refused as a call.
TEST_CASE("forced tool calls: the arguments are an object whatever the parameters schema leaves open", "[api][tools]") {
  const auto gbnf_for = [](const char* params) {
    const ojson tools = ojson::parse(std::string(R"([{"type":"function","function":{"name":"f","parameters":)") +
                                     params + "}}]");
    return tool_call_gbnf(ToolCallSyntax::kHermes, tools, "f", false);
  };
  Result<std::string> open = gbnf_for("{}");
  REQUIRE(open.is_ok());
  auto g = compile(*open);
  CHECK(accepts(*g, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"));  // as with no parameters
  CHECK_FALSE(accepts(*g, "<tool_call>\n{\"name\": \"f\", \"arguments\": \"Yes!\"}\n</tool_call>"));
  CHECK_FALSE(accepts(*g, "<tool_call>\n{\"name\": \"f\", \"arguments\": 5}\n</tool_call>"));
  // Schemas that allow no object at all are refused.
  for (const char* params : {R"({"anyOf":[{"type":"string"}]})", R"({"enum":["a","b"]})", R"({"const":5})"}) {
    CAPTURE(params);
    CHECK_FALSE(gbnf_for(params).is_ok());
  }
  // Said as a type no value has (found in hostile testing: "different
  // values in two allOf branches", of a schema with no allOf).
  CHECK_THAT(gbnf_for(R"({"anyOf":[{"type":"string"}]})").status().message(),
             Catch::Contains("tool \"f\"") && Catch::Contains("no value is both"));
}

TEST_CASE("tool call grammar: the functions' $defs merge, a later one replacing an earlier of its name",
          "[api][tools]") {
  // f's "#/$defs/v" is a boolean, g's a string, h's own "w" an integer: in
  // the merged schema "v" is g's (the last), so f's argument too is a string.
  const ojson tools = ojson::parse(R"([
    {"type":"function","function":{"name":"f","parameters":{"type":"object","$defs":{"v":{"type":"boolean"}},
      "properties":{"a":{"$ref":"#/$defs/v"}},"required":["a"]}}},
    {"type":"function","function":{"name":"g","parameters":{"type":"object","$defs":{"v":{"type":"string"}},
      "properties":{"b":{"$ref":"#/$defs/v"}},"required":["b"]}}},
    {"type":"function","function":{"name":"h","parameters":{"type":"object","$defs":{"w":{"type":"integer"}},
      "properties":{"c":{"$ref":"#/$defs/w"}},"required":["c"]}}}
  ])");
  Result<std::string> gbnf = tool_call_gbnf(ToolCallSyntax::kHermes, tools, "", false);
  INFO(gbnf.status().to_string());
  REQUIRE(gbnf.is_ok());
  auto g = compile(*gbnf);
  auto call = [](const std::string& json) { return "<tool_call>\n" + json + "\n</tool_call>"; };
  CHECK(accepts(*g, call(R"({"name":"g","arguments":{"b":"x"}})")));
  CHECK(accepts(*g, call(R"({"name":"f","arguments":{"a":"x"}})")));
  CHECK_FALSE(accepts(*g, call(R"({"name":"f","arguments":{"a":true}})")));
  CHECK(accepts(*g, call(R"({"name":"h","arguments":{"c":3}})")));
  CHECK_FALSE(accepts(*g, call(R"({"name":"h","arguments":{"c":"3"}})")));
}

TEST_CASE("tool grammar cache: one compile per tool set, errors too, the least recently used set goes first",
          "[api][tools]") {
  ToolGrammarCache cache;
  auto a = cache.get(ToolCallSyntax::kHermes, kTools, "", true);
  REQUIRE(a.is_ok());
  auto again = cache.get(ToolCallSyntax::kHermes, kTools, "", true);
  REQUIRE(again.is_ok());
  CHECK(*again == *a);  // the same compiled grammar
  CHECK(cache.n_compiled() == 1);
  REQUIRE(cache.get(ToolCallSyntax::kHermes, kTools, "", false).is_ok());  // another key: one call only
  REQUIRE(cache.get(ToolCallSyntax::kHermes, kTools, "get_time", false).is_ok());
  CHECK(cache.n_compiled() == 3);
  const ojson bad = ojson::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object",
    "properties":{"s":{"type":"string","contentMediaType":"text/html"}}}}}])");
  auto e1 = cache.get(ToolCallSyntax::kHermes, bad, "", true);
  auto e2 = cache.get(ToolCallSyntax::kHermes, bad, "", true);
  REQUIRE_FALSE(e1.is_ok());
  CHECK(e2.status().message() == e1.status().message());
  CHECK(cache.n_compiled() == 4);
  // 16 more sets: the first ones go; the one just used stays.
  for (int i = 0; i < int(ToolGrammarCache::kEntries); ++i) {
    ojson tools = ojson::array({{{"type", "function"}, {"function", {{"name", "t" + std::to_string(i)}}}}});
    REQUIRE(cache.get(ToolCallSyntax::kHermes, tools, "", true).is_ok());
    if (i == 8) REQUIRE(cache.get(ToolCallSyntax::kHermes, kTools, "", true).is_ok());  // used again
  }
  CHECK(cache.n_compiled() == 4 + int64_t(ToolGrammarCache::kEntries));
  REQUIRE(cache.get(ToolCallSyntax::kHermes, kTools, "", true).is_ok());
  CHECK(cache.n_compiled() == 4 + int64_t(ToolGrammarCache::kEntries));  // still cached
  REQUIRE(cache.get(ToolCallSyntax::kHermes, kTools, "get_time", false).is_ok());
  CHECK(cache.n_compiled() == 5 + int64_t(ToolGrammarCache::kEntries));  // evicted, compiled again
}
