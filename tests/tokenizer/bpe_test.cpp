// Byte-level BPE pieces that the reference corpus cannot reach: the GPT-2
// byte mapping (values from openai/gpt-2 encoder.py bytes_to_unicode, worked
// out by hand), ill-formed UTF-8 (no reference takes it: HF and
// node-llama-cpp take JS strings), streaming decode, and load errors.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/bpe.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"

namespace larder {
namespace {

std::unique_ptr<Tokenizer> llama3_tokenizer() {
  std::ifstream in(std::filesystem::path(__FILE__).parent_path() / "fixtures" / "bpe_llama3.json");
  if (!in) return nullptr;
  const auto f = nlohmann::json::parse(in);
  VocabData v;
  v.model = TokenizerModel::kBpe;
  const int n = f["n_vocab"].get<int>();
  v.tokens.resize(n);
  v.types.assign(n, TokenType::kUnused);
  for (int i = 0; i < n; ++i) v.tokens[i] = "\x01unused" + std::to_string(i);
  for (const auto& t : f["tokens"]) {
    v.tokens[t[0].get<int>()] = t[1].get<std::string>();
    v.types[t[0].get<int>()] = static_cast<TokenType>(t[2].get<int>());
  }
  v.merges = f["merges"].get<std::vector<std::string>>();
  v.pre = "llama-bpe";
  v.bos_id = 128000;
  v.eos_id = 128001;
  v.unk_id = -1;
  v.add_bos = true;
  auto tok = Tokenizer::from_vocab(std::move(v));
  REQUIRE(tok);
  return std::move(*tok);
}

}  // namespace

TEST_CASE("bpe: GPT-2 byte to unicode mapping", "[bpe]") {
  // Printable Latin-1 maps to itself; the 68 others to U+0100.. in byte order:
  // 0x00-0x20 -> U+0100-U+0120, 0x7F-0xA0 -> U+0121-U+0142, 0xAD -> U+0143.
  CHECK(BpeModel::byte_to_text('A') == "A");
  CHECK(BpeModel::byte_to_text('~') == "~");
  CHECK(BpeModel::byte_to_text(0x00) == "\xC4\x80");  // U+0100
  CHECK(BpeModel::byte_to_text(0x0A) == "\xC4\x8A");  // U+010A "Ċ"
  CHECK(BpeModel::byte_to_text(0x20) == "\xC4\xA0");  // U+0120 "Ġ"
  CHECK(BpeModel::byte_to_text(0x7F) == "\xC4\xA1");  // U+0121
  CHECK(BpeModel::byte_to_text(0xA0) == "\xC5\x82");  // U+0142
  CHECK(BpeModel::byte_to_text(0xA1) == "\xC2\xA1");  // U+00A1 itself
  CHECK(BpeModel::byte_to_text(0xAD) == "\xC5\x83");  // U+0143
  CHECK(BpeModel::byte_to_text(0xFF) == "\xC3\xBF");  // U+00FF itself
  CHECK(BpeModel::decode_token_text("\xC4\xA0world") == " world");
  CHECK(BpeModel::decode_token_text("\xC4\x8A\xC4\x8A") == "\n\n");
  for (int b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    CHECK(BpeModel::decode_token_text(BpeModel::byte_to_text(static_cast<uint8_t>(b))) == byte);
  }
}

TEST_CASE("bpe: unicode classes", "[bpe]") {
  namespace uc = unicode;
  CHECK(uc::category('A') == uc::kLu);
  CHECK(uc::category(0x4E2D) == uc::kLo);   // 中
  CHECK(uc::category(0x0301) == uc::kMn);   // combining acute
  CHECK(uc::category(0x0663) == uc::kNd);   // Arabic-Indic 3
  CHECK(uc::category(0x1F600) == uc::kSo);  // 😀
  CHECK(uc::category(0x0378) == uc::kCn);   // unassigned
  CHECK((uc::flags(0x3000) & uc::kWhitespace));
  CHECK((uc::flags(0x85) & uc::kWhitespace));
  CHECK_FALSE((uc::flags(0x200B) & uc::kWhitespace));  // ZWSP is Cf, not White_Space
  CHECK((uc::flags(0x2167) & uc::kNumber));             // Ⅷ (Nl)
  std::vector<uc::Char> chars;
  uc::decode_utf8("a\xC3\xA9\xFF\xE2\x82", chars);  // a, é, then 3 stray bytes
  REQUIRE(chars.size() == 5);
  CHECK(chars[1].cpt == 0xE9);
  CHECK(chars[2].cpt == uc::kInvalidBase + 0xFF);
  CHECK(chars[3].cpt == uc::kInvalidBase + 0xE2);
  CHECK(chars[4].cpt == uc::kInvalidBase + 0x82);
}

TEST_CASE("bpe: ill-formed UTF-8 is kept byte for byte", "[bpe]") {
  auto tok = llama3_tokenizer();
  if (!tok) {
    FAIL("fixture bpe_llama3.json not found (it is committed: check the checkout)");
  }
  // A stray 0xFF is the token of its GPT-2 character "ÿ" (id 187 in the
  // fixture); llama.cpp would tokenize U+FFFD instead.
  CHECK(tok->encode("\xFF", false, false) == std::vector<int32_t>{187});
  // Every byte string survives encode + decode (the corpus-reduced vocab
  // still has all 256 byte tokens).
  std::mt19937 rng(7);
  const std::string alphabet[] = {"a", " ", "\n", "\xC3", "\xA9", "\xE2\x82\xAC", "\xF0\x9F", "\x80", "\xFF", "'s", "1"};
  for (int i = 0; i < 500; ++i) {
    std::string s;
    const int n = static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) s += alphabet[rng() % std::size(alphabet)];
    INFO("case " << i);
    CHECK(tok->decode(tok->encode(s, false, false)) == s);
  }
}

TEST_CASE("bpe: add_bos, special tokens and streaming decode", "[bpe]") {
  auto tok = llama3_tokenizer();
  if (!tok) {
    FAIL("fixture bpe_llama3.json not found (it is committed: check the checkout)");
  }
  // Fixture ids (llama.cpp): "<|eot_id|><|eot_id|>" -> [128009, 128009] with
  // parse_special; plain text otherwise.
  CHECK(tok->encode("<|eot_id|><|eot_id|>", true, true) == std::vector<int32_t>{128000, 128009, 128009});
  CHECK(tok->encode("<|eot_id|>", false, false).size() > 1);
  CHECK(tok->token_to_piece(128009).empty());  // control tokens print nothing
  CHECK(tok->is_end_of_generation(128009));
  // A ZWJ family emoji is 15 byte-level tokens whose pieces split UTF-8
  // characters; the detokenizer only ever emits whole characters.
  const std::string family = "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7\xE2\x80\x8D\xF0\x9F\x91\xA6";
  const auto ids = tok->encode(family, false, false);
  CHECK(ids.size() == 15);
  IncrementalDetokenizer detok(*tok, 128009);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string chunk = detok.push(id);
    CHECK(utf8_is_valid(chunk));
    streamed += chunk;
  }
  streamed += detok.flush();
  CHECK(streamed == family);
}

TEST_CASE("bpe: load errors", "[bpe]") {
  VocabData v;
  v.model = TokenizerModel::kBpe;
  v.tokens = {"a", "b", "ab"};
  v.merges = {"a b"};
  v.add_bos = false;
  v.pre = "no-such-pre";
  auto bad_pre = Tokenizer::from_vocab(v);
  REQUIRE_FALSE(bad_pre);
  CHECK(bad_pre.status().message().find("no-such-pre") != std::string::npos);
  v.pre = "gpt-2";
  v.merges = {"ab"};
  CHECK_FALSE(Tokenizer::from_vocab(v));
  v.merges = {"a b"};
  auto ok = Tokenizer::from_vocab(v);
  REQUIRE(ok);
  CHECK((*ok)->encode("abba", false, false) == std::vector<int32_t>{2, 1, 0});
}

TEST_CASE("bpe: a space after BOS is kept (byte-level BPE keeps every byte)", "[bpe]") {
  auto tok = llama3_tokenizer();
  if (!tok) {
    FAIL("fixture bpe_llama3.json not found (it is committed: check the checkout)");
  }
  // " Hi there" encodes to byte-level pieces whose first one starts with
  // the encoded space; SentencePiece would drop it after BOS, BPE must not.
  const auto ids = tok->encode(" Hi there", false, false);
  REQUIRE(!ids.empty());
  IncrementalDetokenizer detok(*tok, 128000);  // previous token: <|begin_of_text|>
  std::string streamed;
  for (int32_t id : ids) streamed += detok.push(id);
  streamed += detok.flush();
  CHECK(streamed == " Hi there");
  const int32_t bos = 128000;
  CHECK(tok->decode_text(ids, bos) == " Hi there");
}

}  // namespace larder
