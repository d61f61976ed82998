// Ambiguous grammars: the matcher's bound on readings (kMaxGrammarStacks).
// Expected counts are worked by hand from the grammars' structure.
#include <catch2/catch.hpp>

#include <string>

#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_matcher.h"
#include "tests/grammar/grammar_test_util.h"

using namespace larder;
using namespace larder::testing;

namespace {

// l0 ::= "x"; lk ::= "[" l(k-1) "]" | "[" l(k-1) "]" (two alternatives
// alike): after k "[" every choice of alternative at each level so far is
// its own reading, 2^(k+1) of them (the level being entered has two too).
std::string doubling_grammar(int levels) {
  std::string g = "root ::= l" + std::to_string(levels) + "\nl0 ::= \"x\"\n";
  for (int k = 1; k <= levels; ++k) {
    std::string body = "\"[\" l";
    body += std::to_string(k - 1);
    body += " \"]\"";
    g += 'l';
    g += std::to_string(k);
    g += " ::= ";
    g += body;
    g += " | ";
    g += body;
    g += '\n';
  }
  return g;
}

}  // namespace

TEST_CASE("readings that double per byte are counted, then cut at the bound", "[grammar][ambiguity]") {
  static_assert(kMaxGrammarStacks == 262144);
  auto g = compile(doubling_grammar(20));
  bool overflow = true;
  GrammarState st = grammar_start(*g, &overflow);
  CHECK_FALSE(overflow);
  CHECK(st.size() == 2);
  for (int k = 1; k <= 17; ++k) {
    st = grammar_advance(*g, st, '[', &overflow);
    INFO("after " << k << " '['");
    REQUIRE_FALSE(overflow);
    CHECK(st.size() == (size_t(1) << (k + 1)));  // 2^18 = 262144 at k = 17: exactly the bound
  }
  // The 18th would need 2^19 readings: the byte is refused, the state empty.
  st = grammar_advance(*g, st, '[', &overflow);
  CHECK(overflow);
  CHECK(st.empty());
  // A small nesting of the same grammar still matches normally.
  auto small = compile(doubling_grammar(3));
  CHECK(accepts(*small, "[[[x]]]"));
  CHECK_FALSE(accepts(*small, "[[x]]"));
}

TEST_CASE("a grammar whose start alone is too ambiguous is refused by compile_grammar", "[grammar][ambiguity]") {
  // ("a"{0,100}){0,100} nested three deep: the empty text alone has about
  // 100^3 readings (which repetition of each level is the current one).
  Result<Grammar> g = parse_gbnf("root ::= (((\"a\"{0,100}){0,100}){0,100})");
  REQUIRE(g.is_ok());
  bool overflow = false;
  CompiledGrammar cg(*g);
  CHECK(grammar_start(cg, &overflow).empty());
  CHECK(overflow);
  auto compiled = compile_grammar(*g);
  REQUIRE_FALSE(compiled.is_ok());
  CHECK(compiled.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(compiled.status().message(), Catch::Contains("too ambiguous") && Catch::Contains("262144"));
  // One level deep is fine: 101 readings of the empty text at most.
  Result<Grammar> ok = parse_gbnf("root ::= (\"a\"{0,100})");
  REQUIRE(ok.is_ok());
  auto fine = compile_grammar(*ok);
  REQUIRE(fine.is_ok());
  CHECK(accepts(**fine, std::string(100, 'a')));
  CHECK_FALSE(accepts(**fine, std::string(101, 'a')));
}
