// The rest of the OpenAI surface: unknown fields refused by name, the
// fields accepted and ignored on purpose, stream_options.include_usage's
// exact chunk sequence, system_fingerprint, completion_tokens_details,
// x-request-id, and llama.cpp's /tokenize, /detokenize and /apply-template.
// Expected values are written by hand from the OpenAI API reference, the
// llama.cpp server README and the FakeGenerator's script (one token per
// byte, "Hel" "lo" " world").
#include <chrono>
#include <regex>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "tests/api/test_client.h"

using nlohmann::json;
using namespace larder;
using namespace larder::testing;

namespace {

const std::string kHi = R"("messages":[{"role":"user","content":"Hi"}])";

void check_400(const std::optional<ClientResponse>& r, const std::string& param, const std::string& message_part) {
  REQUIRE(r);
  INFO(r->body);
  CHECK(r->status == 400);
  const json e = r->json()["error"];
  CHECK(e["type"] == "invalid_request_error");
  if (param.empty()) {
    CHECK(e["param"].is_null());
  } else {
    CHECK(e["param"] == param);
  }
  CHECK(e["message"].get<std::string>().find(message_part) != std::string::npos);
}

// "fp_" + the first 10 hex digits of XXH3-64 of "<model fingerprint>|<build>"
// (the fake's fingerprint is ""), computed with xxhsum -H3.
const char* const kFpTestBuild = "fp_d55936c742";  // "|larderd test-build"
const char* const kFp999 = "fp_b534607b9a";        // "|larderd 9.9.9"
const char* const kFp998 = "fp_5083d1e7e0";        // "|larderd 9.9.8"

}  // namespace

TEST_CASE("unknown top-level fields are refused by name, per endpoint", "[api][surface]") {
  TestServer ts;
  check_400(http(ts.port(), "POST", "/v1/chat/completions", "{" + kHi + R"(,"temprature":0.5})"), "temprature",
            "Unrecognized request argument supplied: temprature");
  // Chat-only fields on the completions endpoint, and the reverse.
  check_400(http(ts.port(), "POST", "/v1/completions", R"({"prompt":"Hi","tools":[]})"), "tools",
            "Unrecognized request argument supplied: tools");
  check_400(http(ts.port(), "POST", "/v1/completions", R"({"prompt":"Hi","messages":[]})"), "messages",
            "Unrecognized request argument supplied: messages");
  check_400(http(ts.port(), "POST", "/v1/chat/completions", "{" + kHi + R"(,"prompt":"x"})"), "prompt",
            "Unrecognized request argument supplied: prompt");
  // llama.cpp options larder does not have are unknown too, not ignored.
  check_400(http(ts.port(), "POST", "/v1/completions", R"({"prompt":"Hi","n_keep":4})"), "n_keep",
            "Unrecognized request argument supplied: n_keep");
  check_400(http(ts.port(), "POST", "/v1/chat/completions",
                 "{" + kHi + R"(,"stream":true,"stream_options":{"include_usage":true,"x":1}})"),
            "stream_options.x", "Unrecognized request argument supplied: stream_options.x");
  // Known but unsupported fields keep their own message.
  check_400(http(ts.port(), "POST", "/v1/chat/completions", "{" + kHi + R"(,"reasoning_effort":"low"})"),
            "reasoning_effort", "'reasoning_effort' is not supported");
  check_400(http(ts.port(), "POST", "/v1/chat/completions", "{" + kHi + R"(,"web_search_options":{}})"),
            "web_search_options", "'web_search_options' is not supported");
  CHECK(ts.fake().requests().empty());
}

TEST_CASE("fields accepted and ignored on purpose; their types are still checked", "[api][surface]") {
  TestServer ts;
  auto r = http(ts.port(), "POST", "/v1/chat/completions",
                "{" + kHi +
                    R"(,"user":"u-1","safety_identifier":"s-1","metadata":{"k":"v"},"store":false,)"
                    R"("service_tier":"auto","prompt_cache_key":"k","prompt_cache_retention":"24h",)"
                    R"("cache_prompt":true,"prediction":{"type":"content","content":"Hello"},)"
                    R"("verbosity":"medium","reasoning_format":"none",)"
                    R"("stream":true,"stream_options":{"include_obfuscation":true},"n_predict":2})");
  REQUIRE(r);
  INFO(r->body);
  CHECK(r->status == 200);
  REQUIRE(ts.fake().requests().size() == 1);
  CHECK(ts.fake().requests()[0].max_tokens == 2);  // n_predict is llama.cpp's max_tokens
  check_400(http(ts.port(), "POST", "/v1/chat/completions", "{" + kHi + R"(,"user":5})"), "user",
            "'user' must be a string");
  check_400(http(ts.port(), "POST", "/v1/chat/completions", "{" + kHi + R"(,"store":"yes"})"), "store",
            "'store' must be a boolean");
  check_400(http(ts.port(), "POST", "/v1/chat/completions", "{" + kHi + R"(,"metadata":[1]})"), "metadata",
            "'metadata' must be an object");
  check_400(http(ts.port(), "POST", "/v1/completions", R"({"prompt":"Hi","n_predict":0})"), "n_predict",
            "'n_predict' must be -1 or >= 1");
  // -1: no limit (max_tokens wins when both are given).
  auto c = http(ts.port(), "POST", "/v1/completions", R"({"prompt":"Hi","n_predict":-1,"max_tokens":3})");
  REQUIRE(c);
  CHECK(c->status == 200);
  CHECK(ts.fake().requests().back().max_tokens == 3);
}

TEST_CASE("bodies as the openai SDK and LangChain send them are accepted", "[api][surface]") {
  TestServer ts;
  ts.fake().set_n_ctx(4096);
  // @langchain/openai ChatOpenAI.invocationParams() with streaming and a
  // tool bound (every field it fills by default or from common options).
  const std::string langchain = R"({"model":"fake-model","temperature":0.7,"top_p":1,"frequency_penalty":0,)"
                                R"("presence_penalty":0,"n":1,"logit_bias":{},"stop":["\n\n"],"user":"lc",)"
                                R"("stream":true,"stream_options":{"include_usage":true},"seed":7,)"
                                R"("tools":[{"type":"function","function":{"name":"get_time",)"
                                R"("description":"now","parameters":{"type":"object","properties":{}}}}],)"
                                R"("tool_choice":"auto","parallel_tool_calls":true,"logprobs":false,)"
                                R"("max_tokens":8,"prompt_cache_key":"conv-1",)"
                                R"("messages":[{"role":"system","content":"sys"},{"role":"user","content":"hi"}]})";
  auto r = http(ts.port(), "POST", "/v1/chat/completions", langchain);
  REQUIRE(r);
  INFO(r->body);
  CHECK(r->status == 200);
  // The openai SDK's chat.completions.create with the common options.
  const std::string sdk = R"({"model":"fake-model","messages":[{"role":"developer","content":"d"},)"
                          R"({"role":"user","content":[{"type":"text","text":"hi"}]}],"max_completion_tokens":8,)"
                          R"("temperature":0,"seed":1,"stop":null,"response_format":{"type":"text"},)"
                          R"("store":false,"metadata":{"app":"x"},"service_tier":"default",)"
                          R"("safety_identifier":"h1"})";
  auto s = http(ts.port(), "POST", "/v1/chat/completions", sdk);
  REQUIRE(s);
  INFO(s->body);
  CHECK(s->status == 200);
  // Completions as the SDK's completions.create sends them.
  auto c = http(ts.port(), "POST", "/v1/completions",
                R"({"model":"fake-model","prompt":"Hi","max_tokens":4,"temperature":0,"user":"u","echo":false,)"
                R"("best_of":1,"logprobs":null,"suffix":null,"stream":false})");
  REQUIRE(c);
  INFO(c->body);
  CHECK(c->status == 200);
}

TEST_CASE("include_usage: usage null on every chunk, one choices [] chunk with the usage, then [DONE]",
          "[api][surface]") {
  ServerOptions options;
  options.build = "larderd test-build";
  TestServer ts(options);
  const std::string fp = kFpTestBuild;
  for (const char* endpoint : {"/v1/chat/completions", "/v1/completions"}) {
    INFO(endpoint);
    const bool chat = std::string(endpoint) == "/v1/chat/completions";
    const std::string body = std::string("{") + (chat ? kHi : R"("prompt":"Hi")") +
                             R"(,"stream":true,"stream_options":{"include_usage":true}})";
    auto r = http(ts.port(), "POST", endpoint, body);
    REQUIRE(r);
    REQUIRE(r->status == 200);
    std::vector<std::string> payloads = sse_payloads(r->body);
    REQUIRE(payloads.size() >= 3);
    CHECK(payloads.back() == "[DONE]");
    const json usage_chunk = json::parse(payloads[payloads.size() - 2]);
    CHECK(usage_chunk["choices"] == json::array());
    // "user: Hi\n" / "Hi": BOS + one token per byte; 3 pieces.
    const int prompt_tokens = chat ? 10 : 3;
    CHECK(usage_chunk["usage"]["prompt_tokens"] == prompt_tokens);
    CHECK(usage_chunk["usage"]["completion_tokens"] == 3);
    CHECK(usage_chunk["usage"]["total_tokens"] == prompt_tokens + 3);
    CHECK(usage_chunk["system_fingerprint"] == fp);
    std::string text;
    for (size_t i = 0; i + 2 < payloads.size(); ++i) {
      const json chunk = json::parse(payloads[i]);
      INFO(payloads[i]);
      REQUIRE(chunk.contains("usage"));
      CHECK(chunk["usage"].is_null());
      CHECK(chunk["system_fingerprint"] == fp);
      CHECK(chunk["choices"].size() == 1);
      text += chat ? chunk["choices"][0]["delta"].value("content", "") : chunk["choices"][0]["text"].get<std::string>();
    }
    CHECK(text == "Hello world");
  }
  // Without include_usage no chunk carries "usage".
  auto plain = http(ts.port(), "POST", "/v1/chat/completions", "{" + kHi + R"(,"stream":true})");
  REQUIRE(plain);
  for (const std::string& p : sse_payloads(plain->body)) {
    if (p == "[DONE]") continue;
    const json chunk = json::parse(p);
    CHECK_FALSE(chunk.contains("usage"));
    CHECK(chunk["system_fingerprint"] == fp);
    CHECK(chunk["choices"].size() == 1);
  }
}

TEST_CASE("system_fingerprint and completion_tokens_details on a whole body", "[api][surface]") {
  ServerOptions options;
  options.build = "larderd 9.9.9";
  TestServer ts(options);
  auto r = http(ts.port(), "POST", "/v1/chat/completions", "{" + kHi + "}");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  const json body = r->json();
  CHECK(body["system_fingerprint"] == kFp999);
  CHECK(std::regex_match(body["system_fingerprint"].get<std::string>(), std::regex("fp_[0-9a-f]{10}")));
  CHECK(body["system_fingerprint"] != kFp998);
  CHECK(body["usage"]["completion_tokens_details"] ==
        json({{"reasoning_tokens", 0}, {"accepted_prediction_tokens", 0}, {"rejected_prediction_tokens", 0}}));
  auto c = http(ts.port(), "POST", "/v1/completions", R"({"prompt":"Hi"})");
  REQUIRE(c);
  CHECK(c->json()["system_fingerprint"] == kFp999);
  CHECK(c->json()["usage"]["completion_tokens_details"]["reasoning_tokens"] == 0);
}

TEST_CASE("every response carries a fresh x-request-id", "[api][surface]") {
  TestServer ts;
  const std::regex form("req_[0-9a-f]{32}");
  std::set<std::string> seen;
  auto check = [&](const std::optional<ClientResponse>& r, int status) {
    REQUIRE(r);
    CHECK(r->status == status);
    const std::string id = r->header("x-request-id");
    INFO(id);
    CHECK(std::regex_match(id, form));
    CHECK(seen.insert(id).second);
  };
  check(http(ts.port(), "POST", "/v1/chat/completions", "{" + kHi + "}"), 200);
  check(http(ts.port(), "POST", "/v1/chat/completions", "{" + kHi + R"(,"stream":true})"), 200);
  check(http(ts.port(), "POST", "/v1/chat/completions", "{" + kHi + R"(,"bogus":1})"), 400);
  check(http(ts.port(), "GET", "/v1/models"), 200);
  check(http(ts.port(), "GET", "/nowhere"), 404);
  check(http(ts.port(), "POST", "/v1/chat/completions", "not json"), 400);
  // Two requests on one keep-alive connection get two ids.
  TestClient client(ts.port());
  check(client.request("GET", "/health"), 200);
  check(client.request("GET", "/health"), 200);
}

TEST_CASE("/tokenize and /detokenize as llama.cpp's server has them", "[api][surface]") {
  TestServer ts;
  auto tok = [&](const std::string& body) { return http(ts.port(), "POST", "/tokenize", body); };
  auto r = tok(R"({"content":"Hi"})");
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->json() == json::parse(R"({"tokens":[72,105]})"));
  CHECK(tok(R"({"content":"Hi","add_special":true})")->json() == json::parse(R"({"tokens":[256,72,105]})"));
  CHECK(http(ts.port(), "POST", "/v1/tokenize", R"({"content":"Hi"})")->json() ==
        json::parse(R"({"tokens":[72,105]})"));
  // Pieces: a string where it is UTF-8 on its own, else its bytes
  // ("é" is C3 A9: two byte tokens, neither valid alone).
  CHECK(tok(R"({"content":"Hé","with_pieces":true,"add_special":true})")->json() ==
        json::parse(R"({"tokens":[{"id":256,"piece":"<s>"},{"id":72,"piece":"H"},)"
                    R"({"id":195,"piece":[195]},{"id":169,"piece":[169]}]})"));
  // parse_special defaults to true, as in llama.cpp.
  CHECK(ts.fake().parse_special_seen().back() == true);
  tok(R"({"content":"x","parse_special":false})");
  CHECK(ts.fake().parse_special_seen().back() == false);
  CHECK(tok(R"({"content":""})")->json() == json::parse(R"({"tokens":[]})"));

  check_400(tok(R"({})"), "content", "'content' is required");
  check_400(tok(R"({"content":[1,2]})"), "content", "'content' must be a string");
  check_400(tok(R"({"content":"x","with_pieces":1})"), "with_pieces", "'with_pieces' must be a boolean");
  check_400(tok(R"({"content":"x","add_bos":true})"), "add_bos", "Unrecognized request argument supplied: add_bos");
  check_400(tok("[1]"), "", "must be a JSON object");
  check_400(tok("{"), "", "not valid JSON");
  check_400(tok(R"({"content":")" + std::string((1 << 20) + 1, 'a') + R"("})"), "content", "at most 1048576 bytes");
  auto wrong_model = tok(R"({"content":"x","model":"other"})");
  REQUIRE(wrong_model);
  CHECK(wrong_model->status == 404);

  auto detok = [&](const std::string& body) { return http(ts.port(), "POST", "/detokenize", body); };
  auto d = detok(R"({"tokens":[256,72,105]})");
  REQUIRE(d);
  CHECK(d->status == 200);
  CHECK(d->json() == json::parse(R"({"content":"<s>Hi"})"));
  CHECK(detok(R"({"tokens":[72,195,169]})")->json()["content"] == "H\xc3\xa9");
  CHECK(detok(R"({"tokens":[]})")->json()["content"] == "");
  // Ids outside [0, n_vocab = 257).
  check_400(detok(R"({"tokens":[72,257]})"), "tokens[1]", "token id 257 is outside the vocabulary [0, 257)");
  check_400(detok(R"({"tokens":[-1]})"), "tokens[0]", "outside the vocabulary");
  check_400(detok(R"({"tokens":[18446744073709551615]})"), "tokens[0]", "outside the vocabulary");
  check_400(detok(R"({"tokens":[1.5]})"), "tokens[0]", "must be an integer");
  // Integral floats are the integers they spell, as in every integer field.
  CHECK(detok(R"({"tokens":[256,72.0,1.05e2]})")->json()["content"] == "<s>Hi");
  check_400(detok(R"({"tokens":[72,1e20]})"), "tokens[1]", "outside the 64-bit integer range");
  check_400(detok(R"({"tokens":"72"})"), "tokens", "must be an array");
  check_400(detok(R"({})"), "tokens", "'tokens' is required");
  std::string many = R"({"tokens":[)";
  for (int i = 0; i <= (1 << 18); ++i) many += i ? ",1" : "1";
  check_400(detok(many + "]}"), "tokens", "at most 262144");

  auto get = http(ts.port(), "GET", "/tokenize");
  REQUIRE(get);
  CHECK(get->status == 405);
}

TEST_CASE("/apply-template renders a chat body without generating", "[api][surface]") {
  TestServer ts;
  auto r = http(ts.port(), "POST", "/apply-template",
                R"({"messages":[{"role":"system","content":"S"},{"role":"user","content":"Hi"}],"max_tokens":5})");
  REQUIRE(r);
  INFO(r->body);
  CHECK(r->status == 200);
  CHECK(r->json() == json::parse(R"({"prompt":"system: S\nuser: Hi\n"})"));
  CHECK(ts.fake().requests().empty());  // nothing was generated
  check_400(http(ts.port(), "POST", "/apply-template", R"({"messages":[]})"), "messages", "must not be empty");
  check_400(http(ts.port(), "POST", "/apply-template", "{" + kHi + R"(,"nope":1})"), "nope",
            "Unrecognized request argument supplied: nope");
  // A template that cannot show tools: rendered as a chat request is, with
  // the generic tool prompt (api/generic_tools.h) in a system message.
  ts.fake().set_tool_call_syntax(ToolCallSyntax::kNone);
  r = http(ts.port(), "POST", "/apply-template", "{" + kHi + R"(,"tools":[{"type":"function","function":{"name":"f"}}]})");
  REQUIRE(r);
  CHECK(r->status == 200);
  const std::string prompt = r->json().value("prompt", "");
  CHECK(prompt.rfind("system: Respond in JSON format, either with `tool_call`", 0) == 0);
  CHECK(prompt.find("\"name\": \"f\"") != std::string::npos);
  CHECK(prompt.find("user: Hi\n") != std::string::npos);
}

TEST_CASE("tokenizing and rendering run on the pool, never on the loop thread", "[api][surface]") {
  TestServer ts;
  ts.fake().close_prompt_gate();
  TestClient a(ts.port()), b(ts.port());
  const std::string tokenize_body = R"({"content":"Hi"})";
  REQUIRE(a.send_raw("POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
                     std::to_string(tokenize_body.size()) + "\r\n\r\n" + tokenize_body));
  REQUIRE(b.send_raw("POST /apply-template HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
                     std::to_string(kHi.size() + 2) + "\r\n\r\n{" + kHi + "}"));
  REQUIRE(ts.fake().wait_at_gate(2, std::chrono::seconds(10)));
  // Both wait inside the generator; the loop still answers.
  auto health = http(ts.port(), "GET", "/health");
  REQUIRE(health);
  CHECK(health->status == 200);
  ts.fake().open_prompt_gate();
  auto ra = a.read_response();
  auto rb = b.read_response();
  REQUIRE(ra);
  REQUIRE(rb);
  CHECK(ra->json() == json::parse(R"({"tokens":[72,105]})"));
  CHECK(rb->json() == json::parse(R"({"prompt":"user: Hi\n"})"));
}
