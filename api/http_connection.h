// HttpConnection: one accepted TCP connection on the loop thread. Its
// HttpRequestParser (api/http_parser.h) frames the requests (Content-Length
// and chunked bodies, keep-alive, pipelining); each complete request goes to
// the ConnectionHost, and the
// response is written through the ResponseWriter interface this class
// implements. One exchange at a time: bytes of the next pipelined request
// wait until the current response is complete.
//
// Timeouts (one timer per connection, ConnectionLimits): waiting for a
// request's first byte (after accept or a response) is the idle timeout
// (close, nothing sent); from a request's first byte to its last, the
// request timeout (408, close); while response bytes wait in the write
// queue without any being taken by the client, the idle timeout again
// (close). While the request is being answered (generating) nothing is
// timed. Queued response bytes over max_queued_write_bytes close at once.
// Reads go into one buffer the host shares among its connections (the
// bytes are copied or parsed before the read callback returns), so an idle
// connection holds no read buffer.
//
// Closing: close() closes the socket and the timer at once (an
// unfinished ResponseJob is destroyed, which cancels its generation); once
// both close callbacks ran, ConnectionHost::on_connection_closed() is called
// and the host destroys the object. After a response that ends the
// connection (Connection: close, HTTP/1.0, an error), the write side is shut
// down after the pending writes and the rest of the client's bytes are
// discarded for a short linger time, so the client reads the response
// instead of a reset.
#pragma once

#include <uv.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/http_message.h"
#include "api/http_parser.h"
#include "api/router.h"

namespace larder {

class HttpConnection;

// What a connection needs from its server (loop thread only).
class ConnectionHost {
 public:
  virtual ~ConnectionHost() = default;
  // Called once a request's line and headers are parsed, before its body is
  // read (the access checks). Sets *response_headers (empty on entry) to
  // headers every response of this exchange carries (CORS). Returns a
  // response to send instead of routing the request: a refusal (status >=
  // 400: sent at once, the body is never read, the connection ends) or an
  // answer that needs only the head (a CORS preflight's 204: sent once the
  // request is complete); nullopt to route it.
  virtual std::optional<HttpResponse> check_head(const HttpRequest& head, HttpHeaders* response_headers) = 0;
  // Routes a complete request that check_head let through. May take the
  // request's body (it is not used after this call).
  virtual HandlerResult handle_request(HttpRequest& request) = 0;
  // Response bytes queued in libuv by all connections, not yet written to
  // their sockets: the connections add and take back their writes'.
  size_t& queued_write_bytes() { return queued_write_bytes_; }
  // Bytes of request bodies being read by all connections (not yet
  // complete): the connections add and take back their parsers'.
  size_t& request_body_bytes() { return request_body_bytes_; }
  // The loop-wide read buffer (valid until the read callback returns).
  virtual uv_buf_t read_buffer() = 0;
  // Both handles are closed; the host may destroy `connection` now.
  virtual void on_connection_closed(HttpConnection* connection) = 0;
  // True once the server is shutting down: no new exchanges start.
  virtual bool stopping() const = 0;
  // A response with `status` was started for a request of `path` (the
  // target without its query; "" when the request line never parsed): the
  // request counter of /metrics.
  virtual void on_response(std::string_view path, int status) {}
  // A write of kLargeWriteBytes or more finished (or was dropped): its
  // memory is free, and the host may hand free heap back to the system.
  virtual void large_write_done() {}
  static constexpr size_t kLargeWriteBytes = 32 << 20;

 private:
  size_t queued_write_bytes_ = 0;
  size_t request_body_bytes_ = 0;
};

struct ConnectionLimits {
  size_t max_head_bytes = 64 << 10;  // request line + headers; more: 431
  size_t max_body_bytes = 8 << 20;   // more: 413
  uint64_t linger_ms = 2000;         // discard time after a closing response
  uint64_t request_timeout_ms = 30000;  // first byte to last of a request; then 408
  uint64_t idle_timeout_ms = 60000;     // no request (keep-alive), or no response byte taken
  size_t max_queued_write_bytes = 16 << 20;
  size_t max_total_queued_write_bytes = 256 << 20;  // ConnectionHost::queued_write_bytes()
  size_t min_queued_write_bytes_to_cut = 1 << 20;   // a stream cut for the total has at least this unread
  // Request bodies being read by all connections together
  // (ConnectionHost::request_body_bytes()): a body past
  // min_body_bytes_to_refuse that would take the total past this gets 503
  // (at its head when it declares its length, else as it grows).
  size_t max_total_body_bytes = 256 << 20;
  size_t min_body_bytes_to_refuse = 64 << 10;
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
  // The shutdown grace is over: an exchange whose answer has not started
  // gets a 503 (code "shutting_down") and the connection ends after it; any
  // other closes now, as close().
  void end_for_shutdown();
  bool closing() const { return closing_; }
  // Whether closing it now loses no work: no request is being answered and
  // no response bytes are waiting (the server closes such connections, the
  // quietest first, to admit new ones past max_connections).
  bool evictable() const;
  // uv_now() since when it has given the server nothing to do: the start of
  // the request it is still sending (trickling bytes does not count), else
  // its last bytes read or taken by the client.
  uint64_t quiet_since_ms() const;

  // ResponseWriter (used by the router's immediate responses and by jobs).
  void send(HttpResponse response) override;
  void start_stream(int status, std::string_view content_type) override;
  void write_stream(std::string_view data) override;
  void end_stream() override;

 private:

  void on_read(ssize_t nread, const uv_buf_t* buf);
  int start_reading();  // uv_read_start; a libuv error code
  int resume_reading();  // start_reading() where read_paused_, else 0
  bool peer_hung_up() const;  // the client closed (or half-closed) its side, by poll()
  enum class TimerMode { kNone, kIdle, kRequest, kSendStall, kLinger };

  void process_input();
  void dispatch(HttpRequest request);
  void complete_exchange();
  // Sends `response` as the last of this connection (Connection: close),
  // cancelling an unfinished job, then shuts down after the flush.
  void answer_and_close(HttpResponse response);
  void fail(int status, std::string message);
  // Sets this connection's share of host_.request_body_bytes() to `bytes`
  // (the body read so far; 0 once it is taken or dropped). False: the body
  // grew past min_body_bytes_to_refuse with the total over
  // max_total_body_bytes (the caller answers busy_response()).
  bool count_body_bytes(size_t bytes);
  // 503 server_busy (Retry-After: 1): bodies of other requests fill
  // max_total_body_bytes.
  HttpResponse busy_response() const;
  void close_after_flush();
  void on_shutdown_done(int status);
  // Queues bytes on the socket. The connection closes when more than
  // max_queued_write_bytes wait unread, not counting `data` itself when it is
  // a whole response (whole_response: send(); it is in memory already).
  void write(std::string data, bool whole_response = false);
  void add_common_headers(HttpHeaders* headers) const;
  size_t queued_bytes() const;
  // Bytes of its responses the client has taken: handed to the kernel and
  // no longer in the socket's send queue (Linux SIOCOUTQ; elsewhere, those
  // handed to the kernel).
  uint64_t bytes_taken() const;
  void start_timer(TimerMode mode, uint64_t ms);
  void stop_timer();
  // Between requests: the send-stall timer while bytes wait, else nothing
  // while answering, else the idle timer. Leaves a running request timer.
  void rest_timer();
  void on_timer();

  ConnectionHost& host_;
  ConnectionLimits limits_;
  uv_tcp_t tcp_{};
  uv_timer_t timer_{};
  TimerMode timer_mode_ = TimerMode::kNone;
  // Input buffered while an exchange is answered; past it, reading stops
  // until the exchange is done (read_paused_).
  static constexpr size_t kPipelinedInputBytes = 64 << 10;
  bool read_paused_ = false;
  size_t body_bytes_counted_ = 0;  // this connection's share of host_.request_body_bytes()
  // Bytes ever handed to uv_write, and of them those the client had taken
  // (written to the socket) when the send-stall timer started.
  uint64_t bytes_enqueued_ = 0, stall_taken_bytes_ = 0;
  int open_handles_ = 0;

  HttpRequestParser parser_;  // after limits_: built from them
  std::optional<HttpResponse> head_answer_;  // what check_head answered for the request being read
  std::string input_;        // received, not yet parsed bytes

  bool exchange_active_ = false;  // a request is being answered
  bool response_started_ = false; // its response head was written
  uint64_t last_activity_ms_ = 0;
  uint64_t request_start_ms_ = 0;
  bool keep_alive_ = true;
  int http_minor_ = 1;            // of the request being answered
  bool chunked_ = false;          // the streamed response uses chunked framing
  HttpHeaders exchange_headers_;  // the host's headers for every response of this exchange
  std::string exchange_path_;     // the path of the request being answered ("" before its head parsed)
  std::string request_id_;        // x-request-id of the request being answered (new for each request)
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
