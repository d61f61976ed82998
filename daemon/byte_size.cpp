#include "daemon/byte_size.h"

#include <array>
#include <cctype>

namespace larder {
namespace {

constexpr int64_t kMaxBytes = kMaxByteSize;

struct Unit {
  std::string_view name;  // lower case
  int64_t multiplier;
};

constexpr int64_t kKi = 1024;
constexpr std::array<Unit, 17> kUnits = {{
    {"", 1},
    {"b", 1},
    {"kb", 1000},
    {"mb", 1000 * 1000},
    {"gb", int64_t(1000) * 1000 * 1000},
    {"tb", int64_t(1000) * 1000 * 1000 * 1000},
    {"pb", int64_t(1000) * 1000 * 1000 * 1000 * 1000},
    {"kib", kKi},
    {"mib", kKi * kKi},
    {"gib", kKi * kKi * kKi},
    {"tib", kKi * kKi * kKi * kKi},
    {"pib", kKi * kKi * kKi * kKi * kKi},
    {"k", kKi},
    {"m", kKi * kKi},
    {"g", kKi * kKi * kKi},
    {"t", kKi * kKi * kKi * kKi},
    {"p", kKi * kKi * kKi * kKi * kKi},
}};

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<int64_t> parse_byte_size(std::string_view text) {
  std::string_view s = trim(text);
  if (s.empty()) return Status::invalid_argument("empty size");
  if (s.front() == '-') return Status::invalid_argument("must not be negative");

  // Integer part and fraction digits, kept as integers: value = (int_part +
  // frac / 10^n_frac) * multiplier, evaluated exactly in 128-bit arithmetic.
  size_t i = 0;
  __int128 int_part = 0;
  size_t n_int_digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    int_part = int_part * 10 + (s[i] - '0');
    if (int_part > kMaxBytes) return Status::invalid_argument("too large (the limit is 2^62 bytes)");
    ++i;
    ++n_int_digits;
  }
  __int128 frac = 0, frac_scale = 1;
  size_t n_frac_digits = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      // Digits past the 18th are worth less than 2^50 / 10^18 < 0.002 bytes
      // even for PiB; dropping them keeps frac * multiplier inside 128 bits.
      if (n_frac_digits < 18) {
        frac = frac * 10 + (s[i] - '0');
        frac_scale *= 10;
      }
      ++i;
      ++n_frac_digits;
    }
    if (n_frac_digits == 0) return Status::invalid_argument("expected digits after the decimal point");
  }
  if (n_int_digits == 0 && n_frac_digits == 0) {
    return Status::invalid_argument("expected a number followed by a unit, e.g. 512MiB or 2GiB");
  }

  const std::string unit = to_lower(trim(s.substr(i)));
  for (const Unit& u : kUnits) {
    if (u.name != unit) continue;
    const __int128 bytes = int_part * u.multiplier + frac * u.multiplier / frac_scale;
    if (bytes > kMaxBytes) return Status::invalid_argument("too large (the limit is 2^62 bytes)");
    return static_cast<int64_t>(bytes);
  }
  return Status::invalid_argument("unknown unit \"" + std::string(trim(s.substr(i))) +
                                  "\" (use B, KiB, MiB, GiB, TiB or KB, MB, GB, TB)");
}

std::string format_byte_size(int64_t bytes) {
  static constexpr std::array<const char*, 6> kNames = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes <= 0) return std::to_string(bytes) + "B";
  size_t unit = 0;
  while (unit + 1 < kNames.size() && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return std::to_string(bytes) + kNames[unit];
}

}  // namespace larder
