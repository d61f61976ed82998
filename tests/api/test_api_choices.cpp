// n > 1 choices and completion prompt arrays through the HTTP API, with the
// FakeGenerator answering each choice j with the script's pieces (the first
// one prefixed "[j]" for j > 0) and interleaving the choices' events. The
// expected bodies, chunk sequences and usage numbers are written by hand
// from the OpenAI reference ("choices[].index"; a prompt array's choice
// i * n + j) and the fake's script.
#include <map>

#include <catch2/catch.hpp>

#include "tests/api/test_client.h"

using nlohmann::json;
using namespace larder;
using namespace larder::testing;

namespace {

// "user: Hi\n" -> BOS + 9 bytes = 10 prompt tokens; each choice answers
// "Hel" "lo" " world" (3 completion tokens).
const std::string kChatHi = R"({"model":"fake-model","messages":[{"role":"user","content":"Hi"}])";

json usage(int prompt, int completion) {
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", 0}}},
          // No reasoning split, no predicted outputs.
          {"completion_tokens_details",
           {{"reasoning_tokens", 0}, {"accepted_prediction_tokens", 0}, {"rejected_prediction_tokens", 0}}}};
}

// A chat request for n = 2 choices with one tool, get_time, that the fake
// calls in the template's syntax (Qwen's <tool_call> form) in every choice.
std::optional<ClientResponse> post_tool_call_choices(TestServer& ts, bool stream) {
  ts.fake().set_n_ctx(4096);
  FakeScript s;
  s.pieces = {"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"};
  ts.fake().set_script(s);
  const std::string tools = R"([{"type":"function","function":{"name":"get_time","parameters":{"type":"object"}}}])";
  return http(ts.port(), "POST", "/v1/chat/completions",
              std::string(R"({"messages":[{"role":"user","content":"Time?"}],"n":2,)") +
                  (stream ? R"("stream":true,)" : "") + R"("tools":)" + tools + "}");
}

}  // namespace

TEST_CASE("chat n = 3: three indexed choices, the prompt counted once", "[api][choices]") {
  TestServer ts;
  auto r = http(ts.port(), "POST", "/v1/chat/completions", kChatHi + R"(,"n":3,"seed":5})");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  const json body = r->json();
  const json expected_choices = {
      {{"index", 0}, {"message", {{"role", "assistant"}, {"content", "Hello world"}}}, {"logprobs", nullptr},
       {"finish_reason", "stop"}},
      {{"index", 1}, {"message", {{"role", "assistant"}, {"content", "[1]Hello world"}}}, {"logprobs", nullptr},
       {"finish_reason", "stop"}},
      {{"index", 2}, {"message", {{"role", "assistant"}, {"content", "[2]Hello world"}}}, {"logprobs", nullptr},
       {"finish_reason", "stop"}},
  };
  CHECK(body["choices"] == expected_choices);
  // 10 prompt tokens once; 3 x 3 completion tokens.
  CHECK(body["usage"] == usage(10, 9));
  // One engine request with n = 3 (the engine forks the choices).
  auto reqs = ts.fake().requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].n == 3);
  CHECK(reqs[0].first_choice == 0);
  REQUIRE(reqs[0].sampling.seed.has_value());
  CHECK(*reqs[0].sampling.seed == 5);
  // /metrics counts the prompt once too, and every choice's tokens.
  auto m = http(ts.port(), "GET", "/metrics");
  REQUIRE(m);
  CHECK(m->body.find("\nlarder_prompt_tokens_total 10\n") != std::string::npos);
  CHECK(m->body.find("\nlarder_generation_tokens_total 9\n") != std::string::npos);
}

TEST_CASE("streamed chat n = 3: a role chunk, the deltas and a finish chunk per index", "[api][choices]") {
  TestServer ts;
  auto r = http(ts.port(), "POST", "/v1/chat/completions",
                kChatHi + R"(,"n":3,"stream":true,"stream_options":{"include_usage":true}})");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  const std::vector<std::string> events = sse_payloads(r->body);
  // 3 role chunks, 3 x 3 content chunks, 3 finish chunks, usage, [DONE].
  REQUIRE(events.size() == 3 + 9 + 3 + 1 + 1);
  CHECK(events.back() == "[DONE]");
  std::map<int, std::string> content;
  std::map<int, int> n_finish;
  for (int i = 0; i < 3; ++i) {
    const json role = json::parse(events[size_t(i)]);
    CHECK(role["choices"][0]["index"] == i);
    CHECK(role["choices"][0]["delta"] == json{{"role", "assistant"}, {"content", ""}});
  }
  for (size_t e = 3; e + 2 < events.size(); ++e) {
    const json chunk = json::parse(events[e]);
    CHECK(chunk["object"] == "chat.completion.chunk");
    REQUIRE(chunk["choices"].size() == 1);
    const json& c = chunk["choices"][0];
    const int index = c["index"].get<int>();
    INFO("chunk " << e << ": " << events[e]);
    REQUIRE(index >= 0);
    REQUIRE(index < 3);
    CHECK(n_finish[index] == 0);  // nothing of a choice after its finish chunk
    if (c["finish_reason"].is_null()) {
      content[index] += c["delta"]["content"].get<std::string>();
    } else {
      CHECK(c["finish_reason"] == "stop");
      ++n_finish[index];
    }
  }
  CHECK(content == std::map<int, std::string>{{0, "Hello world"}, {1, "[1]Hello world"}, {2, "[2]Hello world"}});
  CHECK(n_finish == std::map<int, int>{{0, 1}, {1, 1}, {2, 1}});
  const json last = json::parse(events[events.size() - 2]);
  CHECK(last["choices"] == json::array());
  CHECK(last["usage"] == usage(10, 9));
}

TEST_CASE("a completion with two prompts x n = 2: choices i * 2 + j, usage summed", "[api][choices]") {
  TestServer ts;
  const bool tokens = GENERATE(false, true);
  CAPTURE(tokens);
  // "Hi" -> BOS 'H' 'i' (3 tokens), "Yo!" -> BOS 'Y' 'o' '!' (4 tokens).
  const std::string prompt = tokens ? R"([[256,72,105],[256,89,111,33]])" : R"(["Hi","Yo!"])";
  auto r = http(ts.port(), "POST", "/v1/completions", R"({"prompt":)" + prompt + R"(,"n":2,"max_tokens":5})");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  const json body = r->json();
  CHECK(body["object"] == "text_completion");
  REQUIRE(body["choices"].size() == 4);
  const std::vector<std::string> texts = {"Hello world", "[1]Hello world", "Hello world", "[1]Hello world"};
  for (int i = 0; i < 4; ++i) {
    CHECK(body["choices"][size_t(i)]["index"] == i);
    CHECK(body["choices"][size_t(i)]["text"] == texts[size_t(i)]);
    CHECK(body["choices"][size_t(i)]["finish_reason"] == "stop");
  }
  // 3 + 4 prompt tokens (each prompt once), 4 x 3 completion tokens.
  CHECK(body["usage"] == usage(7, 12));
  // One batch: an engine request per prompt, its choices numbered from 2 x i.
  auto reqs = ts.fake().requests();
  REQUIRE(reqs.size() == 2);
  CHECK(reqs[0].prompt_tokens == std::vector<int32_t>{256, 'H', 'i'});
  CHECK(reqs[1].prompt_tokens == std::vector<int32_t>{256, 'Y', 'o', '!'});
  CHECK(reqs[0].n == 2);
  CHECK(reqs[1].n == 2);
  CHECK(reqs[0].first_choice == 0);
  CHECK(reqs[1].first_choice == 2);
  // max_tokens is clamped per prompt to the room it leaves (64-token context).
  CHECK(reqs[0].max_tokens == 5);
}

TEST_CASE("a streamed completion with two prompts indexes every chunk", "[api][choices]") {
  TestServer ts;
  auto r = http(ts.port(), "POST", "/v1/completions", R"({"prompt":["Hi","Yo!"],"stream":true})");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  const std::vector<std::string> events = sse_payloads(r->body);
  // 2 x 3 text chunks, 2 finish chunks, [DONE] (no role chunks for completions).
  REQUIRE(events.size() == 6 + 2 + 1);
  std::map<int, std::string> text;
  std::map<int, int> n_finish;
  for (size_t e = 0; e + 1 < events.size(); ++e) {
    const json c = json::parse(events[e])["choices"][0];
    const int index = c["index"].get<int>();
    text[index] += c["text"].get<std::string>();
    if (!c["finish_reason"].is_null()) ++n_finish[index];
  }
  CHECK(text == std::map<int, std::string>{{0, "Hello world"}, {1, "Hello world"}});
  CHECK(n_finish == std::map<int, int>{{0, 1}, {1, 1}});
}

TEST_CASE("tool calls are parsed per choice", "[api][choices]") {
  TestServer ts;
  auto r = post_tool_call_choices(ts, /*stream=*/false);
  REQUIRE(r);
  REQUIRE(r->status == 200);
  const json body = r->json();
  REQUIRE(body["choices"].size() == 2);
  for (int i = 0; i < 2; ++i) {
    const json& m = body["choices"][size_t(i)]["message"];
    INFO("choice " << i << ": " << m.dump());
    CHECK(body["choices"][size_t(i)]["finish_reason"] == "tool_calls");
    REQUIRE(m["tool_calls"].size() == 1);
    CHECK(m["tool_calls"][0]["function"]["name"] == "get_time");
  }
  // Choice 1's "[1]" before its call is content; choice 0 has none.
  CHECK(body["choices"][0]["message"]["content"].is_null());
  CHECK(body["choices"][1]["message"]["content"] == "[1]");
  // Every call has an id of its own.
  CHECK(body["choices"][0]["message"]["tool_calls"][0]["id"] != body["choices"][1]["message"]["tool_calls"][0]["id"]);
}

TEST_CASE("streamed tool calls come per choice, under its index", "[api][choices]") {
  TestServer ts;
  auto r = post_tool_call_choices(ts, /*stream=*/true);
  REQUIRE(r);
  REQUIRE(r->status == 200);
  std::map<int, int> n_calls;
  std::map<int, std::string> finish, content;
  for (const std::string& e : sse_payloads(r->body)) {
    if (e == "[DONE]") continue;
    const json c = json::parse(e)["choices"][0];
    const int index = c["index"].get<int>();
    if (c["delta"].contains("tool_calls")) {
      ++n_calls[index];
      CHECK(c["delta"]["tool_calls"][0]["index"] == 0);  // the call's index within its choice
      CHECK(c["delta"]["tool_calls"][0]["function"]["name"] == "get_time");
    }
    if (c["delta"].contains("content") && c["delta"]["content"].is_string()) {
      content[index] += c["delta"]["content"].get<std::string>();
    }
    if (!c["finish_reason"].is_null()) finish[index] = c["finish_reason"].get<std::string>();
  }
  CHECK(n_calls == std::map<int, int>{{0, 1}, {1, 1}});
  CHECK(finish == std::map<int, std::string>{{0, "tool_calls"}, {1, "tool_calls"}});
  CHECK(content[1] == "[1]");  // choice 1's text before its call
  CHECK(content[0].empty());
}

TEST_CASE("n above server.max_n is refused naming n", "[api][choices]") {
  ServerOptions o;
  o.max_n = 2;
  TestServer ts(o);
  auto ok = http(ts.port(), "POST", "/v1/chat/completions", kChatHi + R"(,"n":2})");
  REQUIRE(ok);
  CHECK(ok->status == 200);
  auto r = http(ts.port(), "POST", "/v1/completions", R"({"prompt":"Hi","n":3})");
  REQUIRE(r);
  CHECK(r->status == 400);
  CHECK(r->json()["error"]["param"] == "n");
  CHECK(r->json()["error"]["message"].get<std::string>().find("server.max_n") != std::string::npos);
  CHECK(ts.fake().requests().size() == 1);
}

TEST_CASE("one failing choice fails the response", "[api][choices]") {
  TestServer ts;
  FakeScript s;
  s.finish = FinishReason::kError;
  s.error = "KV cache is full";
  ts.fake().set_script(s);
  auto r = http(ts.port(), "POST", "/v1/chat/completions", kChatHi + R"(,"n":2})");
  REQUIRE(r);
  CHECK(r->status == 500);
  CHECK(r->json()["error"]["message"] == "KV cache is full");
}
