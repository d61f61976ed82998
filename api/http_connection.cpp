#include "api/http_connection.h"

#include <poll.h>
#include <sys/ioctl.h>
#if defined(__linux__)
#include <linux/sockios.h>
#endif

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <random>
#include <string>

#include <spdlog/spdlog.h>

#include "api/openai_response.h"

namespace larder {

namespace {

struct WriteRequest {
  uv_write_t req{};
  std::string data;
};

std::string seconds(uint64_t ms) {
  std::string s = std::to_string(ms / 1000);
  if (ms % 1000) {
    char frac[8];
    std::snprintf(frac, sizeof frac, ".%03u", static_cast<unsigned>(ms % 1000));
    s += frac;
    while (s.back() == '0') s.pop_back();
  }
  return s;
}

// OpenAI's form: "req_" + 32 random hex digits.
std::string new_request_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return std::string("req_") + hex;
}

}  // namespace

HttpConnection::HttpConnection(uv_loop_t* loop, ConnectionHost& host, ConnectionLimits limits)
    : host_(host),
      limits_(limits),
      parser_(HttpRequestParser::Limits{limits.max_head_bytes, limits.max_body_bytes},
              [this] {
                request_start_ms_ = uv_now(tcp_.loop);
                request_id_ = new_request_id();
                exchange_headers_.clear();
                exchange_path_.clear();
                head_answer_.reset();
                start_timer(TimerMode::kRequest, limits_.request_timeout_ms);
              },
              [this] { write("HTTP/1.1 100 Continue\r\n\r\n"); },
              [this](const HttpRequest& head) {
                exchange_path_ = std::string(head.path());
                head_answer_ = host_.check_head(head, &exchange_headers_);
                if (head_answer_ && head_answer_->status >= 400) return false;
                // A body declared too large for what the other requests'
                // bodies leave is refused before a byte of it is read.
                const size_t declared = parser_.declared_body_bytes();
                if (declared > limits_.min_body_bytes_to_refuse &&
                    host_.request_body_bytes() + declared > limits_.max_total_body_bytes) {
                  head_answer_ = busy_response();
                  return false;
                }
                return true;
              }) {
  uv_tcp_init(loop, &tcp_);
  uv_timer_init(loop, &timer_);
  tcp_.data = this;
  timer_.data = this;
  open_handles_ = 2;
}

HttpConnection::~HttpConnection() { assert(open_handles_ == 0 && "HttpConnection destroyed with open handles"); }

bool HttpConnection::evictable() const {
  return !closing_ && !exchange_active_ && !job_ && pending_writes_ == 0 && !shutting_down_;
}

uint64_t HttpConnection::quiet_since_ms() const {
  return parser_.in_request() ? request_start_ms_ : last_activity_ms_;
}

int HttpConnection::accept(uv_stream_t* listener) {
  last_activity_ms_ = uv_now(tcp_.loop);
  int rc = uv_accept(listener, reinterpret_cast<uv_stream_t*>(&tcp_));
  if (rc != 0) return rc;
  uv_tcp_nodelay(&tcp_, 1);
  rc = start_reading();
  if (rc == 0) rest_timer();
  return rc;
}

int HttpConnection::start_reading() {
  return uv_read_start(
      reinterpret_cast<uv_stream_t*>(&tcp_),
      [](uv_handle_t* h, size_t, uv_buf_t* buf) { *buf = static_cast<HttpConnection*>(h->data)->host_.read_buffer(); },
      [](uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) {
        static_cast<HttpConnection*>(s->data)->on_read(nread, buf);
      });
}

// ---- timers -----------------------------------------------------------------

size_t HttpConnection::queued_bytes() const {
  return uv_stream_get_write_queue_size(reinterpret_cast<const uv_stream_t*>(&tcp_));
}

uint64_t HttpConnection::bytes_taken() const {
  uint64_t in_kernel = 0;
#if defined(__linux__)
  uv_os_fd_t fd;
  int unsent = 0;
  if (uv_fileno(reinterpret_cast<const uv_handle_t*>(&tcp_), &fd) == 0 && ::ioctl(fd, SIOCOUTQ, &unsent) == 0 &&
      unsent > 0) {
    in_kernel = uint64_t(unsent);
  }
#endif
  const uint64_t handed = bytes_enqueued_ - queued_bytes();
  return handed - std::min(handed, in_kernel);
}

void HttpConnection::start_timer(TimerMode mode, uint64_t ms) {
  if (closing_) return;
  timer_mode_ = mode;
  if (mode == TimerMode::kSendStall) stall_taken_bytes_ = bytes_taken();
  uv_timer_start(&timer_, [](uv_timer_t* t) { static_cast<HttpConnection*>(t->data)->on_timer(); }, ms, 0);
}

void HttpConnection::stop_timer() {
  timer_mode_ = TimerMode::kNone;
  if (!closing_) uv_timer_stop(&timer_);
}

void HttpConnection::rest_timer() {
  if (closing_ || shutting_down_ || timer_mode_ == TimerMode::kRequest) return;
  if (queued_bytes() > 0) {
    if (timer_mode_ != TimerMode::kSendStall) start_timer(TimerMode::kSendStall, limits_.idle_timeout_ms);
  } else if (exchange_active_) {
    stop_timer();
  } else if (timer_mode_ != TimerMode::kIdle) {
    start_timer(TimerMode::kIdle, limits_.idle_timeout_ms);
  }
}

void HttpConnection::on_timer() {
  const TimerMode mode = timer_mode_;
  timer_mode_ = TimerMode::kNone;
  switch (mode) {
    case TimerMode::kRequest:
      spdlog::debug("api: request not received within {} s: 408", seconds(limits_.request_timeout_ms));
      fail(408, "the request did not arrive in time (request_timeout_s = " + seconds(limits_.request_timeout_ms) +
                    ")");
      break;
    case TimerMode::kSendStall:
      // A whole response is one write, done only at its end: bytes the
      // client took meanwhile count too (found in hostile testing: a 17 MB
      // body read steadily was cut after idle_timeout_s). Taken, not handed
      // to the kernel: libuv runs timers before it looks for writable
      // sockets, so a loop that woke late saw no bytes handed over while
      // the client read on (found as a flaky test on a loaded machine).
      if (bytes_taken() > stall_taken_bytes_) {
        start_timer(TimerMode::kSendStall, limits_.idle_timeout_ms);
        break;
      }
      spdlog::debug("api: client read nothing of its response for {} s: closing", seconds(limits_.idle_timeout_ms));
      close();
      break;
    case TimerMode::kIdle:
    case TimerMode::kLinger:
      close();
      break;
    case TimerMode::kNone:
      break;
  }
}

// ---- input ------------------------------------------------------------------

void HttpConnection::on_read(ssize_t nread, const uv_buf_t* buf) {
  if (closing_) return;
  if (nread < 0) {
    // EOF or error. A generation in flight has lost its client: close()
    // cancels it. An answered exchange may still have bytes to flush.
    peer_closed_ = true;
    if (job_ || (pending_writes_ == 0 && !shutting_down_)) {
      close();
    } else if (!shutting_down_) {
      close_after_flush();  // on_shutdown_done() closes: the peer is gone
    } else if (shutdown_done_) {
      close();  // was lingering for exactly this
    }
    return;
  }
  if (nread == 0) return;
  last_activity_ms_ = uv_now(tcp_.loop);
  if (draining_) return;  // discarded
  input_.append(buf->base, static_cast<size_t>(nread));
  if (exchange_active_ && input_.size() > limits_.max_head_bytes + limits_.max_body_bytes) {
    close();  // a client pipelining far ahead of the answers
    return;
  }
  // A client pipelining ahead of the answer waits in the kernel's buffers
  // and TCP's window, not in ours, until this exchange is done. Found in
  // hostile testing: 8 MiB of pipelined input per connection, over up to
  // max_connections connections. (A client that closes meanwhile is
  // noticed by pump()'s peer_hung_up, unless its unsent bytes fill TCP's
  // window: its FIN then waits for reading to resume.)
  if (exchange_active_ && !read_paused_ && input_.size() >= kPipelinedInputBytes) {
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&tcp_));
    read_paused_ = true;
  }
  process_input();
}

void HttpConnection::process_input() {
  if (in_process_) return;  // re-entered from dispatch(): the loop below continues
  in_process_ = true;
  while (!closing_ && !draining_ && !exchange_active_ && !input_.empty()) {
    size_t used = 0;
    const HttpRequestParser::Outcome outcome = parser_.feed(input_, &used);
    input_.erase(0, used);
    if (outcome == HttpRequestParser::Outcome::kNeedMore) {
      if (!count_body_bytes(parser_.body_bytes())) {
        // Found in hostile testing: bodies of up to max_body_bytes on
        // every connection at once (8 MiB x 1024) were all held.
        answer_and_close(busy_response());
        break;
      }
      continue;
    }
    count_body_bytes(0);
    if (outcome == HttpRequestParser::Outcome::kError) {
      fail(parser_.error_status(), parser_.error_message());
      break;
    }
    if (outcome == HttpRequestParser::Outcome::kRefused) {
      // Refused from its head (Host, origin, API key): answered without
      // reading the body, and the connection ends.
      HttpRequest head = parser_.take_request();
      http_minor_ = head.http_minor;
      head_only_ = head.method == "HEAD";
      HttpResponse refusal = std::move(*head_answer_);
      head_answer_.reset();
      answer_and_close(std::move(refusal));
      break;
    }
    keep_alive_ = parser_.keep_alive();
    dispatch(parser_.take_request());
  }
  in_process_ = false;
}

void HttpConnection::dispatch(HttpRequest request) {
  exchange_active_ = true;
  response_started_ = false;
  stop_timer();  // nothing is timed while answering
  rest_timer();  // (bytes of an earlier response may still wait)
  http_minor_ = request.http_minor;
  head_only_ = request.method == "HEAD";
  if (host_.stopping()) keep_alive_ = false;
  // A preflight needs only its head: answered without routing.
  std::optional<HttpResponse> head_answer = std::move(head_answer_);
  head_answer_.reset();
  request.request_id = request_id_;
  spdlog::debug("api: {} {} {}", request_id_, request.method, clip_for_message(request.target));
  HandlerResult result = head_answer ? HandlerResult(std::move(*head_answer)) : host_.handle_request(request);
  request = HttpRequest();  // free the body now
  if (auto* response = std::get_if<HttpResponse>(&result)) {
    send(std::move(*response));
    complete_exchange();
    return;
  }
  job_ = std::move(std::get<std::unique_ptr<ResponseJob>>(result));
  pump();
}

int HttpConnection::resume_reading() {
  if (!read_paused_) return 0;
  read_paused_ = false;
  return start_reading();
}

bool HttpConnection::peer_hung_up() const {
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<const uv_handle_t*>(&tcp_), &fd) != 0) return false;
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void HttpConnection::pump() {
  if (!job_ || closing_) return;
  // Reading paused (pipelined input), a closed client shows no EOF: asked
  // at each delivery instead, so its generation is still cancelled (found
  // in review: a non-streamed one ran to its end). Before its response
  // starts, too: a prepared prompt can come back in the same loop turn as
  // the EOF of a client that sent it and left, ahead of it, and would reach
  // the engine (found as a flaky test: 3 of 8 abandoned requests did).
  if ((read_paused_ || !response_started_) && peer_hung_up()) {
    close();
    return;
  }
  in_pump_ = true;
  job_->pump(*this);
  in_pump_ = false;
  if (closing_) {
    job_.reset();  // close() ran inside pump (a failed write) and left the job alive until now
    return;
  }
  if (job_->done()) {
    job_.reset();
    complete_exchange();
  }
}

void HttpConnection::complete_exchange() {
  exchange_active_ = false;
  if (!keep_alive_ || host_.stopping()) {
    close_after_flush();
    return;
  }
  if (resume_reading() != 0) {
    close();
    return;
  }
  rest_timer();
  process_input();
}

void HttpConnection::answer_and_close(HttpResponse response) {
  exchange_active_ = true;
  keep_alive_ = false;
  count_body_bytes(0);  // a body being read is dropped
  job_.reset();  // cancels a generation still running
  send(std::move(response));
  close_after_flush();
}

bool HttpConnection::count_body_bytes(size_t bytes) {
  size_t& total = host_.request_body_bytes();
  total = total - body_bytes_counted_ + bytes;
  const bool grew = bytes > body_bytes_counted_;
  body_bytes_counted_ = bytes;
  return !(grew && bytes > limits_.min_body_bytes_to_refuse && total > limits_.max_total_body_bytes);
}

HttpResponse HttpConnection::busy_response() const {
  return retry_later_response("the server is reading too many large request bodies at once (" +
                                  std::to_string(limits_.max_total_body_bytes >> 20) + " MiB together); try again",
                              "server_busy");
}

void HttpConnection::fail(int status, std::string message) {
  if (request_id_.empty()) request_id_ = new_request_id();
  head_only_ = false;
  exchange_headers_.clear();
  answer_and_close(
      error_response(ApiError{status, std::move(message), "invalid_request_error", std::nullopt, std::nullopt}));
}

void HttpConnection::end_for_shutdown() {
  if (closing_) return;
  if (exchange_active_ && !response_started_ && !shutting_down_) {
    // Not a byte of the answer went out yet: say why instead of vanishing.
    // An admin change already running goes on (found in hostile testing: a
    // pin answered "try again" was applied and kept across the restart).
    const bool withdrawn = !job_ || job_->withdraw();
    answer_and_close(retry_later_response(
        withdrawn ? "the server is shutting down; try again"
                  : "the server is shutting down; this change had begun and may have been applied (see GET "
                    "/admin/cache once the server is back)",
        "shutting_down"));
    return;
  }
  close();
}

void HttpConnection::begin_shutdown() {
  if (closing_) return;
  if (shutting_down_) {
    if (shutdown_done_) close();  // lingering: stop now (else on_shutdown_done closes)
  } else if (exchange_active_) {
    keep_alive_ = false;  // complete_exchange() closes after the response
  } else if (pending_writes_ > 0) {
    close_after_flush();
  } else {
    close();
  }
}

// ---- closing ----------------------------------------------------------------

void HttpConnection::close() {
  if (closing_) return;
  closing_ = true;
  count_body_bytes(0);
  if (!in_pump_) job_.reset();  // cancels an unfinished generation (inside pump(): pump() does it)
  auto on_closed = [](uv_handle_t* h) {
    auto* c = static_cast<HttpConnection*>(h->data);
    if (--c->open_handles_ == 0) c->host_.on_connection_closed(c);  // destroys c
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), on_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&timer_), on_closed);
}

void HttpConnection::close_after_flush() {
  if (closing_ || shutting_down_) return;
  shutting_down_ = true;
  draining_ = true;
  job_.reset();
  input_.clear();
  (void)resume_reading();  // read and discarded from now on (the linger below)
  stop_timer();
  // A client that reads nothing would hold the shutdown back forever.
  if (queued_bytes() > 0) start_timer(TimerMode::kSendStall, limits_.idle_timeout_ms);
  auto req = std::make_unique<uv_shutdown_t>();
  int rc = uv_shutdown(req.get(), reinterpret_cast<uv_stream_t*>(&tcp_), [](uv_shutdown_t* r, int status) {
    std::unique_ptr<uv_shutdown_t> owned(r);
    static_cast<HttpConnection*>(r->handle->data)->on_shutdown_done(status);
  });
  if (rc != 0) {
    close();
    return;
  }
  (void)req.release();  // freed by the callback
}

void HttpConnection::on_shutdown_done(int status) {
  shutdown_done_ = true;
  if (closing_) return;
  stop_timer();
  if (status < 0 || peer_closed_ || host_.stopping() || limits_.linger_ms == 0) {
    close();
    return;
  }
  // Keep reading (and discarding) until the client closes or the linger
  // time is over.
  start_timer(TimerMode::kLinger, limits_.linger_ms);
}

// ---- output -----------------------------------------------------------------

void HttpConnection::write(std::string data, bool whole_response) {
  if (closing_ || data.empty()) return;
  const size_t size = data.size();
  auto w = std::make_unique<WriteRequest>();
  w->data = std::move(data);
  uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
  int rc = uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&tcp_), &buf, 1, [](uv_write_t* r, int status) {
    std::unique_ptr<WriteRequest> owned(reinterpret_cast<WriteRequest*>(r));
    auto* c = static_cast<HttpConnection*>(r->handle->data);
    --c->pending_writes_;
    c->host_.queued_write_bytes() -= owned->data.size();
    if (owned->data.size() >= ConnectionHost::kLargeWriteBytes) {
      std::string().swap(owned->data);
      c->host_.large_write_done();
    }
    if (status >= 0) c->last_activity_ms_ = uv_now(c->tcp_.loop);
    if (status < 0) {
      c->close();  // the client is gone (UV_ECANCELED: already closing)
    } else if (c->timer_mode_ == TimerMode::kSendStall) {
      // The client took bytes: restart the stall timer, or stop it when
      // nothing waits any more.
      if (c->queued_bytes() > 0) {
        c->start_timer(TimerMode::kSendStall, c->limits_.idle_timeout_ms);
      } else {
        c->timer_mode_ = TimerMode::kNone;
        c->rest_timer();
      }
    }
  });
  if (rc != 0) {
    close();
    return;
  }
  ++pending_writes_;
  (void)w.release();  // freed by the callback
  host_.queued_write_bytes() += size;
  bytes_enqueued_ += size;
  const size_t queued = queued_bytes();
  // A whole response (send()) is already made and in memory: waiting for the
  // client to take it costs nothing more, so only what is queued beyond it
  // counts (the stall timer still closes a client that takes nothing).
  // Streams count every byte: they would keep growing behind a slow reader.
  if (queued > limits_.max_queued_write_bytes + (whole_response ? size : 0)) {
    spdlog::warn("api: a client left {} response bytes unread (max {}): closing its connection", queued,
                 limits_.max_queued_write_bytes);
    close();
  } else if (!whole_response && queued > limits_.min_queued_write_bytes_to_cut &&
             host_.queued_write_bytes() > limits_.max_total_queued_write_bytes) {
    spdlog::warn("api: {} response bytes wait unread in all (max {}); closing a stream whose client left {} unread",
                 host_.queued_write_bytes(), limits_.max_total_queued_write_bytes, queued);
    close();
  } else if (queued > 0 && (timer_mode_ == TimerMode::kNone || timer_mode_ == TimerMode::kIdle)) {
    start_timer(TimerMode::kSendStall, limits_.idle_timeout_ms);
  }
}

void HttpConnection::add_common_headers(HttpHeaders* headers) const {
  headers->emplace_back("Connection", keep_alive_ && !host_.stopping() ? "keep-alive" : "close");
  headers->emplace_back("Server", "larder");
  if (!request_id_.empty()) headers->emplace_back("x-request-id", request_id_);
  for (const auto& h : exchange_headers_) headers->push_back(h);
}

void HttpConnection::send(HttpResponse response) {
  response_started_ = true;
  host_.on_response(exchange_path_, response.status);
  HttpHeaders headers;
  if (!response.content_type.empty()) headers.emplace_back("Content-Type", response.content_type);
  if (response.status != 204) headers.emplace_back("Content-Length", std::to_string(response.body.size()));
  add_common_headers(&headers);
  for (auto& h : response.headers) headers.push_back(std::move(h));
  std::string out = encode_response_head(response.status, headers);
  if (response.status != 204 && !head_only_) out += response.body;
  write(std::move(out), /*whole_response=*/true);
}

void HttpConnection::start_stream(int status, std::string_view content_type) {
  response_started_ = true;
  host_.on_response(exchange_path_, status);
  chunked_ = http_minor_ >= 1;
  if (!chunked_) keep_alive_ = false;  // HTTP/1.0: the body ends when the connection does
  HttpHeaders headers;
  headers.emplace_back("Content-Type", std::string(content_type));
  headers.emplace_back("Cache-Control", "no-cache");
  if (chunked_) headers.emplace_back("Transfer-Encoding", "chunked");
  add_common_headers(&headers);
  write(encode_response_head(status, headers));
}

void HttpConnection::write_stream(std::string_view data) {
  if (data.empty()) return;
  write(chunked_ ? encode_chunk(data) : std::string(data));
}

void HttpConnection::end_stream() {
  if (chunked_) write(encode_chunk(""));
}

}  // namespace larder
