// The GBNF parser: what it accepts (checked through the matcher on strings
// worked out by hand) and what it refuses, with the line and column.
#include <catch2/catch.hpp>

#include <atomic>
#include <functional>
#include <vector>

#include "tests/grammar/grammar_test_util.h"
#include "engine/grammar/json_grammar.h"
#include "engine/grammar/grammar_analysis.h"
#include "storage/cancel.h"

using namespace larder;
using namespace larder::testing;

namespace {

std::string parse_error(std::string_view gbnf) {
  Result<Grammar> g = parse_gbnf(gbnf);
  REQUIRE_FALSE(g.is_ok());
  CHECK(g.status().code() == StatusCode::kInvalidArgument);
  return g.status().message();
}

}  // namespace

TEST_CASE("gbnf: sequences, alternatives, groups and repetition", "[grammar]") {
  auto g = compile(R"(root ::= expr
expr ::= term ("+" term)*   # a sum
term ::= [0-9]+
)");
  CHECK(accepts(*g, "1"));
  CHECK(accepts(*g, "12+3+456"));
  CHECK_FALSE(accepts(*g, "12+"));  // a prefix, not a sentence
  CHECK(viable(*g, "12+"));
  CHECK_FALSE(viable(*g, "+1"));
  CHECK_FALSE(viable(*g, "1++"));
  CHECK_FALSE(accepts(*g, ""));

  auto opt = compile(R"(root ::= "x"? "y" | "z")");
  CHECK(accepts(*opt, "y"));
  CHECK(accepts(*opt, "xy"));
  CHECK(accepts(*opt, "z"));
  CHECK_FALSE(viable(*opt, "xx"));
  CHECK_FALSE(viable(*opt, "zy"));
}

TEST_CASE("gbnf: counted repetition {m}, {m,}, {m,n} of a literal and of a group", "[grammar]") {
  auto g = compile(R"(root ::= "ab"{2,3} "." ("x" | "yz"){1,} "!" [0-9]{2})");
  CHECK(accepts(*g, "abab.x!12"));
  CHECK(accepts(*g, "ababab.yzxyz!00"));
  CHECK_FALSE(viable(*g, "ab."));        // one "ab" is too few
  CHECK_FALSE(viable(*g, "abababab"));   // four is too many
  CHECK_FALSE(viable(*g, "abab.!"));     // the group at least once
  CHECK_FALSE(accepts(*g, "abab.x!1"));  // exactly two digits
  CHECK_FALSE(viable(*g, "abab.x!123"));
}

TEST_CASE("gbnf: character classes, negation, any, escapes and UTF-8", "[grammar]") {
  auto q = compile(R"(root ::= "\"" [^"\\]* "\"")");
  CHECK(accepts(*q, "\"abc\""));
  CHECK(accepts(*q, "\"\""));
  CHECK_FALSE(viable(*q, "\"a\\"));
  CHECK_FALSE(viable(*q, "\"a\"b"));

  auto greek = compile("root ::= [\\u03B1-\\u03C9]+ \"!\"");  // alpha..omega
  CHECK(accepts(*greek, "\xCE\xB1\xCE\xB2!"));                 // "αβ!"
  CHECK_FALSE(viable(*greek, "a"));
  // The first byte of α alone (0xCE: code points 0x380..0x3BF) may still
  // become a Greek letter; 0xCF 0x8A (U+03CA) is past omega.
  GrammarState half = feed(*greek, "\xCE");
  CHECK_FALSE(half.empty());
  CHECK_FALSE(grammar_can_end(half));
  CHECK_FALSE(viable(*greek, "\xCF\x8A"));
  CHECK(viable(*greek, "\xCF\x89"));  // U+03C9 omega
  CHECK_FALSE(viable(*greek, "\xCE\xCE"));  // a lead byte where a continuation was due

  auto any = compile(R"(root ::= . . "\x41" [\t\n] "\u00e9")");
  CHECK(accepts(*any, "?\xF0\x9F\xA6\x99" "A\n\xC3\xA9"));  // '?', U+1F999, 'A', newline, 'é'
  CHECK_FALSE(viable(*any, "??B"));

  auto dash = compile(R"(root ::= [a-] [\]\-]+)");
  CHECK(accepts(*dash, "-]-"));
  CHECK(accepts(*dash, "a-"));
  CHECK_FALSE(viable(*dash, "b"));
}

TEST_CASE("compiled character sets: ASCII bits agree with the ranges, negated or not, ranges crossing 127",
          "[grammar]") {
  // Each set's ASCII answers against a membership worked out by hand.
  struct Case {
    const char* gbnf;
    std::function<bool(uint32_t)> in;
  };
  const std::vector<Case> cases = {
      {"root ::= [a-cx]", [](uint32_t c) { return (c >= 'a' && c <= 'c') || c == 'x'; }},
      {"root ::= [^a-cx]", [](uint32_t c) { return !((c >= 'a' && c <= 'c') || c == 'x'); }},
      {"root ::= [\\x00-\\x05~-\\u00ff]", [](uint32_t c) { return c <= 5 || c >= '~'; }},
      {"root ::= [^\\x7f-\\U0010FFFF]", [](uint32_t c) { return c < 0x7f; }},
      {"root ::= [\\u0100-\\u0200]", [](uint32_t) { return false; }},
      {"root ::= .", [](uint32_t) { return true; }},
      {"root ::= [?-A@]", [](uint32_t c) { return c >= '?' && c <= 'A'; }},
  };
  for (const Case& k : cases) {
    INFO(k.gbnf);
    Result<Grammar> g = parse_gbnf(k.gbnf);
    REQUIRE(g.is_ok());
    CompiledGrammar cg(*g);
    const CompiledGrammar::Elem& e = cg.elem(cg.alternatives(cg.root())[0]);
    REQUIRE(e.op == CompiledGrammar::Op::kChars);
    for (uint32_t c = 0; c < 128; ++c) {
      INFO(c);
      CHECK(cg.set(e.arg).matches(c) == k.in(c));
    }
  }
}

TEST_CASE("gbnf: newlines end a rule except inside parentheses or before |", "[grammar]") {
  auto g = compile("root ::= (\n  \"a\"\n  \"b\"\n) | \"c\"\n     | \"d\"\nother ::= \"e\"\n");
  CHECK(accepts(*g, "ab"));
  CHECK(accepts(*g, "c"));
  CHECK(accepts(*g, "d"));
  CHECK_FALSE(viable(*g, "e"));
}

TEST_CASE("gbnf: what is refused, with where", "[grammar]") {
  CHECK_THAT(parse_error("root ::= thing\n"), Catch::Contains("undefined rule \"thing\"") && Catch::Contains("line 1"));
  // The error points at where the name starts: column 10 of "root ::= foo" (columns from 1).
  CHECK_THAT(parse_error("root ::= foo"), Catch::Contains("line 1, column 10"));
  CHECK_THAT(parse_error("root ::= \"a\"\nx ::= root | more\n"), Catch::Contains("line 2, column 14"));
  CHECK_THAT(parse_error("start ::= \"a\"\n"), Catch::Contains("no rule named \"root\""));
  CHECK_THAT(parse_error("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"\n"),
             Catch::Contains("\"expr\" is left-recursive"));
  // Left recursion through a nullable rule: a ::= b a ... with b ::= "" | "x".
  CHECK_THAT(parse_error("root ::= b root \"y\" | \"z\"\nb ::= \"x\"?\n"), Catch::Contains("left-recursive"));
  // A start rule that can never be completed (found in hostile testing: a
  // JSON schema whose required property is its own type ran to max_tokens).
  CHECK_THAT(parse_error("root ::= \"x\" root\n"), Catch::Contains("rule \"root\" can never end"));
  CHECK_THAT(parse_error("root ::= \"(\" a \")\"\na ::= \"x\" b | \"y\" a\nb ::= \"z\" a\n"),
             Catch::Contains("can never end"));
  CHECK(parse_gbnf("root ::= \"x\" a | \"y\"\na ::= \"z\" a\n").is_ok());  // a never ends, but root need not take it
  {
    // ... and the way through it is removed: the matcher never starts it.
    auto dead_end = compile("root ::= \"x\" a | \"y\"\na ::= \"z\" a\n");
    CHECK(accepts(*dead_end, "y"));
    CHECK_FALSE(viable(*dead_end, "x"));
  }
  CHECK(parse_gbnf("root ::= \"(\" root \")\" | \"x\"\n").is_ok());
  CHECK(parse_gbnf("root ::= a*\na ::= \"x\" a\n").is_ok());  // zero of them
  // Code points no UTF-8 text holds (found in hostile testing: these
  // compiled, then failed mid-generation with a misleading message).
  CHECK_THAT(parse_error("root ::= \"a\" \"\\uD800\""), Catch::Contains("surrogate") && Catch::Contains("column 15"));
  CHECK_THAT(parse_error("root ::= \"a\" \"\\U00110000\""), Catch::Contains("past U+10FFFF"));
  CHECK_THAT(parse_error("root ::= [\\U0010FFFF-\\U00110005]"), Catch::Contains("past U+10FFFF"));
  CHECK_THAT(parse_error("root ::= \"a\" [^\\x00-\\U0010FFFF]"), Catch::Contains("can never end"));
  CHECK_THAT(parse_error("root ::= [\\uD800-\\uDFFF]"), Catch::Contains("can never end"));  // surrogates only
  CHECK_THAT(parse_error("root ::= \"a\" []"), Catch::Contains("can never end"));
  {
    // A class that matches nothing, beside a way that ends: that way is removed.
    auto g = compile("root ::= [^\\x00-\\U0010FFFF] | \"b\"");
    CHECK(accepts(*g, "b"));
    CHECK(parse_gbnf("root ::= [\\x00-\\uFFFF]").is_ok());  // crosses the surrogates: fine
  }
  CHECK_THAT(parse_error("root ::= \"abc"), Catch::Contains("unterminated string"));
  CHECK_THAT(parse_error("root ::= [abc"), Catch::Contains("unterminated character class"));
  CHECK_THAT(parse_error("root ::= \"\\q\""), Catch::Contains("unknown escape \\q"));
  CHECK_THAT(parse_error("root ::= \"a\"\nroot ::= \"b\"\n"), Catch::Contains("defined twice") && Catch::Contains("line 2"));
  CHECK_THAT(parse_error("root ::= * \"a\""), Catch::Contains("nothing before it"));
  CHECK_THAT(parse_error("root ::= \"a\"{3,2}"), Catch::Contains("n < m"));
  CHECK_THAT(parse_error("root ::= \"a\"{20000}"), Catch::Contains("above 10000"));
  CHECK_THAT(parse_error("root ::= <[1000]>"), Catch::Contains("token references"));
  CHECK_THAT(parse_error("root ::= (\"a\" \"b\""), Catch::Contains("expected )"));
  CHECK_THAT(parse_error("root := \"a\""), Catch::Contains("expected ::="));
  CHECK_THAT(parse_error("root ::= [z-a]"), Catch::Contains("end is below its start"));
  CHECK_THAT(parse_error("root ::= \"a\"\n  ::= \"b\""), Catch::Contains("line 2, column 3") && Catch::Contains("rule name"));
  // A literal of 120 code points 10000 times: 1.2 million elements. (A
  // repeated group stays small: it is one rule reference.)
  CHECK_THAT(parse_error("root ::= \"" + std::string(120, 'x') + "\"{10000}"), Catch::Contains("too large"));
  CHECK(parse_gbnf("root ::= ((\"a\"{1000}){1000}){1000}").is_ok());
}

TEST_CASE("gbnf: to_gbnf writes a grammar that parses to the same language", "[grammar]") {
  Result<Grammar> g = parse_gbnf(R"(root ::= "a" [^x-z\]] b* | "\u00e9"
b ::= "-" | "\n")");
  REQUIRE(g.is_ok());
  const std::string text = to_gbnf(*g);
  auto again = compile(text);
  CHECK(accepts(*again, "aq--\n-"));
  CHECK(accepts(*again, "\xC3\xA9"));
  CHECK_FALSE(viable(*again, "ay"));
  CHECK_FALSE(viable(*again, "a]"));
}

// Seen on stories260K: byte tokens E0 81 AD (an overlong "m") were allowed
// where "m" was, and the client got U+FFFD three times.
TEST_CASE("utf-8: only well-formed sequences match (no overlong forms, surrogates, or past U+10FFFF)", "[grammar]") {
  auto any = compile("root ::= .");
  CHECK(accepts(*any, "m"));
  CHECK_FALSE(viable(*any, "\xE0\x81"));          // E0 needs A0..BF next: overlong
  CHECK_FALSE(viable(*any, "\xC0"));              // C0, C1: only overlong forms
  CHECK_FALSE(viable(*any, "\xC1\xAD"));
  CHECK(accepts(*any, "\xC2\x80"));               // U+0080, the first 2-byte one
  CHECK_FALSE(viable(*any, "\xED\xA0"));          // ED A0..BF: surrogates
  CHECK(accepts(*any, "\xED\x9F\xBF"));           // U+D7FF
  CHECK(accepts(*any, "\xEE\x80\x80"));           // U+E000
  CHECK_FALSE(viable(*any, "\xF0\x80"));          // F0 needs 90..BF: overlong
  CHECK(accepts(*any, "\xF4\x8F\xBF\xBF"));       // U+10FFFF
  CHECK_FALSE(viable(*any, "\xF4\x90"));          // past U+10FFFF
  CHECK_FALSE(viable(*any, "\xF5"));
  auto m = compile("root ::= \"m\"");
  CHECK_FALSE(viable(*m, "\xE0\x81\xAD"));
  CHECK_FALSE(viable(*m, "\xC1\xAD"));
}

// Found trying to break it: a deep nesting of groups or a long chain of
// rules made the parser or the matcher recurse until the stack ran out.
TEST_CASE("gbnf: nesting and rule chains that would exhaust the stack are refused", "[grammar]") {
  CHECK_THAT(parse_error("root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')')),
             Catch::Contains("nested more than 64"));
  CHECK(parse_gbnf("root ::= " + std::string(60, '(') + "\"a\"" + std::string(60, ')')).is_ok());
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 5000; ++i) chain.append("r").append(std::to_string(i)).append(" ::= r").append(std::to_string(i + 1)).append("\n");
  chain += "r5000 ::= \"a\"\n";
  CHECK_THAT(parse_error(chain), Catch::Contains("more than 1000 rules"));
  // The same chain after a character is fine: each link matches first.
  std::string consuming = "root ::= r0\n";
  for (int i = 0; i < 5000; ++i) {
    consuming.append("r").append(std::to_string(i)).append(" ::= \"a\" r").append(std::to_string(i + 1)).append("\n");
  }
  consuming += "r5000 ::= \"a\"\n";
  auto g = compile(consuming);
  CHECK(accepts(*g, std::string(5001, 'a')));
  CHECK_FALSE(accepts(*g, std::string(5000, 'a')));
}

// Found in hostile testing: "\udddd" (a lone surrogate) was written, which
// nlohmann, serde and larder's own request parser refuse.
TEST_CASE("json grammar: a \\u escape is a character or a surrogate pair, never a lone surrogate", "[grammar]") {
  for (const std::string_view gbnf : {kJsonObjectGbnf, kJsonValueGbnf}) {
    auto g = compile(gbnf);
    const auto in_object = [](const std::string& s) { return "{\"a\": \"" + s + "\"}"; };
    CHECK(accepts(*g, in_object(R"(\u00e9)")));
    CHECK(accepts(*g, in_object(R"(\uD7FF\uE000\uFFFF\u0000)")));
    CHECK(accepts(*g, in_object(R"(\ud83d\ude00)")));   // U+1F600 as a pair
    CHECK(accepts(*g, in_object(R"(\uDBFF\uDFFFx)")));  // U+10FFFF
    CHECK_FALSE(accepts(*g, in_object(R"(\ud800)")));   // a high surrogate alone
    CHECK_FALSE(accepts(*g, in_object(R"(\udc00)")));   // a low one alone
    CHECK_FALSE(accepts(*g, in_object(R"(\udddd)")));
    CHECK_FALSE(accepts(*g, in_object(R"(\ud800x)")));
    CHECK_FALSE(accepts(*g, in_object(R"(\ud800\u0041)")));  // high, then not a low one
    CHECK_FALSE(accepts(*g, in_object(R"(\ud800\ud800)")));  // high, then high
  }
}

TEST_CASE("json grammar: whitespace is a space or one newline with indentation", "[grammar]") {
  auto g = compile(kJsonObjectGbnf);
  CHECK(accepts(*g, "{\"a\": [1, 2]}"));
  CHECK(accepts(*g, "{\n  \"a\": {\n    \"b\": true\n  }\n}"));  // pretty-printed (JSON.stringify(x, null, 2))
  CHECK(accepts(*g, "{\n\t\"a\":1}"));
  CHECK_FALSE(accepts(*g, "{\n\n\"a\":1}"));    // a blank line
  CHECK_FALSE(accepts(*g, "{\"a\":  1}"));     // two spaces
  CHECK_FALSE(accepts(*g, "{\"a\": \n1}"));    // a space, then a newline
  CHECK_FALSE(accepts(*g, std::string("{\n") + std::string(21, ' ') + "\"a\":1}"));  // 21 spaces of indentation
}

TEST_CASE("a cancelled parse, analysis or compile stops with kCancelled", "[grammar]") {
  const char* text = "root ::= a | b\na ::= \"x\" | \"y\"\nb ::= \"z\"\n";
  std::atomic<bool> flag{false};
  CancelScope scope(&flag);
  Result<Grammar> g = parse_gbnf(text);  // not cancelled: parses
  REQUIRE(g.is_ok());
  flag = true;
  Result<Grammar> again = parse_gbnf(text);
  REQUIRE_FALSE(again.is_ok());
  CHECK(again.status().code() == StatusCode::kCancelled);
  CHECK(check_left_recursion(g->rules, 1000).code() == StatusCode::kCancelled);
  CHECK(prune_rules_that_cannot_end(g->rules, g->root).code() == StatusCode::kCancelled);
  Result<std::shared_ptr<const CompiledGrammar>> cg = compile_grammar(*g);
  REQUIRE_FALSE(cg.is_ok());
  CHECK(cg.status().code() == StatusCode::kCancelled);
  flag = false;
  CHECK(compile_grammar(*g).is_ok());
}
