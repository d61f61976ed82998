// Bad input at the HTTP level (random bytes, malformed requests, limits,
// codings and expectations): the right status and reason phrase, and the
// server goes on serving. The JSON-level cases: test_api_errors.cpp.
#include <random>
#include <string>

#include <catch2/catch.hpp>

#include "api/http_message.h"
#include "tests/api/test_client.h"

using nlohmann::json;
using namespace larder;
using namespace larder::testing;

TEST_CASE("random bytes never take the server down", "[api]") {
  TestServer ts;
  std::mt19937 rng(1234);  // fixed seed: the same inputs every run
  for (int i = 0; i < 200; ++i) {
    std::string junk(1 + rng() % 2000, '\0');
    for (char& ch : junk) ch = static_cast<char>(rng());
    // Half of them start like a real request so the parser gets further in.
    if (i % 2) junk = "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 40\r\n" + junk;
    TestClient c(ts.port());
    (void)c.send_raw(junk);
    c.close();
  }
  CHECK(server_answers_health(ts.port()));
}

TEST_CASE("HTTP-level garbage and limits", "[api]") {
  ServerOptions options;
  options.max_body_bytes = 8 << 20;
  TestServer ts(options);
  SECTION("garbage bytes -> 400 and close") {
    TestClient c(ts.port());
    REQUIRE(c.send_raw("\x01\x02 this is not HTTP\r\n\r\n"));
    auto r = c.read_response();
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(r->header("connection") == "close");
    CHECK(r->json()["error"]["type"] == "invalid_request_error");
    CHECK(c.wait_closed(std::chrono::milliseconds(3000)));
  }
  SECTION("a 9 MiB body -> 413") {
    TestClient c(ts.port());
    std::string body(9 << 20, 'a');
    // The server answers after the headers and discards the rest; the
    // send may or may not complete before it closes.
    std::string head = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\n\r\n";
    REQUIRE(c.send_raw(head));
    (void)c.send_raw(body);
    auto r = c.read_response();
    REQUIRE(r);
    CHECK(r->status == 413);
    CHECK(r->json()["error"]["type"] == "invalid_request_error");
  }
  SECTION("a chunked body over the limit -> 413") {
    ServerOptions small;
    small.max_body_bytes = 1000;
    TestServer ts2(small);
    TestClient c(ts2.port());
    std::string chunk(600, 'a');
    REQUIRE(c.send_raw("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "258\r\n" + chunk + "\r\n258\r\n" + chunk + "\r\n0\r\n\r\n"));
    auto r = c.read_response();
    REQUIRE(r);
    CHECK(r->status == 413);
  }
  SECTION("headers over 64 KiB -> 431") {
    TestClient c(ts.port());
    std::string big(70 << 10, 'h');
    REQUIRE(c.send_raw("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + big + "\r\n\r\n"));
    auto r = c.read_response();
    REQUIRE(r);
    CHECK(r->status == 431);
  }
  // Found in hostile testing: these were ignored (a gzip body went on to the
  // JSON parser); a coding or expectation larder does not implement is
  // refused with the status RFC 9110 / 9112 give it.
  SECTION("unsupported transfer or content codings and expectations -> 501, 415, 417") {
    struct Case {
      const char* header;
      int status;
    };
    // chunked not last: the body's length is unknown, a 400 (RFC 9112 section 6.3).
    for (const Case& k : {Case{"Transfer-Encoding: gzip, chunked", 501}, Case{"Transfer-Encoding: chunked, br", 400},
                          Case{"Content-Encoding: gzip", 415}, Case{"Content-Encoding: identity, gzip", 415},
                          Case{"Expect: 200-ok", 417}}) {
      CAPTURE(k.header);
      TestClient c(ts.port());
      const bool chunked = std::string_view(k.header).find("chunked") != std::string_view::npos;
      REQUIRE(c.send_raw(std::string("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n") + k.header +
                         (chunked ? "\r\n\r\n2\r\n{}\r\n0\r\n\r\n" : "\r\nContent-Length: 2\r\n\r\n{}")));
      auto r = c.read_response();
      REQUIRE(r);
      CHECK(r->status == k.status);
    }
    // What is implemented still passes: chunked, identity, 100-continue.
    for (const char* header : {"Transfer-Encoding: chunked\r\nContent-Encoding: identity",
                               "Transfer-Encoding: chunked\r\nContent-Encoding: identity, ,IDENTITY",
                               "Expect: 100-continue\r\nTransfer-Encoding: Chunked"}) {
      CAPTURE(header);
      TestClient c(ts.port());
      REQUIRE(c.send_raw(std::string("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n") + header +
                         "\r\n\r\n2\r\n{}\r\n0\r\n\r\n"));
      auto r = c.read_response();
      REQUIRE(r);
      CHECK(r->status == 400);  // parsed and answered: "prompt" is missing
      CHECK(r->json()["error"]["message"].get<std::string>().find("prompt") != std::string::npos);
    }
    // A content coding of no body changes nothing (noticed in hostile
    // testing: a GET naming gzip was a 415).
    for (const char* request : {"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Encoding: gzip\r\n\r\n",
                                "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Encoding: br\r\n"
                                "Content-Length: 0\r\n\r\n"}) {
      CAPTURE(request);
      TestClient c(ts.port());
      REQUIRE(c.send_raw(request));
      auto r = c.read_response();
      REQUIRE(r);
      CHECK(r->status == 200);
    }
  }
  SECTION("a bad Content-Length -> 400") {
    TestClient c(ts.port());
    REQUIRE(c.send_raw("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n"));
    auto r = c.read_response();
    REQUIRE(r);
    CHECK(r->status == 400);
  }
  CHECK(server_answers_health(ts.port()));
}

// Found in hostile testing: 501 and 417 went out as "HTTP/1.1 501 Unknown".
TEST_CASE("every status the server sends has its reason phrase (RFC 9110 section 15)", "[api]") {
  const std::vector<std::pair<int, std::string>> phrases = {
      {400, "Bad Request"}, {401, "Unauthorized"}, {403, "Forbidden"}, {404, "Not Found"},
      {405, "Method Not Allowed"}, {408, "Request Timeout"}, {413, "Payload Too Large"},
      {415, "Unsupported Media Type"}, {417, "Expectation Failed"}, {431, "Request Header Fields Too Large"},
      {500, "Internal Server Error"}, {501, "Not Implemented"}, {503, "Service Unavailable"},
      {505, "HTTP Version Not Supported"}};
  for (const auto& [status, phrase] : phrases) {
    CAPTURE(status);
    CHECK(http_reason_phrase(status) == phrase);
    CHECK(encode_response_head(status, {}).rfind("HTTP/1.1 " + std::to_string(status) + " " + phrase + "\r\n", 0) == 0);
  }
}
