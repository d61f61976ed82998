#include "storage/log_limiter.h"

#include <chrono>

namespace larder {

int64_t LogLimiter::admit(std::string_view key, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(std::string(key));
  if (it == entries_.end()) {
    entries_.emplace(std::string(key), Entry{now_ms, 0});
    return 0;
  }
  Entry& e = it->second;
  if (now_ms - e.last_ms < interval_ms_) {
    ++e.n_suppressed;
    return -1;
  }
  const int64_t n = e.n_suppressed;
  e.last_ms = now_ms;
  e.n_suppressed = 0;
  return n;
}

bool LogLimiter::log(spdlog::level::level_enum level, std::string_view key, const std::string& message) {
  if (!spdlog::should_log(level)) return false;
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  const int64_t n = admit(key, now);
  if (n < 0) return false;
  spdlog::log(level, "{}{}", message, suppressed_suffix(n));
  return true;
}

std::string LogLimiter::suppressed_suffix(int64_t n) {
  if (n <= 0) return "";
  return " (" + std::to_string(n) + " similar suppressed)";
}

}  // namespace larder
