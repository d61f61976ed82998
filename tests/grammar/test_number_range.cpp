// Integer and number ranges as grammars, against arithmetic: a text is
// accepted exactly when it is a canonical JSON number (no leading zeros, no
// "-0", no exponent) whose value lies in the range, decided here by
// comparing its integer part and whether its fraction is zero with the
// bounds, not by the grammar's construction.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/grammar/number_range.h"
#include "tests/grammar/grammar_test_util.h"

using namespace larder;
using namespace larder::testing;

namespace {

std::shared_ptr<CompiledGrammar> grammar(const std::string& expr) {
  REQUIRE_FALSE(expr.empty());
  return compile("root ::= " + expr + "\n");
}

// A decimal text split into sign, integer part and whether the fraction is
// non-zero; nullopt unless canonical (as the grammar is meant to write).
struct Decimal {
  bool negative;
  int64_t whole;
  bool fraction;
};
std::optional<Decimal> canonical(const std::string& t) {
  size_t i = 0;
  Decimal d{false, 0, false};
  if (i < t.size() && t[i] == '-') d.negative = true, ++i;
  const size_t start = i;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') d.whole = d.whole * 10 + (t[i++] - '0');
  const size_t n_digits = i - start;
  if (n_digits == 0 || n_digits > 16 || (n_digits > 1 && t[start] == '0')) return std::nullopt;
  if (i < t.size()) {
    if (t[i++] != '.') return std::nullopt;
    const size_t f = i;
    for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) {
      if (t[i] != '0') d.fraction = true;
    }
    if (i == f || i - f > 16 || i != t.size()) return std::nullopt;
  }
  if (d.negative && d.whole == 0 && !d.fraction) return std::nullopt;  // "-0"
  return d;
}

// -1, 0, 1 as the value of d is below, at or above the integer b.
int compare(const Decimal& d, int64_t b) {
  auto magnitude_vs = [&](int64_t m) {  // d's magnitude against m
    if (d.whole < m) return -1;
    if (d.whole > m) return 1;
    return d.fraction ? 1 : 0;
  };
  return d.negative ? -magnitude_vs(-b) : magnitude_vs(b);
}

bool in_range(const Decimal& d, std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  if (lo && (lo->exclusive ? compare(d, lo->value) <= 0 : compare(d, lo->value) < 0)) return false;
  if (hi && (hi->exclusive ? compare(d, hi->value) >= 0 : compare(d, hi->value) > 0)) return false;
  return true;
}

// Texts around the small bounds: integers, fractions, and malformed ones.
std::vector<std::string> small_texts() {
  std::vector<std::string> out = {"-0", "-0.0", "00", "01", "-01", "1.", ".5", "1e2", "+1", "", "-", "0.00", "-0.50"};
  for (int v = -130; v <= 130; ++v) {
    const std::string s = std::to_string(v);
    out.push_back(s);
    for (const char* f : {".0", ".5", ".05", ".000", ".999999999999"}) out.push_back(s + f);
  }
  out.push_back("-0.5");
  out.push_back("-0.05");
  out.push_back("0.5");
  return out;
}

}  // namespace

TEST_CASE("number range: integers lo..hi, every value around the bounds", "[grammar][range]") {
  const std::vector<std::pair<int64_t, int64_t>> ranges = {
      {0, 0},   {0, 150}, {1, 9},    {5, 5},    {-5, -5}, {-130, 130}, {-1, 0},  {10, 99},
      {9, 100}, {-99, -10}, {7, 123}, {-17, 42}, {0, 9},   {100, 100},  {-100, 1}, {19, 91}};
  std::vector<std::string> texts = small_texts();
  for (const auto& [lo, hi] : ranges) {
    const auto g = grammar(integer_range_gbnf(lo, hi));
    for (const std::string& t : texts) {
      INFO("[" << lo << ", " << hi << "] \"" << t << "\"");
      const std::optional<Decimal> d = canonical(t);
      const bool expected = d && !d->fraction && t.find('.') == std::string::npos && compare(*d, lo) >= 0 &&
                            compare(*d, hi) <= 0;
      CHECK(accepts(*g, t) == expected);
    }
  }
  CHECK(integer_range_gbnf(3, 2).empty());
}

TEST_CASE("number range: zod's safe-integer bounds and 16-digit values", "[grammar][range]") {
  const int64_t safe = (int64_t(1) << 53) - 1;  // 9007199254740991
  const auto g = grammar(integer_range_gbnf(-safe, safe));
  std::vector<int64_t> values = {0, 1, -1, safe, -safe, safe + 1, -safe - 1, safe - 1, 999999999999999,
                                 1000000000000000, 9007199254740990, 9007199254741000, kMaxRangeMagnitude};
  std::mt19937_64 rng(11);
  for (int i = 0; i < 2000; ++i) {
    const int64_t v = int64_t(rng() % uint64_t(kMaxRangeMagnitude)) * (rng() % 2 ? 1 : -1);
    values.push_back(v >> (rng() % 50));
  }
  for (int64_t v : values) {
    INFO(v);
    CHECK(accepts(*g, std::to_string(v)) == (v >= -safe && v <= safe));
  }
  CHECK_FALSE(accepts(*g, "12345678901234567"));  // 17 digits
}

TEST_CASE("number range: numbers within integral bounds, inclusive and exclusive", "[grammar][range]") {
  using B = std::optional<NumberBound>;
  const std::vector<B> bounds = {std::nullopt,
                                 NumberBound{0, false},  NumberBound{0, true},   NumberBound{1, false},
                                 NumberBound{1, true},   NumberBound{-1, false}, NumberBound{-1, true},
                                 NumberBound{100, false}, NumberBound{-100, true}, NumberBound{7, true}};
  const std::vector<std::string> texts = small_texts();
  int n_ranges = 0;
  for (const B& lo : bounds) {
    for (const B& hi : bounds) {
      const std::string expr = number_range_gbnf(lo, hi);
      bool any = false;
      std::shared_ptr<CompiledGrammar> g = expr.empty() ? nullptr : grammar(expr);
      for (const std::string& t : texts) {
        INFO("lo " << (lo ? std::to_string(lo->value) + (lo->exclusive ? " excl" : "") : "none") << " hi "
                   << (hi ? std::to_string(hi->value) + (hi->exclusive ? " excl" : "") : "none") << " \"" << t
                   << "\"");
        const std::optional<Decimal> d = canonical(t);
        const bool expected = d && in_range(*d, lo, hi);
        any = any || expected;
        CHECK((g != nullptr && accepts(*g, t)) == expected);
      }
      if (!any) CHECK(expr.empty());  // an empty range is "", not a grammar matching nothing
      ++n_ranges;
    }
  }
  CHECK(n_ranges == 100);
}

TEST_CASE("number range: next to an exclusive bound a text parses to a double on its side", "[grammar][range]") {
  // strtod is the client's parser here (what JSON.parse and zod see).
  struct Case {
    std::optional<NumberBound> lo, hi;
  };
  const std::vector<Case> cases = {{NumberBound{5, true}, std::nullopt},
                                   {std::nullopt, NumberBound{5, true}},
                                   {NumberBound{4, false}, NumberBound{5, true}},
                                   {NumberBound{123456789012, true}, NumberBound{123456789014, true}},
                                   {NumberBound{-5, true}, NumberBound{0, true}},
                                   {NumberBound{0, true}, NumberBound{1, true}}};
  std::mt19937 rng(3);
  for (const Case& c : cases) {
    const auto g = grammar(number_range_gbnf(c.lo, c.hi));
    int n_accepted = 0;
    std::vector<std::string> texts;
    for (int64_t b : {int64_t(0), int64_t(1), int64_t(4), int64_t(5), int64_t(-1), int64_t(-4), int64_t(-5),
                      int64_t(123456789012), int64_t(123456789013)}) {
      for (int digits = 1; digits <= 18; ++digits) {
        texts.push_back(std::to_string(b) + "." + std::string(size_t(digits - 1), '0') + "1");
        texts.push_back(std::to_string(b) + "." + std::string(size_t(digits), '9'));
        std::string r = std::to_string(b) + ".";
        for (int k = 0; k < digits; ++k) r += char('0' + rng() % 10);
        texts.push_back(r);
      }
    }
    for (const std::string& t : texts) {
      if (!accepts(*g, t)) continue;
      ++n_accepted;
      const double v = std::strtod(t.c_str(), nullptr);
      INFO(t << " parses as " << v);
      if (c.lo) CHECK(v > double(c.lo->value));
      if (c.hi) CHECK(v < double(c.hi->value));
      CHECK(t.size() - t.find('.') - 1 <= 16);  // at most 16 fraction digits
    }
    CHECK(n_accepted > 10);
  }
  // The two texts the hostile pass found, refused; shorter ones accepted.
  const auto above5 = grammar(number_range_gbnf(NumberBound{5, true}, std::nullopt));
  CHECK_FALSE(accepts(*above5, "5.0000000000000001"));
  CHECK(accepts(*above5, "5.00000000000001"));
  const auto below5 = grammar(number_range_gbnf(NumberBound{4, false}, NumberBound{5, true}));
  CHECK_FALSE(accepts(*below5, "4.9999999999999999"));
  CHECK(accepts(*below5, "4.99999999999999"));
  CHECK(accepts(*grammar(number_range_gbnf(NumberBound{0, true}, NumberBound{1, true})), "0.9999999999999999"));
}
