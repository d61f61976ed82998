// HttpConnection: one accepted TCP connection on the loop thread. llhttp
// parses requests (Content-Length and chunked bodies, keep-alive,
// pipelining); each complete request goes to the ConnectionHost, and the
// response is written through the ResponseWriter interface this class
// implements. One exchange at a time: bytes of the next pipelined request
// wait until the current response is complete.
//
// Closing: close() closes the socket and the linger timer at once (an
// unfinished ResponseJob is destroyed, which cancels its generation); once
// both close callbacks ran, ConnectionHost::on_connection_closed() is called
// and the host destroys the object. After a response that ends the
// connection (Connection: close, HTTP/1.0, an error), the write side is shut
// down after the pending writes and the rest of the client's bytes are
// discarded for a short linger time, so the client reads the response
// instead of a reset.
#pragma once

#include <llhttp.h>
#include <uv.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "api/http_message.h"
#include "api/router.h"

namespace larder {

class HttpConnection;

// What a connection needs from its server (loop thread only).
class ConnectionHost {
 public:
  virtual ~ConnectionHost() = default;
  // May take the request's body (it is not used after this call).
  virtual HandlerResult handle_request(HttpRequest& request) = 0;
  // Both handles are closed; the host may destroy `connection` now.
  virtual void on_connection_closed(HttpConnection* connection) = 0;
  // True once the server is shutting down: no new exchanges start.
  virtual bool stopping() const = 0;
};

struct ConnectionLimits {
  size_t max_head_bytes = 64 << 10;  // request line + headers; more: 431
  size_t max_body_bytes = 8 << 20;   // more: 413
  uint64_t linger_ms = 2000;         // discard time after a closing response
};

class HttpConnection : public ResponseWriter {
 public:
  HttpConnection(uv_loop_t* loop, ConnectionHost& host, ConnectionLimits limits);
  ~HttpConnection() override;  // only after on_connection_closed
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Accepts the pending connection of `listener` and starts reading.
  // Returns a libuv error code; on error the caller must close().
  int accept(uv_stream_t* listener);
  // Lets the active job write what the engine delivered.
  void pump();
  // Server shutdown: close now when idle, else after the current response.
  void begin_shutdown();
  // Closes both handles now (cancels an unfinished generation).
  void close();
  bool closing() const { return closing_; }

  // ResponseWriter (used by the router's immediate responses and by jobs).
  void send(HttpResponse response) override;
  void start_stream(int status, std::string_view content_type) override;
  void write_stream(std::string_view data) override;
  void end_stream() override;

 private:
  static const llhttp_settings_t& parser_settings();
  static int on_message_begin(llhttp_t* p);
  static int on_url(llhttp_t* p, const char* at, size_t n);
  static int on_header_field(llhttp_t* p, const char* at, size_t n);
  static int on_header_value(llhttp_t* p, const char* at, size_t n);
  static int on_headers_complete(llhttp_t* p);
  static int on_body(llhttp_t* p, const char* at, size_t n);
  static int on_message_complete(llhttp_t* p);

  void on_read(ssize_t nread, const uv_buf_t* buf);
  bool count_head_bytes(size_t n);  // false: over the limit (431)
  void process_input();
  void dispatch();
  void complete_exchange();
  void fail(int status, std::string message);
  void close_after_flush();
  void on_shutdown_done(int status);
  void write(std::string data);
  void add_common_headers(HttpHeaders* headers) const;

  ConnectionHost& host_;
  ConnectionLimits limits_;
  uv_tcp_t tcp_{};
  uv_timer_t linger_timer_{};
  int open_handles_ = 0;
  std::vector<char> read_buf_;

  llhttp_t parser_{};
  HttpRequest request_;      // the request being parsed
  std::string header_field_;
  std::string header_value_;
  bool last_was_value_ = false;
  size_t head_bytes_ = 0;
  int limit_status_ = 0;     // 413/431 when a limit stopped the parser
  std::string input_;        // received, not yet parsed bytes

  bool exchange_active_ = false;  // a request is being answered
  bool keep_alive_ = true;
  int http_minor_ = 1;            // of the request being answered
  bool chunked_ = false;          // the streamed response uses chunked framing
  std::unique_ptr<ResponseJob> job_;
  int pending_writes_ = 0;
  bool in_process_ = false;
  bool in_pump_ = false;          // job_->pump() is on the stack: close() must not destroy job_
  bool head_only_ = false;        // answering a HEAD request: no body bytes
  bool draining_ = false;         // no more requests; incoming bytes are discarded
  bool shutting_down_ = false;    // uv_shutdown requested
  bool shutdown_done_ = false;    // its callback ran
  bool peer_closed_ = false;      // EOF or a read error seen
  bool closing_ = false;
};

}  // namespace larder
