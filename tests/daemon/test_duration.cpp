// parse_duration / format_duration. Expected values are computed by hand
// from the unit definitions (m = 60 s, h = 3600 s, d = 86400 s), not by the
// code under test.
#include <catch2/catch.hpp>

#include "daemon/duration.h"

using larder::format_duration;
using larder::parse_duration;

TEST_CASE("durations with units", "[daemon][config]") {
  struct Row {
    const char* text;
    int64_t seconds;
  };
  const Row rows[] = {
      {"0", 0},
      {"45", 45},                  // a bare integer: seconds
      {"45s", 45},
      {"90m", 5400},               // 90 * 60
      {"12h", 43200},              // 12 * 3600
      {"30d", 2592000},            // 30 * 86400
      {"1d12h", 129600},           // 86400 + 43200
      {"1d12h30m5s", 131405},      // 86400 + 43200 + 1800 + 5
      {"1h1m1s", 3661},
      {"0d", 0},
      {"7d", 604800},
      {" 1d 12h ", 129600},        // spaces around and between parts
      {"2 h", 7200},
      {"36525d", 3155760000},      // 100 years of 365.25 days
      {"106751991167300d", 9223372036854720000},        // the most whole days in int64
      {"106751991167300d15h30m7s", 9223372036854775807},  // exactly INT64_MAX: + 55807 s
  };
  for (const Row& row : rows) {
    INFO(row.text);
    auto r = parse_duration(row.text);
    INFO(r.status().message());
    REQUIRE(r.is_ok());
    CHECK(*r == row.seconds);
  }
}

TEST_CASE("bad durations are errors with a reason", "[daemon][config]") {
  struct Row {
    const char* text;
    const char* reason;
  };
  const Row rows[] = {
      {"", "empty duration"},
      {"   ", "empty duration"},
      {"-1h", "must not be negative"},
      {"-5", "must not be negative"},
      {"12x", "unknown unit \"x\"; units: d (days), h (hours), m (minutes), s (seconds)"},
      {"3y", "unknown unit \"y\""},
      {"2M", "unknown unit \"M\""},       // months? minutes? neither
      {"1hr", "unknown unit \"hr\""},
      {"5!", "unknown unit \"!\""},
      {"h", "expected a number before each unit"},
      {"+1h", "expected a number before each unit"},
      {"1.5h", "whole numbers only"},
      {"1h30", "\"30\" has no unit; units: d, h, m, s"},
      {"12h1d", "units must go from largest to smallest"},
      {"1h1h", "units must go from largest to smallest"},
      {"106751991167301d", "too large"},               // 106751991167301 * 86400 > INT64_MAX
      {"106751991167300d15h30m8s", "too large"},       // INT64_MAX + 1
      {"9223372036854775808", "too large"},            // INT64_MAX + 1 seconds
      {"99999999999999999999999s", "too large"},
  };
  for (const Row& row : rows) {
    INFO("\"" << row.text << "\"");
    auto r = parse_duration(row.text);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == larder::StatusCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains(row.reason));
  }
}

TEST_CASE("format_duration uses the largest units, largest first", "[daemon][config]") {
  CHECK(format_duration(0) == "0");
  CHECK(format_duration(45) == "45s");
  CHECK(format_duration(60) == "1m");
  CHECK(format_duration(90) == "1m30s");
  CHECK(format_duration(5400) == "1h30m");
  CHECK(format_duration(129600) == "1d12h");
  CHECK(format_duration(2592000) == "30d");
  CHECK(format_duration(86401) == "1d1s");
  CHECK(format_duration(3155760000) == "36525d");
  // And it parses back.
  for (int64_t v : {int64_t(0), int64_t(1), int64_t(3661), int64_t(131405), int64_t(9223372036854775807)}) {
    INFO(v);
    CHECK(*parse_duration(format_duration(v)) == v);
  }
}
