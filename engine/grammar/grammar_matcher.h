// GrammarMatcher: runs a Grammar (grammar.h) over the bytes a model
// generates, as a pushdown automaton in the manner of llama.cpp's
// llama_grammar_accept (src/llama-grammar.cpp): the state is a set of
// stacks of grammar positions, each stack one way the text so far can be
// read; a stack's top is always a character element. Feeding a code point
// keeps the stacks whose top matches it, moves them past it and expands
// rule references until each top is a character element again (or the
// stack is empty: that reading is complete).
//
// Bytes, not code points, are the unit here, since a token may end inside
// a multi-byte UTF-8 sequence: a stack carries the partial code point, and
// is kept while some completion of it could match its top element. Only
// well-formed UTF-8 is accepted (Unicode 15 table 3-7): no overlong forms
// (E0 81 AD is not "m"), no surrogates, nothing above U+10FFFF, since the
// detokenizer would turn those into U+FFFD and the client would see text
// outside the grammar.
//
// Not thread-safe; a CompiledGrammar is immutable and may be shared.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar/grammar.h"

namespace larder {

// A Grammar flattened for matching: every alternative is a run of elements
// in one array, ended by an end marker.
class CompiledGrammar {
 public:
  explicit CompiledGrammar(const Grammar& g);

  enum class Op : uint8_t { kChars, kRule, kEnd };
  struct Elem {
    Op op;
    uint32_t arg;  // kChars: index into sets_; kRule: rule id
  };
  struct CharSet {
    std::array<uint64_t, 2> ascii{};  // code points 0..127: bit set = matches
    GrammarElement element;           // the full set, for code points >= 128
    bool matches(uint32_t cp) const {
      return cp < 128 ? ((ascii[cp >> 6] >> (cp & 63)) & 1) != 0 : chars_match(element, cp);
    }
  };

  const Elem& elem(uint32_t i) const { return elems_[i]; }
  const CharSet& set(uint32_t i) const { return sets_[i]; }
  const std::vector<uint32_t>& alternatives(uint32_t rule) const { return rule_alts_[rule]; }
  uint32_t root() const { return root_; }

  // Whether two compiled grammars are the same automaton (the same rules,
  // element for element): masks of one are masks of the other, so
  // GrammarMasker shares its tables between them. fingerprint(): a hash of
  // the same content, equal for equal grammars.
  bool same_as(const CompiledGrammar& o) const;
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  std::vector<Elem> elems_;
  std::vector<CharSet> sets_;
  std::vector<std::vector<uint32_t>> rule_alts_;  // rule -> start index of each alternative
  uint32_t root_ = 0;
  uint64_t fingerprint_ = 0;
};

// One reading of the text so far: positions still to match (the top is the
// last), and the part of a UTF-8 code point fed but not complete.
struct GrammarStack {
  std::vector<uint32_t> pos;  // indices of kChars elements to match next; empty: complete
  uint32_t partial = 0;       // the bits of the code point so far
  uint8_t pending = 0;        // continuation bytes still to come (0: at a code point boundary)
  uint8_t width = 0;          // bytes of the code point being fed (2..4), while pending > 0
  bool operator==(const GrammarStack&) const = default;
};

// The matcher's state: distinct stacks, in a canonical (sorted) order, so
// that equal states compare equal (the mask cache keys on them).
using GrammarState = std::vector<GrammarStack>;

// The most readings one state may hold, counted before duplicates merge. An
// ambiguous grammar (nested nullable repetitions such as ("a"{0,100}){0,100},
// or alternatives that repeat each other) can have exponentially many
// readings of one text; past this bound the matcher gives up instead of
// exhausting memory and the engine thread. A JSON object of 10000 optional
// properties (json_schema_grammar's limit) needs one reading per property,
// an anyOf of n alternatives n or more.
inline constexpr size_t kMaxGrammarStacks = size_t(1) << 18;

// The state before any text: the root rule expanded. When it would exceed
// kMaxGrammarStacks readings: empty, and *overflowed (if given) true.
GrammarState grammar_start(const CompiledGrammar& g, bool* overflowed = nullptr);
// The state after one more byte; empty when no stack accepts it, or (with
// *overflowed true) when it would exceed kMaxGrammarStacks readings: that
// byte is then treated as not allowed.
GrammarState grammar_advance(const CompiledGrammar& g, const GrammarState& state, uint8_t byte,
                             bool* overflowed = nullptr);
// g compiled and checked, for requests: kInvalidArgument when its start
// state alone would exceed kMaxGrammarStacks readings (the grammar is too
// ambiguous to run). Costs at most one grammar_start.
Result<std::shared_ptr<const CompiledGrammar>> compile_grammar(const Grammar& g);

// Whether the text so far is a complete sentence of the grammar (some stack
// is empty, with no code point half-fed).
bool grammar_can_end(const GrammarState& state);
// Whether nothing may follow: every stack is complete.
bool grammar_is_done(const GrammarState& state);
// A byte string naming the state, for hashing (the mask cache).
std::string grammar_state_key(const GrammarState& state);

}  // namespace larder
