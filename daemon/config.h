// The daemon's configuration: built-in defaults < config file (TOML) <
// command-line flags. Every key is documented, with its default, in
// config/larder.toml; tests check that file parses to exactly the defaults.
//
// Error messages name the key (dotted in full: cache.disk.ttl), the value
// and the allowed range, e.g.
//   config error: cache.page_size = 12: must be a power of two between 1 and 1024 (larder.toml line 40)
// Bad values never crash the daemon; they come back as kInvalidArgument
// (kNotFound for a config file that does not exist).
//
// Tables nest: [cache.device], [cache.host] and [cache.disk] hold the KV
// cache tiers' keys (storage/cache_options.h); `device.budget = ...` inside
// [cache] is the same key, as TOML makes them equivalent.
//
// Old key names (aliases) that still work in this release, each logging one
// warning per load (spdlog) that names the new key:
//   cache.dir -> cache.disk.dir, cache.memory_capacity -> cache.device.budget,
//   cache.disk_capacity -> cache.disk.budget.
// Setting an old name and its new one in the same file is an error naming
// both. dump_config prints only the new names.
#pragma once

#include <string>
#include <string_view>

#include "api/http_server.h"
#include "engine/engine.h"
#include "engine/generation.h"
#include "storage/status.h"

namespace larder {

struct DaemonConfig {
  EngineOptions engine;   // [model], [cache], [engine]
  ServerOptions server;   // [server], [sampling] (default_sampling, default_max_tokens)
  std::string log_level = "info";  // [log] level: trace|debug|info|warn|error|critical|off
  // [server] api_key_file: more API keys, one per line (daemon/api_keys.h
  // reads it at start; server.api_keys holds only the config's own).
  std::string api_key_file;
};

// The built-in defaults: the struct defaults plus the cache directory,
// "$XDG_CACHE_HOME/larder" when XDG_CACHE_HOME is an absolute path, else
// "$HOME/.cache/larder", else "" (no disk tier) when HOME is unset too.
DaemonConfig default_config();

// The default cache directory alone (see default_config); reads the
// environment each call.
std::string default_cache_dir();

// Parses TOML text and applies every key it sets on top of `base` (keys the
// text leaves out keep base's value). `source_name` appears in error
// messages (a file name; may be empty). Errors (kInvalidArgument): malformed
// TOML (with line and column), an unknown section or key (catches typos), a
// value of the wrong type, a value out of range. The message names the key.
Result<DaemonConfig> load_config_string(std::string_view toml, DaemonConfig base,
                                        const std::string& source_name = "");

// The largest config file read (bytes).
inline constexpr size_t kMaxConfigFileBytes = size_t(1) << 20;

// Same, reading the file at `path`. Errors: kNotFound / kIOError naming the
// path when it cannot be read; kInvalidArgument for a directory, anything
// else that is not a regular file (a FIFO, a device: reading it could block
// or never end) and a file over kMaxConfigFileBytes; otherwise as
// load_config_string.
Result<DaemonConfig> load_config_file(const std::string& path, DaemonConfig base);

// Sets one key from text, as a command-line flag gives it: `key` is dotted
// ("server.port", "cache.disk.dir"; an old name works with a warning),
// `text` is converted to the key's type ("8080" -> 8080, "2GiB" for sizes,
// "1d12h" for durations, "true"/"false") and checked like a config file value. `label` names the
// setting in the error message (e.g. "--port"). Errors: kInvalidArgument
// ("--port 70000: must be an integer between 0 and 65535"); an unknown key.
Status set_config_value(std::string_view key, std::string_view text, DaemonConfig& config,
                        std::string_view label);

// The configuration as a TOML document with every key (what --print-config
// and the debug log show). With redact_secrets (the default) each API key
// prints as "<redacted>", which load_config_string refuses, so a printed
// config can never silently run with wrong keys. Unredacted,
// load_config_string(dump_config(c, false), anything) gives back c.
std::string dump_config(const DaemonConfig& config, bool redact_secrets = true);

// Replaces a leading "~" or "~/" with $HOME (config files are not shell
// expanded). Other paths are returned unchanged.
std::string expand_home(const std::string& path);

}  // namespace larder
