// StringDfa: a set of strings, as a deterministic finite automaton over the
// characters a constrained JSON string writes, built from an ECMAScript
// regular expression (JSON Schema's "pattern", RFC 8927 / ECMA-262 syntax)
// and turned into GBNF rules (grammar.h) for the string's JSON text.
//
// Why a DFA and not a direct regex -> GBNF translation (as llama.cpp's
// json-schema-to-grammar does): a DFA gives every text one reading, so an
// ambiguous pattern such as (a|a)* or .*x.* cannot multiply the matcher's
// stacks (grammar_matcher.h bounds them); lookaheads at the top level of the
// pattern (zod's e-mail pattern starts with (?!\.)(?!.*\.\.)) become an
// intersection with the complement; and a pattern, a format and
// minLength / maxLength combine by intersection, so the output satisfies all
// of them.
//
// The alphabet: printable ASCII (U+0020..U+007E) one symbol each, and one
// symbol kOther for every code point from U+0080 to U+FFFF except the
// Unicode white space ECMAScript's \s matches beyond ASCII (U+00A0, U+1680,
// U+2000-200A, U+2028, U+2029, U+202F, U+205F, U+3000, U+FEFF). Control
// characters, those white spaces and characters past U+FFFF (one character
// to a u-flag RegExp, two to one without) are never written. Where a pattern names
// a character outside the alphabet, or a class covers only part of kOther
// (a literal "é", [à-ÿ]), the automaton leaves it out: the language is a
// subset of the pattern's, so every output still matches the pattern.
//
// Supported: literals, ., classes [...] and [^...] with ranges, \d \D \w \W
// \s \S, escapes (\t \n \xHH \uHHHH \/ \. ...), groups (...) (?:...)
// (?<name>...), |, the quantifiers * + ? {n} {n,} {n,m} (lazy forms too:
// same language), ^ at the start and $ at the end of a top-level
// alternative (without them the match may sit anywhere in the string, as
// JSON Schema says), and (?=...) (?!...) as items of a top-level
// alternative (ending with $ when they have one alternative: (?=.{8,}$)).
// Refused (kInvalidArgument naming the construct): lookbehind, a lookahead
// inside a group or quantifier, backreferences, \b \B, \p{...},
// anchors elsewhere, counts above 1000, a pattern over 4096 code points,
// automata over kMaxDfaStates states or past the DfaBudget.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "storage/status.h"

namespace larder {

// Work the constructions may spend (NFA states visited, times symbol
// classes; states times symbols while minimizing), shared by every call
// given the same budget, so that a schema of many patterns is bounded as a
// whole: a pattern whose automaton would take longer is refused, an
// automaton whose minimization would is kept unminimized.
struct DfaBudget {
  size_t left = size_t(64) << 20;  // about a second of one core
};

class StringDfa {
 public:
  static constexpr int kSymbols = 96;  // 0..94: U+0020..U+007E; 95: kOther
  static constexpr int kOther = 95;
  static constexpr size_t kMaxDfaStates = 16384;

  // The strings that match `pattern` somewhere (or, with ^ and $, whole),
  // as ECMAScript's RegExp.prototype.test without flags decides.
  static Result<StringDfa> from_pattern(std::string_view pattern, DfaBudget* budget = nullptr);
  // Strings of min..max characters (code points); max < 0: no upper bound.
  static StringDfa length_range(int64_t min, int64_t max);

  // The strings in both (or, with complement_other, in this and not in
  // `other`); kInvalidArgument past kMaxDfaStates states or the budget.
  Result<StringDfa> intersect(const StringDfa& other, bool complement_other = false,
                              DfaBudget* budget = nullptr) const;

  bool empty() const { return next_.empty(); }
  size_t n_states() const { return next_.size(); }
  // Whether the automaton accepts `text` (UTF-8); for tests.
  bool accepts(std::string_view text) const;

  // GBNF for the JSON string literal (the quotes included) of the language:
  // one rule per state, named `prefix` + "-" + the state's number, appended
  // to *rules as (name, body); returns the expression that starts it. A
  // '"' or '\' is written as its JSON escape. Requires !empty().
  std::string to_gbnf(const std::string& prefix, std::vector<std::pair<std::string, std::string>>* rules) const;

  // Built by the pattern compiler and intersect: a complete transition
  // table (-1: no string of the language continues that way), trimmed to
  // states that reach an accepting one, minimized, numbered from the start
  // state 0 in breadth-first order. Empty: the language is empty.
  StringDfa(std::vector<std::array<int32_t, kSymbols>> next, std::vector<bool> accept, DfaBudget* budget = nullptr);
  StringDfa() = default;
  const std::vector<std::array<int32_t, kSymbols>>& transitions() const { return next_; }
  const std::vector<bool>& accepting() const { return accept_; }

 private:
  std::vector<std::array<int32_t, kSymbols>> next_;
  std::vector<bool> accept_;
};

}  // namespace larder
