// Tool-call parsing (api/tool_calls.h) on hand-written model outputs in the
// shapes the templates ask for (Qwen 2.5 / Hermes, Llama 3.2, Mistral Nemo;
// see tests/template/fixtures/templates). Expected values are written by hand.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "api/tool_calls.h"

using namespace larder;

namespace {

ToolCallOptions opts(ToolCallSyntax syntax, std::vector<std::string> names = {"get_weather", "get_time"}) {
  return {syntax, std::move(names)};
}

// Feeds `pieces` through a ToolCallStream: what was sent as content at once,
// and the final parse.
struct Streamed {
  std::vector<std::string> sent;  // non-empty push() results, in order
  ToolCallParse rest;
  std::string all_content() const {
    std::string s;
    for (const auto& p : sent) s += p;
    return s + rest.content;
  }
};

Streamed stream(const ToolCallOptions& o, const std::vector<std::string>& pieces, bool cut = false) {
  ToolCallStream s(o);
  Streamed out;
  for (const std::string& p : pieces) {
    std::string sent = s.push(p);
    if (!sent.empty()) out.sent.push_back(sent);
  }
  out.rest = s.finish(cut);
  return out;
}

// Every split of `text` into single bytes.
std::vector<std::string> bytes(const std::string& text) {
  std::vector<std::string> out;
  for (char c : text) out.emplace_back(1, c);
  return out;
}

}  // namespace

TEST_CASE("Hermes / Qwen: one or several <tool_call> blocks", "[api][tools]") {
  const auto o = opts(ToolCallSyntax::kHermes);
  // Qwen 2.5 writes exactly this (its template's instructions).
  auto one = parse_tool_calls(o, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  REQUIRE(one.calls.size() == 1);
  CHECK(one.calls[0].name == "get_weather");
  CHECK(one.calls[0].arguments == R"({"city":"Paris"})");
  CHECK(one.content.empty());

  auto two = parse_tool_calls(
      o, "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n"
         "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>");
  REQUIRE(two.calls.size() == 2);
  CHECK(two.calls[0].arguments == R"({"city":"Paris","unit":"c"})");  // key order kept
  CHECK(two.calls[1].name == "get_time");
  CHECK(two.calls[1].arguments == "{}");
  CHECK(two.content == "Let me look.");

  // Arguments given as a string holding JSON, "parameters" instead of
  // "arguments", no arguments at all, and a last block without its closing tag.
  auto variants = parse_tool_calls(
      o, "<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}</tool_call>"
         "<tool_call>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}</tool_call>"
         "<tool_call>{\"name\": \"get_time\"}</tool_call>"
         "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n");
  REQUIRE(variants.calls.size() == 4);
  CHECK(variants.calls[0].arguments == R"({"city":"Oslo"})");
  CHECK(variants.calls[1].arguments == R"({"city":"Rome"})");
  CHECK(variants.calls[2].arguments == "{}");
  CHECK(variants.calls[3].arguments == R"({"tz":"UTC"})");

  // Unicode in the arguments survives.
  auto uni = parse_tool_calls(o, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\"}}</tool_call>");
  REQUIRE(uni.calls.size() == 1);
  CHECK(uni.calls[0].arguments == "{\"city\":\"Zürich\"}");
}

TEST_CASE("plain answers and malformed calls stay content", "[api][tools]") {
  const auto o = opts(ToolCallSyntax::kHermes);
  const std::vector<std::string> texts = {
      "It is sunny in Paris.",
      "",
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par",       // cut off (max_tokens)
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": [1, 2]}\n</tool_call>",  // arguments not an object
      "<tool_call>\n{\"arguments\": {}}\n</tool_call>",                                // no name
      "<tool_call>\nget_weather(city=Paris)\n</tool_call>",                            // not JSON
      "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call><tool_call>oops</tool_call>",  // one bad: all content
      "<tool_call>{\"name\": \"get_time\", \"arguments\": \"not json\"}</tool_call>",
  };
  for (const std::string& t : texts) {
    INFO(t);
    auto r = parse_tool_calls(o, t);
    CHECK(r.calls.empty());
    CHECK(r.content == t);
    // Streamed byte by byte: the same text comes out, no calls.
    Streamed s = stream(o, bytes(t));
    CHECK(s.rest.calls.empty());
    CHECK(s.all_content() == t);
  }
  // Without tools (kNone) nothing is ever a call, and nothing is held back.
  const auto none = opts(ToolCallSyntax::kNone);
  const std::string call = "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>";
  CHECK(parse_tool_calls(none, call).calls.empty());
  ToolCallStream st(none);
  CHECK(st.push("<tool_call>") == "<tool_call>");
}

TEST_CASE("Llama 3.x: the answer is one JSON object naming an offered tool", "[api][tools]") {
  const auto o = opts(ToolCallSyntax::kLlama3Json);
  // Llama 3.2's template asks for {"name": ..., "parameters": ...}.
  auto r = parse_tool_calls(o, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
  REQUIRE(r.calls.size() == 1);
  CHECK(r.calls[0].name == "get_weather");
  CHECK(r.calls[0].arguments == R"({"city":"Paris"})");
  CHECK(r.content.empty());
  // After <|python_tag|>, with surrounding whitespace, with "type" first.
  auto tagged = parse_tool_calls(
      o, " <|python_tag|>{\"type\": \"function\", \"name\": \"get_time\", \"parameters\": {}}\n");
  REQUIRE(tagged.calls.size() == 1);
  CHECK(tagged.calls[0].name == "get_time");
  // JSON that names no offered tool, or text around the object: content.
  for (std::string t : {"{\"name\": \"Bob\", \"parameters\": {\"age\": 3}}",
                        "Sure: {\"name\": \"get_time\", \"parameters\": {}}",
                        "{\"name\": \"get_time\", \"parameters\": {}} and more"}) {
    INFO(t);
    auto c = parse_tool_calls(o, t);
    CHECK(c.calls.empty());
    CHECK(c.content == t);
  }
}

TEST_CASE("Mistral: [TOOL_CALLS] and a JSON array", "[api][tools]") {
  const auto o = opts(ToolCallSyntax::kMistral);
  // With the control token's text, and without it (control tokens decode to "").
  for (std::string prefix : {"[TOOL_CALLS]", "", " [TOOL_CALLS] "}) {
    auto r = parse_tool_calls(o, prefix + "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, "
                                          "\"id\": \"abc123XYZ\"}, {\"name\": \"get_time\", \"arguments\": {}}]");
    INFO(prefix);
    REQUIRE(r.calls.size() == 2);
    CHECK(r.calls[0].arguments == R"({"city":"Paris"})");
    CHECK(r.calls[1].name == "get_time");
  }
  CHECK(parse_tool_calls(o, "[1] is a footnote.").calls.empty());
  CHECK(parse_tool_calls(o, "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}").calls.empty());
  // Found in hostile testing: without the tag, a JSON list the user asked
  // for became calls, and a bare object a call (which the stream had sent
  // as content). Untagged, only a list of offered tools is calls.
  for (const char* text : {R"([{"name": "Alice"}, {"name": "Bob"}])", R"({"name": "get_time", "arguments": {}})",
                           R"([{"name": "get_time", "arguments": {}}, {"name": "Alice"}])"}) {
    INFO(text);
    auto r = parse_tool_calls(o, text);
    CHECK(r.calls.empty());
    CHECK(r.content == text);
  }
  auto tagged = parse_tool_calls(o, R"([TOOL_CALLS] {"name": "lookup", "arguments": {}})");
  REQUIRE(tagged.calls.size() == 1);
  CHECK(tagged.calls[0].name == "lookup");
}

TEST_CASE("Generic: Hermes tags or a bare JSON object", "[api][tools]") {
  const auto o = opts(ToolCallSyntax::kGeneric);
  // A bare call whose arguments spell a tag is that call (found in hostile
  // testing: it came back as content).
  const std::string spelled = R"({"name": "get_time", "arguments": {"s": "<tool_call>"}})";
  for (bool cut : {false, true}) {
    auto bare = parse_tool_calls(o, spelled, cut);
    REQUIRE(bare.calls.size() == 1);
    CHECK(bare.calls[0].arguments == R"({"s":"<tool_call>"})");
    CHECK(bare.content.empty());
  }
  CHECK(parse_tool_calls(o, "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>").calls.size() == 1);
  CHECK(parse_tool_calls(o, "{\"name\": \"get_time\", \"arguments\": {}}").calls.size() == 1);
  CHECK(parse_tool_calls(o, "{\"answer\": 42}").calls.empty());
}

TEST_CASE("JSON envelope (generic tool prompt): tool_call, tool_calls or response", "[api][tools]") {
  const auto o = opts(ToolCallSyntax::kJsonEnvelope);
  ToolCallParse one = parse_tool_calls(o, R"( {"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}} )");
  REQUIRE(one.calls.size() == 1);
  CHECK(one.calls[0].name == "get_weather");
  CHECK(one.calls[0].arguments == R"({"city":"Paris"})");
  CHECK(one.content.empty());
  ToolCallParse two = parse_tool_calls(
      o, R"({"tool_calls": [{"name": "get_time", "arguments": {}, "id": "call_1"}, {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}]})");
  REQUIRE(two.calls.size() == 2);
  CHECK(two.calls[0].name == "get_time");
  CHECK(two.calls[1].arguments == R"({"city":"Oslo"})");
  // A reply: its text is the content, no calls.
  ToolCallParse reply = parse_tool_calls(o, R"({"response": "It is sunny.\nEnjoy."})");
  CHECK(reply.calls.empty());
  CHECK(reply.content == "It is sunny.\nEnjoy.");
  // Anything else stays the whole text: free text, other JSON, a call not whole.
  for (const char* text : {"Once upon a time", R"({"answer": 42})", R"({"tool_call": {"name": "get_time", "arguments": {})",
                           R"({"tool_calls": [{"name": "get_time", "arguments": 3}]})"}) {
    ToolCallParse p = parse_tool_calls(o, text);
    CHECK(p.calls.empty());
    CHECK(p.content == text);
  }
  // Found in hostile testing (each came back as raw JSON): an empty list is
  // no call; text beside calls is the content; a tool that was not offered
  // is still a call, and the calls beside it stand.
  ToolCallParse none = parse_tool_calls(o, R"({"tool_calls": []})");
  CHECK(none.calls.empty());
  CHECK(none.content.empty());
  ToolCallParse said = parse_tool_calls(o, R"({"tool_calls": [], "response": "Hi"})");
  CHECK(said.calls.empty());
  CHECK(said.content == "Hi");
  ToolCallParse beside = parse_tool_calls(
      o, R"({"tool_calls": [{"name": "get_time", "arguments": {}}, {"name": "rm_rf", "arguments": {}}], "content": "Both."})");
  REQUIRE(beside.calls.size() == 2);
  CHECK(beside.calls[0].name == "get_time");
  CHECK(beside.calls[1].name == "rm_rf");
  CHECK(beside.content == "Both.");
  CHECK(parse_tool_calls(o, R"({"response": null})").content.empty());
  ToolCallParse unoffered = parse_tool_calls(o, R"({"tool_call": {"name": "rm_rf", "arguments": {}}})");
  REQUIRE(unoffered.calls.size() == 1);
  CHECK(unoffered.calls[0].name == "rm_rf");
  CHECK(unoffered.content.empty());
  // Streaming: an answer opening with '{' is held to the end; text streams.
  Streamed held = stream(o, {" {\"response\"", ": \"Hi\"}"});
  CHECK(held.sent.empty());
  CHECK(held.rest.content == "Hi");
  Streamed text = stream(o, {"Once", " upon"});
  CHECK(text.sent == std::vector<std::string>{"Once", " upon"});
}

TEST_CASE("streaming: content flows, a call is held back and parsed at the end", "[api][tools]") {
  const auto hermes = opts(ToolCallSyntax::kHermes);
  SECTION("plain text streams as it comes, except a possible tag start") {
    Streamed s = stream(hermes, {"Hello", " wor", "ld <", "tool", "s are fun"});
    CHECK(s.sent == std::vector<std::string>{"Hello", " wor", "ld", " <tools are fun"});
    CHECK(s.rest.calls.empty());
    CHECK(s.rest.content.empty());
  }
  SECTION("text, then a call split at every byte") {
    const std::string text =
        "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    Streamed s = stream(hermes, bytes(text));
    std::string sent;
    for (const auto& p : s.sent) sent += p;
    CHECK(sent == "Checking.");  // the newline before the call is not content
    REQUIRE(s.rest.calls.size() == 1);
    CHECK(s.rest.calls[0].arguments == R"({"city":"Paris"})");
    CHECK(s.rest.content.empty());
  }
  SECTION("streamed and whole parses agree on the calls") {
    const std::string text =
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
        "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\"}}\n</tool_call>";
    Streamed s = stream(hermes, {text.substr(0, 7), text.substr(7, 30), text.substr(37)});
    auto whole = parse_tool_calls(hermes, text);
    CHECK(s.sent.empty());
    REQUIRE(s.rest.calls.size() == 2);
    REQUIRE(whole.calls.size() == 2);
    for (size_t i = 0; i < 2; ++i) {
      CHECK(s.rest.calls[i].name == whole.calls[i].name);
      CHECK(s.rest.calls[i].arguments == whole.calls[i].arguments);
    }
  }
  SECTION("Llama 3: an answer opening with '{' waits; other answers stream") {
    const auto llama = opts(ToolCallSyntax::kLlama3Json);
    Streamed call = stream(llama, {"\n", "{\"name\": ", "\"get_time\", \"parameters\": {}}"});
    CHECK(call.sent.empty());
    REQUIRE(call.rest.calls.size() == 1);
    Streamed text = stream(llama, {" It", " is", " noon <tool_call>"});
    CHECK(text.sent == std::vector<std::string>{" It", " is", " noon <tool_call>"});
    Streamed json = stream(llama, {"{\"a\"", ": 1}"});  // JSON but not a call: content at the end
    CHECK(json.sent.empty());
    CHECK(json.rest.calls.empty());
    CHECK(json.rest.content == "{\"a\": 1}");
    Streamed tag = stream(llama, {"<|python", "_tag|>{\"name\": \"get_time\", \"parameters\": {}}"});
    CHECK(tag.sent.empty());
    CHECK(tag.rest.calls.size() == 1);
  }
  SECTION("Mistral: an answer opening with '[' waits") {
    const auto mistral = opts(ToolCallSyntax::kMistral);
    Streamed call = stream(mistral, {"[TOOL_", "CALLS][{\"name\": \"get_time\", \"arguments\": {}}]"});
    CHECK(call.sent.empty());
    CHECK(call.rest.calls.size() == 1);
    Streamed text = stream(mistral, {"Sure", ", [1]"});
    CHECK(text.sent == std::vector<std::string>{"Sure", ", [1]"});
  }
}

TEST_CASE("an answer cut short (finish_reason length): a cut call is dropped and its markup is not content",
          "[api][tools]") {
  // Found in hostile testing: a forced call cut by max_tokens came back as
  // the content "<tool_call>\n{ \"name\" : \"get_wea".
  struct Case {
    ToolCallSyntax syntax;
    std::string text;
    std::string content;  // expected when cut
  };
  const std::vector<Case> cases = {
      {ToolCallSyntax::kHermes, "<tool", ""},
      {ToolCallSyntax::kHermes, "<tool_call>\n", ""},
      {ToolCallSyntax::kHermes, "<tool_call>\n{ \"name\" : \"get_wea", ""},
      {ToolCallSyntax::kHermes, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"ci",
       "Let me check."},
      {ToolCallSyntax::kHermes, "It is sunny <too", "It is sunny"},
      {ToolCallSyntax::kHermes, "It is sunny in Par", "It is sunny in Par"},
      {ToolCallSyntax::kGeneric, "<tool_call>{\"name\": \"get_time\", \"argu", ""},
      {ToolCallSyntax::kJsonEnvelope, "{\"response\": \"The weather is", "The weather is"},
      {ToolCallSyntax::kJsonEnvelope, "{\"response\": \"caf\\u00", "caf"},      // a cut \u escape
      {ToolCallSyntax::kJsonEnvelope, "{\"response\": \"a \\\"b\\", "a \"b"},  // a cut \ escape
      {ToolCallSyntax::kJsonEnvelope, "{\"tool_call\": {\"name\": \"get_weather\", \"arguments\": {\"ci", ""},
      {ToolCallSyntax::kJsonEnvelope, "{\"tool_calls\": [", ""},
      {ToolCallSyntax::kJsonEnvelope, "{\"too", ""},  // cut inside the key
      {ToolCallSyntax::kJsonEnvelope, "{\"resp", ""},
      {ToolCallSyntax::kJsonEnvelope, "{\"response\": ", ""},
      {ToolCallSyntax::kJsonEnvelope, "{\"response\"", ""},
      {ToolCallSyntax::kJsonEnvelope, "{\"answer\": \"x", "{\"answer\": \"x"},  // not the envelope: content
      {ToolCallSyntax::kJsonEnvelope, "{\"response\": \"d\\ud83d\\ude0", "d"},  // a cut surrogate pair
      {ToolCallSyntax::kJsonEnvelope, "{\"response\": \"d\\ud83d", "d"},
      {ToolCallSyntax::kJsonEnvelope, "{\"response\": \"abc\", \"note\": \"z", "abc"},  // whole text, then cut
      {ToolCallSyntax::kJsonEnvelope, "{\"response\": 12", ""},  // not a string: nothing trustworthy
      {ToolCallSyntax::kGeneric, "hello <tool_call", "hello"},  // no whole tag yet
      {ToolCallSyntax::kJsonEnvelope, "{", "{"},  // nothing says what it was
  };
  for (const Case& k : cases) {
    INFO(k.text);
    const auto o = opts(k.syntax);
    auto r = parse_tool_calls(o, k.text, /*cut=*/true);
    CHECK(r.calls.empty());
    CHECK(r.content == k.content);
    // Streamed byte by byte: the same content in all, no calls.
    Streamed s = stream(o, bytes(k.text), /*cut=*/true);
    CHECK(s.rest.calls.empty());
    CHECK(s.all_content() == k.content);
    // Not cut (the model ended there): malformed, so the whole text.
    auto whole = parse_tool_calls(o, k.text);
    CHECK(whole.calls.empty());
    CHECK(whole.content == k.text);
  }
  // Whole calls before a cut one stand, as without `cut` (found in hostile
  // testing: the generic prompt's cut list lost them all).
  struct Kept {
    ToolCallSyntax syntax;
    std::string text;
    std::vector<std::string> names;
  };
  const std::vector<Kept> kept = {
      {ToolCallSyntax::kJsonEnvelope,
       "{\"tool_calls\": [{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": "
       "{\"city\": \"a}b\"}}, {\"name\": \"get_wea",
       {"get_time", "get_weather"}},
      {ToolCallSyntax::kJsonEnvelope, "{\"tool_calls\": [{\"name\": \"get_time\", \"arguments\": {}}", {"get_time"}},
      {ToolCallSyntax::kJsonEnvelope, "{\"tool_call\": {\"name\": \"get_time\", \"arguments\": {}}", {"get_time"}},
      {ToolCallSyntax::kJsonEnvelope, "{\"tool_call\": {\"name\": \"get_time\", \"arguments\": {}", {}},
  };
  for (const Kept& k : kept) {
    INFO(k.text);
    auto r = parse_tool_calls(opts(k.syntax), k.text, true);
    std::vector<std::string> names;
    for (const ParsedToolCall& c : r.calls) names.push_back(c.name);
    CHECK(names == k.names);
    CHECK(r.content.empty());
    Streamed s = stream(opts(k.syntax), bytes(k.text), true);
    CHECK(s.sent.empty());
    CHECK(s.rest.calls.size() == k.names.size());
  }
  const auto o = opts(ToolCallSyntax::kHermes);
  auto r = parse_tool_calls(o, "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>\n<tool_call>{\"na",
                            true);
  REQUIRE(r.calls.size() == 1);
  CHECK(r.calls[0].name == "get_time");
  CHECK(r.content.empty());
}

TEST_CASE("a forced call cut short gives no content in any syntax; unforced bare JSON stays content", "[api][tools]") {
  struct Case {
    ToolCallSyntax syntax;
    std::string text;
  };
  const std::vector<Case> cases = {
      {ToolCallSyntax::kLlama3Json, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Pa"},
      {ToolCallSyntax::kLlama3Json, "<|python_tag|>{\"name\": \"get_ti"},
      {ToolCallSyntax::kMistral, "[{\"name\": \"get_weather\", \"arguments\": {"},
      {ToolCallSyntax::kGeneric, "{\"name\": \"get_wea"},
      {ToolCallSyntax::kHermes, "<tool_call>\n{\"name\": \"get_wea"},
      {ToolCallSyntax::kJsonEnvelope, "{"},
  };
  for (const Case& k : cases) {
    INFO(k.text);
    ToolCallOptions forced = opts(k.syntax);
    forced.forced = true;
    auto r = parse_tool_calls(forced, k.text, /*cut=*/true);
    CHECK(r.calls.empty());
    CHECK(r.content.empty());
    Streamed s = stream(forced, bytes(k.text), /*cut=*/true);
    CHECK(s.rest.calls.empty());
    CHECK(s.all_content() == "");
    // Not forced: the bare-JSON syntaxes cannot tell a cut call from a JSON
    // answer, so the text stays content.
    if (k.syntax == ToolCallSyntax::kLlama3Json || k.syntax == ToolCallSyntax::kMistral) {
      CHECK(parse_tool_calls(opts(k.syntax), k.text, true).content == k.text);
    }
  }
  // Forced, whole calls before the cut still stand.
  ToolCallOptions forced = opts(ToolCallSyntax::kMistral);
  forced.forced = true;
  auto whole = parse_tool_calls(forced, "[{\"name\": \"get_time\", \"arguments\": {}}]", true);
  REQUIRE(whole.calls.size() == 1);
  CHECK(whole.calls[0].name == "get_time");
}

TEST_CASE("streamed and whole parses agree on content and calls, split anywhere", "[api][tools]") {
  // Found in hostile testing: leading whitespace before text that comes
  // before a call was streamed but trimmed from the whole answer.
  struct Case {
    ToolCallSyntax syntax;
    std::string text;
  };
  const std::string call = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  const std::vector<Case> cases = {
      {ToolCallSyntax::kHermes, "  Sure.\n" + call},
      {ToolCallSyntax::kHermes, "\n\nLet me check.  " + call + "\n"},
      {ToolCallSyntax::kHermes, "Sure. " + call + " Done."},
      {ToolCallSyntax::kHermes, call + "\n  Done. \n" + call + " Bye "},
      {ToolCallSyntax::kHermes, "  just text, no call  "},
      {ToolCallSyntax::kHermes, " text <tool and <tool_ca"},
      {ToolCallSyntax::kGeneric, " \n" + call},
      {ToolCallSyntax::kGeneric, "  {\"name\": \"get_time\", \"arguments\": {}} "},
      {ToolCallSyntax::kLlama3Json, " <|python_tag|>{\"name\": \"get_time\", \"parameters\": {}}"},
      {ToolCallSyntax::kLlama3Json, "  The time is {noon}. "},
      {ToolCallSyntax::kMistral, " [TOOL_CALLS] [{\"name\": \"get_time\", \"arguments\": {}}]"},
      {ToolCallSyntax::kMistral, " [1, 2] "},
      {ToolCallSyntax::kMistral, " {\"name\": \"get_time\", \"arguments\": {}}"},
      {ToolCallSyntax::kHermes, "To call a tool, write <tool_call> followed by JSON. For <too"},
      {ToolCallSyntax::kHermes, call + " Note: <tool_call> opens one"},
      {ToolCallSyntax::kHermes, "Hi <tool_call>{\"name\": \"get_time\"}</tool_call> <tool_call>{\"a\": \"</tool_call>b"},
      {ToolCallSyntax::kJsonEnvelope, "\n{\"response\": \"  Hi  \"}\n"},
      {ToolCallSyntax::kJsonEnvelope, " {\"tool_calls\": []}"},
      {ToolCallSyntax::kJsonEnvelope, "  hi {\"response\": 1}"},
  };
  for (const Case& k : cases) {
    for (bool cut : {false, true}) {
      const auto o = opts(k.syntax);
      const ToolCallParse whole = parse_tool_calls(o, k.text, cut);
      for (size_t split = 0; split <= k.text.size(); ++split) {
        INFO(k.text << " | cut " << cut << " | split at " << split);
        std::vector<std::string> pieces = {k.text.substr(0, split), k.text.substr(split)};
        if (split == k.text.size()) pieces = bytes(k.text);
        const Streamed s = stream(o, pieces, cut);
        CHECK(s.all_content() == whole.content);
        REQUIRE(s.rest.calls.size() == whole.calls.size());
        for (size_t i = 0; i < whole.calls.size(); ++i) {
          CHECK(s.rest.calls[i].name == whole.calls[i].name);
          CHECK(s.rest.calls[i].arguments == whole.calls[i].arguments);
        }
      }
    }
  }
}

TEST_CASE("a raw newline or tab inside a JSON string is read as its escape", "[api][tools]") {
  // Found in hostile testing: a model writing code with real newlines into
  // an argument string (or a reply) lost the call, or its whole reply.
  const std::string code_args = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a\nb\tc\x01\"}}";
  const std::string want = R"({"city":"a\nb\tc\u0001"})";
  auto hermes = parse_tool_calls(opts(ToolCallSyntax::kHermes), "<tool_call>\n" + code_args + "\n</tool_call>");
  REQUIRE(hermes.calls.size() == 1);
  CHECK(hermes.calls[0].arguments == want);
  auto llama = parse_tool_calls(opts(ToolCallSyntax::kLlama3Json), code_args);
  REQUIRE(llama.calls.size() == 1);
  CHECK(llama.calls[0].arguments == want);
  const auto env = opts(ToolCallSyntax::kJsonEnvelope);
  auto reply = parse_tool_calls(env, "{\"response\": \"line 1\nline 2\"}");
  CHECK(reply.calls.empty());
  CHECK(reply.content == "line 1\nline 2");
  // Cut inside such a string: the text so far.
  CHECK(parse_tool_calls(env, "{\"response\": \"line 1\nline", true).content == "line 1\nline");
  // Raw newlines between tokens stay plain JSON whitespace; an escaped quote
  // does not end the string.
  auto spaced = parse_tool_calls(env, "{\n\"response\":\n\"say \\\"hi\\\"\nnow\"\n}");
  CHECK(spaced.content == "say \"hi\"\nnow");
  // Not JSON even then: the whole text.
  CHECK(parse_tool_calls(env, "{\"response\": \"a\nb}").content == "{\"response\": \"a\nb}");
}

TEST_CASE("Hermes: a closing tag inside an argument string does not end the call", "[api][tools]") {
  // Found in hostile testing: code that writes tool calls put "</tool_call>"
  // in a string, and the call became content.
  const auto o = opts(ToolCallSyntax::kHermes);
  const std::string text =
      "Writing it.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x</tool_call>y\"}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  auto r = parse_tool_calls(o, text);
  REQUIRE(r.calls.size() == 2);
  CHECK(r.calls[0].arguments == R"({"city":"x</tool_call>y"})");
  CHECK(r.calls[1].name == "get_time");
  CHECK(r.content == "Writing it.");
  Streamed s = stream(o, bytes(text));
  CHECK(s.all_content() == "Writing it.");
  REQUIRE(s.rest.calls.size() == 2);
  CHECK(s.rest.calls[0].arguments == R"({"city":"x</tool_call>y"})");
  // Cut inside such a string (max_tokens, a stop string), or ended there
  // after a whole call: the unfinished call is dropped, the whole one
  // stands, no markup is content (found in hostile testing: all raw markup).
  const std::string in_string =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"s\": \"a</tool_call>b";
  for (const std::string& before : {std::string(), std::string("Hi <tool_call>{\"name\": \"get_time\"}</tool_call> ")}) {
    INFO(before);
    auto cut = parse_tool_calls(o, before + in_string, /*cut=*/true);
    CHECK(cut.calls.size() == (before.empty() ? 0 : 1));
    CHECK(cut.content == (before.empty() ? "" : "Hi"));
    Streamed sc = stream(o, bytes(before + in_string), /*cut=*/true);
    CHECK(sc.all_content() == cut.content);
    CHECK(sc.rest.calls.size() == cut.calls.size());
  }
  auto ended = parse_tool_calls(o, "Hi <tool_call>{\"name\": \"get_time\"}</tool_call> " + in_string);
  REQUIRE(ended.calls.size() == 1);
  CHECK(ended.calls[0].name == "get_time");
  CHECK(ended.content == "Hi");
  // Ended there by the model with no whole call: malformed, so content.
  CHECK(parse_tool_calls(o, in_string).content == in_string);
  // A tag followed by what cannot open a call is a mention: text, also in a
  // cut answer and after whole calls (found in hostile testing: dropped).
  const std::string mention = "To call a tool, write <tool_call> followed by JSON. For example";
  CHECK(parse_tool_calls(o, mention, /*cut=*/true).content == mention);
  auto after_call = parse_tool_calls(o, "<tool_call>{\"name\": \"get_time\"}</tool_call> Write <tool_call> then");
  REQUIRE(after_call.calls.size() == 1);
  CHECK(after_call.content == "Write\n<tool_call> then");
  // A closed block whose JSON does not balance (the tag not in a string) is
  // malformed, not unfinished: the whole answer is content, cut or not
  // (found by the re-verification: it and everything after it vanished).
  for (const std::string& text :
       {std::string("<tool_call>{\"name\": \"g\"}</tool_call> <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}"
                    "</tool_call> <tool_call>{\"name\": \"g\", \"arguments\": {\"x\": 2}}</tool_call> Done."),
        std::string("Sure. <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}</tool_call> <tool_call>{\"name\": "
                    "\"g\"}</tool_call> Now")}) {
    for (bool cut : {false, true}) {
      INFO(text << " | cut " << cut);
      auto r = parse_tool_calls(o, text, cut);
      CHECK(r.calls.empty());
      CHECK(r.content == text);
    }
  }
  // A block that is not JSON before its first closing tag is still not a call.
  const std::string bad = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}\n</tool_call> and }";
  CHECK(parse_tool_calls(o, bad).calls.empty());
  CHECK(parse_tool_calls(o, bad).content == bad);
}
