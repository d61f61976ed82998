// UTF-8 sanitizing and the incremental detokenizer. Expected replacements
// follow the Unicode Standard's "U+FFFD substitution of maximal subparts"
// (ch. 3.9, Table 3-8 and the examples around it), worked out by hand from
// Table 3-7 (well-formed byte sequences).
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/test_models.h"

namespace larder {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

// Minimal vocab: 0 <unk>, 1 <s>, 2 </s>, 3..258 byte tokens, 259 "▁", 260 "▁c".
std::unique_ptr<Tokenizer> byte_vocab() {
  VocabData v;
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    v.tokens.push_back(buf);
    v.types.push_back(TokenType::kByte);
  }
  v.tokens.push_back("\xE2\x96\x81");
  v.types.push_back(TokenType::kNormal);
  v.tokens.push_back("\xE2\x96\x81" "c");
  v.types.push_back(TokenType::kNormal);
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  auto tok = Tokenizer::from_vocab(std::move(v));
  REQUIRE(tok.is_ok());
  return std::move(tok).value();
}

int32_t byte_id(unsigned char b) { return 3 + b; }

}  // namespace

TEST_CASE("utf8_sanitize replaces maximal ill-formed subparts", "[tokenizer][utf8]") {
  struct Case {
    std::string in;
    std::string out;
  };
  const Case cases[] = {
      {"plain ascii", "plain ascii"},
      {"caf\xC3\xA9", "caf\xC3\xA9"},                               // é = C3 A9, valid
      {"\xF0\x9F\x99\x82", "\xF0\x9F\x99\x82"},                     // 🙂, valid
      {"\xC3" "A", kFffd + "A"},                                    // lead byte then ASCII
      {"\xE0\x80\x80", kFffd + kFffd + kFffd},                      // overlong: E0 needs A0..BF next
      {"\xED\xA0\x80", kFffd + kFffd + kFffd},                      // surrogate: ED needs 80..9F next
      {"\xF4\x90\x80\x80", kFffd + kFffd + kFffd + kFffd},          // above U+10FFFF
      {"\xE2\x82" "A", kFffd + "A"},                                // truncated 3-byte: one FFFD
      {"\xFF\xC0\x80", kFffd + kFffd + kFffd},                      // never-valid bytes
      {"\x80" "a", kFffd + "a"},                                    // stray continuation byte
      {"\xF0\x9F\x99", kFffd},                                      // incomplete at the end (final)
  };
  for (const Case& c : cases) {
    std::string out;
    CHECK(utf8_sanitize(c.in, /*final=*/true, out) == c.in.size());
    CHECK(out == c.out);
    CHECK(utf8_is_valid(out));
    CHECK(utf8_is_valid(c.in) == (c.in == c.out));
  }
  // Not final: the incomplete tail is left unconsumed.
  std::string out;
  CHECK(utf8_sanitize("a\xF0\x9F\x99", /*final=*/false, out) == 1);
  CHECK(out == "a");
}

TEST_CASE("incremental detokenizer never splits a character", "[tokenizer][utf8]") {
  auto tok = byte_vocab();
  // "🙂 café" as pieces: ▁ (prefix), F0 9F 99 82, ▁c, a, f, C3 A9.
  const std::vector<int32_t> ids = {259, byte_id(0xF0), byte_id(0x9F), byte_id(0x99), byte_id(0x82),
                                    260, byte_id('a'), byte_id('f'), byte_id(0xC3), byte_id(0xA9)};
  // After BOS the prefix space is dropped; the emoji appears only when its 4th byte arrives.
  IncrementalDetokenizer detok(*tok, /*prev_id=*/1);
  std::vector<std::string> chunks;
  for (int32_t id : ids) chunks.push_back(detok.push(id));
  chunks.push_back(detok.flush());
  const std::vector<std::string> expected = {
      "", "", "", "", "\xF0\x9F\x99\x82", " c", "a", "f", "", "\xC3\xA9", ""};
  CHECK(chunks == expected);
  std::string all;
  for (const auto& c : chunks) {
    CHECK(utf8_is_valid(c));
    all += c;
  }
  CHECK(all == "\xF0\x9F\x99\x82 caf\xC3\xA9");

  // Without a preceding BOS the prefix space is kept.
  IncrementalDetokenizer plain(*tok);
  std::string text;
  for (int32_t id : ids) text += plain.push(id);
  text += plain.flush();
  CHECK(text == " \xF0\x9F\x99\x82 caf\xC3\xA9");
}

TEST_CASE("incremental detokenizer replaces invalid bytes", "[tokenizer][utf8]") {
  auto tok = byte_vocab();
  IncrementalDetokenizer detok(*tok);
  CHECK(detok.push(byte_id(0xC3)).empty());        // held: may start é
  CHECK(detok.n_held_bytes() == 1);
  CHECK(detok.push(byte_id('A')) == kFffd + "A");  // C3 41 is ill-formed
  CHECK(detok.push(byte_id(0xFF)) == kFffd);       // FF is never valid
  CHECK(detok.push(byte_id(0xF0)).empty());
  CHECK(detok.push(byte_id(0x9F)).empty());
  CHECK(detok.flush() == kFffd);                   // incomplete tail at the end
  CHECK(detok.n_held_bytes() == 0);
  CHECK(detok.push(1).empty());                    // control token: no text
  CHECK(detok.push(-7).empty());                   // invalid id: no text
}

TEST_CASE("streaming random bytes equals sanitizing the whole text", "[tokenizer][utf8]") {
  auto tok = byte_vocab();
  std::mt19937 rng(1234);  // fixed seed: deterministic
  for (int round = 0; round < 200; ++round) {
    // Mostly bytes that form or break UTF-8 sequences, some ASCII.
    std::vector<int32_t> ids;
    std::string bytes;
    const int n = 1 + static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) {
      const unsigned char b = static_cast<unsigned char>(rng() % 3 == 0 ? 'a' + rng() % 26 : 0x80 + rng() % 128);
      ids.push_back(byte_id(b));
      bytes.push_back(static_cast<char>(b));
    }
    std::string whole;
    (void)utf8_sanitize(bytes, /*final=*/true, whole);
    IncrementalDetokenizer detok(*tok);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string chunk = detok.push(id);
      REQUIRE(utf8_is_valid(chunk));
      streamed += chunk;
    }
    streamed += detok.flush();
    CHECK(streamed == whole);
  }
}

TEST_CASE("streaming the real tokens of \"🙂 café\"", "[tokenizer][utf8][model]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto gguf = GgufFile::open(path);
  REQUIRE(gguf.is_ok());
  auto tok = Tokenizer::from_gguf(**gguf);
  REQUIRE(tok.is_ok());
  const std::string text = "\xF0\x9F\x99\x82 caf\xC3\xA9";
  // llama.cpp (node-llama-cpp 3.21.1) tokenizes it as 410, 243, 162, 156, 133, 280, 412, 431, 485.
  const std::vector<int32_t> ids = (*tok)->encode(text, /*add_bos=*/true, false);
  REQUIRE(ids == std::vector<int32_t>{1, 410, 243, 162, 156, 133, 280, 412, 431, 485});
  IncrementalDetokenizer detok(**tok);
  std::string all;
  int n_nonempty = 0;
  for (int32_t id : ids) {
    const std::string chunk = detok.push(id);
    CHECK(utf8_is_valid(chunk));
    n_nonempty += chunk.empty() ? 0 : 1;
    all += chunk;
  }
  all += detok.flush();
  CHECK(all == text);
  // BOS, "▁" (dropped after BOS) and the emoji's first three bytes give
  // nothing; the emoji, " c", "a", "f", "é" give one chunk each.
  CHECK(n_nonempty == 5);
}

}  // namespace larder
