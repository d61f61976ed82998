#include "tests/api/test_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstring>

#include <catch2/catch.hpp>

namespace larder::testing {

namespace {
constexpr int kReadTimeoutMs = 5000;
}

TestClient::TestClient(int port, int rcvbuf_bytes) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (rcvbuf_bytes > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf_bytes, sizeof rcvbuf_bytes);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

TestClient::~TestClient() { close(); }

void TestClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool TestClient::send_raw(const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

bool TestClient::fill() {
  if (pace_.count() > 0) std::this_thread::sleep_for(pace_);
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, kReadTimeoutMs) <= 0) return false;
  char tmp[65536];
  ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
  if (n <= 0) return false;
  buf_.append(tmp, static_cast<size_t>(n));
  return true;
}

std::optional<std::string> TestClient::read_line() {
  for (;;) {
    size_t eol = buf_.find("\r\n");
    if (eol != std::string::npos) {
      std::string line = buf_.substr(0, eol);
      buf_.erase(0, eol + 2);
      return line;
    }
    if (!fill()) return std::nullopt;
  }
}

std::optional<ClientResponse> TestClient::read_response(bool no_body, bool interim) {
  ClientResponse r;
  auto status_line = read_line();
  if (!status_line) return std::nullopt;
  // "HTTP/1.1 200 OK"
  if (status_line->rfind("HTTP/1.", 0) != 0 || status_line->size() < 12) return std::nullopt;
  r.status = std::stoi(status_line->substr(9, 3));
  for (;;) {
    auto line = read_line();
    if (!line) return std::nullopt;
    if (line->empty()) break;
    size_t colon = line->find(':');
    std::string name = line->substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t v = colon + 1;
    while (v < line->size() && (*line)[v] == ' ') ++v;
    r.headers[name] = line->substr(v);
  }
  if (r.status == 100 && !interim) return read_response(no_body);  // interim response
  if (r.status == 100) {
    r.complete = true;
    return r;
  }
  if (r.status == 204 || no_body) {
    r.complete = true;
    return r;
  }
  if (r.header("transfer-encoding") == "chunked") {
    r.chunked = true;
    for (;;) {
      auto size_line = read_line();
      if (!size_line) return r;  // cut short
      size_t size = std::stoul(*size_line, nullptr, 16);
      while (buf_.size() < size + 2) {
        if (!fill()) return r;
      }
      if (buf_.compare(size, 2, "\r\n") != 0) return r;  // bad framing: not complete
      std::string payload = buf_.substr(0, size);
      buf_.erase(0, size + 2);
      if (size == 0) {
        r.complete = true;
        return r;
      }
      r.body += payload;
      r.chunks.push_back(std::move(payload));
    }
  }
  if (!r.header("content-length").empty()) {
    size_t len = std::stoul(r.header("content-length"));
    while (buf_.size() < len) {
      if (!fill()) return r;
    }
    r.body = buf_.substr(0, len);
    buf_.erase(0, len);
    r.complete = true;
    return r;
  }
  while (fill()) {
  }
  r.body = std::move(buf_);
  buf_.clear();
  r.complete = true;
  return r;
}

std::optional<ClientResponse> TestClient::request(const std::string& method, const std::string& path,
                                                  const std::string& body, const std::string& extra_headers) {
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra_headers;
  if (method == "POST" || !body.empty()) {
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  req += "\r\n" + body;
  if (!send_raw(req)) return std::nullopt;
  return read_response(method == "HEAD");
}

bool TestClient::read_until(const std::string& needle) {
  while (buf_.find(needle) == std::string::npos) {
    if (!fill()) return false;
  }
  return true;
}

bool TestClient::wait_closed(std::chrono::milliseconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  char tmp[65536];
  while (std::chrono::steady_clock::now() < until) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count()) + 1) <= 0) continue;
    ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) return true;
  }
  return false;
}

std::optional<ClientResponse> http(int port, const std::string& method, const std::string& path,
                                   const std::string& body, const std::string& extra_headers) {
  TestClient c(port);
  if (!c.connected()) return std::nullopt;
  return c.request(method, path, body, extra_headers);
}

std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) {
      out.push_back("<unterminated>" + body.substr(pos));
      break;
    }
    std::string event = body.substr(pos, end - pos);
    out.push_back(event.rfind("data: ", 0) == 0 ? event.substr(6) : "<not data>" + event);
    pos = end + 2;
  }
  return out;
}

TestServer::TestServer(ServerOptions options) : returned_(std::make_shared<std::atomic<bool>>(false)) {
  options.port = 0;
  auto created = HttpServer::create(options, fake_);
  REQUIRE(created.is_ok());
  server_ = std::move(created).value();
  thread_ = std::thread([s = server_.get(), returned = returned_] {
    s->run();
    returned->store(true);
  });
}

bool TestServer::stop(std::chrono::milliseconds timeout) {
  if (!thread_.joinable()) return true;
  server_->request_stop();
  auto until = std::chrono::steady_clock::now() + timeout;
  while (!returned_->load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  bool ok = returned_->load();
  if (ok) thread_.join();
  return ok;
}

TestServer::~TestServer() {
  if (thread_.joinable()) {
    server_->request_stop();
    thread_.join();
  }
  server_.reset();
}

}  // namespace larder::testing
