// Helpers for the grammar tests: parse or fail the test, and feed text.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <catch2/catch.hpp>

#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_matcher.h"

namespace larder::testing {

inline std::shared_ptr<CompiledGrammar> compile(std::string_view gbnf) {
  Result<Grammar> g = parse_gbnf(gbnf);
  INFO(g.status().to_string());
  REQUIRE(g.is_ok());
  return std::make_shared<CompiledGrammar>(*g);
}

// The state after `text`; empty when some byte was refused.
inline GrammarState feed(const CompiledGrammar& g, std::string_view text) {
  GrammarState st = grammar_start(g);
  for (char c : text) {
    st = grammar_advance(g, st, uint8_t(c));
    if (st.empty()) break;
  }
  return st;
}

// Whether `text` is a whole sentence of the grammar.
inline bool accepts(const CompiledGrammar& g, std::string_view text) { return grammar_can_end(feed(g, text)); }
// Whether `text` can still be extended into one.
inline bool viable(const CompiledGrammar& g, std::string_view text) { return !feed(g, text).empty(); }

}  // namespace larder::testing
