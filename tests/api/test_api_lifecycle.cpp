// Request options reaching the engine, connection handling (keep-alive,
// pipelining, client disconnect), shutdown, and bind errors.
#include <atomic>

#include <catch2/catch.hpp>

#include "tests/api/test_client.h"

using nlohmann::json;
using namespace larder;
using namespace larder::testing;
using namespace std::chrono_literals;

namespace {
const std::string kUserHi = R"("messages":[{"role":"user","content":"Hi"}])";  // 10 prompt tokens
}

TEST_CASE("ServerOptions defaults reach the engine; request values override them", "[api]") {
  ServerOptions options;
  options.default_sampling.temperature = 0.3f;
  options.default_sampling.top_k = 7;
  options.default_sampling.top_p = 0.5f;
  options.default_sampling.min_p = 0.1f;
  options.default_sampling.repeat_penalty = 1.2f;
  options.default_sampling.presence_penalty = 0.25f;
  options.default_sampling.frequency_penalty = 0.5f;
  options.default_sampling.seed = 99;
  options.default_max_tokens = 5;
  TestServer ts(options);

  // Fields ignored on purpose (and null knobs) change nothing; an unknown
  // one is refused (tests/api/test_api_surface.cpp).
  auto r1 = http(ts.port(), "POST", "/v1/chat/completions",
                 "{" + kUserHi + R"(,"user":"u1","tools":[],"metadata":{"bar":"1"},"top_p":null})");
  REQUIRE(r1);
  REQUIRE(r1->status == 200);
  auto r2 = http(ts.port(), "POST", "/v1/chat/completions",
                 "{" + kUserHi +
                     R"(,"temperature":1.5,"top_k":3,"top_p":0.9,"min_p":0,"repeat_penalty":1.1,)"
                     R"("presence_penalty":-1,"frequency_penalty":2,"seed":42,"stop":["\n","END"],"max_tokens":10})");
  REQUIRE(r2);
  REQUIRE(r2->status == 200);
  auto r3 = http(ts.port(), "POST", "/v1/chat/completions",
                 "{" + kUserHi + R"(,"stop":"###","max_completion_tokens":1000,"seed":-1,"temperature":null})");
  REQUIRE(r3);
  REQUIRE(r3->status == 200);

  auto reqs = ts.fake().requests();
  REQUIRE(reqs.size() == 3);
  // 1: everything from ServerOptions.
  const SamplingParams& d = reqs[0].sampling;
  CHECK(d.temperature == 0.3f);
  CHECK(d.top_k == 7);
  CHECK(d.top_p == 0.5f);
  CHECK(d.min_p == 0.1f);
  CHECK(d.repeat_penalty == 1.2f);
  CHECK(d.presence_penalty == 0.25f);
  CHECK(d.frequency_penalty == 0.5f);
  CHECK(d.seed == std::optional<uint64_t>(99));
  CHECK(reqs[0].max_tokens == 5);
  CHECK(reqs[0].stop.empty());
  // 2: every knob from the request.
  const SamplingParams& o = reqs[1].sampling;
  CHECK(o.temperature == 1.5f);
  CHECK(o.top_k == 3);
  CHECK(o.top_p == 0.9f);
  CHECK(o.min_p == 0.0f);
  CHECK(o.repeat_penalty == 1.1f);
  CHECK(o.presence_penalty == -1.0f);
  CHECK(o.frequency_penalty == 2.0f);
  CHECK(o.seed == std::optional<uint64_t>(42));
  CHECK(reqs[1].stop == std::vector<std::string>{"\n", "END"});
  CHECK(reqs[1].max_tokens == 10);
  // 3: a single stop string; max_completion_tokens clamped to the room left
  // (64 - 10 = 54); seed -1 asks for a random seed; null temperature keeps
  // the default.
  CHECK(reqs[2].stop == std::vector<std::string>{"###"});
  CHECK(reqs[2].max_tokens == 54);
  CHECK(!reqs[2].sampling.seed.has_value());
  CHECK(reqs[2].sampling.temperature == 0.3f);
}

TEST_CASE("no max_tokens anywhere: the whole remaining context", "[api]") {
  TestServer ts;  // default_max_tokens = -1
  auto r = http(ts.port(), "POST", "/v1/chat/completions", "{" + kUserHi + "}");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  auto reqs = ts.fake().requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].max_tokens == 64 - 10);
}

TEST_CASE("keep-alive: several requests on one connection, also pipelined", "[api]") {
  TestServer ts;
  TestClient c(ts.port());
  auto a = c.request("GET", "/health");
  REQUIRE(a);
  CHECK(a->status == 200);
  CHECK(a->header("connection") == "keep-alive");
  auto b = c.request("POST", "/v1/chat/completions", "{" + kUserHi + "}");
  REQUIRE(b);
  CHECK(b->status == 200);
  CHECK(b->json()["choices"][0]["message"]["content"] == "Hello world");
  // A HEAD answer carries no body bytes (else the next response would be
  // misread); the connection stays usable.
  // (HEAD works wherever GET does, as RFC 9110 section 9.3.2 asks: the
  // same head, Content-Length of the body it would have had: 15 bytes of
  // {"status":"ok"}.)
  auto head = c.request("HEAD", "/health");
  REQUIRE(head);
  CHECK(head->status == 200);
  CHECK(head->header("content-length") == "15");
  CHECK(head->body.empty());
  auto head_post_only = c.request("HEAD", "/v1/chat/completions");
  REQUIRE(head_post_only);
  CHECK(head_post_only->status == 405);
  // An error response keeps the connection too.
  auto e = c.request("POST", "/v1/chat/completions", "{}");
  REQUIRE(e);
  CHECK(e->status == 400);
  // Two requests in one write: answered in order.
  std::string body = "{" + kUserHi + R"(,"stream":true})";
  REQUIRE(c.send_raw("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body + "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  auto s = c.read_response();
  REQUIRE(s);
  CHECK(s->status == 200);
  CHECK(s->complete);
  CHECK(sse_payloads(s->body).back() == "[DONE]");
  auto m = c.read_response();
  REQUIRE(m);
  CHECK(m->status == 200);
  CHECK(m->json()["object"] == "list");
  // Connection: close is honoured.
  auto last = c.request("GET", "/health", "", "Connection: close\r\n");
  REQUIRE(last);
  CHECK(last->header("connection") == "close");
  CHECK(c.wait_closed(3s));
}

TEST_CASE("HTTP/1.0 streaming: no chunked framing, the body ends at close", "[api]") {
  TestServer ts;
  TestClient c(ts.port());
  std::string body = "{" + kUserHi + R"(,"stream":true})";
  REQUIRE(c.send_raw("POST /v1/chat/completions HTTP/1.0\r\nContent-Length: " + std::to_string(body.size()) +
                     "\r\n\r\n" + body));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(!r->chunked);
  auto events = sse_payloads(r->body);
  REQUIRE(events.size() == 6);  // role, 3 content, finish, [DONE]
  CHECK(events.back() == "[DONE]");
}

TEST_CASE("a client that disconnects mid-stream cancels the generation", "[api]") {
  TestServer ts;
  FakeScript script;
  script.pieces.assign(500, "z");  // 500 x 10 ms: far longer than the test
  script.delay_ms = 10;
  ts.fake().set_script(script);
  {
    TestClient c(ts.port());
    std::string body = "{" + kUserHi + R"(,"stream":true})";
    REQUIRE(c.send_raw("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\n\r\n" + body));
    REQUIRE(c.read_until(R"({"content":"z"})"));  // streaming has begun
    CHECK(!ts.fake().wait_cancelled(0ms));
  }  // the client goes away
  CHECK(ts.fake().wait_cancelled(1000ms));
  auto h = http(ts.port(), "GET", "/health");
  REQUIRE(h);
  CHECK(h->status == 200);
}

TEST_CASE("request_stop() while a stream is in flight", "[api]") {
  SECTION("short grace: the stream is cut, the generation cancelled, run() returns") {
    ServerOptions options;
    options.shutdown_grace_s = 0.2;
    TestServer ts(options);
    FakeScript script;
    script.pieces.assign(500, "z");
    script.delay_ms = 10;
    ts.fake().set_script(script);
    TestClient c(ts.port());
    std::string body = "{" + kUserHi + R"(,"stream":true})";
    REQUIRE(c.send_raw("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\n\r\n" + body));
    REQUIRE(c.read_until(R"({"content":"z"})"));
    auto t0 = std::chrono::steady_clock::now();
    CHECK(ts.stop(3000ms));
    CHECK(std::chrono::steady_clock::now() - t0 < 2000ms);  // grace 0.2 s, not the 5 s script
    CHECK(c.wait_closed(1000ms));
    CHECK(ts.fake().wait_cancelled(1000ms));
  }
  SECTION("long grace: the stream completes, then run() returns") {
    ServerOptions options;
    options.shutdown_grace_s = 10;
    TestServer ts(options);
    FakeScript script;
    script.pieces.assign(20, "z");  // 20 x 10 ms
    script.delay_ms = 10;
    ts.fake().set_script(script);
    TestClient c(ts.port());
    TestClient idle(ts.port());  // an idle keep-alive connection is closed at once
    REQUIRE(idle.request("GET", "/health"));
    std::string body = "{" + kUserHi + R"(,"stream":true})";
    REQUIRE(c.send_raw("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\n\r\n" + body));
    REQUIRE(c.read_until(R"({"content":"z"})"));
    CHECK(ts.stop(5000ms));
    CHECK(idle.wait_closed(100ms));
    auto r = c.read_response();
    REQUIRE(r);
    CHECK(r->complete);
    auto events = sse_payloads(r->body);
    REQUIRE(events.size() == 23);  // role chunk, 20 x "z", finish chunk, [DONE]
    CHECK(events.back() == "[DONE]");
    CHECK(r->header("connection") == "keep-alive");  // decided before the stop
    CHECK(c.wait_closed(1000ms));                     // but closed after it
  }
  SECTION("stop with nothing in flight, and a second stop") {
    TestServer ts;
    CHECK(ts.stop(2000ms));
    ts.server().request_stop();  // after run() returned: a no-op
  }
}

TEST_CASE("create() on a port in use fails with kIOError", "[api]") {
  TestServer ts;
  FakeGenerator fake;
  ServerOptions options;
  options.port = ts.port();
  auto second = HttpServer::create(options, fake);
  REQUIRE(!second.is_ok());
  CHECK(second.status().code() == StatusCode::kIOError);
  CHECK(second.status().message() ==
        "cannot listen on 127.0.0.1:" + std::to_string(ts.port()) + ": address already in use");
  options.host = "not-an-ip";
  options.port = 0;
  auto bad_host = HttpServer::create(options, fake);
  REQUIRE(!bad_host.is_ok());
  CHECK(bad_host.status().code() == StatusCode::kInvalidArgument);
}
