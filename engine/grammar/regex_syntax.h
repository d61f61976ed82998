// The syntax of an ECMAScript regular expression (ECMA-262 section 22.2,
// with the Annex B leniencies a JSON Schema "pattern" written for
// JavaScript relies on: a '{' that starts no count and a lone ']' or '}'
// are literals), parsed into a tree over StringDfa's alphabet
// (string_dfa.h) for the automaton builder. What is supported and refused
// is listed there.
#pragma once

#include <bitset>
#include <cstdint>
#include <string_view>
#include <vector>

#include "storage/status.h"

namespace larder::regex {

// A set of StringDfa symbols: bit c for U+0020 + c (c < 95), bit 95 for
// every code point in kOther.
using Symbols = std::bitset<96>;

struct Node {
  enum Kind : uint8_t {
    kSet,     // one character from `set`
    kSeq,     // kids in order (none: the empty string)
    kAlt,     // one of kids
    kRepeat,  // kids[0] from min to max times (max < 0: no bound)
    kLook,    // lookahead (?=kids[0]) or, when negative, (?!kids[0])
  };
  Kind kind = kSeq;
  Symbols set;    // kSet: the symbols surely in the set (a partial cover of kOther left out)
  Symbols upper;  // kSet: every symbol that may be (a partial cover of kOther let in): a
                  // negative lookahead's body uses these, so that its complement stays inside
  std::vector<int> kids;  // indices into Tree::nodes
  int min = 0, max = 0;
  bool negative = false;
  bool anchored = false;  // kLook: the body ends with $ ((?=.{4}$): the rest is exactly it)
};

// One top-level alternative: its items (lookaheads only here), whether it
// starts with ^ and ends with $.
struct TopAlternative {
  std::vector<int> items;
  bool anchored_start = false;
  bool anchored_end = false;
};

struct Tree {
  std::vector<Node> nodes;
  std::vector<TopAlternative> top;
};

inline constexpr int kMaxCount = 1000;           // {n,m} bounds
inline constexpr size_t kMaxPatternChars = 4096;  // code points

// kInvalidArgument naming the construct and its offset (in code points)
// for what string_dfa.h lists as refused, and for syntax errors.
Result<Tree> parse(std::string_view pattern);

// Whether code point cp >= U+0080 is in the kOther symbol: in the Basic
// Multilingual Plane (JavaScript's RegExp without the u flag, as zod runs
// it, sees a character past U+FFFF as two; ajv's u flag as one: a pattern's
// . or [^a] means one of those for both only below U+10000), and not one of
// the white spaces \s matches beyond ASCII.
bool in_other(uint32_t cp);
// kOther as a GBNF character class.
inline constexpr std::string_view kOtherGbnf =
    "[^\\x00-\\x7F\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000\\uFEFF"
    "\\U00010000-\\U0010FFFF]";

}  // namespace larder::regex
