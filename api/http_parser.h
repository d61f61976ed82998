// HttpRequestParser: HTTP/1.1 request framing on llhttp, with no I/O, so the
// bytes a client sends can be tested and fuzzed apart from the socket
// (tests/fuzz/http_request.cpp). The connection (api/http_connection.h)
// feeds it what it reads and answers each request it completes.
//
// Framing: Content-Length and chunked bodies (de-chunked), keep-alive and
// pipelining (one request at a time: feed() stops after each complete
// request and says how many bytes it used; the rest is the next one's).
// Header names are lower-cased; values as sent (llhttp trims them).
// An Upgrade header (websocket, h2c) is ignored, as RFC 9110 section 7.8
// allows: the request is answered as plain HTTP/1.1.
//
// Errors end the connection's input (feed() keeps returning the error):
//   431  request line + headers over max_head_bytes
//   413  body over max_body_bytes (declared Content-Length or chunks)
//   405  CONNECT (larder is not a proxy)
//   505  the HTTP/2 connection preface
//   400  anything llhttp cannot parse ("malformed HTTP request: HPE_...")
#pragma once

#include <llhttp.h>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "api/http_message.h"

namespace larder {

class HttpRequestParser {
 public:
  struct Limits {
    size_t max_head_bytes = 64 << 10;
    size_t max_body_bytes = 8 << 20;
  };
  enum class Outcome { kNeedMore, kRequest, kError, kRefused };

  // on_begin: the first byte of a request was parsed (starts the request
  // timer). on_head: the request line and headers are complete (the body is
  // not read yet); returning false stops the parser with kRefused (the
  // caller answers from the head alone and ends the connection).
  // on_continue: the head passed and asked for "Expect: 100-continue"
  // (HTTP/1.1).
  HttpRequestParser(Limits limits, std::function<void()> on_begin = {}, std::function<void()> on_continue = {},
                    std::function<bool(const HttpRequest& head)> on_head = {});
  HttpRequestParser(const HttpRequestParser&) = delete;
  HttpRequestParser& operator=(const HttpRequestParser&) = delete;

  // Parses `data` until a request is complete or the bytes run out. Sets
  // *consumed to the bytes used: all of them for kNeedMore, up to the end of
  // the request for kRequest (take it with take_request()). After kError,
  // error_status()/error_message() say why and every later call is kError;
  // after kRefused (on_head said no), take_request() gives the head (no
  // body) and every later call is kError.
  Outcome feed(std::string_view data, size_t* consumed);
  // The request feed() completed; the parser is ready for the next one.
  HttpRequest take_request();
  // Whether the connection may carry another request after the last one
  // (HTTP/1.1 without "Connection: close", HTTP/1.0 with keep-alive).
  bool keep_alive() const { return keep_alive_; }
  // True while a request is partly parsed (its first byte came).
  bool in_request() const { return in_request_; }
  // The Content-Length of the request whose head is being checked: valid
  // inside on_head only (0 for a chunked body or none).
  size_t declared_body_bytes() const;
  // Bytes of the current request's body read so far (de-chunked).
  size_t body_bytes() const { return request_.body.size(); }

  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

 private:
  static const llhttp_settings_t& settings();
  static int on_message_begin(llhttp_t* p);
  static int on_url(llhttp_t* p, const char* at, size_t n);
  static int on_header_field(llhttp_t* p, const char* at, size_t n);
  static int on_header_value(llhttp_t* p, const char* at, size_t n);
  static int on_headers_complete(llhttp_t* p);
  static int on_body(llhttp_t* p, const char* at, size_t n);
  static int on_message_complete(llhttp_t* p);
  bool count_head_bytes(size_t n);  // false: over the limit (431)
  void refuse(int status, std::string message);

  Limits limits_;
  std::function<void()> on_begin_;
  std::function<void()> on_continue_;
  std::function<bool(const HttpRequest&)> on_head_;
  bool refused_head_ = false;
  llhttp_t parser_{};
  HttpRequest request_;
  std::string header_field_;
  std::string header_value_;
  bool last_was_value_ = false;
  size_t head_bytes_ = 0;
  bool in_request_ = false;
  bool keep_alive_ = true;
  int refuse_status_ = 0;  // set by a callback that stopped the parser
  std::string refuse_message_;
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace larder
