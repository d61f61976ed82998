// larderd: loads a GGUF model and serves the OpenAI-style API on localhost.
// Exit status: 0 after a clean shutdown (SIGINT/SIGTERM) or --help/--version,
// 1 when the model cannot be loaded or the port cannot be bound, 2 for a
// usage or config error.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "api/http_server.h"
#include "daemon/api_keys.h"
#include "daemon/command_line.h"
#include "daemon/config.h"
#include "daemon/reload.h"
#include "daemon/version.h"
#include "engine/engine.h"
#include "storage/open_tiers.h"

int main(int argc, char** argv) {
  // libuv's thread pool prepares requests (templates, tokenizing, grammar
  // compiles) and builds large bodies. Its default of 4 threads let 12 slow
  // json_schema compiles hold a trivial chat request 15 s (found in hostile
  // testing); with 16 the cheap ones get a thread at once and share the
  // cores. Read once, at the pool's first use; an admin's setting wins.
  setenv("UV_THREADPOOL_SIZE", "16", /*overwrite=*/0);
  // Logs go to stderr (spdlog's default is stdout), before anything can log:
  // the config loader's warnings must not end up in --print-config's output.
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  auto command_line = larder::parse_command_line(argc, argv, larder::default_config());
  if (!command_line.is_ok()) {
    std::fprintf(stderr, "larderd: %s\n", command_line.status().message().c_str());
    return 2;
  }
  if (command_line->exit_now) {
    std::fputs(command_line->output.c_str(), stdout);
    return 0;
  }
  larder::DaemonConfig& config = command_line->config;
  if (config.engine.model_path.empty()) {
    std::fprintf(stderr,
                 "larderd: no model given: pass --model PATH (a GGUF file) or set [model] path in the "
                 "config file; see README.md for where to get one\n");
    return 2;
  }

  // The level was validated by the config loader, so from_str cannot fall
  // back to "off" by accident here.
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  spdlog::info("larderd {}: config {}", larder::kLarderVersion,
               command_line->config_path.empty() ? "(none: defaults and flags)" : command_line->config_path);
  spdlog::debug("effective configuration:\n{}", larder::dump_config(config));  // API keys redacted
  if (larder::Status st = larder::add_api_keys_from_file_and_env(config); !st.is_ok()) {
    std::fprintf(stderr, "larderd: %s\n", st.message().c_str());
    return 2;
  }
  const std::string& host = config.server.host;
  const bool loopback = host == "127.0.0.1" || host == "::1" || host == "localhost" || host.rfind("127.", 0) == 0;
  if (!config.server.api_keys.empty()) {
    spdlog::info("larderd: {} API key(s): requests must send one (Authorization: Bearer KEY)",
                 config.server.api_keys.size());
  } else if (!loopback) {
    spdlog::warn("larderd: listening on {} without API keys: anyone who reaches this port can use the model "
                 "(set [server] api_keys, api_key_file or LARDER_API_KEY)", host);
  }

  // The daemon builds the tiers below the device (host RAM, disk); the
  // engine sees only their interface.
  config.engine.open_tiers = larder::tier_factory();
  auto engine = larder::Engine::create(config.engine);
  if (!engine.is_ok()) {
    // Model errors mostly name the file already.
    const std::string& msg = engine.status().message();
    if (msg.find(config.engine.model_path) != std::string::npos) {
      std::fprintf(stderr, "larderd: cannot serve the model: %s\n", msg.c_str());
    } else {
      std::fprintf(stderr, "larderd: cannot serve %s: %s\n", config.engine.model_path.c_str(), msg.c_str());
    }
    return 1;
  }

  // SIGHUP and POST /admin/reload read the config again as this command
  // line did, and apply what can change live (daemon/reload.h).
  larder::Engine& running = **engine;
  larder::ConfigReloader reloader(std::vector<std::string>(argv, argv + argc), config,
                                  [&running](const larder::CacheOptions& c) { return running.reconfigure(c); });
  config.server.reload = [&reloader] { return reloader.reload(); };
  config.server.build = std::string("larderd ") + larder::kLarderVersion;  // in system_fingerprint
  config.server.handle_signals = true;  // SIGINT/SIGTERM -> request_stop(); run() returns
  auto server = larder::HttpServer::create(config.server, **engine);
  if (!server.is_ok()) {
    std::fprintf(stderr, "larderd: %s\n", server.status().message().c_str());
    (*engine)->stop();
    return 1;
  }

  const larder::ModelInfo& info = (*engine)->model_info();
  const std::string& cache_dir = config.engine.cache.disk.dir;
  spdlog::info("larderd: serving {} on http://{}:{} ({} ctx, cache {})", info.id, config.server.host,
               (*server)->port(), info.n_ctx, cache_dir.empty() ? "in memory only" : cache_dir);

  (*server)->run();

  spdlog::info("larderd: shutting down: finishing requests and flushing page writes");
  (*engine)->stop();  // finishes in-flight requests, flushes pending page writes
  server->reset();    // the server refers to the engine: release it first
  engine->reset();
  spdlog::info("larderd: stopped");
  return 0;
}
