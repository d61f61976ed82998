// Reasoning models through /v1/chat/completions with the FakeGenerator
// scripted to think in <think> tags: message.reasoning_content,
// delta.reasoning_content, usage.completion_tokens_details.reasoning_tokens
// (the fake makes one token per byte, so the counts are the bytes of the
// pieces that hold the block), reasoning_format, tool calls only outside
// the thinking, and chat_template_kwargs reaching the template.
#include <catch2/catch.hpp>

#include "tests/api/test_client.h"

using nlohmann::json;
using namespace larder;
using namespace larder::testing;

namespace {

std::string body(const std::string& extra = "") {
  return R"({"messages":[{"role":"user","content":"Hi"}])" + extra + "}";
}

FakeScript thinking_script() {
  FakeScript s;
  // <think> (7 bytes), "\nI should greet." (16), "\n</think>" (9): 32 reasoning tokens.
  s.pieces = {"<think>", "\nI should greet.", "\n</think>", "\n\nHello", "!"};
  return s;
}

struct Streamed {
  std::string reasoning, content;
  std::vector<std::string> order;  // "r" / "c" per chunk with text
  json usage;
};

Streamed read_stream(const std::string& sse) {
  Streamed out;
  for (const std::string& e : sse_payloads(sse)) {
    if (e == "[DONE]") continue;
    json j = json::parse(e);
    if (j.contains("usage") && !j["usage"].is_null()) out.usage = j["usage"];
    if (j["choices"].empty()) continue;
    const json& d = j["choices"][0]["delta"];
    if (d.contains("reasoning_content")) {
      out.reasoning += d["reasoning_content"].get<std::string>();
      out.order.push_back("r");
    }
    if (d.contains("content") && !d["content"].get<std::string>().empty()) {
      out.content += d["content"].get<std::string>();
      out.order.push_back("c");
    }
  }
  return out;
}

}  // namespace

TEST_CASE("reasoning: the thinking becomes reasoning_content, whole and streamed", "[api][reasoning]") {
  TestServer ts;
  ts.fake().set_n_ctx(4096);
  ts.fake().set_reasoning(ReasoningSyntax::kThinkTags);
  ts.fake().set_script(thinking_script());

  auto r = http(ts.port(), "POST", "/v1/chat/completions", body());
  REQUIRE(r);
  REQUIRE(r->status == 200);
  json j = r->json();
  json msg = j["choices"][0]["message"];
  CHECK(msg["reasoning_content"] == "I should greet.");
  CHECK(msg["content"] == "Hello!");
  CHECK(j["usage"]["completion_tokens_details"]["reasoning_tokens"] == 32);

  auto s = http(ts.port(), "POST", "/v1/chat/completions",
                body(R"(,"stream":true,"stream_options":{"include_usage":true})"));
  REQUIRE(s);
  REQUIRE(s->status == 200);
  Streamed st = read_stream(s->body);
  CHECK(st.reasoning == "I should greet.");
  CHECK(st.content == "Hello!");
  CHECK(st.order == std::vector<std::string>{"r", "c", "c"});  // "I should greet." then "Hello", "!"
  CHECK(st.usage["completion_tokens_details"]["reasoning_tokens"] == 32);

  // reasoning_format "none": all of it is content, tags included.
  auto none = http(ts.port(), "POST", "/v1/chat/completions", body(R"(,"reasoning_format":"none")"));
  REQUIRE(none);
  json n = none->json();
  CHECK(n["choices"][0]["message"]["content"] == "<think>\nI should greet.\n</think>\n\nHello!");
  CHECK_FALSE(n["choices"][0]["message"].contains("reasoning_content"));
  CHECK(n["usage"]["completion_tokens_details"]["reasoning_tokens"] == 0);

  // A model without reasoning markers: the same text is content.
  ts.fake().set_reasoning(ReasoningSyntax::kNone);
  auto plain = http(ts.port(), "POST", "/v1/chat/completions", body());
  REQUIRE(plain);
  CHECK(plain->json()["choices"][0]["message"]["content"] == "<think>\nI should greet.\n</think>\n\nHello!");
}

TEST_CASE("reasoning: streamed logprobs ride on the chunk of their own tokens, thinking included", "[api][reasoning]") {
  TestServer ts;
  ts.fake().set_n_ctx(4096);
  ts.fake().set_reasoning(ReasoningSyntax::kThinkTags);
  FakeScript s = thinking_script();
  // One entry per piece, told apart by its logprob: -1 for piece 0, -2 for piece 1, ...
  for (size_t p = 0; p < s.pieces.size(); ++p) {
    TokenLogprob e;
    e.id = int32_t(p);
    e.logprob = -double(p + 1);
    e.piece = s.pieces[p];
    s.logprobs.push_back({e});
  }
  ts.fake().set_script(s);
  auto r = http(ts.port(), "POST", "/v1/chat/completions", body(R"(,"stream":true,"logprobs":true)"));
  REQUIRE(r);
  REQUIRE(r->status == 200);
  // (chunk kind, logprobs it carries): "<think>" is held until the split
  // knows it opens the block, so its entry goes with the first thinking text.
  std::vector<std::pair<std::string, std::vector<double>>> seen;
  for (const std::string& e : sse_payloads(r->body)) {
    if (e == "[DONE]") continue;
    json j = json::parse(e);
    if (j["choices"].empty()) continue;
    const json& ch = j["choices"][0];
    std::vector<double> lps;
    if (ch.contains("logprobs") && !ch["logprobs"].is_null()) {
      for (const json& t : ch["logprobs"]["content"]) lps.push_back(t["logprob"].get<double>());
    }
    const json& d = ch["delta"];
    const bool text = d.contains("reasoning_content") || (d.contains("content") && !d["content"].get<std::string>().empty());
    if (!text) {
      CHECK(lps.empty());
      continue;
    }
    seen.push_back({d.contains("reasoning_content") ? "r" : "c", lps});
  }
  using Seen = std::vector<std::pair<std::string, std::vector<double>>>;
  // The closing tag yields no text of its own: its entry rides on "Hello".
  CHECK(seen == Seen{{"r", {-1, -2}}, {"c", {-3, -4}}, {"c", {-5}}});
}

TEST_CASE("reasoning: a prompt that opens the block starts the answer inside it", "[api][reasoning]") {
  TestServer ts;
  ts.fake().set_n_ctx(4096);
  ts.fake().set_reasoning(ReasoningSyntax::kThinkTags, /*opens=*/true);
  FakeScript s;
  s.pieces = {"Hmm.", "\n</think>\n\n", "Yes."};
  ts.fake().set_script(s);
  auto r = http(ts.port(), "POST", "/v1/chat/completions", body());
  REQUIRE(r);
  json msg = r->json()["choices"][0]["message"];
  CHECK(msg["reasoning_content"] == "Hmm.");
  CHECK(msg["content"] == "Yes.");
  CHECK(r->json()["usage"]["completion_tokens_details"]["reasoning_tokens"] == 4 + 11);
  // Under a grammar the answer is constrained from its first token: no thinking.
  auto g = http(ts.port(), "POST", "/v1/chat/completions", body(R"(,"grammar":"root ::= [a-zA-Z.\\n </>]+")"));
  REQUIRE(g);
  CHECK(g->json()["choices"][0]["message"]["content"] == "Hmm.\n</think>\n\nYes.");
}

TEST_CASE("reasoning: a <think> written under a grammar is content, whole and streamed", "[api][reasoning]") {
  // README: under a grammar none of the answer is thinking, also when the
  // grammar lets the model open the block itself.
  TestServer ts;
  ts.fake().set_n_ctx(4096);
  ts.fake().set_reasoning(ReasoningSyntax::kThinkTags);
  ts.fake().set_script(thinking_script());
  const std::string whole = "<think>\nI should greet.\n</think>\n\nHello!";
  for (const char* constraint :
       {R"(,"grammar":"root ::= [a-zA-Z.!\\n </>]+")", R"(,"response_format":{"type":"json_object"})",
        R"(,"json_schema":{"type":"object"})"}) {
    CAPTURE(constraint);
    auto r = http(ts.port(), "POST", "/v1/chat/completions", body(constraint));
    REQUIRE(r);
    REQUIRE(r->status == 200);
    const json msg = r->json()["choices"][0]["message"];
    CHECK(msg["content"] == whole);
    CHECK_FALSE(msg.contains("reasoning_content"));
    auto s = http(ts.port(), "POST", "/v1/chat/completions",
                  body(std::string(constraint) + R"(,"stream":true)"));
    REQUIRE(s);
    REQUIRE(s->status == 200);
    Streamed st = read_stream(s->body);
    CHECK(st.reasoning.empty());
    CHECK(st.content == whole);
  }
}

TEST_CASE("reasoning: tool calls count only outside the thinking", "[api][reasoning][tools]") {
  TestServer ts;
  ts.fake().set_n_ctx(8192);
  ts.fake().set_reasoning(ReasoningSyntax::kThinkTags);
  const std::string tools =
      R"(,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
      R"("properties":{"city":{"type":"string"}}}}}])";
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  for (const std::string& stream : {std::string(), std::string(R"(,"stream":true)")}) {
    CAPTURE(stream);
    FakeScript inside;
    inside.pieces = {"<think>I could write ", call, " but no.</think>", "\n\nNo call."};
    ts.fake().set_script(inside);
    auto r = http(ts.port(), "POST", "/v1/chat/completions", body(tools + stream));
    REQUIRE(r);
    REQUIRE(r->status == 200);
    if (stream.empty()) {
      json c = r->json()["choices"][0];
      CHECK(c["finish_reason"] == "stop");
      CHECK_FALSE(c["message"].contains("tool_calls"));
      CHECK(c["message"]["content"] == "No call.");
      CHECK(c["message"]["reasoning_content"] == "I could write " + call + " but no.");
      // reasoning_format "none": the block is content, and still not a call.
      auto none = http(ts.port(), "POST", "/v1/chat/completions", body(tools + R"(,"reasoning_format":"none")"));
      REQUIRE(none);
      json nc = none->json()["choices"][0];
      CHECK(nc["finish_reason"] == "stop");
      CHECK_FALSE(nc["message"].contains("tool_calls"));
      CHECK(nc["message"]["content"] == "<think>I could write " + call + " but no.</think>\n\nNo call.");
    } else {
      Streamed st = read_stream(r->body);
      CHECK(st.reasoning == "I could write " + call + " but no.");
      CHECK(st.content == "No call.");
      CHECK(r->body.find("tool_calls") == std::string::npos);
    }

    FakeScript after;
    after.pieces = {"<think>Paris, then.</think>\n", call};
    ts.fake().set_script(after);
    auto a = http(ts.port(), "POST", "/v1/chat/completions", body(tools + stream));
    REQUIRE(a);
    if (stream.empty()) {
      json c = a->json()["choices"][0];
      CHECK(c["finish_reason"] == "tool_calls");
      REQUIRE(c["message"]["tool_calls"].size() == 1);
      CHECK(c["message"]["tool_calls"][0]["function"]["arguments"] == R"({"city":"Paris"})");
      CHECK(c["message"]["reasoning_content"] == "Paris, then.");
      CHECK(c["message"]["content"].is_null());
    } else {
      Streamed st = read_stream(a->body);
      CHECK(st.reasoning == "Paris, then.");
      CHECK(st.content.empty());
      CHECK(a->body.find(R"("finish_reason":"tool_calls")") != std::string::npos);
    }
  }
}

TEST_CASE("chat_template_kwargs and reasoning_format are checked and passed on", "[api][reasoning]") {
  TestServer ts;
  ts.fake().set_n_ctx(4096);
  auto ok = http(ts.port(), "POST", "/v1/chat/completions",
                 body(R"(,"chat_template_kwargs":{"enable_thinking":false,"custom":"x"})"));
  REQUIRE(ok);
  CHECK(ok->status == 200);
  CHECK(json::parse(ts.fake().last_chat().template_kwargs_json) == json{{"enable_thinking", false}, {"custom", "x"}});
  auto empty = http(ts.port(), "POST", "/v1/chat/completions", body(R"(,"chat_template_kwargs":{})"));
  REQUIRE(empty);
  CHECK(empty->status == 200);
  CHECK(ts.fake().last_chat().template_kwargs_json.empty());

  struct Bad {
    const char* extra;
    const char* param;
  };
  for (const Bad& b : {Bad{R"(,"chat_template_kwargs":[1])", "chat_template_kwargs"},
                       Bad{R"(,"chat_template_kwargs":"x")", "chat_template_kwargs"},
                       Bad{R"(,"chat_template_kwargs":{"messages":[]})", "chat_template_kwargs.messages"},
                       Bad{R"(,"chat_template_kwargs":{"add_generation_prompt":false})",
                           "chat_template_kwargs.add_generation_prompt"},
                       Bad{R"(,"reasoning_format":"deepseek-legacy")", "reasoning_format"},
                       Bad{R"(,"reasoning_format":1)", "reasoning_format"}}) {
    CAPTURE(b.extra);
    auto r = http(ts.port(), "POST", "/v1/chat/completions", body(b.extra));
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(r->json()["error"]["param"] == b.param);
  }
}
