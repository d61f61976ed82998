// Plain HTTP/1.1 request and response values, the ResponseWriter interface a
// handler writes a (possibly streamed) response through, and the byte-level
// encoders (status line + headers, chunked framing). No libuv, no JSON here.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace larder {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;   // "GET", "POST", ... (llhttp's names)
  std::string target;   // the raw request target, e.g. "/v1/models?x=1"
  HttpHeaders headers;  // names lower-cased, values as sent (trimmed by llhttp)
  std::string body;     // de-chunked
  int http_major = 1;
  int http_minor = 1;
  std::string request_id;  // "req_..." (set by the connection; sent back as x-request-id)

  // The target without its query string ("/v1/models").
  std::string_view path() const;
  // The first header with this (lower-case) name, or nullptr.
  const std::string* header(std::string_view lower_name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  HttpHeaders headers;  // extra headers (framing, Connection, Server and CORS headers are added by the connection)
  std::string body;
};

// Where a handler's response goes. Implemented by the connection; used only on
// the loop thread. Either send() once, or start_stream(), write_stream()*,
// end_stream().
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // A complete response with Content-Length.
  virtual void send(HttpResponse response) = 0;
  // Response head with Transfer-Encoding: chunked (HTTP/1.0 clients: no
  // framing, the connection closes at the end).
  virtual void start_stream(int status, std::string_view content_type) = 0;
  // One piece of the body (sent as one chunk; empty data is ignored).
  virtual void write_stream(std::string_view data) = 0;
  // The terminating zero-length chunk; the exchange is over.
  virtual void end_stream() = 0;
};

// A header value without its optional whitespace: SP and HTAB at either
// end (RFC 9110 section 5.6.3).
std::string_view trim_ows(std::string_view s);
// s with ASCII letters lower-cased (header names, tokens such as codings).
std::string ascii_lower(std::string_view s);

// "OK", "Not Found", ...; "Unknown" for codes we never send.
const char* http_reason_phrase(int status);

// "HTTP/1.1 <status> <reason>\r\n" + headers + "\r\n". `headers` must already
// hold the framing headers (Content-Length or Transfer-Encoding).
std::string encode_response_head(int status, const HttpHeaders& headers);

// One chunk of a chunked body: "<hex size>\r\n<data>\r\n". Empty data gives
// the terminating "0\r\n\r\n".
std::string encode_chunk(std::string_view data);

}  // namespace larder
