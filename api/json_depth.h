// A bound on JSON nesting, checked on the raw text before parsing.
//
// nlohmann::json parses deep nesting iteratively, but copying or comparing a
// parsed value recurses once per level: a 200 KB body of 100,000 nested "["
// overflowed the stack of the thread that handled it. Requests and tool-call
// JSON in model output are therefore refused beyond kMaxJsonDepth levels
// (real requests: a tool's JSON schema rarely exceeds 10-20).
#pragma once

#include <string_view>

namespace larder {

inline constexpr int kMaxJsonDepth = 128;

// True when `text` opens more than max_depth arrays/objects inside each
// other (brackets inside strings do not count). Does not validate the JSON.
inline bool json_nesting_exceeds(std::string_view text, int max_depth = kMaxJsonDepth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

}  // namespace larder
