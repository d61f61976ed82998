// LogLimiter: one line per key per interval, and the count of the lines it
// suppressed.
#include <catch2/catch.hpp>

#include "storage/log_limiter.h"
#include "tests/support/log_capture.h"

using namespace larder;

TEST_CASE("log limiter: one line per key per interval, then the suppressed count", "[storage][log]") {
  LogLimiter lim(1000);
  // (key, time ms, expected admit()): -1 suppressed, else lines suppressed before.
  struct Row { const char* key; int64_t t; int64_t want; };
  const Row rows[] = {
      {"a", 0, 0},    {"a", 1, -1},   {"a", 999, -1}, {"b", 999, 0},  {"a", 1000, 2},
      {"a", 1999, -1}, {"a", 2000, 1}, {"a", 5000, 0}, {"b", 1500, -1}, {"b", 1999, 1},
  };
  for (const Row& r : rows) {
    INFO(r.key << " at " << r.t);
    CHECK(lim.admit(r.key, r.t) == r.want);
  }
  CHECK(LogLimiter::suppressed_suffix(0).empty());
  CHECK(LogLimiter::suppressed_suffix(3) == " (3 similar suppressed)");
  LogLimiter none(0);
  CHECK(none.admit("x", 7) == 0);
  CHECK(none.admit("x", 7) == 0);
}

TEST_CASE("log limiter: log() writes the line with the suppressed count", "[storage][log]") {
  larder::testing::LogCapture cap;
  LogLimiter lim(600000);
  CHECK(lim.log(spdlog::level::warn, "disk", "disk full"));
  for (int i = 0; i < 5; ++i) CHECK_FALSE(lim.log(spdlog::level::warn, "disk", "disk full"));
  CHECK(lim.log(spdlog::level::warn, "other", "another kind"));
  CHECK_FALSE(lim.log(spdlog::level::trace, "quiet", "below the level: neither logged nor counted"));
  CHECK(cap.count("disk full") == 1);
  CHECK(cap.count("another kind") == 1);
  CHECK(cap.count("below the level") == 0);
  LogLimiter zero(0);
  CHECK(zero.log(spdlog::level::warn, "disk", "again"));
  CHECK(zero.log(spdlog::level::warn, "disk", "again"));
  CHECK(cap.count("again") == 2);
}
