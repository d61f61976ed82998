// LogCapture: while alive, every spdlog line of the default logger is also
// kept in memory (and still printed), so a test can count log lines.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

namespace larder::testing {

class LogCapture {
 public:
  explicit LogCapture(size_t max_lines = 100000)
      : previous_(spdlog::default_logger()),
        sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(max_lines)) {
    std::vector<spdlog::sink_ptr> sinks = previous_->sinks();
    sinks.push_back(sink_);
    auto logger = std::make_shared<spdlog::logger>("capture", sinks.begin(), sinks.end());
    logger->set_level(previous_->level());
    spdlog::set_default_logger(logger);
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // The message texts captured so far, oldest first (no time or level).
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    for (const auto& m : sink_->last_raw()) out.emplace_back(m.payload.data(), m.payload.size());
    return out;
  }
  // Lines containing `part`.
  size_t count(const std::string& part) const {
    const std::vector<std::string> all = lines();
    return size_t(std::count_if(all.begin(), all.end(),
                                [&](const std::string& l) { return l.find(part) != std::string::npos; }));
  }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

}  // namespace larder::testing
