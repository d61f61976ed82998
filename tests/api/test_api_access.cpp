// Access checks before routing (api/access_policy.h): the Host allow-list
// (DNS rebinding), CORS per origin, API keys, and the JSON content type of
// browser POSTs. Expected values follow the Fetch standard (CORS), RFC 9110
// (Host) and OpenAI's error bodies ("invalid_api_key").
#include <catch2/catch.hpp>

#include "api/access_policy.h"
#include "tests/api/test_client.h"

using nlohmann::json;
using namespace larder;
using namespace larder::testing;

namespace {

const std::string kChat = R"({"messages":[{"role":"user","content":"Hi"}]})";

// A request with exactly these headers (no Content-Type unless given).
std::optional<ClientResponse> raw(int port, const std::string& method, const std::string& path,
                                  const std::string& headers, const std::string& body = "") {
  TestClient c(port);
  if (!c.connected()) return std::nullopt;
  std::string req = method + " " + path + " HTTP/1.1\r\n" + headers;
  if (!body.empty() || method == "POST") req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  if (!c.send_raw(req + "\r\n" + body)) return std::nullopt;
  return c.read_response(method == "HEAD");
}

void check_error(const ClientResponse& r, int status, const char* code) {
  CHECK(r.status == status);
  json body = json::parse(r.body, nullptr, false);
  REQUIRE(body.is_object());
  CHECK(body["error"]["type"] == "invalid_request_error");
  CHECK(body["error"]["code"] == code);
  CHECK(body["error"]["param"].is_null());
  CHECK(!body["error"]["message"].get<std::string>().empty());
}

}  // namespace

TEST_CASE("normalize_cors_origin and normalize_allowed_host", "[api][access]") {
  struct Row {
    const char* in;
    const char* out;  // nullptr: refused
  };
  const Row origins[] = {
      {"*", "*"},
      {"null", "null"},
      {"http://localhost:3000", "http://localhost:3000"},
      {"HTTP://LocalHost:3000/", "http://localhost:3000"},  // case and one trailing slash
      {"http://example.com:80", "http://example.com"},       // browsers omit default ports
      {"https://example.com:443", "https://example.com"},
      {"https://example.com:80", "https://example.com:80"},
      {"http://[::1]:8080", "http://[::1]:8080"},
      {"chrome-extension://abcdef", "chrome-extension://abcdef"},
      {"localhost:3000", nullptr},            // no scheme
      {"http://localhost:3000/app", nullptr}, // a path
      {"http://", nullptr},
      {"http://user@host", nullptr},
      {"http://exa mple.com", nullptr},
      {"", nullptr},
  };
  for (const Row& r : origins) {
    INFO(r.in);
    Result<std::string> got = normalize_cors_origin(r.in);
    if (r.out == nullptr) {
      CHECK_FALSE(got.is_ok());
    } else {
      REQUIRE(got.is_ok());
      CHECK(*got == r.out);
    }
  }
  const Row hosts[] = {
      {"*", "*"},
      {"Example.LAN", "example.lan"},
      {".example.lan", ".example.lan"},
      {"192.168.1.5", "192.168.1.5"},
      {"::1", "[::1]"},
      {"[FE80::1]", "[fe80::1]"},
      {"example.lan:8080", nullptr},  // ports are never part of an entry
      {"[::1]:8080", nullptr},
      {"http://example.lan", nullptr},
      {"", nullptr},
      {"-bad", nullptr},
      {"a b", nullptr},
  };
  for (const Row& r : hosts) {
    INFO(r.in);
    Result<std::string> got = normalize_allowed_host(r.in);
    if (r.out == nullptr) {
      CHECK_FALSE(got.is_ok());
    } else {
      REQUIRE(got.is_ok());
      CHECK(*got == r.out);
    }
  }
}

TEST_CASE("AccessPolicy: host matching and key comparison", "[api][access]") {
  ServerOptions o;  // listens on 127.0.0.1
  o.allowed_hosts = {"my-box.lan", ".corp.example"};
  o.api_keys = {"sk-alpha", "sk-beta-longer"};
  auto p = AccessPolicy::create(o);
  REQUIRE(p.is_ok());
  for (const char* ok : {"localhost", "localhost:8080", "LOCALHOST:1", "localhost.", "app.localhost:3000",
                         "127.0.0.1", "127.0.0.1:8080", "[::1]", "[::1]:8080", "my-box.lan:9", "corp.example",
                         "a.b.corp.example:443"}) {
    INFO(ok);
    CHECK(p->host_allowed(ok));
  }
  for (const char* no : {"evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.2",
                         "my-box.lan.evil", "xcorp.example", "", "[::1", "localhost:80a", "[::2]"}) {
    INFO(no);
    CHECK_FALSE(p->host_allowed(no));
  }
  CHECK(p->key_valid("sk-alpha"));
  CHECK(p->key_valid("sk-beta-longer"));
  CHECK_FALSE(p->key_valid("sk-alph"));
  CHECK_FALSE(p->key_valid("sk-alphaa"));
  CHECK_FALSE(p->key_valid("sk-beta"));
  CHECK_FALSE(p->key_valid(""));
  CHECK_FALSE(p->key_valid("SK-ALPHA"));

  // A wildcard listen address takes any Host unless names are configured.
  ServerOptions any;
  any.host = "0.0.0.0";
  auto pa = AccessPolicy::create(any);
  REQUIRE(pa.is_ok());
  CHECK(pa->host_allowed("whatever.example:8080"));
  any.allowed_hosts = {"my-box.lan"};
  auto pb = AccessPolicy::create(any);
  REQUIRE(pb.is_ok());
  CHECK(pb->host_allowed("my-box.lan"));
  CHECK(pb->host_allowed("localhost:8080"));
  CHECK_FALSE(pb->host_allowed("whatever.example"));

  // The listen address itself is allowed.
  ServerOptions lan;
  lan.host = "192.168.7.7";
  auto pl = AccessPolicy::create(lan);
  REQUIRE(pl.is_ok());
  CHECK(pl->host_allowed("192.168.7.7:8080"));

  ServerOptions bad;
  bad.cors_origins = {"localhost:3000"};
  CHECK_FALSE(AccessPolicy::create(bad).is_ok());
  bad.cors_origins = {};
  bad.api_keys = {"has space"};
  CHECK_FALSE(AccessPolicy::create(bad).is_ok());
}

TEST_CASE("Host allow-list: a DNS-rebound name gets 403, localhost names pass", "[api][access]") {
  TestServer ts;  // 127.0.0.1, no allowed_hosts
  const std::string port = std::to_string(ts.port());
  for (const std::string& host : std::vector<std::string>{"evil.example:" + port, "attacker.test", "127.0.0.1.nip.io:" + port}) {
    INFO(host);
    auto r = raw(ts.port(), "GET", "/v1/models", "Host: " + host + "\r\n");
    REQUIRE(r);
    check_error(*r, 403, "host_not_allowed");
    auto post = raw(ts.port(), "POST", "/v1/chat/completions", "Host: " + host + "\r\nContent-Type: application/json\r\n",
                    kChat);
    REQUIRE(post);
    check_error(*post, 403, "host_not_allowed");
  }
  for (const std::string& host : std::vector<std::string>{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "LocalHost"}) {
    INFO(host);
    auto r = raw(ts.port(), "GET", "/v1/models", "Host: " + host + "\r\n");
    REQUIRE(r);
    CHECK(r->status == 200);
  }
  // HTTP/1.0 tools may send no Host at all.
  TestClient c(ts.port());
  REQUIRE(c.send_raw("GET /health HTTP/1.0\r\n\r\n"));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(ts.fake().requests().empty());

  ServerOptions o;
  o.allowed_hosts = {"my-box.lan"};
  TestServer configured(o);
  auto ok = raw(configured.port(), "GET", "/health", "Host: my-box.lan:1234\r\n");
  REQUIRE(ok);
  CHECK(ok->status == 200);
}

TEST_CASE("CORS is off by default: no Access-Control headers, cross-origin POSTs refused", "[api][access]") {
  TestServer ts;
  const std::string origin = "Origin: http://localhost:3000\r\n";
  // A preflight from any origin fails.
  auto pre = raw(ts.port(), "OPTIONS", "/v1/chat/completions",
                 "Host: 127.0.0.1\r\n" + origin + "Access-Control-Request-Method: POST\r\n"
                 "Access-Control-Request-Headers: content-type, authorization\r\n");
  REQUIRE(pre);
  check_error(*pre, 403, "origin_not_allowed");
  CHECK(pre->header("access-control-allow-origin").empty());
  CHECK(pre->header("access-control-allow-methods").empty());
  // A "simple" cross-origin POST (text/plain needs no preflight) is refused
  // before anything is generated.
  auto simple = raw(ts.port(), "POST", "/v1/chat/completions",
                    "Host: 127.0.0.1\r\n" + origin + "Content-Type: text/plain;charset=UTF-8\r\n", kChat);
  REQUIRE(simple);
  check_error(*simple, 403, "origin_not_allowed");
  CHECK(simple->header("access-control-allow-origin").empty());
  // GETs are answered, but without CORS headers the page cannot read them.
  auto get = raw(ts.port(), "GET", "/v1/models", "Host: 127.0.0.1\r\n" + origin);
  REQUIRE(get);
  CHECK(get->status == 200);
  CHECK(get->header("access-control-allow-origin").empty());
  CHECK(get->header("vary").empty());
  // No Origin (curl, SDKs): served, no CORS headers.
  auto plain = http(ts.port(), "POST", "/v1/chat/completions", kChat);
  REQUIRE(plain);
  CHECK(plain->status == 200);
  CHECK(plain->header("access-control-allow-origin").empty());
  CHECK(ts.fake().requests().size() == 1);
}

TEST_CASE("CORS for configured origins: preflight, echoed origin, Vary", "[api][access]") {
  ServerOptions o;
  o.cors_origins = {"http://localhost:3000", "https://app.example"};
  TestServer ts(o);
  const std::string host = "Host: 127.0.0.1\r\n";
  SECTION("preflight from an allowed origin") {
    auto pre = raw(ts.port(), "OPTIONS", "/v1/chat/completions",
                   host + "Origin: http://localhost:3000\r\nAccess-Control-Request-Method: POST\r\n"
                          "Access-Control-Request-Headers: content-type, authorization, x-stainless-os\r\n"
                          "Access-Control-Request-Private-Network: true\r\n");
    REQUIRE(pre);
    CHECK(pre->status == 204);
    CHECK(pre->header("access-control-allow-origin") == "http://localhost:3000");
    CHECK(pre->header("vary") == "Origin");
    CHECK(pre->header("access-control-allow-methods") == "GET, POST, OPTIONS");
    CHECK(pre->header("access-control-allow-headers") == "Authorization, Content-Type, x-stainless-os");
    CHECK(pre->header("access-control-max-age") == "600");
    CHECK(pre->header("access-control-allow-private-network") == "true");
  }
  SECTION("an allowed origin reads responses, errors included") {
    auto ok = raw(ts.port(), "POST", "/v1/chat/completions",
                  host + "Origin: https://app.example\r\nContent-Type: application/json; charset=utf-8\r\n", kChat);
    REQUIRE(ok);
    CHECK(ok->status == 200);
    CHECK(ok->header("access-control-allow-origin") == "https://app.example");
    CHECK(ok->header("vary") == "Origin");
    auto err = raw(ts.port(), "POST", "/v1/chat/completions",
                   host + "Origin: https://app.example\r\nContent-Type: application/json\r\n", "{}");
    REQUIRE(err);
    CHECK(err->status == 400);
    CHECK(err->header("access-control-allow-origin") == "https://app.example");
    // Streaming responses carry them too.
    auto stream = raw(ts.port(), "POST", "/v1/chat/completions",
                      host + "Origin: https://app.example\r\nContent-Type: application/json\r\n",
                      R"({"messages":[{"role":"user","content":"Hi"}],"stream":true})");
    REQUIRE(stream);
    CHECK(stream->status == 200);
    CHECK(stream->chunked);
    CHECK(stream->header("access-control-allow-origin") == "https://app.example");
  }
  SECTION("an allowed origin must send JSON: 415 otherwise") {
    for (const std::string& type : std::vector<std::string>{"Content-Type: text/plain\r\n",
                                                          "Content-Type: application/x-www-form-urlencoded\r\n",
                                                          "Content-Type: multipart/form-data; boundary=x\r\n", ""}) {
      INFO(type);
      auto r = raw(ts.port(), "POST", "/v1/chat/completions", host + "Origin: http://localhost:3000\r\n" + type,
                   kChat);
      REQUIRE(r);
      check_error(*r, 415, "unsupported_media_type");
      CHECK(r->header("access-control-allow-origin") == "http://localhost:3000");
    }
    CHECK(ts.fake().requests().empty());
  }
  SECTION("other origins: 403 for POST and preflight, GET without CORS headers") {
    for (const char* origin : {"http://localhost:3001", "http://evil.example", "null", "https://app.example.evil"}) {
      INFO(origin);
      auto pre = raw(ts.port(), "OPTIONS", "/v1/completions",
                     host + "Origin: " + origin + "\r\nAccess-Control-Request-Method: POST\r\n");
      REQUIRE(pre);
      check_error(*pre, 403, "origin_not_allowed");
      CHECK(pre->header("access-control-allow-origin").empty());
      auto post = raw(ts.port(), "POST", "/v1/completions",
                      host + "Origin: " + origin + "\r\nContent-Type: application/json\r\n", R"({"prompt":"a"})");
      REQUIRE(post);
      check_error(*post, 403, "origin_not_allowed");
      CHECK(post->header("access-control-allow-origin").empty());
      CHECK(post->header("vary") == "Origin");
      auto get = raw(ts.port(), "GET", "/health", host + "Origin: " + origin + "\r\n");
      REQUIRE(get);
      CHECK(get->status == 200);
      CHECK(get->header("access-control-allow-origin").empty());
    }
    CHECK(ts.fake().requests().empty());
  }
  SECTION("without Origin (curl -d sends form-urlencoded): any content type is read as JSON") {
    auto r = raw(ts.port(), "POST", "/v1/chat/completions",
                 host + "Content-Type: application/x-www-form-urlencoded\r\n", kChat);
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->header("access-control-allow-origin").empty());
  }
}

TEST_CASE("cors_origins = [\"*\"] allows every origin", "[api][access]") {
  ServerOptions o;
  o.cors_origins = {"*"};
  TestServer ts(o);
  auto r = raw(ts.port(), "POST", "/v1/chat/completions",
               "Host: 127.0.0.1\r\nOrigin: http://anything.example:9\r\nContent-Type: application/json\r\n", kChat);
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->header("access-control-allow-origin") == "http://anything.example:9");
}

TEST_CASE("API keys: 401 with OpenAI's body unless a key is sent; /health stays open", "[api][access]") {
  ServerOptions o;
  o.api_keys = {"sk-first", "sk-second"};
  o.cors_origins = {"http://localhost:3000"};
  TestServer ts(o);
  SECTION("missing, wrong or malformed keys") {
    for (const std::string& auth : std::vector<std::string>{"", "Authorization: Bearer sk-wrong\r\n",
                                                          "Authorization: Bearer sk-firs\r\n",
                                                          "Authorization: Basic c2stZmlyc3Q6\r\n",
                                                          "Authorization: sk-first\r\n", "X-Api-Key: nope\r\n"}) {
      INFO(auth);
      for (const char* path : {"/v1/chat/completions", "/v1/models", "/completions", "/v1/nope"}) {
        INFO(path);
        const bool post = std::string(path).find("completions") != std::string::npos;
        auto r = raw(ts.port(), post ? "POST" : "GET", path,
                     "Host: 127.0.0.1\r\nContent-Type: application/json\r\n" + auth, post ? kChat : "");
        REQUIRE(r);
        check_error(*r, 401, "invalid_api_key");
        CHECK(r->header("www-authenticate") == "Bearer");
        // Never echoed.
        CHECK(r->body.find("sk-") == std::string::npos);
      }
    }
    CHECK(ts.fake().requests().empty());
  }
  SECTION("a right key, as Bearer (any case, extra spaces) or X-Api-Key") {
    for (const std::string& auth : std::vector<std::string>{"Authorization: Bearer sk-first\r\n",
                                                          "Authorization: bearer   sk-second\r\n",
                                                          "X-Api-Key: sk-second\r\n"}) {
      INFO(auth);
      auto r = raw(ts.port(), "POST", "/v1/chat/completions",
                   "Host: 127.0.0.1\r\nContent-Type: application/json\r\n" + auth, kChat);
      REQUIRE(r);
      CHECK(r->status == 200);
    }
    CHECK(ts.fake().requests().size() == 3);
  }
  SECTION("/health and preflights need no key; a 401 to an allowed origin is readable") {
    for (const char* path : {"/health", "/v1/health"}) {
      auto h = raw(ts.port(), "GET", path, "Host: 127.0.0.1\r\n");
      REQUIRE(h);
      CHECK(h->status == 200);
    }
    auto pre = raw(ts.port(), "OPTIONS", "/v1/chat/completions",
                   "Host: 127.0.0.1\r\nOrigin: http://localhost:3000\r\nAccess-Control-Request-Method: POST\r\n");
    REQUIRE(pre);
    CHECK(pre->status == 204);
    auto denied = raw(ts.port(), "POST", "/v1/chat/completions",
                      "Host: 127.0.0.1\r\nOrigin: http://localhost:3000\r\nContent-Type: application/json\r\n", kChat);
    REQUIRE(denied);
    check_error(*denied, 401, "invalid_api_key");
    CHECK(denied->header("access-control-allow-origin") == "http://localhost:3000");
  }
}

// Found in hostile testing: bodies were read in full before the checks, so
// 100 keyless clients each sending 8 MiB (and never the last byte) made the
// daemon hold 1 GB. Now a refusal is sent as soon as the head is parsed,
// before any body byte is read or waited for.
TEST_CASE("refusals come from the head alone: no body is read or waited for", "[api][access]") {
  ServerOptions o;
  o.api_keys = {"sk-test"};
  TestServer ts(o);
  const std::string head_8mib = "POST /v1/chat/completions HTTP/1.1\r\nContent-Type: application/json\r\n"
                                "Content-Length: 8388608\r\n";
  struct Case {
    const char* what;
    std::string headers;
    int status;
    const char* code;
  };
  const std::vector<Case> cases = {
      {"no API key", "Host: 127.0.0.1\r\n", 401, "invalid_api_key"},
      {"a rebinding Host", "Host: attacker.example\r\nAuthorization: Bearer sk-test\r\n", 403, "host_not_allowed"},
      {"another origin", "Host: 127.0.0.1\r\nOrigin: http://attacker.example\r\nAuthorization: Bearer sk-test\r\n",
       403, "origin_not_allowed"},
      {"HTTP/1.1 without Host", "Authorization: Bearer sk-test\r\n", 400, "missing_host"},
      // Found in hostile testing: the first Host counted, so an allowed one
      // followed by another passed (and the reverse order was a 403).
      {"two Host headers", "Host: 127.0.0.1\r\nHost: attacker.example\r\nAuthorization: Bearer sk-test\r\n", 400,
       "duplicate_host"},
      {"two Host headers, the other order",
       "Host: attacker.example\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sk-test\r\n", 400, "duplicate_host"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    TestClient client(ts.port());
    // The head and 1 KiB of the 8 MiB body: the answer comes anyway.
    REQUIRE(client.send_raw(head_8mib + c.headers + "\r\n" + std::string(1024, '{')));
    auto r = client.read_response();
    REQUIRE(r);
    check_error(*r, c.status, c.code);
    CHECK(r->header("connection") == "close");
  }
  CHECK(ts.fake().requests().empty());
  // A request that passes still has its body read as usual.
  auto ok = raw(ts.port(), "POST", "/v1/chat/completions",
                "Host: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer sk-test\r\n", kChat);
  REQUIRE(ok);
  CHECK(ok->status == 200);
}
