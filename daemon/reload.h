// ConfigReloader: SIGHUP and POST /admin/reload (ServerOptions::reload).
// Re-reads the configuration exactly as at start — larderd's own command
// line parsed again: the same config file (--config, else $LARDER_CONFIG),
// the same flags on top, API keys from the key file and the environment —
// checks all of it (load_config_file), then applies what can change while
// larderd runs:
//   [cache.*] budgets, policies, disk ttl   Engine::reconfigure (which refuses
//                                           keys that need a restart)
//   [sampling]                              the defaults of new requests
//                                           (returned in the report; the
//                                           server applies them)
//   [log] level                             spdlog's level
// ([cache] trace_file is opened at start: a change needs a restart.)
// Every other key that changed is reported (and logged by the server) as
// needing a restart; it keeps its old value, so it is reported again by the
// next reload until larderd restarts. A file that does not load, or a cache
// change the engine refuses, fails the reload with nothing applied.
// Thread-safe: one reload at a time.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "api/http_server.h"
#include "daemon/config.h"
#include "storage/cache_options.h"
#include "storage/status.h"

namespace larder {

class ConfigReloader {
 public:
  // args: larderd's argv (args[0] the program name); in_force: the
  // configuration it runs with (API keys merged); reconfigure_cache: applies
  // new cache options (Engine::reconfigure).
  ConfigReloader(std::vector<std::string> args, DaemonConfig in_force,
                 std::function<Status(const CacheOptions&)> reconfigure_cache);

  // Errors: the config error (kInvalidArgument naming the key, kNotFound /
  // kIOError for a file that cannot be read), or the engine's refusal.
  Result<ReloadReport> reload();

  // The configuration in force now (tests).
  DaemonConfig in_force() const;

 private:
  std::vector<std::string> args_;
  std::function<Status(const CacheOptions&)> reconfigure_cache_;
  mutable std::mutex mu_;
  DaemonConfig in_force_;  // guarded by mu_
};

}  // namespace larder
