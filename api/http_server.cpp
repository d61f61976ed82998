#include "api/http_server.h"

#include <malloc.h>
#include <sys/resource.h>
#include <uv.h>

#include <algorithm>
#include <csignal>
#include <optional>
#include <string>
#include <vector>
#include <mutex>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "api/access_policy.h"
#include "storage/log_limiter.h"
#include "api/generation_job.h"
#include "api/http_connection.h"
#include "api/router.h"
#include "api/openai_response.h"
#include "api/pool_job.h"
#include "api/uv_handle.h"

namespace larder {

namespace {

constexpr size_t kReadBufferBytes = 64 << 10;

// libuv sets a signal back to its default action when the last uv_signal_t
// for it in the process stops, and the server's handles close in ~Impl: a
// SIGTERM between that and the SIG_IGN right after killed larderd while it
// flushed page writes (seen once in the test that sends SIGTERMs every
// millisecond through a shutdown). Handles on a loop of their own, never
// run or closed, keep libuv's handler installed for the life of the
// process; what they receive is never read (a full pipe drops it).
// Returns whether they are (else ~Impl sets the signals to SIG_IGN, which
// a later server in the same process, as in the tests, could not undo: with
// a keeper, libuv installs its handler only once).
bool keep_signal_handlers_installed() {
  static std::once_flag once;
  static bool kept = false;
  std::call_once(once, [] {
    static uv_loop_t keeper;
    static uv_signal_t handles[3];
    if (uv_loop_init(&keeper) != 0) return;
    const int signums[3] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; ++i) {
      if (uv_signal_init(&keeper, &handles[i]) != 0) return;
      if (uv_signal_start(&handles[i], [](uv_signal_t*, int) {}, signums[i]) != 0) return;
    }
    kept = true;
  });
  return kept;
}
// A connection refused at max_connections reads and drops the client's
// bytes this long before it closes (so the 503 is read, not reset), and at
// most this many do so at once (the rest close at once).
constexpr uint64_t kRefusedLingerMs = 500;
constexpr int kMaxRefusedLingering = 64;
// Descriptors kept for everything but connections (RocksDB files, the
// model, libuv's own, logs).
constexpr rlim_t kReservedFds = 256;

// max_connections, lowered where the descriptor limit cannot hold it (after
// raising the soft limit toward the hard one).
int fit_connection_cap(int wanted) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return wanted;
  const rlim_t need = static_cast<rlim_t>(wanted) + kReservedFds;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need) return wanted;
  const int fit = rl.rlim_cur > 2 * kReservedFds ? static_cast<int>(rl.rlim_cur - kReservedFds)
                                                 : std::max(1, static_cast<int>(rl.rlim_cur / 2));
  spdlog::warn("api: max_connections {} lowered to {}: this process may open only {} files (ulimit -n)", wanted,
               fit, static_cast<uint64_t>(rl.rlim_cur));
  return fit;
}

// The whole answer to a connection over the cap.
std::string too_many_connections_response(int cap) {
  HttpResponse r = retry_later_response(
      "too many connections (this server takes " + std::to_string(cap) +
          " at once: [server] max_connections); try again later",
      "too_many_connections");
  HttpHeaders headers = {{"Content-Type", r.content_type},
                         {"Content-Length", std::to_string(r.body.size())},
                         {"Connection", "close"}};
  headers.insert(headers.end(), r.headers.begin(), r.headers.end());
  headers.emplace_back("Server", "larder");
  return encode_response_head(503, headers) + r.body;
}

}  // namespace

// A connection refused at max_connections, while it drains (refuse_connection).
struct RefusedConnection {
  uv_tcp_t tcp{};
  uv_timer_t timer{};
  uv_shutdown_t shutdown{};
  HttpServer::Impl* owner = nullptr;
  bool lingering = false;
  bool closing = false;
  int open_handles = 2;
  void close();
};

struct HttpServer::Impl : public ConnectionHost {
  Impl(const ServerOptions& o, Generator& g) : options(o), generator(g) {}
  ~Impl() override;

  Status init();
  void on_new_connection(int status);
  void refuse_connection();
  // At the connection cap: closes the connection quiet longest among those
  // that lose nothing by it (HttpConnection::evictable, quiet_since_ms: an
  // idle keep-alive one, or one sending a request for long — slowloris), so
  // a flood of idle or trickling sockets cannot lock clients out. False
  // when every connection is answering a request.
  bool evict_one();
  void on_wake();
  void on_stop();
  void on_signal(int signum);
  void on_grace_expired();
  void cancel_connections();  // ends every connection now (grace over, or a second signal)
  void maybe_finish();
  void close_all_now();

  // ConnectionHost
  std::optional<HttpResponse> check_head(const HttpRequest& head, HttpHeaders* response_headers) override {
    *response_headers = access->response_headers(head);
    return access->check(head);
  }
  HandlerResult handle_request(HttpRequest& request) override { return router->handle(request); }
  uv_buf_t read_buffer() override {
    return uv_buf_init(read_buf.data(), static_cast<unsigned>(read_buf.size()));
  }
  void on_connection_closed(HttpConnection* c) override {
    connections.erase(c);
    maybe_finish();
  }
  bool stopping() const override { return stopping_; }
  void on_response(std::string_view path, int status) override { metrics->count_response(path, status); }
  // glibc keeps the pages of a freed large body (and of the pool thread
  // that built it) in its arenas: 600 MB stayed after a 274 MB body in
  // hostile testing. malloc_trim hands them back, on the pool (it walks
  // every arena), one at a time.
  void large_write_done() override {
    if (trim_queued) return;
    auto* req = new uv_work_t;
    req->data = this;
    const int rc = uv_queue_work(
        &loop, req, [](uv_work_t*) { malloc_trim(0); },
        [](uv_work_t* r, int) {
          static_cast<Impl*>(r->data)->trim_queued = false;
          delete r;
        });
    if (rc != 0) {
      delete req;
      return;
    }
    trim_queued = true;
  }
  bool trim_queued = false;

  ServerOptions options;
  Generator& generator;
  uv_loop_t loop{};
  bool loop_initialized = false;
  UvHandle<uv_tcp_t> listener;
  UvHandle<uv_async_t> wake_async;   // engine events are queued
  UvHandle<uv_async_t> stop_async;   // request_stop()
  UvHandle<uv_timer_t> grace_timer;
  UvHandle<uv_signal_t> sigint;
  UvHandle<uv_signal_t> sigterm;
  UvHandle<uv_signal_t> sighup;
  std::shared_ptr<LoopWaker> waker;
  std::shared_ptr<ApiMetrics> metrics = std::make_shared<ApiMetrics>();
  std::unique_ptr<ApiRouter> router;
  std::optional<AccessPolicy> access;
  std::vector<char> read_buf = std::vector<char>(kReadBufferBytes);  // shared by every connection's reads
  std::unordered_map<HttpConnection*, std::unique_ptr<HttpConnection>> connections;
  int max_connections = 0;       // options.max_connections, fitted to the descriptor limit
  std::string refusal_503;       // the answer above max_connections
  LogLimiter refusal_log;        // one refusal line per 10 s
  int n_refused_lingering = 0;  // refused connections draining their request
  int port = 0;
  bool stopping_ = false;
  bool finished = false;  // every server handle closed

  std::mutex stop_mu;
  bool stop_async_open = false;  // guarded by stop_mu
};

namespace {

template <typename T>
HttpServer::Impl* impl_of(T* handle) {
  return static_cast<HttpServer::Impl*>(handle->data);
}

}  // namespace

Status HttpServer::Impl::init() {
  if (int rc = uv_loop_init(&loop); rc != 0) return Status::internal(std::string("uv_loop_init: ") + uv_strerror(rc));
  loop_initialized = true;
  const std::string where = options.host + ":" + std::to_string(options.port);
  if (options.port < 0 || options.port > 65535) return Status::invalid_argument("bad port in " + where);
  Result<AccessPolicy> policy = AccessPolicy::create(options);
  if (!policy.is_ok()) return policy.status();
  access = std::move(*policy);
  if (options.max_connections < 1) return Status::invalid_argument("max_connections must be at least 1");
  if (!(options.request_timeout_s > 0) || !(options.idle_timeout_s > 0)) {
    return Status::invalid_argument("request_timeout_s and idle_timeout_s must be above 0");
  }
  max_connections = fit_connection_cap(options.max_connections);
  refusal_503 = too_many_connections_response(max_connections);

  sockaddr_storage addr{};
  if (uv_ip4_addr(options.host.c_str(), options.port, reinterpret_cast<sockaddr_in*>(&addr)) != 0 &&
      uv_ip6_addr(options.host.c_str(), options.port, reinterpret_cast<sockaddr_in6*>(&addr)) != 0) {
    return Status::invalid_argument("cannot listen on " + where + ": not an IP address");
  }
  uv_tcp_init(&loop, listener.get());
  listener.mark_initialized();
  listener.get()->data = this;
  int rc = uv_tcp_bind(listener.get(), reinterpret_cast<const sockaddr*>(&addr), 0);
  if (rc == 0) {
    rc = uv_listen(reinterpret_cast<uv_stream_t*>(listener.get()), 511, [](uv_stream_t* s, int status) {
      if (auto* self = impl_of(s)) self->on_new_connection(status);
    });
  }
  if (rc != 0) {
    std::string reason = rc == UV_EADDRINUSE ? "address already in use" : uv_strerror(rc);
    return Status::io_error("cannot listen on " + where + ": " + reason);
  }
  sockaddr_storage bound{};
  int len = sizeof bound;
  uv_tcp_getsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &len);
  port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  uv_async_init(&loop, wake_async.get(), [](uv_async_t* a) {
    if (auto* self = impl_of(a)) self->on_wake();
  });
  wake_async.mark_initialized();
  wake_async.get()->data = this;
  waker = std::make_shared<LoopWaker>(wake_async.get());

  uv_async_init(&loop, stop_async.get(), [](uv_async_t* a) {
    if (auto* self = impl_of(a)) self->on_stop();
  });
  stop_async.mark_initialized();
  stop_async.get()->data = this;
  {
    std::lock_guard<std::mutex> lock(stop_mu);
    stop_async_open = true;
  }

  uv_timer_init(&loop, grace_timer.get());
  grace_timer.mark_initialized();
  grace_timer.get()->data = this;

  if (options.handle_signals) {
    keep_signal_handlers_installed();
    for (auto [handle, signum] : {std::pair{&sigint, SIGINT}, std::pair{&sigterm, SIGTERM}, std::pair{&sighup, SIGHUP}}) {
      uv_signal_init(&loop, handle->get());
      handle->mark_initialized();
      handle->get()->data = this;
      uv_signal_start(handle->get(), [](uv_signal_t* s, int signum) {
        if (auto* self = impl_of(s)) self->on_signal(signum);
      }, signum);
    }
  }
  router = std::make_unique<ApiRouter>(&loop, generator, options, waker, metrics);
  return Status::ok();
}

bool HttpServer::Impl::evict_one() {
  HttpConnection* victim = nullptr;
  int n_open = 0;
  for (auto& [raw, conn] : connections) {
    if (conn->closing()) continue;
    ++n_open;
    if (!conn->evictable()) continue;
    if (!victim || conn->quiet_since_ms() < victim->quiet_since_ms()) victim = raw;
  }
  // Connections already closing still hold their descriptor until their
  // close callbacks run (one loop turn); a few of them fit in the reserve.
  if (n_open < max_connections && static_cast<int>(connections.size()) < max_connections + 64) return true;
  if (!victim) return false;
  spdlog::debug("api: {} connections open: closing the quietest to admit a new one", n_open);
  victim->close();
  return true;
}

void HttpServer::Impl::on_new_connection(int status) {
  // (Out of descriptors, libuv accepts and closes the pending connections
  // with a descriptor it keeps in reserve, and reports UV_EMFILE here: the
  // listener never spins.)
  if (status < 0 || stopping_) return;
  if (static_cast<int>(connections.size()) >= max_connections && !evict_one()) {
    refuse_connection();
    return;
  }
  const auto ms = [](double s) { return static_cast<uint64_t>(std::max(1.0, s * 1000)); };
  ConnectionLimits limits;
  limits.max_body_bytes = options.max_body_bytes;
  limits.request_timeout_ms = ms(options.request_timeout_s);
  limits.idle_timeout_ms = ms(options.idle_timeout_s);
  limits.max_queued_write_bytes = options.max_queued_write_bytes;
  limits.max_total_queued_write_bytes = options.max_total_queued_write_bytes;
  limits.max_total_body_bytes = options.max_total_body_bytes;
  auto conn = std::make_unique<HttpConnection>(&loop, *this, limits);
  HttpConnection* raw = conn.get();
  connections.emplace(raw, std::move(conn));
  if (raw->accept(reinterpret_cast<uv_stream_t*>(listener.get())) != 0) raw->close();
}

void RefusedConnection::close() {
  if (closing) return;
  closing = true;
  if (lingering) --owner->n_refused_lingering;
  auto on_closed = [](uv_handle_t* h) {
    auto* self = static_cast<RefusedConnection*>(h->data);
    if (--self->open_handles == 0) std::unique_ptr<RefusedConnection> owned(self);
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp), on_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&timer), on_closed);
}

void HttpServer::Impl::refuse_connection() {
  auto r = std::make_unique<RefusedConnection>();
  uv_tcp_init(&loop, &r->tcp);
  uv_timer_init(&loop, &r->timer);
  r->tcp.data = r.get();
  r->timer.data = r.get();
  r->owner = this;
  RefusedConnection* raw = r.release();  // freed when both handles are closed
  auto* stream = reinterpret_cast<uv_stream_t*>(&raw->tcp);
  const bool accepted = uv_accept(reinterpret_cast<uv_stream_t*>(listener.get()), stream) == 0;
  if (accepted) {
    // A fresh socket's send buffer takes these few hundred bytes at once.
    uv_buf_t buf = uv_buf_init(refusal_503.data(), static_cast<unsigned>(refusal_503.size()));
    (void)uv_try_write(stream, &buf, 1);
  }
  if (accepted && n_refused_lingering < kMaxRefusedLingering &&
      uv_shutdown(&raw->shutdown, stream, [](uv_shutdown_t*, int) {}) == 0) {
    // Read (and drop) what the client sends until it closes, at most
    // kRefusedLingerMs: closing with its request unread would send a TCP
    // reset, and the client might never see the 503.
    ++n_refused_lingering;
    raw->lingering = true;
    uv_read_start(
        reinterpret_cast<uv_stream_t*>(&raw->tcp),
        [](uv_handle_t* h, size_t, uv_buf_t* b) {
          auto* rc = static_cast<RefusedConnection*>(h->data);
          *b = rc->owner->read_buffer();
        },
        [](uv_stream_t* s, ssize_t nread, const uv_buf_t*) {
          if (nread < 0) static_cast<RefusedConnection*>(s->data)->close();
        });
    uv_timer_start(&raw->timer, [](uv_timer_t* t) { static_cast<RefusedConnection*>(t->data)->close(); },
                   kRefusedLingerMs, 0);
  } else {
    raw->close();
  }
  refusal_log.log(spdlog::level::warn, "refused",
                  "api: a connection was refused: max_connections (" + std::to_string(max_connections) +
                      ") are open and all are being answered");
}

void HttpServer::Impl::on_wake() {
  // Each connection with a job takes what its sink has queued. A closing
  // connection may be erased by a close callback, but not during this loop.
  for (auto& [raw, conn] : connections) conn->pump();
}

void HttpServer::Impl::on_signal(int signum) {
  if (signum == SIGHUP) {
    // A closed terminal must not kill the daemon (the default action would,
    // without flushing page writes): SIGHUP reloads the config, or is ignored.
    if (!options.reload) {
      spdlog::warn("api: SIGHUP ignored: this server has no config reload; restart larderd to apply a changed "
                   "config");
      return;
    }
    if (stopping_) return;
    spdlog::info("api: SIGHUP: reloading the configuration");
    // Reading and applying the file blocks (disk, the engine thread's
    // turn): on the admin thread, never on the loop or libuv's pool. The
    // outcome is logged there.
    router->admin().reload_in_background();
    return;
  }
  if (!stopping_) {
    spdlog::info("api: signal {}, shutting down (again to cancel in-flight responses at once)", signum);
    on_stop();
    return;
  }
  // A second Ctrl-C: skip the grace period; pending page writes are still
  // flushed when run() returns.
  spdlog::info("api: signal {} again: cancelling in-flight responses now", signum);
  cancel_connections();
}

void HttpServer::Impl::on_stop() {
  if (stopping_) return;
  stopping_ = true;
  listener.close();
  for (auto& [raw, conn] : connections) conn->begin_shutdown();
  if (!connections.empty()) {
    auto grace_ms = static_cast<uint64_t>(std::max(0.0, options.shutdown_grace_s) * 1000);
    uv_timer_start(grace_timer.get(), [](uv_timer_t* t) {
      if (auto* self = impl_of(t)) self->on_grace_expired();
    }, grace_ms, 0);
  }
  maybe_finish();
}

void HttpServer::Impl::on_grace_expired() {
  if (!connections.empty()) {
    spdlog::warn("api: shutdown grace over, cancelling {} connection(s)", connections.size());
  }
  cancel_connections();
}

void HttpServer::Impl::cancel_connections() {
  // Collected first: end_for_shutdown may close (and a close callback erase)
  // connections only later, but keep the loop simple.
  std::vector<HttpConnection*> open;
  for (auto& [raw, conn] : connections) open.push_back(raw);
  for (HttpConnection* c : open) c->end_for_shutdown();
}

void HttpServer::Impl::maybe_finish() {
  if (!stopping_ || finished || !connections.empty()) return;
  finished = true;
  if (waker) waker->detach();
  {
    std::lock_guard<std::mutex> lock(stop_mu);
    stop_async_open = false;
    stop_async.close();
  }
  wake_async.close();
  grace_timer.close();
  // The signal handles stay started but stop holding the loop open: run()
  // returns, and a SIGINT/SIGTERM/SIGHUP while the caller finishes and
  // flushes page writes still lands here (and is ignored) instead of taking
  // the default action and killing the process. Closed in ~Impl.
  for (const UvHandle<uv_signal_t>* h : {&sigint, &sigterm, &sighup}) {
    if (h->is_open()) uv_unref(h->handle());
  }
}

void HttpServer::Impl::close_all_now() {
  stopping_ = true;
  listener.close();
  for (auto& [raw, conn] : connections) conn->close();
  maybe_finish();
}

HttpServer::Impl::~Impl() {
  if (!loop_initialized) return;
  close_all_now();
  sigint.close();
  sigterm.close();
  sighup.close();
  // Without the keeper, uv_close set the default actions back: ignored.
  if (options.handle_signals && !keep_signal_handlers_installed()) {
    for (int signum : {SIGINT, SIGTERM, SIGHUP}) std::signal(signum, SIG_IGN);
  }
  // Run the close callbacks (connections, then the server's handles).
  uv_run(&loop, UV_RUN_DEFAULT);
  if (!finished) {
    maybe_finish();
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  if (uv_loop_close(&loop) != 0) spdlog::error("api: libuv loop closed with handles still open");
}

// ---- HttpServer -------------------------------------------------------------

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;

Result<std::unique_ptr<HttpServer>> HttpServer::create(const ServerOptions& options, Generator& generator) {
  std::signal(SIGPIPE, SIG_IGN);
  auto impl = std::make_unique<Impl>(options, generator);
  Status st = impl->init();
  if (!st.is_ok()) return st;
  return std::make_unique<HttpServer>(std::move(impl));
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::run() {
  uv_run(&impl_->loop, UV_RUN_DEFAULT);
}

void HttpServer::request_stop() {
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  if (impl_->stop_async_open) uv_async_send(impl_->stop_async.get());
}

}  // namespace larder
