// Token masks: on a hand-made vocabulary, the allowed sets worked out by
// hand; on a larger random one, the trie walk against feeding every token
// on its own; the cache; and JSON documents drawn at random under the JSON
// grammar, each parsed by nlohmann::json (an independent parser).
#include <random>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/grammar/json_grammar.h"
#include "engine/grammar/token_mask.h"
#include "tests/grammar/grammar_test_util.h"

using namespace larder;
using namespace larder::testing;

namespace {

std::vector<int32_t> allowed(const TokenMask& m, int n_vocab) {
  std::vector<int32_t> out;
  for (int32_t id = 0; id < n_vocab; ++id) {
    if (mask_allows(m, id)) out.push_back(id);
  }
  return out;
}

// Feeds a token's bytes on its own: the reference the trie walk must equal.
bool token_fits(const CompiledGrammar& g, const GrammarState& st, const std::string& bytes) {
  if (bytes.empty()) return false;
  GrammarState s = st;
  for (char c : bytes) {
    s = grammar_advance(g, s, uint8_t(c));
    if (s.empty()) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("token mask: a hand-made vocabulary under a small grammar", "[grammar]") {
  //                               0    1    2     3     4    5      6           7       8   9
  const std::vector<std::string> vocab{"a", "b", "aa", "ab", "{", "\"", "\xCE\xB1", "\xCE", "", "ba"};
  TokenTrie trie(vocab);
  CHECK(trie.n_vocab() == 10);
  auto g = compile(R"(root ::= "a"+ "b" [\u03B1-\u03C9]?)");
  GrammarState st = grammar_start(*g);
  // First: "a" and "aa" (more a's may follow), "ab" (a then b): yes; "b"
  // needs an a first; "{", "\"", Greek: no; the empty control token never.
  CHECK(allowed(compute_token_mask(*g, trie, st), 10) == std::vector<int32_t>{0, 2, 3});
  st = feed(*g, "aa");
  CHECK(allowed(compute_token_mask(*g, trie, st), 10) == std::vector<int32_t>{0, 1, 2, 3});
  // After "ab": a Greek letter, whole (6) or its first byte (7, 0xCE:
  // code points 0x380..0x3BF include alpha); "ba" no.
  st = feed(*g, "ab");
  CHECK(grammar_can_end(st));
  CHECK(allowed(compute_token_mask(*g, trie, st), 10) == std::vector<int32_t>{6, 7});
  // After "ab" + 0xCE: no token starts with a continuation byte here.
  st = feed(*g, "ab\xCE");
  CHECK_FALSE(grammar_can_end(st));
  CHECK(allowed(compute_token_mask(*g, trie, st), 10).empty());
  // Done: nothing may follow.
  st = feed(*g, "ab\xCE\xB1");
  CHECK(grammar_is_done(st));
  CHECK(allowed(compute_token_mask(*g, trie, st), 10).empty());
}

TEST_CASE("token mask: the trie walk equals feeding each token alone (random vocabulary, JSON)", "[grammar]") {
  std::mt19937 rng(11);
  const std::string alphabet = "{}[]\":,.-+eE0123456789 \n\ttrufalsn\\/ab\xCE\xB1xyz";
  std::vector<std::string> vocab;
  for (int i = 0; i < 3000; ++i) {
    std::string t;
    const int len = 1 + int(rng() % 5);
    for (int j = 0; j < len; ++j) t += alphabet[rng() % alphabet.size()];
    vocab.push_back(t);
  }
  vocab.push_back("");  // a control token
  TokenTrie trie(vocab);
  auto g = compile(kJsonValueGbnf);
  // The interned-state walk too (a small table limit, so it is rebuilt on the way).
  GrammarMasker masker(g, std::make_shared<TokenTrie>(vocab), 4, 16);
  for (const char* prefix : {"", "{", "{\"a", "{\"a\":", "[1,", "[-0.5e", "\"\\u00", "{\"k\": [tr", "\"\xCE"}) {
    INFO("after " << prefix);
    GrammarState st = feed(*g, prefix);
    REQUIRE_FALSE(st.empty());
    const TokenMask m = compute_token_mask(*g, trie, st);
    int n_allowed = 0;
    for (int32_t id = 0; id < int32_t(vocab.size()); ++id) {
      INFO("token " << id << " \"" << vocab[size_t(id)] << "\"");
      CHECK(mask_allows(m, id) == token_fits(*g, st, vocab[size_t(id)]));
      n_allowed += mask_allows(m, id) ? 1 : 0;
    }
    CHECK(n_allowed > 0);
    CHECK(masker.mask(st) == m);
  }
  CHECK(masker.n_states() > 0);
}

TEST_CASE("token mask: masks are cached by state", "[grammar]") {
  const std::vector<std::string> vocab{"a", "b", "\"", "ab"};
  auto trie = std::make_shared<TokenTrie>(vocab);
  std::shared_ptr<const CompiledGrammar> g = compile(R"(root ::= "\"" [a-z]* "\"")");
  GrammarMasker masker(g, trie, 2);
  GrammarState st = feed(*g, "\"");
  const TokenMask first = masker.mask(st);
  // Inside the string every letter leads to the same state: a hit.
  CHECK(masker.mask(feed(*g, "\"ab")) == first);
  CHECK(masker.misses() == 1);
  CHECK(masker.hits() == 1);
  CHECK(allowed(first, 4) == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(allowed(masker.mask(grammar_start(*g)), 4) == std::vector<int32_t>{2});
  CHECK(masker.misses() == 2);
}

TEST_CASE("json grammar: random walks give documents nlohmann::json parses", "[grammar]") {
  // Tokens: every printable ASCII character alone, and some multi-byte pieces.
  std::vector<std::string> vocab;
  for (int c = 0x20; c < 0x7F; ++c) vocab.push_back(std::string(1, char(c)));
  for (const char* t : {"\n", "\t", "true", "false", "null", "\":", "\",\"", "{\"", "\"}", "[]", "{}", "12", "0.",
                        "e+", "\\n", "\\u00e9", "\xC3\xA9", "\xF0\x9F\xA6\x99", ", ", "]}", "\xE4\xB8"}) {
    vocab.push_back(t);
  }
  // Byte tokens for continuation bytes, as byte-fallback vocabularies have,
  // so that "\xE4\xB8" (two bytes of a three-byte code point) can finish.
  for (int b = 0x80; b < 0xC0; ++b) vocab.push_back(std::string(1, char(b)));
  TokenTrie trie(vocab);
  auto g = compile(kJsonObjectGbnf);
  std::mt19937 rng(5);
  int n_docs = 0;
  for (int run = 0; run < 200; ++run) {
    GrammarState st = grammar_start(*g);
    std::string text;
    for (int step = 0; step < 400; ++step) {
      if (grammar_can_end(st) && (grammar_is_done(st) || rng() % 4 == 0)) break;
      const std::vector<int32_t> ok = allowed(compute_token_mask(*g, trie, st), int(vocab.size()));
      REQUIRE_FALSE(ok.empty());  // never a dead end
      const std::string& t = vocab[size_t(ok[rng() % ok.size()])];
      text += t;
      for (char c : t) st = grammar_advance(*g, st, uint8_t(c));
      REQUIRE_FALSE(st.empty());
    }
    if (!grammar_can_end(st)) continue;  // ran out of steps inside a document
    INFO(text);
    const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    CHECK_FALSE(doc.is_discarded());
    CHECK(doc.is_object());
    ++n_docs;
  }
  CHECK(n_docs >= 50);
}

TEST_CASE("json grammar: hand-picked documents in and out", "[grammar]") {
  auto g = compile(kJsonObjectGbnf);
  for (const char* ok : {"{}", "{ }", "{\"a\":1}", "{\"a\": [1, -2.5e+3, true, null, {\"b\": \"\\u00e9\\n\"}]}",
                         "{\"\xC3\xA9\": \"\xF0\x9F\xA6\x99\"}", "{\n\t\"x\" : 0\n}"}) {
    INFO(ok);
    CHECK(accepts(*g, ok));
  }
  for (const char* bad : {"[]", "{\"a\":}", "{\"a\":01}", "{\"a\":1,}", "{'a':1}", "{\"a\":tru}", "{\"a\":\"\x01\"}",
                          "{\"a\":\"\\x\"}", "{\"a\":1}}"}) {
    INFO(bad);
    CHECK_FALSE(accepts(*g, bad));
  }
}
