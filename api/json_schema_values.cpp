#include "api/json_schema_values.h"

#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/grammar/number_range.h"

namespace larder {

namespace {

using json = nlohmann::ordered_json;

// An ECMAScript pattern for each supported format, each a subset of its
// standard that the common validators (zod 3 and 4, ajv-formats) accept
// too: RFC 3339 section 5.6 full-date with the days each month has and
// February 29 in leap years only (the Gregorian rule), time with seconds
// 00-59 (RFC 3339 allows a leap second 60; zod does not) and numeric
// offsets of hours 00-23 and minutes 00-59, a date-time in UTC ("Z":
// what zod's default .datetime() requires); RFC 9562's 8-4-4-4-12 hex
// digits; for e-mail a dot-atom local part of at most 64 characters and a
// host of letter-digit-hyphen labels, 64 characters in all
// (RFC 5321 section 4.5.3.1 allows 255): bounded, so that a small model's
// address ends.
#define LARDER_LEAP "(?:\\d\\d(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29"
#define LARDER_DATE "(?:" LARDER_LEAP "|[0-9]{4}-(?:02-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])))"
#define LARDER_HOUR "(?:[01][0-9]|2[0-3])"
#define LARDER_CLOCK LARDER_HOUR ":[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?"
constexpr std::pair<const char*, const char*> kFormats[] = {
    {"date", "^" LARDER_DATE "$"},
    {"time", "^" LARDER_CLOCK "(?:Z|[+-]" LARDER_HOUR ":[0-5][0-9])$"},
    {"date-time", "^" LARDER_DATE "T" LARDER_CLOCK "Z$"},
    {"uuid", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"},
    {"email", "^(?=[^@]{1,64}@[^@]{1,64}$)[A-Za-z0-9_+-]+(?:\\.[A-Za-z0-9_+-]+)*@"
              "(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\\.)+[A-Za-z]{2,}$"},
};
#undef LARDER_LEAP
#undef LARDER_DATE
#undef LARDER_HOUR
#undef LARDER_CLOCK

}  // namespace

Status schema_error(const std::string& where, const std::string& what) {
  return Status::invalid_argument("json schema at " + where + ": " + what);
}

Status schema_allows_nothing(const std::string& where, const std::string& what) {
  return Status::out_of_range("json schema at " + where + ": " + what);
}

long double json_number(const json& v) {
  if (v.is_number_unsigned()) return static_cast<long double>(v.get<uint64_t>());
  if (v.is_number_integer()) return static_cast<long double>(v.get<int64_t>());
  return static_cast<long double>(v.get<double>());
}

Result<std::optional<SchemaBound>> schema_bound(const json& s, const std::string& where, bool lower) {
  const std::string plain = lower ? "minimum" : "maximum";
  const std::string excl = lower ? "exclusiveMinimum" : "exclusiveMaximum";
  std::optional<SchemaBound> out;
  auto tighten = [&](SchemaBound b) {
    if (!out || (lower ? b.value > out->value : b.value < out->value) || (b.value == out->value && b.exclusive)) out = b;
  };
  bool draft4_exclusive = false;
  if (const auto e = s.find(excl); e != s.end()) {
    if (e->is_boolean()) {
      draft4_exclusive = e->get<bool>();
    } else if (e->is_number()) {
      tighten({json_number(*e), true});
    } else {
      return schema_error(where + "/" + excl, "must be a number");
    }
  }
  if (const auto m = s.find(plain); m != s.end()) {
    if (!m->is_number()) return schema_error(where + "/" + plain, "must be a number");
    tighten({json_number(*m), draft4_exclusive});
  }
  return out;
}

Result<std::string> number_gbnf(const json& s, const std::string& where, bool integer) {
  std::optional<SchemaBound> lo, hi;
  LARDER_ASSIGN_OR_RETURN(lo, schema_bound(s, where, true));
  LARDER_ASSIGN_OR_RETURN(hi, schema_bound(s, where, false));
  if (!lo && !hi) return std::string(integer ? "integer" : "number");
  constexpr long double kCap = kMaxRangeMagnitude;
  const std::string empty = "its minimum / maximum (or exclusive ones) leave no " +
                            std::string(integer ? "integer" : "number") +
                            " the grammar can write (whole parts within ±(2^53 - 1) under a bound)";
  if (integer) {
    // The integers inside: the least above the lower bound, the greatest below the upper.
    long double a = lo ? (lo->exclusive ? std::floor(lo->value) + 1 : std::ceil(lo->value)) : -kCap;
    long double b = hi ? (hi->exclusive ? std::ceil(hi->value) - 1 : std::floor(hi->value)) : kCap;
    a = std::max(a, -kCap);
    b = std::min(b, kCap);
    if (a > b) return schema_allows_nothing(where, empty);
    return integer_range_gbnf(int64_t(a), int64_t(b));
  }
  std::optional<NumberBound> nlo, nhi;
  for (auto [b, out, name] : {std::tuple{&lo, &nlo, "minimum"}, std::tuple{&hi, &nhi, "maximum"}}) {
    if (!*b) continue;
    const long double v = (*b)->value;
    if (v != std::floor(v)) {
      return schema_error(where + "/" + name, "a fractional bound for a number is not supported (whole-number bounds are)");
    }
    // Past the whole parts a bounded number can have, a bound is no constraint on
    // its own side and excludes everything on the other.
    if (v < -kCap || v > kCap) {
      if ((b == &lo) == (v < 0)) continue;
      return schema_allows_nothing(where, empty);
    }
    *out = NumberBound{int64_t(v), (*b)->exclusive};
  }
  const std::string expr = number_range_gbnf(nlo, nhi);
  if (expr.empty()) return schema_allows_nothing(where, empty);
  return expr;
}

// The automaton of a supported format, built once per process (the
// e-mail one takes tens of milliseconds); null for other formats.
const StringDfa* format_automaton(const std::string& fmt) {
  static const std::vector<std::pair<std::string, StringDfa>> kAutomata = [] {
    std::vector<std::pair<std::string, StringDfa>> out;
    for (const auto& [name, pattern] : kFormats) {
      Result<StringDfa> d = StringDfa::from_pattern(pattern);
      if (d.is_ok()) out.emplace_back(name, std::move(*d));  // they all compile (tests/api)
    }
    return out;
  }();
  for (const auto& [name, d] : kAutomata) {
    if (name == fmt) return &d;
  }
  return nullptr;
}

Result<std::pair<int64_t, int64_t>> string_lengths(const json& s, const std::string& where) {
  int64_t min = 0, max = -1;
  for (const char* key : {"minLength", "maxLength"}) {
    const auto v = s.find(key);
    if (v == s.end()) continue;
    const bool integral = v->is_number_unsigned() ||
                          (v->is_number_float() && v->get<double>() >= 0 && v->get<double>() <= 1e9 &&
                           std::trunc(v->get<double>()) == v->get<double>());
    if (!integral) return schema_error(where + "/" + key, "must be a non-negative integer");
    (std::string_view(key) == "minLength" ? min : max) = int64_t(v->get<double>());
  }
  if (min > 10000 || max > 10000) return schema_error(where, "minLength / maxLength above 10000 are not supported");
  if (max >= 0 && max < min) return schema_allows_nothing(where, "maxLength is below minLength");
  return std::make_pair(min, max);
}

Result<std::optional<StringDfa>> string_automaton(const json& s, const std::string& where, DfaBudget* budget) {
  std::pair<int64_t, int64_t> len;
  LARDER_ASSIGN_OR_RETURN(len, string_lengths(s, where));
  const auto [min, max] = len;
  const auto format = s.find("format");
  const auto pattern = s.find("pattern");
  std::optional<StringDfa> by_format, by_pattern;
  if (format != s.end()) {
    if (!format->is_string()) return schema_error(where + "/format", "must be a string");
    const std::string& fmt = format->get_ref<const std::string&>();
    const StringDfa* d = format_automaton(fmt);
    if (d == nullptr) {
      return schema_error(where + "/format", "format \"" + fmt + "\" is not supported (date, time, date-time, uuid, email are)");
    }
    by_format = *d;
  }
  if (pattern != s.end()) {
    if (!pattern->is_string()) return schema_error(where + "/pattern", "must be a string");
    Result<StringDfa> d = StringDfa::from_pattern(pattern->get_ref<const std::string&>(), budget);
    if (!d.is_ok()) return schema_error(where + "/pattern", d.status().message());
    by_pattern = std::move(*d);
  }
  std::optional<StringDfa> dfa;
  if (by_pattern && by_format) {
    Result<StringDfa> both = by_pattern->intersect(*by_format, false, budget);
    if (!both.is_ok()) return schema_error(where + "/format", both.status().message());
    dfa = both->empty() ? std::move(*by_pattern) : std::move(*both);
  } else if (by_pattern) {
    dfa = std::move(by_pattern);
  } else if (by_format) {
    dfa = std::move(by_format);
  }
  if (min > 0 || max >= 0) {
    StringDfa l = StringDfa::length_range(min, max);
    if (!dfa) return std::optional<StringDfa>(std::move(l));
    Result<StringDfa> both = dfa->intersect(l, false, budget);
    if (!both.is_ok()) return schema_error(where, both.status().message());
    dfa = std::move(*both);
  }
  return dfa;
}

}  // namespace larder
