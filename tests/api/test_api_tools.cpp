// Function calling through /v1/chat/completions with the FakeGenerator
// scripted to write tool calls: request data reaching the template, the
// response shapes of the OpenAI reference (message.tool_calls,
// delta.tool_calls, finish_reason "tool_calls"), and what stays content.
// Expected values are written by hand from the reference and the script.
#include <regex>

#include <catch2/catch.hpp>

#include "tests/api/test_client.h"

using nlohmann::json;
using namespace larder;
using namespace larder::testing;

namespace {

const std::string kTools =
    R"([{"type":"function","function":{"name":"get_weather","description":"Weather for a city",)"
    R"("parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},)"
    R"({"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{}}}}])";

std::string chat_body(const std::string& extra) {
  return R"({"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":)" + kTools + extra + "}";
}

// The fake answering with a Hermes tool call in pieces that split the tags.
FakeScript hermes_call_script() {
  FakeScript s;
  s.pieces = {"Let me check.", "\n<tool", "_call>\n{\"name\": \"get_weather\", ",
              "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "\n<tool_call>\n{\"name\": \"get_time\", "
              "\"arguments\": {}}\n</tool_call>"};
  return s;
}

bool is_call_id(const json& v) {
  return v.is_string() && std::regex_match(v.get<std::string>(), std::regex("call_[A-Za-z0-9]{24}"));
}

// Choice 0 of a chat answer, streamed or not: its content (deltas joined),
// whether any tool_calls came, and its finish_reason.
struct ChoiceSeen {
  std::string content;
  bool any_tool_calls = false;
  std::string finish;
};
ChoiceSeen read_choice(const ClientResponse& r, bool stream) {
  ChoiceSeen out;
  if (!stream) {
    const json c = r.json()["choices"][0];
    out.any_tool_calls = c["message"].contains("tool_calls");
    out.content = c["message"]["content"].is_string() ? c["message"]["content"].get<std::string>() : "";
    out.finish = c["finish_reason"];
    return out;
  }
  for (const std::string& e : sse_payloads(r.body)) {
    if (e == "[DONE]") continue;
    const json c = json::parse(e)["choices"][0];
    out.any_tool_calls = out.any_tool_calls || c["delta"].contains("tool_calls");
    if (c["delta"].contains("content")) out.content += c["delta"]["content"].get<std::string>();
    if (c["finish_reason"].is_string()) out.finish = c["finish_reason"];
  }
  return out;
}

}  // namespace

TEST_CASE("tools and tool-call history reach the chat template as data", "[api][tools]") {
  TestServer ts;
  ts.fake().set_n_ctx(4096);
  const std::string body =
      R"({"messages":[)"
      R"({"role":"user","content":[{"type":"text","text":"Weather in "},{"type":"text","text":"Paris?"}]},)"
      R"({"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",)"
      R"("function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},)"
      R"({"role":"tool","tool_call_id":"call_1","content":"21 C"},)"
      R"({"role":"assistant","tool_calls":[{"id":"call_2","type":"function","function":{"name":"get_time","arguments":{"tz":"UTC"}}}]},)"
      R"({"role":"tool","tool_call_id":"call_2","name":"get_time","content":"noon"}],)"
      R"("tools":)" + kTools + R"(,"tool_choice":"auto","parallel_tool_calls":true})";
  auto r = http(ts.port(), "POST", "/v1/chat/completions", body);
  REQUIRE(r);
  CHECK(r->status == 200);
  ChatRequest got = ts.fake().last_chat();
  CHECK(got.tools_json == kTools);  // as sent, key order kept
  REQUIRE(got.messages.size() == 5);
  CHECK(got.messages[0].content == "Weather in Paris?");
  CHECK_FALSE(got.messages[0].content_null);
  CHECK(got.messages[1].content_null);
  REQUIRE(got.messages[1].tool_calls.size() == 1);
  CHECK(got.messages[1].tool_calls[0].id == "call_1");
  CHECK(got.messages[1].tool_calls[0].name == "get_weather");
  CHECK(got.messages[1].tool_calls[0].arguments == R"({"city": "Paris"})");  // the string as sent
  CHECK(got.messages[2].tool_call_id == "call_1");
  CHECK(got.messages[2].content == "21 C");
  CHECK(got.messages[3].content_null);  // content absent
  CHECK(got.messages[3].tool_calls[0].arguments == R"({"tz":"UTC"})");  // an object is accepted as its JSON
  CHECK(got.messages[4].name == "get_time");

  // The prompt is the fake's rendering, tools included.
  auto reqs = ts.fake().requests();
  REQUIRE(reqs.size() == 1);
  std::string prompt;
  for (size_t i = 1; i < reqs[0].prompt_tokens.size(); ++i) prompt += char(reqs[0].prompt_tokens[i]);
  CHECK(prompt.rfind("tools: " + kTools + "\nuser: Weather in Paris?\nassistant:  call(call_1 get_weather", 0) == 0);

  // tool_choice "none": the tools are not shown to the model.
  auto none = http(ts.port(), "POST", "/v1/chat/completions", chat_body(R"(,"tool_choice":"none")"));
  REQUIRE(none);
  CHECK(none->status == 200);
  CHECK(ts.fake().last_chat().tools_json.empty());
  // An empty tools array is no tools.
  auto empty = http(ts.port(), "POST", "/v1/chat/completions",
                    R"({"messages":[{"role":"user","content":"Hi"}],"tools":[]})");
  REQUIRE(empty);
  CHECK(empty->status == 200);
  CHECK(ts.fake().last_chat().tools_json.empty());
}

TEST_CASE("non-streaming: tool calls in the answer become message.tool_calls", "[api][tools]") {
  TestServer ts;
  ts.fake().set_n_ctx(4096);
  ts.fake().set_script(hermes_call_script());
  auto r = http(ts.port(), "POST", "/v1/chat/completions", chat_body(""));
  REQUIRE(r);
  REQUIRE(r->status == 200);
  json body = r->json();
  const json& choice = body["choices"][0];
  CHECK(choice["finish_reason"] == "tool_calls");
  const json& msg = choice["message"];
  CHECK(msg["role"] == "assistant");
  CHECK(msg["content"] == "Let me check.");
  REQUIRE(msg["tool_calls"].size() == 2);
  const json& c0 = msg["tool_calls"][0];
  CHECK(is_call_id(c0["id"]));
  CHECK(c0["type"] == "function");
  CHECK(c0["function"] == json{{"name", "get_weather"}, {"arguments", R"({"city":"Paris"})"}});
  CHECK(msg["tool_calls"][1]["function"] == json{{"name", "get_time"}, {"arguments", "{}"}});
  CHECK(c0["id"] != msg["tool_calls"][1]["id"]);
  CHECK(body["usage"]["completion_tokens"] == 5);  // one per event of the script

  // Only calls, no text: content is null.
  FakeScript only;
  only.pieces = {"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"};
  ts.fake().set_script(only);
  auto r2 = http(ts.port(), "POST", "/v1/chat/completions", chat_body(""));
  REQUIRE(r2);
  json m2 = r2->json()["choices"][0]["message"];
  CHECK(m2["content"].is_null());
  CHECK(m2["tool_calls"].size() == 1);
}

// Found in hostile testing: a forced call cut by max_tokens before its
// closing tag said finish_reason "tool_calls", and after two whole calls
// the start of a third tag ("<too") came back as content.
TEST_CASE("an answer cut by max_tokens says length, calls or not; a cut tag is not content", "[api][tools]") {
  TestServer ts;
  ts.fake().set_n_ctx(4096);
  for (const bool stream : {false, true}) {
    CAPTURE(stream);
    FakeScript cut;
    cut.pieces = {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
                  "\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>", "\n<too"};
    cut.finish = FinishReason::kLength;
    ts.fake().set_script(cut);
    auto r = http(ts.port(), "POST", "/v1/chat/completions", chat_body(stream ? R"(,"stream":true)" : ""));
    REQUIRE(r);
    REQUIRE(r->status == 200);
    json calls = json::array(), content = nullptr, finish;
    if (!stream) {
      const json choice = r->json()["choices"][0];
      calls = choice["message"]["tool_calls"];
      content = choice["message"]["content"];
      finish = choice["finish_reason"];
    } else {
      for (const std::string& e : sse_payloads(r->body)) {
        if (e == "[DONE]") continue;
        const json c = json::parse(e)["choices"][0];
        if (c["delta"].contains("tool_calls")) calls.push_back(c["delta"]["tool_calls"][0]);
        if (c["delta"].contains("content") && c["delta"]["content"] != "") content = c["delta"]["content"];
        if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
      }
    }
    CHECK(finish == "length");
    REQUIRE(calls.size() == 2);
    CHECK(calls[0]["function"]["name"] == "get_weather");
    CHECK(calls[1]["function"]["name"] == "get_time");
    CHECK(content.is_null());
    // A call without its closing tag, cut there: still the call, still length.
    FakeScript open;
    open.pieces = {"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}"};
    open.finish = FinishReason::kLength;
    ts.fake().set_script(open);
    auto r2 = http(ts.port(), "POST", "/v1/chat/completions", chat_body(""));
    REQUIRE(r2);
    CHECK(r2->json()["choices"][0]["finish_reason"] == "length");
    CHECK(r2->json()["choices"][0]["message"]["tool_calls"].size() == 1);
    // Cut inside the closing tag, and inside a second call after a whole
    // one: the whole calls stand, nothing of the cut is content.
    for (const char* rest : {"\n</too", "\n</tool_call>\n<tool_call>\n{\"name\": \"get_ti"}) {
      CAPTURE(rest);
      FakeScript later;
      later.pieces = {"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}", rest};
      later.finish = FinishReason::kLength;
      ts.fake().set_script(later);
      auto r3 = http(ts.port(), "POST", "/v1/chat/completions", chat_body(""));
      REQUIRE(r3);
      const json m3 = r3->json()["choices"][0]["message"];
      CHECK(r3->json()["choices"][0]["finish_reason"] == "length");
      REQUIRE(m3["tool_calls"].size() == 1);
      CHECK(m3["tool_calls"][0]["function"]["name"] == "get_time");
      CHECK(m3["content"].is_null());
    }
  }
}

TEST_CASE("malformed calls, no tools, and tool_choice none leave the text as content", "[api][tools]") {
  TestServer ts;
  ts.fake().set_n_ctx(4096);
  const std::string text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par";
  // Ended there by the model (stop): malformed, so content. Cut by
  // max_tokens (length) or by a stop string: an unfinished call, dropped,
  // and its markup is not content (found in hostile testing).
  for (const auto& [finish, by_string] : {std::pair{FinishReason::kStop, false}, std::pair{FinishReason::kLength, false},
                                          std::pair{FinishReason::kStop, true}}) {
    FakeScript bad;
    bad.pieces = {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": ", "\"Par"};
    bad.finish = finish;
    bad.stopped_by_string = by_string;
    ts.fake().set_script(bad);
    const bool cut = finish == FinishReason::kLength || by_string;
    const std::string want = cut ? "" : text;
    for (const std::string& extra : {std::string(), std::string(R"(,"stream":true)")}) {
      CAPTURE(extra, cut);
      auto r = http(ts.port(), "POST", "/v1/chat/completions", chat_body(extra));
      REQUIRE(r);
      REQUIRE(r->status == 200);
      const ChoiceSeen c = read_choice(*r, !extra.empty());
      CHECK_FALSE(c.any_tool_calls);
      CHECK(c.content == want);
      CHECK(c.finish == (finish == FinishReason::kLength ? "length" : "stop"));
    }
  }
  // A well-formed call with tool_choice "none", or without tools: content.
  ts.fake().set_script(hermes_call_script());
  for (const std::string& body :
       {chat_body(R"(,"tool_choice":"none")"), std::string(R"({"messages":[{"role":"user","content":"Hi"}]})")}) {
    auto r = http(ts.port(), "POST", "/v1/chat/completions", body);
    REQUIRE(r);
    json choice = r->json()["choices"][0];
    CHECK(choice["finish_reason"] == "stop");
    CHECK_FALSE(choice["message"].contains("tool_calls"));
    CHECK(choice["message"]["content"].get<std::string>().find("<tool_call>") != std::string::npos);
  }
}

TEST_CASE("streaming: content deltas, then delta.tool_calls, finish_reason tool_calls", "[api][tools]") {
  TestServer ts;
  ts.fake().set_n_ctx(4096);
  ts.fake().set_script(hermes_call_script());
  auto r = http(ts.port(), "POST", "/v1/chat/completions",
                chat_body(R"(,"stream":true,"stream_options":{"include_usage":true})"));
  REQUIRE(r);
  REQUIRE(r->status == 200);
  auto events = sse_payloads(r->body);
  // role, "Let me check.", call 0, call 1, finish, usage, [DONE]
  REQUIRE(events.size() == 7);
  CHECK(json::parse(events[0])["choices"][0]["delta"] == json{{"role", "assistant"}, {"content", ""}});
  CHECK(json::parse(events[1])["choices"][0]["delta"] == json{{"content", "Let me check."}});
  for (int i = 0; i < 2; ++i) {
    json choice = json::parse(events[2 + i])["choices"][0];
    CHECK(choice["finish_reason"].is_null());
    const json& calls = choice["delta"]["tool_calls"];
    REQUIRE(calls.size() == 1);
    CHECK(calls[0]["index"] == i);
    CHECK(is_call_id(calls[0]["id"]));
    CHECK(calls[0]["type"] == "function");
    CHECK(calls[0]["function"]["name"] == (i == 0 ? "get_weather" : "get_time"));
    CHECK(calls[0]["function"]["arguments"] == (i == 0 ? R"({"city":"Paris"})" : "{}"));
  }
  json finish = json::parse(events[4]);
  CHECK(finish["choices"][0]["finish_reason"] == "tool_calls");
  CHECK(finish["choices"][0]["delta"] == json::object());
  CHECK(json::parse(events[5])["usage"]["completion_tokens"] == 5);
  CHECK(events[6] == "[DONE]");
}

TEST_CASE("Mistral ids have 9 alphanumerics; Llama JSON answers are calls", "[api][tools]") {
  TestServer ts;
  ts.fake().set_n_ctx(4096);
  ts.fake().set_tool_call_syntax(ToolCallSyntax::kMistral);
  FakeScript mistral;
  mistral.pieces = {"[{\"name\": \"get_time\", ", "\"arguments\": {}}]"};
  ts.fake().set_script(mistral);
  auto r = http(ts.port(), "POST", "/v1/chat/completions", chat_body(""));
  REQUIRE(r);
  json msg = r->json()["choices"][0]["message"];
  REQUIRE(msg["tool_calls"].size() == 1);
  CHECK(std::regex_match(msg["tool_calls"][0]["id"].get<std::string>(), std::regex("[A-Za-z0-9]{9}")));

  ts.fake().set_tool_call_syntax(ToolCallSyntax::kLlama3Json);
  FakeScript llama;
  llama.pieces = {"{\"name\": \"get_weather\", ", "\"parameters\": {\"city\": \"Paris\"}}"};
  ts.fake().set_script(llama);
  auto s = http(ts.port(), "POST", "/v1/chat/completions", chat_body(R"(,"stream":true)"));
  REQUIRE(s);
  auto events = sse_payloads(s->body);
  REQUIRE(events.size() == 4);  // role, call, finish, [DONE]
  json call = json::parse(events[1])["choices"][0]["delta"]["tool_calls"][0];
  CHECK(call["function"] == json{{"name", "get_weather"}, {"arguments", R"({"city":"Paris"})"}});
  CHECK(json::parse(events[2])["choices"][0]["finish_reason"] == "tool_calls");
}

TEST_CASE("a model whose template cannot render tools gets the generic tool prompt", "[api][tools]") {
  TestServer ts;
  ts.fake().set_n_ctx(8192);
  ts.fake().set_tool_call_syntax(ToolCallSyntax::kNone);
  FakeScript script;
  script.pieces = {R"({"tool_call": {"name": "get_weather", )", R"("arguments": {"city": "Paris"}}})"};
  ts.fake().set_script(script);
  auto r = http(ts.port(), "POST", "/v1/chat/completions", chat_body(R"(,"parallel_tool_calls":false)"));
  REQUIRE(r);
  REQUIRE(r->status == 200);
  json msg = r->json()["choices"][0]["message"];
  CHECK(r->json()["choices"][0]["finish_reason"] == "tool_calls");
  REQUIRE(msg["tool_calls"].size() == 1);
  CHECK(msg["tool_calls"][0]["function"]["name"] == "get_weather");
  CHECK(msg["tool_calls"][0]["function"]["arguments"] == R"({"city":"Paris"})");
  CHECK(msg["content"].is_null());
  // The template got no tools: a system message describes them, in
  // llama.cpp's words, with the tools as indented JSON.
  ChatRequest got = ts.fake().last_chat();
  CHECK(got.tools_json.empty());
  REQUIRE(got.messages.size() == 2);
  CHECK(got.messages[0].role == "system");
  const std::string& sys = got.messages[0].content;
  CHECK(sys.rfind("Respond in JSON format, either with `tool_call` (a request to call tools) or with `response` "
                  "reply to the user's request.\n\nYou can call any of the following tools to satisfy the user's "
                  "requests: [\n  {\n    \"type\": \"function\",\n    \"function\": {\n      \"name\": "
                  "\"get_weather\",\n",
                  0) == 0);
  CHECK(sys.find(R"({"tool_call": {"name": "tool_name", "arguments": {"arg1": "some_value"}}})") != std::string::npos);
  CHECK(got.messages[1].content == "Weather in Paris?");

  // History with calls and results: the calls become the assistant's JSON,
  // the results user messages; a client system prompt comes first.
  const std::string history =
      R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather?"},)"
      R"({"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",)"
      R"("function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},)"
      R"({"role":"tool","tool_call_id":"call_1","content":"21 C"}],"tools":)" + kTools + "}";
  auto h = http(ts.port(), "POST", "/v1/chat/completions", history);
  REQUIRE(h);
  CHECK(h->status == 200);
  got = ts.fake().last_chat();
  REQUIRE(got.messages.size() == 4);
  CHECK(got.messages[0].content.rfind("Be brief.\n\nRespond in JSON format", 0) == 0);
  CHECK(got.messages[0].content.find(R"({"tool_calls": [{"name": "tool_name")") != std::string::npos);  // parallel
  CHECK(got.messages[2].role == "assistant");
  CHECK(got.messages[2].content == R"({"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}})");
  CHECK(got.messages[2].tool_calls.empty());
  CHECK(got.messages[3].role == "user");
  CHECK(got.messages[3].content == R"({"tool_response": {"tool_call_id": "call_1", "content": "21 C"}})");

  // tool_choice "required": the grammar of the envelope goes to the engine.
  auto forced = http(ts.port(), "POST", "/v1/chat/completions", chat_body(R"(,"tool_choice":"required")"));
  REQUIRE(forced);
  CHECK(forced->status == 200);
  auto reqs = ts.fake().requests();
  REQUIRE(reqs.size() == 3);
  CHECK(reqs[0].grammar == nullptr);
  CHECK(reqs[2].grammar != nullptr);
  // A plain reply in the envelope is content.
  script.pieces = {R"({"response": "I cannot tell."})"};
  ts.fake().set_script(script);
  auto reply = http(ts.port(), "POST", "/v1/chat/completions", chat_body(""));
  REQUIRE(reply);
  CHECK(reply->json()["choices"][0]["message"]["content"] == "I cannot tell.");
  CHECK(reply->json()["choices"][0]["finish_reason"] == "stop");
}

TEST_CASE("a forced Llama 3 call cut by max_tokens gives no content; unforced, the cut JSON is content",
          "[api][tools]") {
  TestServer ts;
  ts.fake().set_n_ctx(4096);
  ts.fake().set_tool_call_syntax(ToolCallSyntax::kLlama3Json);
  FakeScript cut;
  cut.pieces = {"{\"name\": \"get_weather\", ", "\"parameters\": {\"city\": \"Pa"};
  cut.finish = FinishReason::kLength;
  const std::string text = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Pa";
  for (const bool forced : {true, false}) {
    for (const std::string& stream : {std::string(), std::string(R"(,"stream":true)")}) {
      CAPTURE(forced, stream);
      ts.fake().set_script(cut);
      auto r = http(ts.port(), "POST", "/v1/chat/completions",
                    chat_body((forced ? std::string(R"(,"tool_choice":"required")") : std::string()) + stream));
      REQUIRE(r);
      REQUIRE(r->status == 200);
      const ChoiceSeen c = read_choice(*r, !stream.empty());
      CHECK_FALSE(c.any_tool_calls);
      CHECK(c.content == (forced ? "" : text));
      CHECK(c.finish == "length");
    }
  }
}
