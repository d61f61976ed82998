// AnswerMemo (bounded LRU of answer ids) and splice_answers (prompt ids with
// stored answer ids in place of the answer text), on stories260K's
// SentencePiece vocabulary. Expected ids are built from encode() of the
// pieces a rendering is cut into by hand, and every spliced prompt is checked
// to decode back to the rendered text.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/answer_memo.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/test_models.h"

namespace larder {
namespace {

std::unique_ptr<Tokenizer> load_stories_tokenizer(const std::string& path) {
  auto gguf = GgufFile::open(path);
  REQUIRE(gguf.is_ok());
  auto tok = Tokenizer::from_gguf(**gguf);
  REQUIRE(tok.is_ok());
  return std::move(*tok);
}

std::vector<int32_t> concat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Ids of `text` one character per token (as a model may sample them): each
// character encoded on its own without a space prefix. Not what encode()
// gives for the whole text whenever the vocab merges two of the characters.
std::vector<int32_t> char_by_char(const Tokenizer& tok, const std::string& text) {
  std::vector<int32_t> out;
  for (char c : text) {
    auto ids = tok.encode_continuation(std::string(1, c), false);
    out.insert(out.end(), ids.begin(), ids.end());
  }
  return out;
}

}  // namespace

TEST_CASE("AnswerMemo keeps ids by exact text, drops least recently used beyond its bound", "[answer_memo]") {
  AnswerMemo memo(10);
  memo.remember("alpha", std::vector<int32_t>{1, 2, 3});
  memo.remember("beta", std::vector<int32_t>{4, 5, 6, 7});
  CHECK(memo.n_answers() == 2);
  CHECK(memo.n_tokens() == 7);
  CHECK(memo.find("alpha") == std::vector<int32_t>{1, 2, 3});
  CHECK_FALSE(memo.find("alpha "));  // exact text only
  CHECK_FALSE(memo.find(""));
  // "alpha" was used last: adding 4 ids (11 > 10) drops "beta".
  memo.remember("gamma", std::vector<int32_t>{8, 9, 10, 11});
  CHECK_FALSE(memo.find("beta"));
  CHECK(memo.find("alpha") == std::vector<int32_t>{1, 2, 3});
  CHECK(memo.find("gamma") == std::vector<int32_t>{8, 9, 10, 11});
  CHECK(memo.n_tokens() == 7);
  // Same text again replaces the entry; empty or over-long answers are not kept.
  memo.remember("alpha", std::vector<int32_t>{12});
  CHECK(memo.find("alpha") == std::vector<int32_t>{12});
  CHECK(memo.n_tokens() == 5);
  memo.remember("", std::vector<int32_t>{1});
  memo.remember("x", std::vector<int32_t>{});
  memo.remember("long", std::vector<int32_t>(11, 1));
  CHECK(memo.n_answers() == 2);
  CHECK_FALSE(memo.find("long"));
}

TEST_CASE("answer_marker is printable ASCII, distinct per answer and stable", "[answer_memo]") {
  const std::string m0 = answer_marker(0), m1 = answer_marker(1);
  CHECK(m0 != m1);
  CHECK(m0 == answer_marker(0));
  for (char c : m0) CHECK((c >= 0x21 && c <= 0x7e));
}

TEST_CASE("answer_marked_content keeps the whitespace edges of the answer", "[answer_memo]") {
  CHECK(answer_marked_content("  hi there \n", 3) == "  " + answer_marker(3) + " \n");
  CHECK(answer_marked_content("x", 0) == answer_marker(0));
  CHECK_FALSE(answer_marked_content("", 0));
  CHECK_FALSE(answer_marked_content(" \n\t ", 0));
}

TEST_CASE("encode_continuation gives no space prefix at the start of the text", "[answer_memo]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto tok = load_stories_tokenizer(path);
  for (const std::string text : {"Once upon a time", "\nUser: hi", "x", " leading space"}) {
    INFO(text);
    // encode() treats the text as the input start: SentencePiece adds "▁".
    CHECK(tok->decode(tok->encode(text, false, false)) == " " + text);
    CHECK(tok->decode(tok->encode_continuation(text, false)) == text);
  }
  CHECK(tok->encode_continuation("", false).empty());
}

TEST_CASE("splice_answers puts the stored ids of answers into the prompt", "[answer_memo]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto tok = load_stories_tokenizer(path);
  const std::string answer1 = " Once upon a time there was a cat.";
  const std::string answer2 = " The cat was happy.";
  const std::string p0 = "User: Tell me a story.\nAssistant:", p1 = "\nUser: More.\nAssistant:",
                    p2 = "\nUser: Again.\nAssistant:";
  const std::string rendered = p0 + answer1 + p1 + answer2 + p2;
  // The answers keep their leading space around the marker.
  const std::string marked = p0 + " " + answer_marker(0) + p1 + " " + answer_marker(1) + p2;
  REQUIRE(marked == p0 + *answer_marked_content(answer1, 0) + p1 + *answer_marked_content(answer2, 1) + p2);
  const std::vector<SplicedAnswer> answers = {{answer1, char_by_char(*tok, answer1)},
                                              {answer2, char_by_char(*tok, answer2)}};
  REQUIRE(answers[0].ids != tok->encode_continuation(answer1, false));  // really not canonical

  auto ids = splice_answers(*tok, rendered, marked, answers, /*add_bos=*/true, false);
  REQUIRE(ids);
  const std::vector<int32_t> expected =
      concat({{tok->bos_id()}, tok->encode(p0, false, false), answers[0].ids, tok->encode_continuation(p1, false),
              answers[1].ids, tok->encode_continuation(p2, false)});
  CHECK(*ids == expected);
  // The prompt of the first turn followed by the first answer's ids (what the
  // KV pages of that turn hold) is a prefix of the spliced prompt.
  const std::vector<int32_t> turn1 = concat({{tok->bos_id()}, tok->encode(p0, false, false), answers[0].ids});
  CHECK(std::equal(turn1.begin(), turn1.end(), ids->begin()));
  CHECK(tok->decode_text(*ids) == rendered);  // the same text as a whole

  SECTION("no BOS when not asked") {
    auto no_bos = splice_answers(*tok, rendered, marked, answers, /*add_bos=*/false, false);
    REQUIRE(no_bos);
    CHECK(std::vector<int32_t>(ids->begin() + 1, ids->end()) == *no_bos);
  }
  SECTION("a marker missing or twice: no splice") {
    CHECK_FALSE(splice_answers(*tok, rendered, p0 + answer1 + p1 + " " + answer_marker(1) + p2, answers, true, false));
    CHECK_FALSE(splice_answers(*tok, rendered, marked + answer_marker(1), answers, true, false));
  }
  SECTION("the template changed the answer (the marked rendering does not give back the text): no splice") {
    // As a template that trims content renders the answer without its leading space.
    const std::string trimmed = p0 + answer1.substr(1) + p1 + answer2 + p2;
    CHECK_FALSE(splice_answers(*tok, trimmed, marked, answers, true, false));
  }
  SECTION("the template dropped the answer's leading space around the marker: no splice") {
    CHECK_FALSE(splice_answers(*tok, rendered, p0 + answer_marker(0) + p1 + " " + answer_marker(1) + p2, answers,
                               true, false));
  }
  SECTION("ids that do not decode to the answer's text: no splice") {
    std::vector<SplicedAnswer> wrong = answers;
    wrong[1].ids.pop_back();
    CHECK_FALSE(splice_answers(*tok, rendered, marked, wrong, true, false));
  }
  SECTION("no answers: no splice") {
    CHECK_FALSE(splice_answers(*tok, rendered, rendered, {}, true, false));
  }
}

}  // namespace larder

namespace larder {

TEST_CASE("answer records: round trip, and every damaged or foreign record is refused", "[answer_memo]") {
  const std::string text = "Hello there!";
  const std::vector<int32_t> ids = {7, 300, 12, 511};
  const std::string rec = encode_answer_record(text, ids);
  // Layout by hand: 28-byte header, 4 bytes per id, 8-byte checksum.
  REQUIRE(rec.size() == 28 + 4 * 4 + 8);
  CHECK(rec.substr(0, 4) == "LDAN");
  CHECK(uint8_t(rec[28 + 4]) == 300 % 256);
  CHECK(uint8_t(rec[28 + 5]) == 300 / 256);
  CHECK(decode_answer_record(rec, text, 512) == ids);

  CHECK_FALSE(decode_answer_record(rec, "Hello there?", 512));  // another text
  CHECK_FALSE(decode_answer_record(rec, text, 511));            // id 511 out of a 511-token vocab
  for (size_t cut = 0; cut < rec.size(); ++cut) CHECK_FALSE(decode_answer_record(rec.substr(0, cut), text, 512));
  for (size_t i = 0; i < rec.size(); ++i) {
    std::string bad = rec;
    bad[i] = char(bad[i] ^ 0x01);
    CHECK_FALSE(decode_answer_record(bad, text, 512));
  }
  CHECK_FALSE(decode_answer_record(rec + "x", text, 512));

  // Keys differ by text and by cache root; the same inputs give the same key.
  const PageKey root{1, 2}, other_root{1, 3};
  CHECK(answer_key(root, text) == answer_key(root, text));
  CHECK_FALSE(answer_key(root, text) == answer_key(root, "Hello there"));
  CHECK_FALSE(answer_key(root, text) == answer_key(other_root, text));
}

}  // namespace larder
