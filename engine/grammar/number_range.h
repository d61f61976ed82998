// GBNF for the JSON integers and numbers inside bounds: JSON Schema's
// minimum / maximum / exclusiveMinimum / exclusiveMaximum (draft 2020-12,
// section 6.2) as a grammar, by splitting the range into runs of decimal
// strings of one length and those by their first differing digit (the
// construction regex generators use for numeric ranges; llama.cpp's
// json-schema-to-grammar builds integer ranges the same way).
//
// Numbers are written as JSON writes them: no leading zeros, no "-0", a
// fraction of up to 16 digits, and no exponent (a bounded number is written
// in plain decimal: a subset of the valid texts, so every output is inside
// the bounds). Under a bound, whole parts stay within kMaxRangeMagnitude,
// 2^53 - 1, the largest integer past which a double (what JSON.parse and
// most clients read) skips integers, so that a value inside the bounds is
// still inside once parsed; bounds past it are clamped to it (for numbers:
// treated as absent), which only narrows the set.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace larder {

inline constexpr int64_t kMaxRangeMagnitude = 9007199254740991;  // 2^53 - 1

// An integral bound; exclusive: the value itself is outside.
struct NumberBound {
  int64_t value = 0;
  bool exclusive = false;
};

// A GBNF expression for the integers lo..hi (inclusive; |lo|, |hi| <=
// kMaxRangeMagnitude), or "" when lo > hi.
std::string integer_range_gbnf(int64_t lo, int64_t hi);

// A GBNF expression for the numbers (integer part, optional fraction) in
// the range the bounds give (absent: unbounded on that side; |value| <=
// kMaxRangeMagnitude), or "" when it holds none.
std::string number_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi);

}  // namespace larder
