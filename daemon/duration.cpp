#include "daemon/duration.h"

#include <array>
#include <cctype>
#include <limits>

namespace larder {
namespace {

struct Unit {
  char name;
  int64_t seconds;
};

// Largest first: the order parts must come in.
constexpr std::array<Unit, 4> kUnits = {{{'d', 86400}, {'h', 3600}, {'m', 60}, {'s', 1}}};

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

Result<int64_t> parse_duration(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  if (text.empty()) return Status::invalid_argument("empty duration");
  if (text.front() == '-') return Status::invalid_argument("must not be negative");

  int64_t total = 0;
  size_t next_unit = 0;  // index in kUnits of the smallest unit still allowed
  size_t i = 0;
  bool first = true;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    // The number.
    const size_t number_at = i;
    int64_t n = 0;
    bool too_large = false;
    while (i < text.size() && is_digit(text[i])) {
      const int digit = text[i] - '0';
      if (n > (kMax - digit) / 10) too_large = true;
      else n = n * 10 + digit;
      ++i;
    }
    if (i == number_at) {
      return Status::invalid_argument(
          "expected a number before each unit, e.g. \"30d\", \"12h\", \"90m\", \"45s\" or \"1d12h\"");
    }
    if (i < text.size() && (text[i] == '.' || text[i] == ',')) {
      return Status::invalid_argument("whole numbers only: write \"1h30m\", not \"1.5h\"");
    }
    if (too_large) return Status::invalid_argument("too large");
    while (i < text.size() && is_space(text[i])) ++i;
    // The unit: none only for a bare number of seconds, the whole text.
    if (i == text.size()) {
      if (first) return n;
      std::string msg(1, '"');  // (not "\"" + ...: GCC 12 warns falsely, -Wrestrict)
      msg.append(text.substr(number_at)).append("\" has no unit; units: d, h, m, s");
      return Status::invalid_argument(msg);
    }
    const size_t unit_at = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    const std::string_view unit = text.substr(unit_at, i - unit_at);
    size_t u = 0;
    while (u < kUnits.size() && !(unit.size() == 1 && unit[0] == kUnits[u].name)) ++u;
    if (u == kUnits.size()) {
      const std::string shown = unit.empty() ? std::string(1, text[unit_at]) : std::string(unit);
      return Status::invalid_argument("unknown unit \"" + shown +
                                      "\"; units: d (days), h (hours), m (minutes), s (seconds)");
    }
    if (u < next_unit) {
      return Status::invalid_argument(
          "units must go from largest to smallest, each at most once: d, h, m, s, as in \"1d12h\"");
    }
    next_unit = u + 1;
    if (n > (kMax - total) / kUnits[u].seconds) return Status::invalid_argument("too large");
    total += n * kUnits[u].seconds;
    first = false;
  }
  return total;
}

std::string format_duration(int64_t seconds) {
  if (seconds < 0) return std::to_string(seconds);
  if (seconds == 0) return "0";
  std::string out;
  for (const Unit& u : kUnits) {
    const int64_t n = seconds / u.seconds;
    seconds %= u.seconds;
    if (n > 0) out += std::to_string(n) + u.name;
  }
  return out;
}

}  // namespace larder
