// A context-free grammar over Unicode code points, in the shape llama.cpp's
// GBNF parser produces (llama.cpp src/llama-grammar.h, grammars/README.md):
// rules made of alternatives, each a sequence of elements; an element
// matches one code point from a set of ranges, or expands another rule.
// Groups, repetition (*, +, ?, {m,n}) and string literals are desugared by
// the parser into plain rules, so the matcher (grammar_matcher.h) sees only
// these two kinds of element.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "storage/status.h"

namespace larder {

struct CharRange {
  uint32_t lo = 0, hi = 0;  // inclusive code points
};

struct GrammarElement {
  enum class Kind : uint8_t { kChars, kRule };
  Kind kind = Kind::kChars;
  // kChars: matches one code point inside any range, or (negated) outside
  // every range; `.` is a negated set with no ranges (any code point).
  bool negated = false;
  std::vector<CharRange> ranges;
  uint32_t rule = 0;  // kRule: index into Grammar::rules
};

// A sequence of elements; empty matches the empty string.
using GrammarAlternative = std::vector<GrammarElement>;

struct GrammarRule {
  std::string name;  // as written, or "<parent>-<n>" for a generated one
  std::vector<GrammarAlternative> alternatives;
};

struct Grammar {
  std::vector<GrammarRule> rules;
  uint32_t root = 0;  // the start rule
};

// Whether a kChars element matches code point cp.
bool chars_match(const GrammarElement& e, uint32_t cp);
// Whether a kChars element matches some code point in [lo, hi] (used while
// a multi-byte UTF-8 code point is only partly known).
bool chars_match_any(const GrammarElement& e, uint32_t lo, uint32_t hi);

// Parses GBNF (llama.cpp's grammar format): `name ::= alternatives` rules,
// alternatives separated by `|`, a sequence of "literal" strings, [a-z]
// character classes (with ^ for negation and ranges), `.`, rule names and
// ( groups ), each optionally followed by `*`, `+`, `?`, `{m}`, `{m,}` or
// `{m,n}`; `#` comments; escapes \n \r \t \\ \" \[ \] \xHH \uHHHH
// \UHHHHHHHH. A newline ends a rule's sequence unless inside parentheses; an
// alternative may continue on the next line starting with `|`.
// Errors (kInvalidArgument, with the line and column): a syntax error, an
// undefined rule, no rule named `root_name`, a rule defined twice, a
// left-recursive rule (it could expand to itself before matching a code
// point, which a top-down matcher cannot run), a repetition count above
// 10000, more than 2^20 elements once repetitions are expanded, groups
// nested over 64 deep, a chain of over 1000 rules expanded before a
// character matches, token references (<...>, not supported).
Result<Grammar> parse_gbnf(std::string_view text, std::string_view root_name = "root");

// The grammar back in GBNF (generated rules included), for logs and tests.
std::string to_gbnf(const Grammar& g);

}  // namespace larder
