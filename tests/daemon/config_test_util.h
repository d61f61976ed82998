// Helpers shared by the daemon tests.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <cstdlib>

#include "daemon/config.h"

namespace larder::testing {

// Checks every field of two configs, one CHECK per field, so a failure names
// the field.
inline void check_same_config(const DaemonConfig& a, const DaemonConfig& b) {
  CHECK(a.engine.model_path == b.engine.model_path);
  CHECK(a.engine.model_id == b.engine.model_id);
  CHECK(a.engine.cache.disk.dir == b.engine.cache.disk.dir);
  CHECK(a.engine.cache.page_size == b.engine.cache.page_size);
  CHECK(a.engine.cache.device.budget_bytes == b.engine.cache.device.budget_bytes);
  CHECK(a.engine.cache.disk.budget_bytes == b.engine.cache.disk.budget_bytes);
  CHECK(a.engine.cache.device.policy == b.engine.cache.device.policy);
  CHECK(a.engine.cache.host.budget_bytes == b.engine.cache.host.budget_bytes);
  CHECK(a.engine.cache.host.policy == b.engine.cache.host.policy);
  CHECK(a.engine.cache.disk.policy == b.engine.cache.disk.policy);
  CHECK(a.engine.cache.disk.ttl_seconds == b.engine.cache.disk.ttl_seconds);
  CHECK(a.engine.cache.disk.sync == b.engine.cache.disk.sync);
  CHECK(a.engine.cache.disk.on_error == b.engine.cache.disk.on_error);
  CHECK(a.engine.n_threads == b.engine.n_threads);
  CHECK(a.engine.n_ctx == b.engine.n_ctx);
  CHECK(a.engine.max_running == b.engine.max_running);
  CHECK(a.engine.draft_tokens == b.engine.draft_tokens);
  CHECK(a.engine.draft_model == b.engine.draft_model);
  CHECK(a.engine.device == b.engine.device);
  CHECK(a.engine.cache.write_through == b.engine.cache.write_through);
  CHECK(a.engine.cache.n_storage_threads == b.engine.cache.n_storage_threads);
  CHECK(a.engine.cache.kv_dtype == b.engine.cache.kv_dtype);
  CHECK(a.engine.cache.salt == b.engine.cache.salt);
  CHECK(a.engine.cache.trace_file == b.engine.cache.trace_file);
  CHECK(a.server.host == b.server.host);
  CHECK(a.server.port == b.server.port);
  CHECK(a.server.max_body_bytes == b.server.max_body_bytes);
  CHECK(a.server.default_max_tokens == b.server.default_max_tokens);
  CHECK(a.server.handle_signals == b.server.handle_signals);
  CHECK(a.server.shutdown_grace_s == b.server.shutdown_grace_s);
  CHECK(a.server.allowed_hosts == b.server.allowed_hosts);
  CHECK(a.server.cors_origins == b.server.cors_origins);
  CHECK(a.server.api_keys == b.server.api_keys);
  CHECK(a.api_key_file == b.api_key_file);
  CHECK(a.server.max_connections == b.server.max_connections);
  CHECK(a.server.request_timeout_s == b.server.request_timeout_s);
  CHECK(a.server.idle_timeout_s == b.server.idle_timeout_s);
  CHECK(a.server.admin_enabled == b.server.admin_enabled);
  CHECK(a.server.admin_token == b.server.admin_token);
  const SamplingParams& sa = a.server.default_sampling;
  const SamplingParams& sb = b.server.default_sampling;
  CHECK(sa.temperature == sb.temperature);
  CHECK(sa.top_k == sb.top_k);
  CHECK(sa.top_p == sb.top_p);
  CHECK(sa.min_p == sb.min_p);
  CHECK(sa.repeat_penalty == sb.repeat_penalty);
  CHECK(sa.repeat_last_n == sb.repeat_last_n);
  CHECK(sa.presence_penalty == sb.presence_penalty);
  CHECK(sa.frequency_penalty == sb.frequency_penalty);
  CHECK(sa.seed == sb.seed);
  CHECK(a.log_level == b.log_level);
}

// A file in the temp directory, removed when the object goes out of scope.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& contents)
      : path_(std::filesystem::temp_directory_path() /
              ("larder-test-" + std::to_string(::getpid()) + "-" + name)) {
    std::ofstream(path_) << contents;
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// RAII: sets (or unsets, with nullptr) an environment variable and restores
// the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) ::setenv(name_.c_str(), old_.c_str(), 1);
    else ::unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace larder::testing
