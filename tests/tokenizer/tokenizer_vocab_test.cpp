// Tokenizer on a small hand-made vocabulary: every expected id below was
// worked out by hand from the merge rule (highest score first, ties to the
// leftmost pair) and the byte-fallback rule, as noted next to each case.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace larder {
namespace {

using Ids = std::vector<int32_t>;

// ids: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF> (byte b = id b+3),
// 259 "▁" -5, 260 "a" -3, 261 "b" -3, 262 "c" -3, 263 "ab" -2, 264 "bc" -1.5,
// 265 "abc" -1, 266 "▁a" -4, 267 "aa" -2.5, 268 "<tool>" user-defined,
// 269 "<|im_end|>" control.
VocabData small_vocab(bool with_bytes = true) {
  VocabData v;
  auto add = [&](std::string text, float score, TokenType type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    // Without byte tokens the slots hold unused filler so the ids stay put.
    if (with_bytes) add(buf, 0, TokenType::kByte);
    else add("unused" + std::to_string(b), 0, TokenType::kUnused);
  }
  add("\xE2\x96\x81", -5, TokenType::kNormal);  // 259 "▁"
  add("a", -3, TokenType::kNormal);
  add("b", -3, TokenType::kNormal);
  add("c", -3, TokenType::kNormal);
  add("ab", -2, TokenType::kNormal);
  add("bc", -1.5f, TokenType::kNormal);
  add("abc", -1, TokenType::kNormal);
  add("\xE2\x96\x81" "a", -4, TokenType::kNormal);  // 266 "▁a"
  add("aa", -2.5f, TokenType::kNormal);
  add("<tool>", 0, TokenType::kUserDefined);
  add("<|im_end|>", 0, TokenType::kControl);
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  return v;
}

std::unique_ptr<Tokenizer> make(VocabData v) {
  auto tok = Tokenizer::from_vocab(std::move(v));
  REQUIRE(tok.is_ok());
  return std::move(tok).value();
}

}  // namespace

TEST_CASE("merges follow scores and break ties to the left", "[tokenizer]") {
  auto tok = make(small_vocab());
  REQUIRE(tok->n_vocab() == 270);
  struct Case {
    const char* text;
    Ids expected;
  };
  const Case cases[] = {
      // "▁abc": bc (-1.5) beats ab (-2) and ▁a (-4); then a+bc = abc (-1); "▁abc" is no piece.
      {"abc", {259, 265}},
      // "▁ab▁ab": both ab (-2) beat both ▁a (-4); ▁ab and ab▁ are no pieces.
      {"ab ab", {259, 263, 259, 263}},
      // "▁aaa": aa at (1,2) and (2,3) tie at -2.5, the left one wins -> ▁ aa a; ▁+aa is no piece,
      // and the stale ▁a pair is skipped. (Right-first would have given ▁a, aa = 266, 267.)
      {"aaa", {259, 267, 260}},
      // "▁a": the ▁a piece.
      {"a", {266}},
      // "▁xé": x = 0x78 -> 123, é = C3 A9 -> 198, 172 (byte fallback, id = byte + 3).
      {"x\xC3\xA9", {259, 123, 198, 172}},
      // " " -> "▁▁": no "▁▁" piece.
      {" ", {259, 259}},
      // A tab is not a space: "▁a" then 0x09 -> 12.
      {"a\t", {266, 12}},
  };
  for (const Case& c : cases) {
    INFO("text: " << c.text);
    CHECK(tok->encode(c.text, /*add_bos=*/false, /*parse_special=*/false) == c.expected);
    Ids with_bos{1};
    with_bos.insert(with_bos.end(), c.expected.begin(), c.expected.end());
    CHECK(tok->encode(c.text, /*add_bos=*/true, /*parse_special=*/false) == with_bos);
  }
  // Empty text: no space prefix, only BOS if asked (SentencePiece: encode("") = []).
  CHECK(tok->encode("", true, true) == Ids{1});
  CHECK(tok->encode("", false, false).empty());
}

TEST_CASE("special tokens are parsed only when asked; user-defined always", "[tokenizer]") {
  auto tok = make(small_vocab());
  // parse_special: <s> -> 1, then "a" after a special token gets the space prefix -> ▁a = 266, </s> -> 2.
  CHECK(tok->encode("<s>a</s>", false, true) == Ids{1, 266, 2});
  CHECK(tok->encode("<s>a</s>", true, true) == Ids{1, 1, 266, 2});
  // Plain text: ▁ then bytes '<' 0x3C -> 63, 's' 0x73 -> 118, '>' 0x3E -> 65, a -> 260, '/' 0x2F -> 50.
  CHECK(tok->encode("<s>a</s>", false, false) == Ids{259, 63, 118, 65, 260, 63, 50, 118, 65});
  // User-defined <tool> (268) is cut out even without parse_special; "b" after it gets "▁" -> ▁, b.
  CHECK(tok->encode("a<tool>b", false, false) == Ids{266, 268, 259, 261});
  // <unk> text with parse_special -> the unknown token 0.
  CHECK(tok->encode("<unk>", false, true) == Ids{0});
}

TEST_CASE("byte fallback without byte tokens falls back to unk per byte", "[tokenizer]") {
  auto tok = make(small_vocab(/*with_bytes=*/false));
  // "▁xé": x has no piece and no byte token -> unk; é is two bytes -> two unk.
  CHECK(tok->encode("x\xC3\xA9", false, false) == Ids{259, 0, 0, 0});
}

TEST_CASE("add_eos appends EOS together with BOS", "[tokenizer]") {
  VocabData v = small_vocab();
  v.add_eos = true;
  auto tok = make(std::move(v));
  CHECK(tok->encode("a", true, false) == Ids{1, 266, 2});
  CHECK(tok->encode("a", false, false) == Ids{266});
}

TEST_CASE("token_to_piece, decode and end-of-generation", "[tokenizer]") {
  auto tok = make(small_vocab());
  CHECK(tok->token_to_piece(259) == " ");
  CHECK(tok->token_to_piece(266) == " a");
  CHECK(tok->token_to_piece(1).empty());                 // control
  CHECK(tok->token_to_piece(0) == "\xE2\x96\x85");       // unknown -> U+2585 like llama.cpp
  CHECK(tok->token_to_piece(3 + 0x41) == "A");           // <0x41>
  CHECK(tok->token_to_piece(3 + 0xC3) == "\xC3");        // a lone byte stays a raw byte
  CHECK(tok->token_to_piece(268) == "<tool>");           // user-defined: verbatim
  CHECK(tok->token_to_piece(-1).empty());
  CHECK(tok->token_to_piece(270).empty());
  const Ids ids{266, 263, 3 + 0x41, 9999};
  CHECK(tok->decode(ids) == " aabA");
  const Ids after_bos{1, 266, 259, 263};
  CHECK(tok->decode(after_bos) == " a ab");
  CHECK(tok->decode_text(after_bos) == "a ab");          // space right after BOS dropped once
  CHECK(tok->decode_text(Ids{266}, /*prev_id=*/1) == "a");
  CHECK(tok->decode_text(Ids{266}, /*prev_id=*/260) == " a");

  CHECK(tok->is_end_of_generation(2));     // EOS
  CHECK(tok->is_end_of_generation(269));   // <|im_end|> control
  CHECK_FALSE(tok->is_end_of_generation(1));
  CHECK_FALSE(tok->is_end_of_generation(266));
  CHECK_FALSE(tok->is_end_of_generation(-5));
  CHECK_FALSE(tok->is_end_of_generation(100000));
  CHECK(tok->find_token("<tool>") == 268);
  CHECK(tok->find_token("nope") == -1);
}

TEST_CASE("from_vocab rejects malformed vocabularies", "[tokenizer]") {
  auto expect_invalid = [](VocabData v, const char* what) {
    INFO(what);
    auto tok = Tokenizer::from_vocab(std::move(v));
    REQUIRE_FALSE(tok.is_ok());
    CHECK(tok.status().code() == StatusCode::kInvalidArgument);
  };
  expect_invalid(VocabData{}, "no tokens");
  {
    VocabData v = small_vocab();
    v.scores.pop_back();
    expect_invalid(std::move(v), "scores length");
  }
  {
    VocabData v = small_vocab();
    v.types.push_back(TokenType::kNormal);
    expect_invalid(std::move(v), "types length");
  }
  {
    VocabData v = small_vocab();
    v.bos_id = 270;
    expect_invalid(std::move(v), "bos out of range");
  }
  {
    VocabData v = small_vocab();
    v.eot_id = -2;
    expect_invalid(std::move(v), "eot negative");
  }
  {
    VocabData v = small_vocab();
    v.tokens[3] = "<0xZZ>";
    expect_invalid(std::move(v), "bad byte token text");
  }
  {
    VocabData v = small_vocab();
    v.bos_id = -1;  // add_bos stays true
    expect_invalid(std::move(v), "add_bos without bos");
  }
  {
    VocabData v = small_vocab();
    v.types[260] = static_cast<TokenType>(9);
    expect_invalid(std::move(v), "unknown token type");
  }
  // Scores and types may be left empty (all 0 / all normal).
  VocabData v;
  v.tokens = {"a", "b", "ab"};
  v.add_bos = false;
  v.add_space_prefix = false;
  auto tok = Tokenizer::from_vocab(std::move(v));
  REQUIRE(tok.is_ok());
  CHECK((*tok)->encode("abba", false, false) == Ids{2, 1, 0});  // ab (only bigram piece), b, a
}

}  // namespace larder
