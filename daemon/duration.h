// Durations as admins write them in config/larder.toml: "30d", "12h",
// "90m", "45s", "1d12h", "0" (e.g. [cache.disk] ttl). No TOML or CLI types
// here, so the config loader and the command line can both use it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "storage/status.h"

namespace larder {

// Parses a duration into whole seconds:
//   "45"          a bare non-negative integer: seconds ("0" = 0)
//   "45s" "90m"   a whole number and a unit: s (seconds), m (minutes,
//   "12h" "30d"   60 s), h (hours, 3600 s), d (days, 86400 s)
//   "1d12h30m"    several parts, largest unit first, each unit at most once
// Spaces around the text and between parts are allowed ("1d 12h"); units
// are lower case (no "M": it would read as months). No fractions ("1.5h":
// write "1h30m"), no sign.
// Errors: kInvalidArgument with a reason that does not repeat the input
// (the caller names the key): "empty duration", "must not be negative",
// "unknown unit \"x\" ...", "units must go from largest to smallest ...",
// "too large" past INT64_MAX seconds. The caller checks its own range.
Result<int64_t> parse_duration(std::string_view text);

// Formats whole seconds (>= 0) with the largest units that add up exactly,
// largest first, zero parts left out: 129600 -> "1d12h", 90 -> "1m30s",
// 0 -> "0". The result parses back to the same value. A negative value
// (never produced by parse_duration) is formatted as a plain integer.
std::string format_duration(int64_t seconds);

}  // namespace larder
