// The masker's fast paths against the reference walk: the trie's subtree
// summaries against a brute-force scan of the vocabulary; masks with
// subtree skipping and with shared tables against compute_token_mask on
// every state of many random walks; which maskers share tables.
#include <algorithm>
#include <random>
#include <set>
#include <thread>

#include <catch2/catch.hpp>

#include "engine/grammar/json_grammar.h"
#include "engine/grammar/token_mask.h"
#include "tests/grammar/grammar_test_util.h"

using namespace larder;
using namespace larder::testing;

namespace {

// A vocabulary shaped like a BPE one: every byte alone, words of letters
// (many sharing prefixes, so subtrees have summaries), words with a space
// in front, JSON punctuation runs, digits, escapes and UTF-8 pieces (whole
// and split code points).
std::vector<std::string> test_vocab(uint32_t seed, int n_words) {
  std::mt19937 rng(seed);
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, char(b)));
  const std::string letters = "abcdelmn";
  for (int i = 0; i < n_words; ++i) {
    std::string w = rng() % 3 == 0 ? " " : "";
    const int len = 2 + int(rng() % 5);
    for (int j = 0; j < len; ++j) w += letters[rng() % letters.size()];
    switch (rng() % 100) {  // a few words end otherwise
      case 0: w += "\""; break;
      case 1: w += "\":"; break;
      case 2: w += "\xC3\xA9"; break;  // é
      case 3: w += "\xE4\xB8"; break;  // the first two bytes of a CJK character
      default: break;
    }
    v.push_back(w);
  }
  for (const char* t : {"{\"", "\":", "\",\"", "\"}", "[]", "{}", "12", "0.", "e+", "\\n", "\\u00e9", "true", "false",
                        "null", ", ", "]}", "\n- ", "- ", "\xE2\x80\xA8", "\xF0\x9F\xA6\x99", "\xC3\xA9t\xC3\xA9"}) {
    v.push_back(t);
  }
  v.push_back("");  // a control token
  return v;
}

std::vector<int32_t> allowed(const TokenMask& m, int n_vocab) {
  std::vector<int32_t> out;
  for (int32_t id = 0; id < n_vocab; ++id) {
    if (mask_allows(m, id)) out.push_back(id);
  }
  return out;
}

}  // namespace

TEST_CASE("token trie: subtree ranges and byte sets equal a scan of the vocabulary", "[grammar]") {
  const std::vector<std::string> vocab = test_vocab(3, 2000);
  TokenTrie trie(vocab);
  // Every node's prefix, by walking the trie from the root.
  std::vector<std::string> prefix(trie.n_nodes());
  std::vector<uint32_t> work{0};
  while (!work.empty()) {
    const uint32_t i = work.back();
    work.pop_back();
    const TokenTrie::Node& n = trie.node(i);
    for (uint32_t c = 0; c < n.n_children; ++c) {
      const TokenTrie::Edge& e = trie.edge(n.first_child + c);
      prefix[e.child] = prefix[i] + char(e.byte);
      work.push_back(e.child);
    }
  }
  int n_summaries = 0;
  for (uint32_t i = 0; i < trie.n_nodes(); ++i) {
    // The scan: tokens that start with the prefix, and the bytes after it.
    std::set<int32_t> expect;
    TokenTrie::ByteSet bytes{};
    for (int32_t id = 0; id < int32_t(vocab.size()); ++id) {
      const std::string& t = vocab[size_t(id)];
      if (t.empty() || t.compare(0, prefix[i].size(), prefix[i]) != 0) continue;
      expect.insert(id);
      for (size_t k = prefix[i].size(); k < t.size(); ++k) {
        const uint8_t b = uint8_t(t[k]);
        bytes[b >> 6] |= uint64_t(1) << (b & 63);
      }
    }
    std::set<int32_t> got;
    for (uint32_t t = trie.node(i).first_token; t < trie.subtree_end(i); ++t) got.insert(trie.token(t));
    INFO("node " << i << " prefix \"" << prefix[i] << "\"");
    REQUIRE(got == expect);
    REQUIRE(trie.subtree_end(i) - trie.node(i).first_token == expect.size());  // no token twice
    const TokenTrie::ByteSet* summary = trie.subtree_bytes(i);
    CHECK((summary != nullptr) == (expect.size() >= TokenTrie::kSummaryTokens));
    if (summary != nullptr) {
      CHECK(*summary == bytes);
      ++n_summaries;
    }
  }
  CHECK(n_summaries > 50);
}

TEST_CASE("token mask: subtree skipping and shared tables give the reference masks on random walks", "[grammar]") {
  const std::vector<std::string> vocab = test_vocab(7, 3000);
  auto trie = std::make_shared<const TokenTrie>(vocab);
  const char* list_gbnf = "root ::= item+\nitem ::= \"- \" [^\\r\\n\\x0b\\x0c\\x85\\u2028\\u2029]+ \"\\n\"\n";
  const char* record_gbnf =
      "root ::= \"{\" ws \"\\\"name\\\":\" ws str \",\" ws \"\\\"tags\\\":\" ws \"[\" ( str ( \",\" ws str )* )? \"]\" "
      "ws \"}\"\nstr ::= \"\\\"\" [^\"\\\\]{0,30} \"\\\"\"\nws ::= [ ]?\n";
  for (const std::string_view gbnf : {kJsonObjectGbnf, kJsonValueGbnf, std::string_view(list_gbnf),
                                      std::string_view(record_gbnf)}) {
    INFO(gbnf);
    auto g = compile(gbnf);
    std::mt19937 rng(42);
    size_t n_checked = 0, n_closures = 0;
    for (int walk = 0; walk < 12; ++walk) {
      // A fresh masker per walk, as per request: the shared ones reuse the
      // earlier walks' masks; small limits so the tables are rebuilt and
      // masks evicted on the way.
      GrammarMasker::Options shared;
      shared.capacity = 8;
      shared.max_states = 40;
      GrammarMasker::Options own = shared;
      own.share = false;
      GrammarMasker fast_shared(compile(gbnf), trie, shared);
      GrammarMasker fast_own(g, trie, own);
      GrammarState st = grammar_start(*g);
      for (int step = 0; step < 60 && !grammar_is_done(st); ++step) {
        const TokenMask ref = compute_token_mask(*g, *trie, st);
        REQUIRE(fast_own.mask(st) == ref);
        REQUIRE(fast_shared.mask(st) == ref);
        ++n_checked;
        const std::vector<int32_t> ok = allowed(ref, int(vocab.size()));
        REQUIRE_FALSE(ok.empty());
        const std::string& t = vocab[size_t(ok[rng() % ok.size()])];
        for (char c : t) st = grammar_advance(*g, st, uint8_t(c));
        REQUIRE_FALSE(st.empty());
      }
      n_closures += fast_own.closure_walks();
    }
    CHECK(n_checked > 100);
    CHECK(n_closures > 0);  // the fast path ran
  }
}

TEST_CASE("token mask: inside a string the closure allows letter tokens at once", "[grammar]") {
  //                                 0     1    2     3      4      5      6       7       8       9       10
  const std::vector<std::string> vocab{"\"", "a", "ab", "abc", "abd", "abe", "abcd", "abce", "ab\"", "\xC3\xA9", "a\xC3"};
  auto trie = std::make_shared<const TokenTrie>(vocab);
  std::shared_ptr<const CompiledGrammar> g = compile(R"(root ::= "\"" [a-z]* "\"")");
  GrammarMasker::Options o;
  o.share = false;
  GrammarMasker masker(g, trie, o);
  const GrammarState inside = feed(*g, "\"");
  // Letters stay inside, the quote (alone or after letters) closes the
  // string; no UTF-8: [a-z] has no code point >= 0x80.
  CHECK(allowed(masker.mask(inside), int(vocab.size())) == std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(masker.closure_walks() == 1);
  // The class of the closure: the bytes a-z; the tokens made of them, the
  // edges that leave it: the root's '"', 0xC3 and "ab"'s '"', "a"'s 0xC3.
  TokenTrie::ByteSet letters{};
  for (int b = 'a'; b <= 'z'; ++b) letters[size_t(b) >> 6] |= uint64_t(1) << (b & 63);
  auto c = trie->closure(letters);
  CHECK(allowed(c->closed, int(vocab.size())) == std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7});
  std::vector<uint8_t> left;
  for (const auto& [child, byte] : c->frontier) left.push_back(byte);
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<uint8_t>{'"', '"', 0xC3, 0xC3});
  // With the lead byte of é (0xC3): "é" and "a" + 0xC3 join the closed tokens.
  TokenTrie::ByteSet with_c3 = letters;
  with_c3[0xC3 >> 6] |= uint64_t(1) << (0xC3 & 63);
  auto u = trie->closure(with_c3);
  CHECK(allowed(u->closed, int(vocab.size())) == std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 9, 10});
  CHECK(u->frontier.size() == 2);
  // At the start only the quote opens the string: no byte loops there, but
  // a chain (the quote, then letters for ever).
  CHECK(allowed(masker.mask(grammar_start(*g)), int(vocab.size())) == std::vector<int32_t>{0});
  CHECK(masker.closure_walks() == 2);
}

TEST_CASE("token mask: a subtree whose bytes all loop is allowed whole", "[grammar]") {
  // The start state's chain takes the '"' branch; the walk from its exit
  // "'" reaches the single-quoted string, where every byte below loops.
  const std::vector<std::string> vocab{"\"", "'", "'a", "'ab", "'abc", "'abd", "'abe", "'b", "'bc", "'bd", "x"};
  auto trie = std::make_shared<const TokenTrie>(vocab);
  std::shared_ptr<const CompiledGrammar> g = compile(R"(root ::= "\"" [a-z]* "\"" | "'" [a-z]* "'")");
  GrammarMasker::Options o;
  o.share = false;
  GrammarMasker masker(g, trie, o);
  CHECK(allowed(masker.mask(grammar_start(*g)), int(vocab.size())) ==
        std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(masker.skipped_subtrees() == 1);
  CHECK(masker.closure_walks() == 1);
}

TEST_CASE("token mask: a bounded string is a chain of states with an end", "[grammar]") {
  //                                 0     1    2     3      4       5      6       7        8
  const std::vector<std::string> vocab{"\"", "a", "ab", "abc", "abcd", "a\"", "abc\"", "abcd\"", "\xC3\xA9"};
  auto trie = std::make_shared<const TokenTrie>(vocab);
  std::shared_ptr<const CompiledGrammar> g = compile(R"(root ::= "\"" [a-z]{0,3} "\"")");
  GrammarMasker::Options o;
  o.share = false;
  GrammarMasker masker(g, trie, o);
  // Up to three letters, then the quote: by hand.
  CHECK(allowed(masker.mask(feed(*g, "\"")), int(vocab.size())) == std::vector<int32_t>{0, 1, 2, 3, 5, 6});
  CHECK(allowed(masker.mask(feed(*g, "\"a")), int(vocab.size())) == std::vector<int32_t>{0, 1, 2, 5});
  CHECK(allowed(masker.mask(feed(*g, "\"ab")), int(vocab.size())) == std::vector<int32_t>{0, 1, 5});
  CHECK(allowed(masker.mask(feed(*g, "\"abc")), int(vocab.size())) == std::vector<int32_t>{0});
  CHECK(masker.closure_walks() >= 3);
}

TEST_CASE("token mask: maskers share tables for equal grammars on the same trie", "[grammar]") {
  const std::vector<std::string> vocab = test_vocab(9, 500);
  auto trie = std::make_shared<const TokenTrie>(vocab);
  const GrammarState start = grammar_start(*compile(kJsonObjectGbnf));
  {
    GrammarMasker a(compile(kJsonObjectGbnf), trie);
    a.mask(start);
    CHECK(a.misses() == 1);
  }
  // Compiled again (another request): the first masker is gone, its masks are not.
  GrammarMasker b(compile(kJsonObjectGbnf), trie);
  b.mask(start);
  CHECK(b.misses() == 0);
  CHECK(b.hits() == 1);
  // Another grammar, or another trie: no sharing.
  auto other = compile(kJsonValueGbnf);
  CHECK_FALSE(other->same_as(*compile(kJsonObjectGbnf)));
  CHECK(compile(kJsonObjectGbnf)->same_as(*compile(kJsonObjectGbnf)));
  CHECK(compile(kJsonObjectGbnf)->fingerprint() == compile(kJsonObjectGbnf)->fingerprint());
  GrammarMasker c(other, trie);
  c.mask(grammar_start(*other));
  CHECK(c.misses() == 1);
  auto trie2 = std::make_shared<const TokenTrie>(vocab);
  GrammarMasker d(compile(kJsonObjectGbnf), trie2);
  d.mask(start);
  CHECK(d.misses() == 1);
  // The registry keeps the last kSharedTables grammars: after that many
  // others on trie2, the JSON-object tables of trie2 are gone.
  for (size_t i = 0; i < GrammarMasker::kSharedTables; ++i) {
    auto gi = compile("root ::= \"x\"{" + std::to_string(i + 1) + "}");
    GrammarMasker m(gi, trie2);
    m.mask(grammar_start(*gi));
  }
  GrammarMasker e(compile(kJsonObjectGbnf), trie2);
  e.mask(start);
  CHECK(e.misses() == 1);
}

TEST_CASE("token mask: maskers sharing tables on two threads give the reference masks", "[grammar]") {
  const std::vector<std::string> vocab = test_vocab(13, 1500);
  auto trie = std::make_shared<const TokenTrie>(vocab);
  auto g = compile(kJsonObjectGbnf);
  // The states after some prefixes, and their reference masks.
  std::vector<GrammarState> states;
  for (const char* p : {"", "{", "{\"a", "{\"ab\xC3", "{\"a\":", "{\"a\": [1", "{\"a\": [1, tr", "{\"a\": \"x\\u00"}) {
    states.push_back(feed(*g, p));
  }
  std::vector<TokenMask> ref;
  for (const GrammarState& st : states) ref.push_back(compute_token_mask(*g, *trie, st));
  std::vector<int> wrong(2, 0);
  auto run = [&](int t) {
    GrammarMasker::Options o;
    o.capacity = 3;  // evictions while the other thread reads
    for (int round = 0; round < 20; ++round) {
      // Compiled here without the test helper (REQUIRE is for the main thread).
      GrammarMasker m(std::make_shared<const CompiledGrammar>(*parse_gbnf(kJsonObjectGbnf)), trie, o);
      for (size_t i = 0; i < states.size(); ++i) {
        const size_t k = (i * (t + 1) + round) % states.size();
        if (m.mask(states[k]) != ref[k]) ++wrong[size_t(t)];
      }
    }
  };
  std::thread a(run, 0), b(run, 1);
  a.join();
  b.join();
  CHECK(wrong == std::vector<int>{0, 0});
}
