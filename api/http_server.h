// HttpServer: the OpenAI-style HTTP API on a libuv loop.
//
// Endpoints (also without the /v1 prefix, like llama.cpp's server):
//   POST /v1/chat/completions   chat.completion / SSE chat.completion.chunk
//   POST /v1/completions        text_completion (streamed or not)
//   GET  /v1/models             {"object":"list","data":[...]}
//   GET  /v1/models/{id}
//   GET  /health                {"status":"ok"}
//   OPTIONS *                   204 (CORS preflight)
// Every response carries permissive CORS headers. Unknown path: 404; known
// path with another method: 405. Errors are OpenAI-shaped JSON
// (api/api_error.h). HTTP/1.1 keep-alive, pipelining, `Connection: close`,
// Content-Length and chunked request bodies. Limits: request head 64 KiB
// (431), body max_body_bytes (413), unparsable HTTP (400, then close).
//
// Threads: create() and run() on the loop thread; request_stop() from any
// thread. The engine delivers events on its own thread; they cross to the
// loop through a queue + uv_async (api/generation_job.h). create() sets
// SIGPIPE to SIG_IGN for the process (writes to a vanished client must fail
// with EPIPE, not kill the daemon).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "engine/generation.h"
#include "storage/status.h"

namespace larder {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                          // 0: an ephemeral port (tests)
  size_t max_body_bytes = 8 << 20;          // larger request bodies: 413
  SamplingParams default_sampling;          // used for every knob a request leaves unset
  int default_max_tokens = -1;              // when the request gives none (-1: until the context is full)
  bool handle_signals = false;              // SIGINT/SIGTERM -> request_stop() (uv_signal on the loop)
  double shutdown_grace_s = 10;             // in-flight responses get this long to finish after stop, then are cancelled
};

class HttpServer {
 public:
  // Binds and listens (nothing runs yet). Errors: kIOError
  // "cannot listen on 127.0.0.1:8080: address already in use";
  // kInvalidArgument for an unparsable host or a port outside [0, 65535].
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
