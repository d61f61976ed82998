// Endpoint behaviour against the OpenAI API reference: response bodies field
// by field, streamed chunk sequences and their chunked framing. Expected
// values are written by hand from the reference and the FakeGenerator's
// script, not produced by the code under test.
#include <ctime>

#include <catch2/catch.hpp>

#include "tests/api/test_client.h"

using nlohmann::json;
using namespace larder;
using namespace larder::testing;

namespace {

// One user message "Hi": the fake renders "user: Hi\n" (9 bytes) and
// tokenizes it to BOS + 9 byte tokens = 10 prompt tokens. The default script
// answers "Hel" "lo" " world": 3 completion tokens (one per event).
const std::string kChatHi = R"({"model":"fake-model","messages":[{"role":"user","content":"Hi"}]})";

// system_fingerprint of the fake ("" fingerprint, "" build): "fp_" + the
// first 10 hex digits of XXH3-64("|"), by xxhsum -H3.
const char* const kFingerprint = "fp_d2c01b5588";
// usage.completion_tokens_details: no reasoning, no predicted outputs.
const json kNoDetails = {{"reasoning_tokens", 0}, {"accepted_prediction_tokens", 0}, {"rejected_prediction_tokens", 0}};

bool is_id(const json& v, const std::string& prefix) {
  if (!v.is_string()) return false;
  std::string s = v.get<std::string>();
  if (s.rfind(prefix, 0) != 0 || s.size() != prefix.size() + 24) return false;
  for (size_t i = prefix.size(); i < s.size(); ++i) {
    if (!std::isalnum(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

bool is_recent(const json& v) {
  if (!v.is_number_integer()) return false;
  int64_t now = static_cast<int64_t>(std::time(nullptr));
  return v.get<int64_t>() >= now - 60 && v.get<int64_t>() <= now + 60;
}

}  // namespace

TEST_CASE("non-streaming chat completion body, field by field", "[api]") {
  TestServer ts;
  auto r = http(ts.port(), "POST", "/v1/chat/completions", kChatHi);
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->header("content-type") == "application/json");
  json body = r->json();
  CHECK(is_id(body["id"], "chatcmpl-"));
  CHECK(is_recent(body["created"]));
  // Everything but id/created, as the chat completion object reference shows it.
  json expected = {
      {"id", body["id"]},
      {"object", "chat.completion"},
      {"created", body["created"]},
      {"model", "fake-model"},
      {"system_fingerprint", kFingerprint},
      {"choices",
       {{{"index", 0},
         {"message", {{"role", "assistant"}, {"content", "Hello world"}}},
         {"logprobs", nullptr},
         {"finish_reason", "stop"}}}},
      {"usage",
       {{"prompt_tokens", 10},
        {"completion_tokens", 3},
        {"total_tokens", 13},
        {"prompt_tokens_details", {{"cached_tokens", 0}}},
        {"completion_tokens_details", kNoDetails}}},  // present also when 0
      // llama.cpp extension: prompt_n = 10 - 0 cached, the fake's times.
      {"timings", {{"prompt_n", 10}, {"prompt_ms", 12.5}, {"predicted_n", 3}, {"predicted_ms", 30.25}}},
  };
  CHECK(body == expected);

  // The engine got the rendered prompt, tokenized with parse_special = true
  // (the fake's chat_uses_special_tokens()).
  auto reqs = ts.fake().requests();
  REQUIRE(reqs.size() == 1);
  std::vector<int32_t> prompt = {FakeGenerator::kBos, 'u', 's', 'e', 'r', ':', ' ', 'H', 'i', '\n'};
  CHECK(reqs[0].prompt_tokens == prompt);
  CHECK(ts.fake().parse_special_seen() == std::vector<bool>{true});
}

TEST_CASE("cached tokens and a length finish are reported", "[api]") {
  TestServer ts;
  FakeScript script;
  script.pieces = {"a", "b"};
  script.cached_tokens = 8;
  script.finish = FinishReason::kLength;
  ts.fake().set_script(script);
  auto r = http(ts.port(), "POST", "/chat/completions", kChatHi);  // also without /v1
  REQUIRE(r);
  REQUIRE(r->status == 200);
  json body = r->json();
  CHECK(body["choices"][0]["message"]["content"] == "ab");
  CHECK(body["choices"][0]["finish_reason"] == "length");
  CHECK(body["usage"] == json{{"prompt_tokens", 10},
                              {"completion_tokens", 2},
                              {"total_tokens", 12},
                              {"prompt_tokens_details", {{"cached_tokens", 8}}},
                              {"completion_tokens_details", kNoDetails}});
  CHECK(body["timings"]["prompt_n"] == 2);  // 10 prompt tokens, 8 of them cached
}

TEST_CASE("streaming chat: exact SSE event sequence and chunked framing", "[api]") {
  TestServer ts;
  const bool include_usage = GENERATE(true, false);
  CAPTURE(include_usage);
  std::string body = R"({"messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":)" +
                     std::string(include_usage ? "true" : "false") + "}}";
  auto r = http(ts.port(), "POST", "/v1/chat/completions", body);
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->header("content-type") == "text/event-stream");
  CHECK(r->header("transfer-encoding") == "chunked");
  CHECK(r->header("content-length").empty());
  CHECK(r->complete);  // ended with the zero-length chunk

  auto events = sse_payloads(r->body);
  // role chunk, 3 content chunks, finish chunk, [usage chunk], [DONE]
  REQUIRE(events.size() == (include_usage ? 7u : 6u));
  CHECK(events.back() == "[DONE]");

  json first = json::parse(events[0]);
  REQUIRE(is_id(first["id"], "chatcmpl-"));
  CHECK(is_recent(first["created"]));
  auto chunk = [&](json delta, json finish) {
    json c = {{"id", first["id"]},
              {"object", "chat.completion.chunk"},
              {"created", first["created"]},
              {"model", "fake-model"},
              {"system_fingerprint", kFingerprint},
              {"choices", {{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", finish}}}}};
    if (include_usage) c["usage"] = nullptr;  // OpenAI: on every chunk but the usage chunk
    return c;
  };
  CHECK(first == chunk({{"role", "assistant"}, {"content", ""}}, nullptr));
  CHECK(json::parse(events[1]) == chunk({{"content", "Hel"}}, nullptr));
  CHECK(json::parse(events[2]) == chunk({{"content", "lo"}}, nullptr));
  CHECK(json::parse(events[3]) == chunk({{"content", " world"}}, nullptr));
  json finish = json::parse(events[4]);
  CHECK(finish["timings"]["predicted_ms"] == 30.25);
  finish.erase("timings");
  CHECK(finish == chunk(json::object(), "stop"));
  if (include_usage) {
    json usage = {{"id", first["id"]},
                  {"object", "chat.completion.chunk"},
                  {"created", first["created"]},
                  {"model", "fake-model"},
                  {"system_fingerprint", kFingerprint},
                  {"choices", json::array()},
                  {"usage",
                   {{"prompt_tokens", 10},
                    {"completion_tokens", 3},
                    {"total_tokens", 13},
                    {"prompt_tokens_details", {{"cached_tokens", 0}}},
                    {"completion_tokens_details", kNoDetails}}}};
    CHECK(json::parse(events[5]) == usage);
  }
  // Chunked framing: each chunk carries whole SSE events and the chunks
  // concatenate to the body.
  std::string joined;
  for (const auto& c : r->chunks) {
    CHECK(c.rfind("data: ", 0) == 0);
    CHECK(c.size() >= 2);
    CHECK(c.substr(c.size() - 2) == "\n\n");
    joined += c;
  }
  CHECK(joined == r->body);
  CHECK(r->chunks.size() == events.size());
}

TEST_CASE("completions endpoint, non-streaming and streaming", "[api]") {
  TestServer ts;
  SECTION("non-streaming text_completion") {
    auto r = http(ts.port(), "POST", "/v1/completions", R"({"model":"fake-model","prompt":"abc","max_tokens":4})");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    json body = r->json();
    CHECK(is_id(body["id"], "cmpl-"));
    json expected = {
        {"id", body["id"]},
        {"object", "text_completion"},
        {"created", body["created"]},
        {"model", "fake-model"},
        {"system_fingerprint", kFingerprint},
        {"choices", {{{"index", 0}, {"text", "Hello world"}, {"logprobs", nullptr}, {"finish_reason", "stop"}}}},
        // "abc" -> BOS + 3 bytes = 4 prompt tokens
        {"usage",
         {{"prompt_tokens", 4},
          {"completion_tokens", 3},
          {"total_tokens", 7},
          {"prompt_tokens_details", {{"cached_tokens", 0}}},
          {"completion_tokens_details", kNoDetails}}},
        {"timings", {{"prompt_n", 4}, {"prompt_ms", 12.5}, {"predicted_n", 3}, {"predicted_ms", 30.25}}},
    };
    CHECK(body == expected);
    auto reqs = ts.fake().requests();
    REQUIRE(reqs.size() == 1);
    CHECK(reqs[0].prompt_tokens == std::vector<int32_t>{FakeGenerator::kBos, 'a', 'b', 'c'});
    CHECK(reqs[0].max_tokens == 4);
    // A raw completion prompt parses control-token text by default (the
    // client rendered it: llama.cpp's server and vLLM do the same);
    // "parse_special": false keeps it text.
    CHECK(ts.fake().parse_special_seen() == std::vector<bool>{true});
    auto plain = http(ts.port(), "POST", "/v1/completions", R"({"prompt":"abc","max_tokens":4,"parse_special":false})");
    REQUIRE(plain);
    CHECK(plain->status == 200);
    CHECK(ts.fake().parse_special_seen() == std::vector<bool>{true, false});
  }
  SECTION("parse_special reaches the chat request; a non-boolean is a 400 naming it") {
    auto r = http(ts.port(), "POST", "/v1/chat/completions",
                  R"({"messages":[{"role":"user","content":"Hi"}],"parse_special":true})");
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(ts.fake().last_chat().special_in_content);
    r = http(ts.port(), "POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"Hi"}]})");
    REQUIRE(r);
    CHECK_FALSE(ts.fake().last_chat().special_in_content);
    r = http(ts.port(), "POST", "/v1/chat/completions",
             R"({"messages":[{"role":"user","content":"Hi"}],"parse_special":"yes"})");
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(r->json()["error"]["param"] == "parse_special");
  }
  SECTION("extensions: return_tokens and ignore_eos") {
    auto r = http(ts.port(), "POST", "/v1/completions",
                  R"({"prompt":"abc","max_tokens":4,"return_tokens":true,"ignore_eos":true})");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    // The fake sends "Hel", "lo", " world", one token per byte.
    std::vector<int> want;
    for (unsigned char c : std::string("Hello world")) want.push_back(c);
    CHECK(r->json()["choices"][0]["tokens"] == json(want));
    auto reqs = ts.fake().requests();
    REQUIRE(reqs.size() == 1);
    CHECK(reqs[0].ignore_eos);
    auto plain = http(ts.port(), "POST", "/v1/completions", R"({"prompt":"abc","max_tokens":4})");
    REQUIRE(plain);
    CHECK_FALSE(plain->json()["choices"][0].contains("tokens"));
    CHECK_FALSE(ts.fake().requests()[1].ignore_eos);
  }
  SECTION("streaming text_completion chunks") {
    auto r = http(ts.port(), "POST", "/completions",
                  R"({"prompt":["abc"],"stream":true,"stream_options":{"include_usage":true}})");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    auto events = sse_payloads(r->body);
    // 3 text chunks, finish chunk, usage chunk, [DONE] (no role chunk for completions)
    REQUIRE(events.size() == 6);
    json first = json::parse(events[0]);
    REQUIRE(is_id(first["id"], "cmpl-"));
    auto chunk = [&](json text, json finish) {
      return json{{"id", first["id"]},
                  {"object", "text_completion"},
                  {"created", first["created"]},
                  {"model", "fake-model"},
                  {"system_fingerprint", kFingerprint},
                  {"usage", nullptr},  // include_usage
                  {"choices", {{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish}}}}};
    };
    CHECK(first == chunk("Hel", nullptr));
    CHECK(json::parse(events[1]) == chunk("lo", nullptr));
    CHECK(json::parse(events[2]) == chunk(" world", nullptr));
    json finish = json::parse(events[3]);
    finish.erase("timings");
    CHECK(finish == chunk("", "stop"));
    json usage = json::parse(events[4]);
    CHECK(usage["choices"] == json::array());
    CHECK(usage["usage"]["total_tokens"] == 7);
    CHECK(events[5] == "[DONE]");
  }
  SECTION("token id prompt passes through unchanged") {
    auto r = http(ts.port(), "POST", "/v1/completions", R"({"prompt":[5,6,7]})");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    auto reqs = ts.fake().requests();
    REQUIRE(reqs.size() == 1);
    CHECK(reqs[0].prompt_tokens == std::vector<int32_t>{5, 6, 7});
    CHECK(r->json()["usage"]["prompt_tokens"] == 3);
  }
}

TEST_CASE("models and health endpoints", "[api]") {
  TestServer ts;
  json model = {{"id", "fake-model"},
                {"object", "model"},
                {"created", 1700000000},
                {"owned_by", "larder"},
                {"meta", {{"n_ctx", 64}, {"n_vocab", 257}}}};
  for (const char* path : {"/v1/models", "/models"}) {
    auto r = http(ts.port(), "GET", path);
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->json() == json{{"object", "list"}, {"data", {model}}});
  }
  auto one = http(ts.port(), "GET", "/v1/models/fake-model");
  REQUIRE(one);
  CHECK(one->status == 200);
  CHECK(one->json() == model);
  auto missing = http(ts.port(), "GET", "/v1/models/gpt-4");
  REQUIRE(missing);
  CHECK(missing->status == 404);
  CHECK(missing->json()["error"]["code"] == "model_not_found");
  for (const char* path : {"/health", "/v1/health"}) {
    auto r = http(ts.port(), "GET", path);
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->json() == json{{"status", "ok"}});
  }
}

TEST_CASE("no CORS headers by default; OPTIONS, 404 and 405", "[api]") {
  TestServer ts;  // cors_origins empty (tests/api/test_api_access.cpp covers configured origins)
  // A plain OPTIONS (no preflight) is answered; a preflight is refused.
  auto options = http(ts.port(), "OPTIONS", "/v1/chat/completions");
  REQUIRE(options);
  CHECK(options->status == 204);
  auto pre = http(ts.port(), "OPTIONS", "/v1/chat/completions", "",
                  "Origin: http://localhost:3000\r\nAccess-Control-Request-Method: POST\r\n"
                  "Access-Control-Request-Headers: content-type, authorization\r\n");
  REQUIRE(pre);
  CHECK(pre->status == 403);
  CHECK(pre->header("access-control-allow-origin").empty());

  auto ok = http(ts.port(), "GET", "/health");
  REQUIRE(ok);
  CHECK(ok->header("access-control-allow-origin").empty());

  auto nf = http(ts.port(), "GET", "/v1/nope");
  REQUIRE(nf);
  CHECK(nf->status == 404);
  CHECK(nf->json()["error"]["type"] == "not_found_error");
  CHECK(nf->header("access-control-allow-origin").empty());

  auto wrong = http(ts.port(), "GET", "/v1/chat/completions");
  REQUIRE(wrong);
  CHECK(wrong->status == 405);
  CHECK(wrong->json()["error"]["type"] == "invalid_request_error");
  CHECK(wrong->header("allow") == "POST, OPTIONS");
}

TEST_CASE("text content parts are concatenated; a chunked request body is accepted", "[api]") {
  TestServer ts;
  // An assistant turn may have null content (it carried tool calls).
  const std::string body = R"({"messages":[{"role":"assistant","content":null},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]})";
  // Send it chunked, split in two chunks.
  std::string half1 = body.substr(0, 20), half2 = body.substr(20);
  char h1[16], h2[16];
  std::snprintf(h1, sizeof h1, "%zx", half1.size());
  std::snprintf(h2, sizeof h2, "%zx", half2.size());
  TestClient c(ts.port());
  REQUIRE(c.send_raw("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n" +
                     std::string(h1) + "\r\n" + half1 + "\r\n" + h2 + "\r\n" + half2 + "\r\n0\r\n\r\n"));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 200);
  auto reqs = ts.fake().requests();
  REQUIRE(reqs.size() == 1);
  // "assistant: \nuser: ab\n" -> BOS + 21 bytes
  std::string rendered = "assistant: \nuser: ab\n";
  std::vector<int32_t> expected = {FakeGenerator::kBos};
  for (unsigned char ch : rendered) expected.push_back(ch);
  CHECK(reqs[0].prompt_tokens == expected);
}

TEST_CASE("engine errors: 500 before the first byte, an error event mid-stream", "[api]") {
  TestServer ts;
  SECTION("error before any text, non-streaming and streaming -> 500 JSON") {
    FakeScript script;
    script.pieces = {};
    script.finish = FinishReason::kError;
    script.error = "device lost";
    ts.fake().set_script(script);
    for (const char* stream : {"false", "true"}) {
      auto r = http(ts.port(), "POST", "/v1/chat/completions",
                    R"({"messages":[{"role":"user","content":"Hi"}],"stream":)" + std::string(stream) + "}");
      REQUIRE(r);
      CHECK(r->status == 500);
      CHECK(r->json() == json{{"error",
                               {{"message", "device lost"}, {"type", "server_error"}, {"param", nullptr}, {"code", nullptr}}}});
    }
  }
  SECTION("error after text while streaming -> error event then [DONE]") {
    FakeScript script;
    script.pieces = {"x"};
    script.finish = FinishReason::kError;
    script.error = "device lost";
    ts.fake().set_script(script);
    auto r = http(ts.port(), "POST", "/v1/chat/completions",
                  R"({"messages":[{"role":"user","content":"Hi"}],"stream":true})");
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->complete);
    auto events = sse_payloads(r->body);
    REQUIRE(events.size() == 4);  // role, "x", error, [DONE]
    CHECK(json::parse(events[1])["choices"][0]["delta"]["content"] == "x");
    CHECK(json::parse(events[2]) == json{{"error",
                                          {{"message", "device lost"}, {"type", "server_error"}, {"param", nullptr}, {"code", nullptr}}}});
    CHECK(events[3] == "[DONE]");
  }
  SECTION("an error the request leads to (its logit_bias bans every next token) -> 400") {
    FakeScript script;
    script.pieces = {};
    script.finish = FinishReason::kError;
    script.error = "logit_bias bans every token";
    script.request_fault = true;
    ts.fake().set_script(script);
    auto r = http(ts.port(), "POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"Hi"}]})");
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(r->json() == json{{"error",
                             {{"message", "logit_bias bans every token"}, {"type", "invalid_request_error"},
                              {"param", nullptr}, {"code", nullptr}}}});
  }
}
