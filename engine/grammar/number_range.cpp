#include "engine/grammar/number_range.h"

#include <algorithm>
#include <string_view>
#include <vector>

namespace larder {

namespace {

std::string quoted(std::string_view digits) {
  std::string out = "\"";
  out.append(digits);
  out += '"';
  return out;
}

bool all_of_digit(std::string_view s, char d) {
  return std::all_of(s.begin(), s.end(), [d](char c) { return c == d; });
}

std::string any_digits(size_t n) {
  if (n == 0) return "";
  return n == 1 ? "[0-9]" : "[0-9]{" + std::to_string(n) + "}";
}

std::string join(const std::vector<std::string>& alts) {
  std::string out;
  for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
  return alts.size() == 1 ? out : "( " + out + " )";
}

// The digit strings of x's length from x to y (x <= y as numbers), each
// with one reading: the alternatives differ in their first digit.
std::string same_length(std::string_view x, std::string_view y) {
  const size_t n = x.size();
  if (x == y) return quoted(x);
  if (all_of_digit(x, '0') && all_of_digit(y, '9')) return any_digits(n);
  if (x[0] == y[0]) return quoted(x.substr(0, 1)) + " " + same_length(x.substr(1), y.substr(1));
  std::vector<std::string> alts;
  char lo = x[0], hi = y[0];
  const std::string nines(n - 1, '9'), zeros(n - 1, '0');
  if (!all_of_digit(x.substr(1), '0')) {
    alts.push_back(quoted(x.substr(0, 1)) + " " + same_length(x.substr(1), nines));
    ++lo;
  }
  std::string top;
  if (!all_of_digit(y.substr(1), '9')) {
    top = quoted(y.substr(0, 1)) + " " + same_length(zeros, y.substr(1));
    --hi;
  }
  if (lo <= hi) {
    std::string cls;
    if (lo == hi) {
      cls = quoted(std::string(1, lo));
    } else {
      cls = "[";
      cls += lo;
      cls += '-';
      cls += hi;
      cls += ']';
    }
    if (n > 1) cls.append(" ").append(any_digits(n - 1));
    alts.push_back(cls);
  }
  if (!top.empty()) alts.push_back(top);
  return join(alts);
}

// The integers a..b (0 <= a <= b), without leading zeros.
std::string non_negative_range(int64_t a, int64_t b) {
  const std::string sa = std::to_string(a), sb = std::to_string(b);
  std::vector<std::string> alts;
  int64_t power = 1;  // 10^(d-1)
  size_t full_from = 0;  // lengths full_from..d-1 take every value (d >= 2): one [1-9] [0-9]{m,n}
  auto flush_full = [&](size_t d) {
    if (full_from == 0) return;
    const size_t m = full_from - 1, n = d - 2;
    std::string run = "[1-9] [0-9]{";
    run.append(std::to_string(m));
    if (m != n) run.append(",").append(std::to_string(n));
    alts.push_back(run + "}");
    full_from = 0;
  };
  for (size_t d = 1; d <= sb.size(); ++d, power *= 10) {
    if (d < sa.size()) continue;
    const int64_t lo = d == sa.size() ? a : power;
    const int64_t hi = d == sb.size() ? b : power * 10 - 1;
    if (d >= 2 && lo == power && hi == power * 10 - 1) {
      if (full_from == 0) full_from = d;
      continue;
    }
    flush_full(d);
    alts.push_back(same_length(std::to_string(lo), std::to_string(hi)));
  }
  flush_full(sb.size() + 1);
  return join(alts);
}

constexpr std::string_view kZeroFraction = "( \".\" \"0\"{1,16} )?";

// Significant digits a number's text keeps next to an exclusive bound: a
// double holds 15 decimal digits exactly (IEEE 754 binary64: 15.95), so a
// text of at most 15 digits on the right side of an integer bound parses
// to a double on that side too (5.0000000000000001 parses as 5, and
// 4.9999999999999999 as 5: both break a bound of 5 once a client parses
// them).
constexpr int kExactDigits = 15;

// Fraction digits a text may have next to an exclusive bound, after the
// whole part v: 16 after 0 (0.9999999999999999 is still below 1 as a
// double), kExactDigits less v's digits otherwise.
int exact_fraction_digits(int64_t v) { return v == 0 ? 16 : kExactDigits - int(std::to_string(v).size()); }

// A fraction of 1..max_digits digits (any), or "" when max_digits < 1.
std::string fraction_up_to(int max_digits) {
  if (max_digits < 1) return "";
  std::string out = "( \".\" [0-9]{1,";
  return out.append(std::to_string(std::min(max_digits, 16))).append("} )?");
}

// A non-zero fraction whose first non-zero digit is among the first
// `within` digits, 16 digits at most in all; "" when within < 1.
std::string nonzero_fraction(int within) {
  within = std::min(within, 16);
  if (within < 1) return "";
  std::vector<std::string> alts;
  for (int zeros = 0; zeros < within; ++zeros) {
    std::string a;
    if (zeros > 0) a.append("\"").append(size_t(zeros), '0').append("\" ");
    a.append("[1-9]");
    if (zeros < 15) a.append(" [0-9]{0,").append(std::to_string(15 - zeros)).append("}");
    alts.push_back(a);
  }
  return "\".\" " + join(alts);
}

// The magnitudes m (integer part and fraction) with p <= m (p < m when
// p_exclusive) and m <= q (m < q when q_exclusive; no bound when q is
// absent), 0 <= p; "" when there are none. The alternatives do not overlap:
// whole parts in [p or p + 1, q - 1] with any fraction, p itself with a
// non-zero fraction, q itself with a zero one. Next to an exclusive bound
// the digits are kept to kExactDigits.
std::string magnitude(int64_t p, bool p_exclusive, std::optional<int64_t> q, bool q_exclusive) {
  std::vector<std::string> alts;
  const int64_t lo_any = p_exclusive ? p + 1 : p;
  int64_t hi_any = q ? *q - 1 : kMaxRangeMagnitude;
  // Below an exclusive upper bound, the last whole part's fraction is short.
  std::string last;
  if (q && q_exclusive && lo_any <= hi_any) {
    last = quoted(std::to_string(hi_any));
    const std::string f = fraction_up_to(exact_fraction_digits(hi_any));
    if (!f.empty()) last.append(" ").append(f);
    --hi_any;
  }
  if (lo_any <= hi_any) alts.push_back(non_negative_range(lo_any, hi_any) + " " + fraction_up_to(16));
  if (!last.empty()) alts.push_back(last);
  if (p_exclusive && (!q || p < *q)) {
    const std::string f = nonzero_fraction(exact_fraction_digits(p));
    if (!f.empty()) alts.push_back(quoted(std::to_string(p)) + " " + f);
  }
  if (q && !q_exclusive && (*q > p || !p_exclusive) && *q >= p) {
    alts.push_back(quoted(std::to_string(*q)) + " " + std::string(kZeroFraction));
  }
  return alts.empty() ? "" : join(alts);
}

}  // namespace

std::string integer_range_gbnf(int64_t lo, int64_t hi) {
  if (lo > hi) return "";
  std::vector<std::string> alts;
  if (hi >= 0) alts.push_back(non_negative_range(std::max<int64_t>(lo, 0), hi));
  if (lo < 0) alts.push_back("\"-\" " + non_negative_range(std::max<int64_t>(1, -hi), -lo));
  return join(alts);
}

std::string number_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  std::vector<std::string> alts;
  // v >= 0: from max(lo, 0) to hi.
  if (!hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive)) {
    const bool lo_here = lo && lo->value >= 0;
    std::string m = magnitude(lo_here ? lo->value : 0, lo_here && lo->exclusive,
                              hi ? std::optional<int64_t>(hi->value) : std::nullopt, hi && hi->exclusive);
    if (!m.empty()) alts.push_back(m);
  }
  // v < 0: magnitudes from -hi (or just above 0) up to -lo.
  if (!lo || lo->value < 0) {
    const bool hi_here = hi && hi->value < 0;
    std::string m = magnitude(hi_here ? -hi->value : 0, hi_here ? hi->exclusive : true,
                              lo ? std::optional<int64_t>(-lo->value) : std::nullopt, lo && lo->exclusive);
    if (!m.empty()) alts.push_back("\"-\" " + m);
  }
  return alts.empty() ? "" : join(alts);
}

}  // namespace larder
