// Logprobs in the API: the request fields (chat logprobs/top_logprobs,
// completions logprobs/echo, max_tokens 0 with echo) and the response
// shapes of api/response_logprobs.h, from hand-made engine entries.
#include <cmath>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "api/openai_request.h"
#include "api/openai_response.h"
#include "api/response_logprobs.h"
#include "tests/api/test_client.h"

using nlohmann::json;
using namespace larder;
using namespace larder::testing;

namespace {

TokenLogprob entry(int32_t id, double lp, std::string piece, size_t offset, std::vector<TopLogprob> top = {}) {
  TokenLogprob e;
  e.id = id;
  e.logprob = lp;
  e.piece = std::move(piece);
  e.text_offset = offset;
  e.top = std::move(top);
  return e;
}

std::optional<ApiError> chat(const std::string& extra, ChatCompletionRequest* out) {
  return parse_chat_completion_request(R"({"messages":[{"role":"user","content":"Hi"}])" + extra + "}",
                                       SamplingParams{}, out);
}

std::optional<ApiError> completion(const std::string& extra, CompletionRequest* out) {
  return parse_completion_request(R"({"prompt":"Hi")" + extra + "}", SamplingParams{}, 300, out);
}

}  // namespace

TEST_CASE("logprobs request fields", "[api][logprobs]") {
  ChatCompletionRequest c;
  REQUIRE_FALSE(chat("", &c));
  CHECK(c.options.logprobs == -1);
  REQUIRE_FALSE(chat(R"(,"logprobs":true)", &c));
  CHECK(c.options.logprobs == 0);
  REQUIRE_FALSE(chat(R"(,"logprobs":true,"top_logprobs":20)", &c));
  CHECK(c.options.logprobs == 20);
  REQUIRE_FALSE(chat(R"(,"logprobs":false,"top_logprobs":null)", &c));
  CHECK(c.options.logprobs == -1);
  for (const char* bad : {R"(,"top_logprobs":3)", R"(,"logprobs":false,"top_logprobs":0)",
                          R"(,"logprobs":true,"top_logprobs":21)", R"(,"logprobs":true,"top_logprobs":-1)",
                          R"(,"logprobs":true,"top_logprobs":1.5)"}) {
    CAPTURE(bad);
    ChatCompletionRequest r;
    auto e = chat(bad, &r);
    REQUIRE(e);
    CHECK(e->param == std::optional<std::string>("top_logprobs"));
  }
  ChatCompletionRequest r;
  auto e = chat(R"(,"logprobs":3)", &r);
  REQUIRE(e);
  CHECK(e->param == std::optional<std::string>("logprobs"));
  e = chat(R"(,"echo":true)", &r);
  REQUIRE(e);
  CHECK(e->param == std::optional<std::string>("echo"));
  e = chat(R"(,"max_tokens":0)", &r);
  REQUIRE(e);
  CHECK(e->param == std::optional<std::string>("max_tokens"));

  CompletionRequest p;
  REQUIRE_FALSE(completion(R"(,"logprobs":5,"echo":true,"max_tokens":0)", &p));
  CHECK(p.options.logprobs == 5);
  CHECK(p.options.echo);
  CHECK(p.options.max_tokens == std::optional<int>(0));
  REQUIRE_FALSE(completion(R"(,"logprobs":0)", &p));
  CHECK(p.options.logprobs == 0);
  // llama.cpp's n_probs is refused with a pointer to the OpenAI fields.
  std::optional<ApiError> n_probs = completion(R"(,"n_probs":5)", &p);
  REQUIRE(n_probs);
  CHECK(n_probs->param == std::optional<std::string>("n_probs"));
  CHECK(n_probs->message.find("use 'logprobs'") != std::string::npos);
  for (auto [bad, param] : std::vector<std::pair<const char*, const char*>>{
           {R"(,"logprobs":21)", "logprobs"},
           {R"(,"logprobs":true)", "logprobs"},
           {R"(,"max_tokens":0)", "max_tokens"},
           {R"(,"echo":false,"max_tokens":0)", "max_tokens"},
           {R"(,"echo":1)", "echo"},
           {R"(,"top_logprobs":2)", "top_logprobs"}}) {
    CAPTURE(bad);
    CompletionRequest q;
    auto err = completion(bad, &q);
    REQUIRE(err);
    CHECK(err->param == std::optional<std::string>(param));
  }
}

TEST_CASE("chat logprobs shape: token, bytes, top list, -inf", "[api][logprobs]") {
  ResponseLogprobs lp(CompletionKind::kChat);
  GenerationEvent ev;
  ev.text = "H\xE2\x82\xAC";
  ev.logprobs = {entry(7, -0.25, "H", 0, {{7, -0.25, "H"}, {9, -INFINITY, "\xE2"}}),
                 entry(9, -1.5, "\xE2", 1), entry(10, -0.125, "\x82\xAC", 1)};
  lp.add(ev);
  CHECK(lp.has_pending());
  const json j = json::parse(dump_json(lp.take()));
  CHECK_FALSE(lp.has_pending());
  const json want = json::parse(R"({"content":[
    {"token":"H","logprob":-0.25,"bytes":[72],"top_logprobs":[
      {"token":"H","logprob":-0.25,"bytes":[72]},{"token":"\ufffd","logprob":-9999.0,"bytes":[226]}]},
    {"token":"\ufffd","logprob":-1.5,"bytes":[226],"top_logprobs":[]},
    {"token":"\ufffd\ufffd","logprob":-0.125,"bytes":[130,172],"top_logprobs":[]}],
    "refusal":null})");
  CHECK(j == want);
  CHECK(json(lp.take()) == json::parse(R"({"content":[],"refusal":null})"));
}

// take_text writes what dump_json(take()) writes, without the DOM.
TEST_CASE("logprobs as text: byte for byte the dumped object, chat and completions", "[api][logprobs]") {
  const auto feed = [](ResponseLogprobs& lp) {
    GenerationEvent echo;
    echo.echo = true;
    echo.text = "H\xC3\xA9";
    TokenLogprob bos = entry(1, 0, "", 0);
    bos.has_logprob = false;
    echo.logprobs = {bos, entry(5, -2.0, "H\xC3\xA9", 0, {{4, -1.0, "a"}, {5, -2.0, "H\xC3\xA9"}, {6, -2.5, "a"}})};
    lp.add(echo);
    GenerationEvent gen;
    gen.text = "\xE2\x82\xAC\"q\\";
    gen.logprobs = {entry(8, -0.5, "\xE2", 0, {{8, -0.5, "\xE2"}, {11, -INFINITY, "\xE3"}, {12, -3.0, "b"}}),
                    entry(9, -0.0625, "\x82\xAC", 0), entry(10, -1e-7, "\"q\\", 2, {{10, -1e-7, "\"q\\"}})};
    lp.add(gen);
  };
  for (CompletionKind kind : {CompletionKind::kChat, CompletionKind::kText}) {
    ResponseLogprobs as_dom(kind), as_text(kind);
    feed(as_dom);
    feed(as_text);
    const std::string want = dump_json(as_dom.take());
    CAPTURE(want);
    CHECK(as_text.take_text() == want);
    CHECK_FALSE(as_text.has_pending());
    CHECK(as_text.take_text() == dump_json(as_dom.take()));  // nothing pending: the empty object
  }
}

TEST_CASE("completions logprobs shape: echo, null first entry, offsets in characters", "[api][logprobs]") {
  ResponseLogprobs lp(CompletionKind::kText);
  GenerationEvent echo;
  echo.echo = true;
  echo.text = "H\xC3\xA9";  // "Hé": 3 bytes, 2 characters
  TokenLogprob bos = entry(1, 0, "", 0);
  bos.has_logprob = false;
  echo.logprobs = {bos, entry(5, -2.0, "H\xC3\xA9", 0, {{4, -1.0, "a"}, {5, -2.0, "H\xC3\xA9"}})};
  lp.add(echo);
  GenerationEvent gen;
  gen.text = "\xE2\x82\xAC";  // a character from two byte tokens
  gen.logprobs = {entry(8, -0.5, "\xE2", 0, {{8, -0.5, "\xE2"}, {11, -0.75, "\xE3"}, {12, -3.0, "b"}}),
                  entry(9, -0.0625, "\x82\xAC", 0)};
  lp.add(gen);
  GenerationEvent fin;
  fin.done = true;
  fin.text = "ignored: final text comes as its own piece";
  fin.logprobs = {entry(13, -4.0, "", 3)};
  lp.add(fin);
  const json j = json::parse(dump_json(lp.take()));
  const json want = json::parse(R"({
    "tokens":["","H\u00e9","\ufffd","\ufffd\ufffd",""],
    "token_logprobs":[null,-2.0,-0.5,-0.0625,-4.0],
    "top_logprobs":[null,{"a":-1.0,"H\u00e9":-2.0},{"\ufffd":-0.5,"b":-3.0},{},{}],
    "text_offset":[0,0,2,2,3]})");
  CHECK(j == want);
}

namespace {

// Alternatives whose rank order is not their text order, with a piece twice.
std::vector<TopLogprob> unsorted_top() {
  return {{20, -0.25, "z"}, {21, -0.5, "a"}, {22, -0.75, "z"}, {23, -2.0, "m"}};
}

}  // namespace

TEST_CASE("completions top_logprobs objects list their keys in rank order", "[api][logprobs]") {
  // Clients read a {piece: logprob} object's key order as the rank (OpenAI's
  // docs list the likeliest first): "z" (-0.25) before "a" (-0.5) before
  // "m" (-2.0), and the second "z" (-0.75) gives way to the first.
  const std::string want = R"("top_logprobs":[{"z":-0.25,"a":-0.5,"m":-2.0}])";
  ResponseLogprobs lp(CompletionKind::kText);
  GenerationEvent ev;
  ev.text = "z";
  ev.logprobs = {entry(20, -0.25, "z", 0, unsorted_top())};
  lp.add(ev);
  const std::string text = dump_json(lp.take());
  CAPTURE(text);
  CHECK(text.find(want) != std::string::npos);

  // Through the HTTP layer, in the raw bytes of the body and of the chunks.
  TestServer ts;
  FakeScript script;
  script.pieces = {"z", "q"};
  script.logprobs = {{entry(20, -0.25, "z", 0, unsorted_top())}, {entry(30, -1.0, "q", 1, unsorted_top())}};
  ts.fake().set_script(script);
  auto r = http(ts.port(), "POST", "/v1/completions", R"({"prompt":"Hi","logprobs":4})");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  CAPTURE(r->body);
  CHECK(r->body.find(R"("top_logprobs":[{"z":-0.25,"a":-0.5,"m":-2.0},{"z":-0.25,"a":-0.5,"m":-2.0}])") !=
        std::string::npos);
  auto s = http(ts.port(), "POST", "/v1/completions", R"({"prompt":"Hi","logprobs":4,"stream":true})");
  REQUIRE(s);
  REQUIRE(s->status == 200);
  int n_with = 0;
  for (const std::string& e : sse_payloads(s->body)) {
    if (e.find("top_logprobs") == std::string::npos) continue;
    CAPTURE(e);
    CHECK(e.find(want) != std::string::npos);
    ++n_with;
  }
  CHECK(n_with == 2);
}

TEST_CASE("integer fields take integral floats; fractions stay 400s naming the field", "[api][logprobs]") {
  // Some JSON encoders write 2 as 2.0; OpenAI's server reads it as 2.
  ChatCompletionRequest c;
  REQUIRE_FALSE(chat(R"(,"logprobs":true,"top_logprobs":2.0,"n":2.0,"max_tokens":3.0,"seed":7.0,"top_k":4.0)", &c));
  CHECK(c.options.logprobs == 2);
  CHECK(c.options.n == 2);
  CHECK(c.options.max_tokens == std::optional<int>(3));
  CHECK(c.options.sampling.seed == std::optional<uint64_t>(7));
  CHECK(c.options.sampling.top_k == 4);
  CompletionRequest p;
  REQUIRE_FALSE(completion(R"(,"logprobs":3.0,"top_logprobs":0.0,"n_predict":5.0)", &p));
  CHECK(p.options.logprobs == 3);
  CHECK(p.options.max_tokens == std::optional<int>(5));
  for (auto [bad, param] : std::vector<std::pair<const char*, const char*>>{
           {R"(,"logprobs":true,"top_logprobs":2.5)", "top_logprobs"},
           {R"(,"n":2.5)", "n"},
           {R"(,"max_tokens":3.5)", "max_tokens"},
           {R"(,"seed":1e300)", "seed"},
           {R"(,"logprobs":true,"top_logprobs":21.0)", "top_logprobs"}}) {
    CAPTURE(bad);
    ChatCompletionRequest r;
    auto e = chat(bad, &r);
    REQUIRE(e);
    CHECK(e->param == std::optional<std::string>(param));
  }
  // Token ids too: a prompt of ids and logit_bias pairs.
  CompletionRequest ids;
  REQUIRE_FALSE(parse_completion_request(R"({"prompt":[1.0,255,2e2],"logit_bias":[[5.0,-100]]})", SamplingParams{},
                                         300, &ids));
  REQUIRE(ids.prompt_is_tokens);
  CHECK(ids.prompt_tokens == std::vector<int32_t>{1, 255, 200});
  REQUIRE(ids.options.logit_bias.size() == 1);
  CHECK(ids.options.logit_bias[0].first == 5);
  CompletionRequest batch;
  REQUIRE_FALSE(parse_completion_request(R"({"prompt":[[3.0,4],"x"]})", SamplingParams{}, 300, &batch));
  REQUIRE(batch.prompt_is_tokens);
  CHECK(batch.prompt_tokens == std::vector<int32_t>{3, 4});
  REQUIRE(batch.more_prompts.size() == 1);
  CHECK(batch.more_prompts[0].text == "x");
  CHECK(parse_completion_request(R"({"prompt":[1.5]})", SamplingParams{}, 300, &batch)->param ==
        std::optional<std::string>("prompt"));
  // An integral float past 64 bits says so, not "must be an integer".
  ChatCompletionRequest big;
  auto too_big = chat(R"(,"n":1e20)", &big);
  REQUIRE(too_big);
  CHECK_THAT(too_big->message, Catch::Contains("outside the 64-bit integer range") && Catch::Contains("1e+20"));
  CompletionRequest q;
  auto e = completion(R"(,"logprobs":2.5)", &q);
  REQUIRE(e);
  CHECK(e->param == std::optional<std::string>("logprobs"));
  CHECK(e->message.find("2.5") != std::string::npos);
}

TEST_CASE("echo: n_predict 0 is max_tokens 0, and a scored prompt may fill the context", "[api][logprobs]") {
  CompletionRequest p;
  REQUIRE_FALSE(completion(R"(,"echo":true,"logprobs":1,"n_predict":0)", &p));
  CHECK(p.options.max_tokens == std::optional<int>(0));
  auto e = completion(R"(,"n_predict":0)", &p);  // without echo: nothing to return
  REQUIRE(e);
  CHECK(e->param == std::optional<std::string>("n_predict"));

  TestServer ts;  // the fake's context: 64 tokens
  REQUIRE(ts.fake().model_info().n_ctx == 64);
  auto ids = [](int n) {
    std::string s = "[";
    for (int i = 0; i < n; ++i) {
      if (i > 0) s += ',';
      s += std::to_string(65 + i % 26);
    }
    return s + "]";
  };
  auto post = [&](int n_tokens, const std::string& extra) {
    return http(ts.port(), "POST", "/v1/completions", R"({"prompt":)" + ids(n_tokens) + extra + "}");
  };
  for (const char* zero : {R"(,"max_tokens":0)", R"(,"n_predict":0)"}) {
    CAPTURE(zero);
    auto r = post(64, std::string(R"(,"echo":true,"logprobs":1)") + zero);
    REQUIRE(r);
    CHECK(r->status == 200);
    auto over = post(65, std::string(R"(,"echo":true,"logprobs":1)") + zero);
    REQUIRE(over);
    CHECK(over->status == 400);
    CHECK(over->json()["error"]["code"] == "context_length_exceeded");
    CHECK(over->json()["error"]["param"] == "prompt");
  }
  const std::vector<GenerationRequest> seen = ts.fake().requests();
  REQUIRE(seen.size() == 2);
  for (const GenerationRequest& g : seen) {
    CHECK(g.prompt_tokens.size() == 64);
    CHECK(g.max_tokens == 0);
  }
  // A prompt that generates still leaves a position for its token.
  auto gen = post(64, R"(,"echo":true,"max_tokens":1)");
  REQUIRE(gen);
  CHECK(gen->status == 400);
  CHECK(gen->json()["error"]["code"] == "context_length_exceeded");
}
