// A small blocking HTTP/1.1 client for the API tests, written against the
// wire format (RFC 9112) rather than our server code, plus a fixture that
// runs an HttpServer with a FakeGenerator on an ephemeral port.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/http_server.h"
#include "tests/api/fake_generator.h"

namespace larder::testing {

struct ClientResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // de-chunked
  bool chunked = false;
  std::vector<std::string> chunks;             // chunk payloads, in order (chunked only)
  bool complete = false;                       // the body ended as framed (not cut by EOF)

  nlohmann::json json() const { return nlohmann::json::parse(body); }
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

class TestClient {
 public:
  // rcvbuf_bytes > 0: SO_RCVBUF before connecting (a client that reads
  // slowly, or not at all, fills its window sooner).
  explicit TestClient(int port, int rcvbuf_bytes = 0);
  ~TestClient();
  bool connected() const { return fd_ >= 0; }

  // Writes all bytes; false when the server closed (EPIPE/ECONNRESET).
  bool send_raw(const std::string& bytes);
  // Reads one response (status line, headers, body by Content-Length,
  // chunked framing, or until EOF). nullopt when the connection closed
  // before a status line, or on timeout.
  // no_body: the answer to a HEAD request (headers only, RFC 9110 9.3.2).
  // interim: a 100 Continue is returned too (else skipped).
  std::optional<ClientResponse> read_response(bool no_body = false, bool interim = false);
  // POST/GET helper with keep-alive; body sent with Content-Length.
  std::optional<ClientResponse> request(const std::string& method, const std::string& path,
                                        const std::string& body = "", const std::string& extra_headers = "");
  // Reads until the received bytes contain `needle` (true) or the
  // connection ends / times out (false). The bytes stay buffered for
  // read_response().
  bool read_until(const std::string& needle);
  // True when the server closes the connection within `timeout` (bytes
  // that arrive meanwhile are discarded).
  bool wait_closed(std::chrono::milliseconds timeout);
  void close();
  // Sleeps this long before each read of at most 64 KiB (a slow reader).
  void pace_reads(std::chrono::milliseconds per_read) { pace_ = per_read; }

 private:
  bool fill();  // reads more into buf_; false at EOF/error/timeout
  std::optional<std::string> read_line();

  int fd_ = -1;
  std::string buf_;
  std::chrono::milliseconds pace_{0};
};

// The server on an ephemeral port, run() on its own thread.
class TestServer {
 public:
  explicit TestServer(ServerOptions options = {});
  ~TestServer();
  int port() const { return server_->port(); }
  FakeGenerator& fake() { return fake_; }
  HttpServer& server() { return *server_; }
  // request_stop() and join; true when run() returned within `timeout`.
  bool stop(std::chrono::milliseconds timeout);

 private:
  FakeGenerator fake_;  // outlives the server
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  std::shared_ptr<std::atomic<bool>> returned_;
};

// One request on a fresh connection.
std::optional<ClientResponse> http(int port, const std::string& method, const std::string& path,
                                   const std::string& body = "", const std::string& extra_headers = "");

// The "data: ..." payloads of an SSE body, in order ("[DONE]" included).
std::vector<std::string> sse_payloads(const std::string& body);

// Whether GET /health answers 200 {"status":"ok"}: the server still serves.
inline bool server_answers_health(int port) {
  auto r = http(port, "GET", "/health");
  return r && r->status == 200 && r->body == R"({"status":"ok"})";
}

}  // namespace larder::testing
