// A real Engine behind a real HttpServer on an ephemeral port, run() on its
// own thread: what the end-to-end C++ tests talk to over HTTP.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "api/http_server.h"
#include "engine/engine.h"

namespace larder::testing {

struct LiveServer {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<HttpServer> server;
  std::thread thread;

  // One engine thread, 64 MiB of KV pages, no disk tier unless `eo` says.
  explicit LiveServer(const std::string& model, ServerOptions so = {}, EngineOptions eo = {}) {
    eo.model_path = model;
    if (eo.n_threads == 0) eo.n_threads = 1;
    eo.cache.device.budget_bytes = 64 << 20;
    auto e = Engine::create(eo);
    INFO(e.status().to_string());
    REQUIRE(e.is_ok());
    engine = std::move(e).value();
    so.port = 0;
    auto s = HttpServer::create(so, *engine);
    INFO(s.status().to_string());
    REQUIRE(s.is_ok());
    server = std::move(s).value();
    thread = std::thread([this] { server->run(); });
  }
  ~LiveServer() {
    server->request_stop();
    thread.join();
    engine->stop();
  }
  int port() const { return server->port(); }
};

}  // namespace larder::testing
