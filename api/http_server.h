// HttpServer: the OpenAI-style HTTP API on a libuv loop.
//
// Endpoints (also without the /v1 prefix, like llama.cpp's server):
//   POST /v1/chat/completions   chat.completion / SSE chat.completion.chunk
//   POST /v1/completions        text_completion (streamed or not)
//   GET  /v1/models             {"object":"list","data":[...]}
//   GET  /v1/models/{id}
//   GET  /health                {"status":"ok"}
//   GET  /admin/cache, POST/DELETE /admin/cache/pin, POST /admin/cache/evict,
//   POST /admin/reload, GET /metrics   (api/admin_routes.h; not under /v1)
//   (HEAD wherever GET: the same head, no body)
//   OPTIONS *                   204 (a CORS preflight only for allowed origins)
// Before routing, every request passes the Host allow-list, the CORS origin
// check, the API key check and (for browsers) the JSON content-type check:
// api/access_policy.h. Unknown path: 404; known path with another method:
// 405. Errors are OpenAI-shaped JSON (api/api_error.h). HTTP/1.1
// keep-alive, pipelining, `Connection: close`, Content-Length and chunked
// request bodies. `Upgrade` headers are ignored (the request is answered as
// plain HTTP/1.1); CONNECT gets 405 and the HTTP/2 preface 505, then close.
// Limits: request head 64 KiB (431), body max_body_bytes (413), request
// bodies of all connections together max_total_body_bytes (503), unparsable
// HTTP (400, then close); connections above max_connections get 503 and are
// closed at once; a request whose head and body do not arrive within
// request_timeout_s gets 408 and close; a keep-alive connection idle for
// idle_timeout_s is closed, and so is one whose client reads nothing of its
// response for that long or leaves more than max_queued_write_bytes unread.
// Generating is never timed out: the timeouts only run while the server
// waits for the client.
//
// Threads: create() and run() on the loop thread; request_stop() from any
// thread. The engine delivers events on its own thread; they cross to the
// loop through a queue + uv_async (api/generation_job.h). create() sets
// SIGPIPE to SIG_IGN for the process (writes to a vanished client must fail
// with EPIPE, not kill the daemon).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/generation.h"
#include "storage/status.h"

namespace larder {

// What a config reload did (ServerOptions::reload).
struct ReloadReport {
  std::string config_path;                  // the file read; "" when the daemon runs without one
  std::vector<std::string> changed;         // applied now, e.g. "cache.device.budget: \"1GiB\" -> \"512MiB\""
  std::vector<std::string> restart_needed;  // changed in the file, in force only after a restart
  SamplingParams default_sampling;          // the [sampling] defaults in force now
  int default_max_tokens = -1;
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                          // 0: an ephemeral port (tests)
  size_t max_body_bytes = 8 << 20;          // larger request bodies: 413
  SamplingParams default_sampling;          // used for every knob a request leaves unset
  int default_max_tokens = -1;              // when the request gives none (-1: until the context is full)
  int max_n = 8;                            // most choices per prompt a request may ask for ("n"); more: 400
  std::string build;                        // the server's version: part of every response's system_fingerprint
  // SIGINT/SIGTERM -> request_stop(), a second one cancels in-flight
  // responses at once; SIGHUP -> `reload` on the admin thread (logged), or logged
  // and ignored without one (uv_signal on the loop). Once run() has
  // returned they are ignored (the caller is finishing its shutdown: a
  // default action would kill it before its page writes are flushed), also
  // after the server is destroyed.
  bool handle_signals = false;
  double shutdown_grace_s = 10;             // in-flight responses get this long to finish after stop, then are cancelled

  // Access (api/access_policy.h).
  std::vector<std::string> allowed_hosts;   // Host names answered besides localhost and the listen address ("*": any)
  std::vector<std::string> cors_origins;    // web origins allowed to call the API ("*": any); empty: none
  std::vector<std::string> api_keys;        // Bearer keys; empty: no key needed

  // Admin endpoints (api/admin_routes.h): /admin/* and /metrics.
  bool admin_enabled = true;                // false: they answer 404, as unknown paths do
  std::string admin_token;                  // the Bearer token they need; empty: the api_keys rule
  // Re-reads the config file and applies what can change live: POST
  // /admin/reload and SIGHUP (with handle_signals). Runs on the admin
  // routes' own thread (api/serial_worker.h), one call at a time; errors (kInvalidArgument naming the key, kNotFound for a
  // vanished file) leave the configuration in force. Null: no reloading
  // (SIGHUP is logged and ignored, /admin/reload answers 501).
  std::function<Result<ReloadReport>()> reload;

  // Connections.
  int max_connections = 1024;               // more at once: 503 and close (lowered to fit the descriptor limit)
  double request_timeout_s = 30;            // head + body of a request must arrive within this: else 408 and close
  double idle_timeout_s = 60;               // keep-alive idle time, and how long a client may read nothing
  size_t max_queued_write_bytes = 16 << 20; // response bytes a client leaves unread beyond the socket buffers
  // Unread response bytes of all connections together: past it, a stream
  // whose client left over 1 MiB unread is closed at its next write (found
  // in hostile testing: 16 MiB each over 1024 connections is 16 GiB).
  size_t max_total_queued_write_bytes = 256 << 20;
  // Request bodies being read by all connections together: past it, a body
  // over 64 KiB gets 503 server_busy with Retry-After: 1 (at its head when
  // it declares its length). Found in hostile testing: max_body_bytes on
  // each of 1024 connections is 8 GiB. The same bound holds for bodies over
  // 64 KiB read whole and waiting their turn to be prepared (api/router.h).
  size_t max_total_body_bytes = 256 << 20;
};

class HttpServer {
 public:
  // Binds and listens (nothing runs yet). Errors: kIOError
  // "cannot listen on 127.0.0.1:8080: address already in use";
  // kInvalidArgument for an unparsable host, a port outside [0, 65535], a
  // bad allowed_hosts / cors_origins entry or API key, max_connections < 1,
  // or a timeout that is not positive. Raises the soft RLIMIT_NOFILE toward
  // the hard one when max_connections needs it; where the hard limit is too
  // low, max_connections is lowered (with a warning) so that the listener
  // never runs out of descriptors.
  static Result<std::unique_ptr<HttpServer>> create(const ServerOptions& options, Generator& generator);
  // Closes whatever is still open (cancelling in-flight generations) and
  // releases the loop. Call from the thread that ran run() (or created it).
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;  // the bound port
  // Runs the libuv loop on the calling thread until stopped and every handle
  // is closed.
  void run();
  // Thread-safe (uv_async): stop accepting, let in-flight responses end
  // (up to shutdown_grace_s, then they are cancelled and their connections
  // closed), close everything; run() returns. Idle keep-alive connections
  // are closed at once. Calling it again, or after run() returned, is a no-op.
  void request_stop();

  struct Impl;  // defined in http_server.cpp
  explicit HttpServer(std::unique_ptr<Impl> impl);  // use create()

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace larder
