// LogLimiter: keeps a repeated warning from flooding the log. At most one
// line per key per interval is let through; the next line let through after
// suppressed ones says how many were dropped: "... (12 similar suppressed)".
// A key names a kind of event ("page store write", "page verify"), not one
// instance of it: the keys of one limiter are a small fixed set.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include <spdlog/spdlog.h>

namespace larder {

class LogLimiter {
 public:
  // interval_ms: the least time between two lines of one key (0: no limit).
  explicit LogLimiter(int64_t interval_ms = 10000) : interval_ms_(interval_ms) {}

  // Decides whether a line of `key` at now_ms (any monotonic clock in
  // milliseconds) goes out: returns the number of lines of key suppressed
  // since the last one that went out (>= 0), or -1 when this one is
  // suppressed (and counted).
  int64_t admit(std::string_view key, int64_t now_ms);

  // Logs message at level under key unless admit() suppresses it, adding
  // " (N similar suppressed)" when N > 0. Uses the steady clock. Returns
  // true when the line went out. A level below spdlog's current one is
  // neither logged nor counted.
  bool log(spdlog::level::level_enum level, std::string_view key, const std::string& message);

  // " (N similar suppressed)" for n > 0, "" otherwise.
  static std::string suppressed_suffix(int64_t n);

 private:
  struct Entry {
    int64_t last_ms = 0;
    int64_t n_suppressed = 0;
  };
  const int64_t interval_ms_;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace larder
