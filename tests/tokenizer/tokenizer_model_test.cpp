// Tokenizer on the real stories260K vocabulary (read through GgufFile),
// against reference.json (llama2.c encoder/decoder, agreed by llama.cpp) and
// against id tables produced by llama.cpp itself.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/test_models.h"

namespace larder {
namespace {

using Ids = std::vector<int32_t>;

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  auto gguf = GgufFile::open(path);
  REQUIRE(gguf.is_ok());
  auto tok = Tokenizer::from_gguf(**gguf);
  INFO(tok.status().to_string());
  REQUIRE(tok.is_ok());
  return std::move(tok).value();
}

nlohmann::json load_reference() {
  auto dir = testing::test_models_dir();
  REQUIRE(dir.has_value());
  std::ifstream in(*dir + "/reference.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("stories260K vocabulary metadata", "[tokenizer][model]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto tok = load_tokenizer(path);
  // Values from the model README's tokenizer table.
  CHECK(tok->n_vocab() == 512);
  CHECK(tok->bos_id() == 1);
  CHECK(tok->eos_id() == 2);
  CHECK(tok->unk_id() == 0);
  CHECK(tok->add_bos());
  CHECK_FALSE(tok->add_eos());
  CHECK(tok->add_space_prefix());
  CHECK(tok->token_to_piece(410) == " ");           // "▁" alone
  CHECK(tok->token_to_piece(13) == "\n");           // <0x0A>
  CHECK(tok->token_to_piece(403) == " Once");       // "▁Once" (README / vocab dump)
  CHECK(tok->token_to_piece(1).empty());
  CHECK(tok->is_end_of_generation(2));
  CHECK_FALSE(tok->is_end_of_generation(1));
}

TEST_CASE("reference.json prompt tokens and greedy text", "[tokenizer][model]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto tok = load_tokenizer(path);
  const nlohmann::json ref = load_reference();
  REQUIRE(ref["cases"].size() == 6);
  for (const auto& c : ref["cases"]) {
    const std::string name = c["name"].get<std::string>();
    INFO("case " << name);
    const std::string prompt = c["prompt"].get<std::string>();
    const Ids prompt_tokens = c["prompt_tokens"].get<Ids>();
    CHECK(tok->encode(prompt, /*add_bos=*/true, /*parse_special=*/false) == prompt_tokens);
    CHECK(tok->encode(prompt, /*add_bos=*/true, /*parse_special=*/true) == prompt_tokens);

    // Conventions: <0xXX> raw bytes, ▁ a space, BOS/EOS nothing, the space of
    // the piece right after a BOS dropped (the last prompt token may be BOS).
    const Ids greedy = c["greedy_tokens"].get<Ids>();
    const std::string greedy_text = c["greedy_text"].get<std::string>();
    CHECK(tok->decode_text(greedy, prompt_tokens.back()) == greedy_text);

    // Streaming the same tokens gives valid UTF-8 chunks adding up to the same text.
    IncrementalDetokenizer detok(*tok, prompt_tokens.back());
    std::string streamed;
    for (int32_t id : greedy) {
      const std::string chunk = detok.push(id);
      CHECK(utf8_is_valid(chunk));
      streamed += chunk;
    }
    streamed += detok.flush();
    CHECK(streamed == greedy_text);

    // decode is lossless for text: the pieces of encode(prompt) are " " + prompt.
    if (!prompt.empty()) CHECK(tok->decode(prompt_tokens) == " " + prompt);
  }
}

// Expected ids: llama.cpp's tokenizer (node-llama-cpp 3.21.1, prebuilt CPU
// binaries) on stories260K.gguf, `model.tokenize(text, specialTokens)`, which
// includes the SentencePiece space prefix but not BOS (prepended here).
TEST_CASE("edge cases agree with llama.cpp", "[tokenizer][model]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto tok = load_tokenizer(path);
  struct Case {
    const char* text;
    bool special;
    Ids llama_cpp;
  };
  const Case cases[] = {
      {" Hello world", false, {410, 346, 306, 414, 263, 304, 341}},
      {"Hello  world", false, {346, 306, 414, 410, 263, 304, 341}},
      {"a\tb", false, {261, 12, 430}},
      {"One.\n\nTwo.", false, {385, 426, 13, 13, 434, 424, 414, 426}},
      {"<s>hello", false, {410, 504, 419, 505, 260, 306, 414}},
      {"<s>hello", true, {1, 281, 306, 414}},
      {"Hi <s> there</s>", true, {320, 417, 410, 1, 410, 383, 2}},
      {"Hi <s> there</s>", false, {320, 417, 410, 504, 419, 505, 383, 504, 492, 419, 505}},
      {"<unk>", true, {0}},
      {"\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C", false,  // 你好世界
       {410, 231, 192, 163, 232, 168, 192, 231, 187, 153, 234, 152, 143}},
      {"\xF0\x9F\x99\x82\xF0\x9F\x9A\x80", false, {410, 243, 162, 156, 133, 243, 162, 157, 131}},  // 🙂🚀
      {"Zo\xC3\xAB caf\xC3\xA9", false, {410, 469, 414, 198, 174, 280, 412, 431, 485}},          // Zoë café
      {"3.14, 42! (x) #1 $5 @a ~b", false,
       {410, 472, 426, 475, 484, 432, 410, 484, 479, 443, 410, 489, 444, 488,
        410, 38, 475, 410, 494, 480, 410, 67, 412, 410, 510, 430}},
      {"", false, {}},
      {" ", false, {410, 410}},
      {"The little cat sat on the warm mat and looked at the big red ball, then it jumped up high and ran far "
       "away into the green forest.",
       false,
       {291, 376, 280, 294, 262, 294, 353, 265, 273, 420, 423, 284, 294, 269, 278, 347, 355, 261, 413, 265,
        370, 352, 266, 268, 388, 432, 265, 416, 312, 410, 449, 425, 423, 427, 266, 350, 270, 333, 415, 269,
        352, 303, 272, 295, 261, 424, 283, 322, 413, 414, 265, 298, 276, 302, 272, 414, 276, 356, 426}},
      {"Hello\n", false, {346, 306, 414, 13}},
  };
  for (const Case& c : cases) {
    INFO("text: '" << c.text << "' special " << c.special);
    Ids expected{1};
    expected.insert(expected.end(), c.llama_cpp.begin(), c.llama_cpp.end());
    CHECK(tok->encode(c.text, /*add_bos=*/true, c.special) == expected);
    CHECK(tok->encode(c.text, /*add_bos=*/false, c.special) == c.llama_cpp);
  }
}

TEST_CASE("random bytes round-trip through encode and decode", "[tokenizer][model]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto tok = load_tokenizer(path);
  std::mt19937 rng(42);  // fixed seed: deterministic
  for (int round = 0; round < 300; ++round) {
    std::string text;
    const int n = 1 + static_cast<int>(rng() % 64);
    for (int i = 0; i < n; ++i) {
      // Half ASCII letters/spaces, half arbitrary bytes (broken UTF-8 included).
      const uint32_t r = rng();
      text.push_back(static_cast<char>(r % 2 ? " abehlnot"[r / 2 % 9] : r / 2 % 256));
    }
    if (text.find("\xE2\x96\x81") != std::string::npos) continue;  // a literal "▁" decodes as " "
    INFO("round " << round);
    // Every byte is covered by a piece or a <0xXX> token, so the pieces give back " " + text.
    const Ids ids = tok->encode(text, /*add_bos=*/false, /*parse_special=*/false);
    CHECK(tok->decode(ids) == " " + text);
    for (int32_t id : ids) CHECK((id >= 3 && id < 512));  // never BOS/EOS/unk from plain text
  }
}

TEST_CASE("tokenizing ~100 KB is fast and exact", "[tokenizer][model]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto tok = load_tokenizer(path);
  const nlohmann::json ref = load_reference();
  const nlohmann::json* long_case = nullptr;
  for (const auto& c : ref["cases"]) {
    if (c["name"] == "long") long_case = &c;
  }
  REQUIRE(long_case != nullptr);
  const std::string prompt = (*long_case)["prompt"].get<std::string>();
  const Ids prompt_tokens = (*long_case)["prompt_tokens"].get<Ids>();
  // prompt + ("\n " + prompt) * 159: no piece contains '\n' (the vocab has no
  // newline piece: README), so nothing merges across it and each copy after
  // "\n" starts with "▁Once" exactly like the first one after the space
  // prefix. Expected = reference ids, then ([13] + reference ids without BOS) * 159.
  std::string text = prompt;
  Ids expected = prompt_tokens;
  for (int i = 0; i < 159; ++i) {
    text += "\n " + prompt;
    expected.push_back(13);
    expected.insert(expected.end(), prompt_tokens.begin() + 1, prompt_tokens.end());
  }
  REQUIRE(text.size() > 100000);
  const auto t0 = std::chrono::steady_clock::now();
  const Ids ids = tok->encode(text, true, false);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CHECK(ids == expected);
  INFO("encode of " << text.size() << " bytes took " << ms << " ms");
  CHECK(ms < 250.0);
}

}  // namespace larder
