// StringDfa against an independent oracle: std::regex in ECMAScript mode
// (regex_search: JSON Schema's unanchored "pattern" semantics) decides every
// string the tests feed, and the GBNF written from the automaton accepts a
// string's JSON text exactly when the automaton accepts the string.
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/grammar/string_dfa.h"
#include "tests/grammar/grammar_test_util.h"

using namespace larder;
using namespace larder::testing;

namespace {

StringDfa dfa_of(const std::string& pattern) {
  Result<StringDfa> d = StringDfa::from_pattern(pattern);
  INFO(pattern << ": " << d.status().to_string());
  REQUIRE(d.is_ok());
  return std::move(*d);
}

std::string refusal(const std::string& pattern) {
  Result<StringDfa> d = StringDfa::from_pattern(pattern);
  INFO(pattern);
  REQUIRE_FALSE(d.is_ok());
  CHECK(d.status().code() == StatusCode::kInvalidArgument);
  return d.status().message();
}

bool oracle(const std::regex& re, const std::string& s) { return std::regex_search(s, re); }

// Every string of length <= max_len over `alphabet`.
std::vector<std::string> all_strings(const std::string& alphabet, size_t max_len) {
  std::vector<std::string> out = {""};
  for (size_t begin = 0, len = 0; len < max_len; ++len) {
    const size_t end = out.size();
    for (size_t i = begin; i < end; ++i) {
      for (char c : alphabet) out.push_back(out[i] + c);
    }
    begin = end;
  }
  return out;
}

std::shared_ptr<CompiledGrammar> grammar_of(const StringDfa& d) {
  std::vector<std::pair<std::string, std::string>> rules;
  std::string gbnf = "root ::= " + d.to_gbnf("re", &rules) + "\n";
  for (const auto& [name, body] : rules) gbnf += name + " ::= " + body + "\n";
  INFO(gbnf);
  return compile(gbnf);
}

std::string json_text(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace

TEST_CASE("string dfa: every short string is decided as ECMAScript's regex_search decides it", "[grammar][pattern]") {
  const std::vector<std::string> patterns = {
      "a", "^a", "a$", "^a+$", "^(a|ab)*$", "^(?:a|b)*a(?:a|b)$", "ab|^ba$", "^$", "", ".*", "^a?$|^b{2}$",
      "^[^a]b?$", "^a{2,3}$", "^a{2,}$", "^a{0}b$", "^\\d+-?$", "^[\\w.-]{1,3}$", "^[\\d-]+$", "^[a-]+$",
      "^(?!\\.)(?!.*\\.\\.)[a.]+$", "^(?=a)[ab]{2}$", "^(?=.*b)(?!.*ab).{1,3}$", "(?!a)b", "^[^\\W\\d]*$",
      "^(a(b|-)?)+$", "^\\.a\\-$", "^a{1,2}?$", "^[\\]a]$", "^[\\x61-\\x62]+$", "^\\u0061$",
      "^[a\\-b]$", "^\\S\\s?$", "^\\D\\W$", "^.$",
      // Lookaheads that can never hold (an empty automaton must stay empty
      // where it is embedded, not become the empty string).
      "^(?=a)b", "^x(?=a)b$", "^(?=.*\\d)[a-z]+$", "^(?!a)a", "^a(?=b)(?!b)",
      // A lookahead ending with $: the rest is exactly its body.
      "^(?=.{2}$)", "^(?!.{3}$)[a.-]*$", "(?=a$)", "^(?=[ab]{2}$).*", "^a(?!b.$)", "^(?=(?:a|b)$).$",
  };
  const std::vector<std::string> strings = all_strings("ab.-0 ", 4);
  for (const std::string& p : patterns) {
    const StringDfa d = dfa_of(p);
    const auto g = d.empty() ? nullptr : grammar_of(d);  // an empty language has no grammar (a 400 above)
    const std::regex re(p, std::regex::ECMAScript);
    for (const std::string& s : strings) {
      INFO("pattern " << p << " string \"" << s << "\"");
      const bool expected = oracle(re, s);
      CHECK(d.accepts(s) == expected);
      CHECK((g != nullptr && accepts(*g, json_text(s))) == expected);
    }
  }
}

TEST_CASE("string dfa: zod's uuid, e-mail and datetime patterns, on mutations of valid strings", "[grammar][pattern]") {
  // What zod 4's z.uuid(), z.email() and z.iso.datetime() send as "pattern"
  // (the openai SDK's zodResponseFormat passes them through).
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|"
       "00000000-0000-0000-0000-000000000000)$",
       {"123e4567-e89b-12d3-a456-426614174000", "00000000-0000-0000-0000-000000000000"}},
      {"^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$",
       {"tom.o'neil+x@mail.example.org", "a@b.co"}},
      {"^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|"
       "1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))T(?:(?:[01]"
       "\\d|2[0-3]):[0-5]\\d(?::[0-5]\\d(?:\\.\\d+)?)?(?:Z))$",
       {"2024-02-29T12:30:00Z", "2023-12-31T23:59:59.125Z", "2000-02-29T00:00Z"}},
  };
  std::mt19937 rng(7);
  const std::string chars = "0123456789abfAF-.@_'+:TZxy ";
  for (const auto& [pattern, valid] : cases) {
    const StringDfa d = dfa_of(pattern);
    const auto g = grammar_of(d);
    const std::regex re(pattern, std::regex::ECMAScript);
    int n_accepted = 0;
    for (const std::string& v : valid) {
      for (int trial = 0; trial < 3000; ++trial) {
        std::string s = v;
        for (int k = int(rng() % 3); k >= 0; --k) {  // 1..3 edits
          const size_t at = rng() % (s.size() + 1);
          const char c = chars[rng() % chars.size()];
          switch (rng() % 3) {
            case 0: if (at < s.size()) s[at] = c; break;
            case 1: s.insert(s.begin() + long(at), c); break;
            default: if (at < s.size()) s.erase(at, 1); break;
          }
        }
        if (trial == 0) s = v;
        INFO("pattern " << pattern << " string \"" << s << "\"");
        const bool expected = oracle(re, s);
        n_accepted += expected ? 1 : 0;
        REQUIRE(d.accepts(s) == expected);
        REQUIRE(accepts(*g, json_text(s)) == expected);
      }
    }
    CHECK(n_accepted > 50);  // the mutations reach both sides of the pattern
  }
}

TEST_CASE("string dfa: what std::regex refuses but JavaScript accepts", "[grammar][pattern]") {
  // Annex B: a '{' that starts no count is a literal; named groups (ES2018).
  const StringDfa brace = dfa_of("^a{$");
  CHECK(brace.accepts("a{"));
  CHECK_FALSE(brace.accepts("a"));
  const StringDfa named = dfa_of("^(?<x>a|b)c$");
  CHECK(named.accepts("ac"));
  CHECK(named.accepts("bc"));
  CHECK_FALSE(named.accepts("c"));
  CHECK(dfa_of("^\\cJ?x$").accepts("x"));  // \cJ: a control character, never written
}

TEST_CASE("string dfa: a negative lookahead of a character outside the alphabet still excludes it", "[grammar][pattern]") {
  // (?!é): é is in kOther only partly; the body's automaton takes all of
  // kOther, so its complement lets no é through (nor any other kOther).
  for (const char* p : {"^(?!\xC3\xA9).$", "^(?!\\u00e9).$", "^(?![\xC3\xA9\xC3\xA8]).$"}) {
    const StringDfa d = dfa_of(p);
    INFO(p);
    CHECK_FALSE(d.accepts("\xC3\xA9"));
    CHECK(d.accepts("a"));
  }
  CHECK(dfa_of("^(?=[\xC3\xA9" "a]).$").accepts("a"));  // positive: the sure part
  // \c in a class: \c_ is U+001F and \c1 U+0011 (Annex B), controls never written.
  for (const char* p : {"^[\\c_]$", "^[\\c1]$"}) CHECK(dfa_of(p).empty());
  const StringDfa ca = dfa_of("^[\\c_a]$");
  CHECK(ca.accepts("a"));
  CHECK_FALSE(ca.accepts("\\"));
  CHECK_FALSE(ca.accepts("c"));
  CHECK_FALSE(ca.accepts("_"));
}

TEST_CASE("string dfa: intersections with lengths and complements", "[grammar][pattern]") {
  const StringDfa word = dfa_of("^[a-c]+$");
  Result<StringDfa> short_words = word.intersect(StringDfa::length_range(2, 3));
  REQUIRE(short_words.is_ok());
  Result<StringDfa> no_a = word.intersect(dfa_of("a"), true);  // words without an a
  REQUIRE(no_a.is_ok());
  for (const std::string& s : all_strings("abcd", 5)) {
    INFO(s);
    const bool is_word = !s.empty() && s.find('d') == std::string::npos;
    CHECK(short_words->accepts(s) == (is_word && s.size() >= 2 && s.size() <= 3));
    CHECK(no_a->accepts(s) == (is_word && s.find('a') == std::string::npos));
  }
  const StringDfa unbounded = StringDfa::length_range(3, -1);
  CHECK_FALSE(unbounded.accepts("ab"));
  CHECK(unbounded.accepts("abcdefgh"));
  CHECK(unbounded.accepts("\xC3\xA9xy"));  // é counts as one character
  CHECK(word.intersect(dfa_of("^d$"))->empty());
}

TEST_CASE("string dfa: characters outside the alphabet are left out, never let in", "[grammar][pattern]") {
  const StringDfa any = dfa_of("^.$");
  CHECK(any.accepts("\xC3\xA9"));            // é
  CHECK(any.accepts("\xE2\x82\xAC"));        // €
  CHECK_FALSE(any.accepts("\xE2\x80\xA8"));  // U+2028, a line terminator . does not match
  CHECK_FALSE(any.accepts("\n"));
  CHECK_FALSE(any.accepts("\xC2\xA0"));      // U+00A0: never written (a \s space)
  CHECK_FALSE(any.accepts("\xF0\x9F\x98\x80"));  // U+1F600: one . with the u flag, two without: never written
  const auto any_g = grammar_of(any);
  CHECK(accepts(*any_g, "\"\xC3\xA9\""));
  CHECK(accepts(*any_g, "\"\xEF\xBF\xBD\""));              // U+FFFD, the last of the plane kOther covers
  CHECK_FALSE(accepts(*any_g, "\"\xF0\x9F\x98\x80\""));   // the grammar writes no U+1F600 either
  CHECK_FALSE(accepts(*any_g, "\"\xE2\x80\xA8\""));
  CHECK(dfa_of("^[^a]$").accepts("\xC3\xA9"));
  CHECK_FALSE(dfa_of("^[^\xC3\xA9]$").accepts("\xC3\xA8"));  // a class naming a non-ASCII character: not kOther
  CHECK(dfa_of("^\xC3\xA9$").empty());                        // that character alone: nothing the alphabet writes
  CHECK(dfa_of("^\\S$").accepts("\xC3\xA9"));
  CHECK_FALSE(dfa_of("^\\s$").accepts("\xC3\xA9"));
  CHECK(dfa_of("^a\\nb$").empty());  // a control character is never written
  // The grammar writes a non-ASCII character as raw UTF-8 and " and \ as their escapes.
  const auto g = grammar_of(dfa_of("^[^a]\"\\\\$"));
  CHECK(accepts(*g, "\"\xC3\xA9\\\"\\\\\""));
  CHECK_FALSE(accepts(*g, "\"a\\\"\\\\\""));
}

TEST_CASE("string dfa: what cannot be an automaton here is refused by name", "[grammar][pattern]") {
  CHECK_THAT(refusal("(?<=a)b"), Catch::Contains("lookbehind"));
  CHECK_THAT(refusal("^(?!a|b$)"), Catch::Contains("several alternatives"));
  CHECK_THAT(refusal("(a)\\1"), Catch::Contains("backreferences"));
  CHECK_THAT(refusal("\\bword"), Catch::Contains("word boundary"));
  CHECK_THAT(refusal("^(?:(?!a)b)*$"), Catch::Contains("top-level alternative"));
  CHECK_THAT(refusal("^a{1001}$"), Catch::Contains("above 1000"));
  CHECK_THAT(refusal("^a{3,2}$"), Catch::Contains("out of order"));
  CHECK_THAT(refusal("a^b"), Catch::Contains("^ and $"));
  CHECK_THAT(refusal("^[b-a]$"), Catch::Contains("out of order"));
  CHECK_THAT(refusal("^(ab"), Catch::Contains("missing )"));
  CHECK_THAT(refusal("a)"), Catch::Contains("unmatched )"));
  CHECK_THAT(refusal("^[ab$"), Catch::Contains("missing ]"));
  CHECK_THAT(refusal("^*a$"), Catch::Contains("nothing to repeat"));
  CHECK_THAT(refusal("\\p{L}"), Catch::Contains("property"));
  CHECK_THAT(refusal("^\xff$"), Catch::Contains("UTF-8"));
  // (a|b)*a(a|b){n}: the n+1'th character from the end is an a; its DFA
  // needs 2^(n+1) states (the classic worst case of the subset construction).
  CHECK_THAT(refusal("^(a|b)*a(a|b){16}$"), Catch::Contains("states"));
  CHECK(dfa_of("^(a|b)*a(a|b){8}$").n_states() == 512);
}

TEST_CASE("string dfa: the work budget refuses what would take long, shared across calls", "[grammar][pattern]") {
  DfaBudget small{1000};
  Result<StringDfa> d = StringDfa::from_pattern("^[a-z]{0,500}$", &small);
  REQUIRE_FALSE(d.is_ok());
  CHECK_THAT(d.status().message(), Catch::Contains("too complex"));
  // The same pattern within a default budget; its states count characters.
  DfaBudget shared;
  const size_t before = shared.left;
  Result<StringDfa> ok = StringDfa::from_pattern("^[a-z]{0,500}$", &shared);
  REQUIRE(ok.is_ok());
  CHECK(ok->n_states() == 501);
  CHECK(shared.left < before);  // charged
  // A minimization past its share keeps the automaton correct, unminimized.
  DfaBudget tight{size_t(4) << 20};
  Result<StringDfa> chain = StringDfa::from_pattern("^(?:[a-z]{0,1000}[0-9]{0,1000})$", &tight);
  if (chain.is_ok()) {
    CHECK(chain->accepts(std::string(1000, 'q') + std::string(1000, '7')));
    CHECK_FALSE(chain->accepts(std::string(1001, 'q')));
    CHECK_FALSE(chain->accepts("7q"));
  }
}
