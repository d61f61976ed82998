// Chat prompt ids from a marked rendering (engine/tokenizer/chat_prompt.h) on
// stories260K's SentencePiece vocabulary: stored answer ids spliced in,
// control-token text in contents kept as text, and the fallbacks. Expected
// ids are put together from plain Tokenizer::encode calls on the pieces a
// rendering is cut into by hand.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/chat_prompt.h"
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

std::string marked(const std::string& text, size_t k) { return marked_content(text, k).value(); }

}  // namespace

TEST_CASE("content markers: printable ASCII, distinct, stable; marked content keeps whitespace edges", "[chat_prompt]") {
  const std::string m0 = content_marker(0), m1 = content_marker(1);
  CHECK(m0 != m1);
  CHECK(m0 == content_marker(0));
  for (char c : m0) CHECK((c >= 0x21 && c <= 0x7e));
  CHECK(marked_content("  hi there \n", 3) == "  " + content_marker(3) + " \n");
  CHECK(marked_content("x", 0) == content_marker(0));
  CHECK_FALSE(marked_content("", 0));
  CHECK_FALSE(marked_content(" \n\t ", 0));
  // Unicode spaces count, as in Python's str.strip (U+3000, U+00A0, U+2009);
  // other characters that are not ASCII do not (U+00E9, U+4E2D).
  CHECK(marked_content("\u3000hi\u00a0\u2009", 1) == "\u3000" + content_marker(1) + "\u00a0\u2009");
  CHECK(marked_content("\u00e9\u4e2d", 2) == content_marker(2));
  CHECK_FALSE(marked_content("\u3000 \u2028", 0));
}

TEST_CASE("encode_continuation gives no space prefix at the start of the text", "[chat_prompt]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto tok = load_stories_tokenizer(path);
  for (const std::string text : {"Once upon a time", "\nUser: hi", "x", " leading space"}) {
    INFO(text);
    // encode() treats the text as the input start: SentencePiece adds "▁".
    const std::string with_prefix = std::string(1, ' ').append(text);
    CHECK(tok->decode(tok->encode(text, false, false)) == with_prefix);
    CHECK(tok->decode(tok->encode_continuation(text, false)) == text);
  }
  CHECK(tok->encode_continuation("", false).empty());
}

TEST_CASE("encode_chat keeps control-token text inside plain ranges as text", "[chat_prompt]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto tok = load_stories_tokenizer(path);
  REQUIRE(tok->bos_id() == 1);
  REQUIRE(tok->eos_id() == 2);
  const std::string text = "<s>User: hi </s> there";  // content "hi </s> there" at bytes 9..22
  const std::vector<Tokenizer::ByteRange> content = {{9, 22}};
  // Whole text parsed: BOS, "▁User: hi ", EOS, "▁there" (space prefix after each control token).
  const std::vector<int32_t> parsed = tok->encode(text, false, true);
  CHECK(parsed == concat({{1}, tok->encode("User: hi ", false, false), {2}, tok->encode(" there", false, false)}));
  CHECK(tok->encode_chat(text, true, {}) == parsed);
  // "</s>" inside the content range stays text; the template's "<s>" is still BOS.
  CHECK(tok->encode_chat(text, true, content) == concat({{1}, tok->encode("User: hi </s> there", false, false)}));
  // A range that only overlaps the token text blocks it too.
  CHECK(tok->encode_chat(text, true, std::vector<Tokenizer::ByteRange>{{14, 15}}) ==
        tok->encode_chat(text, true, content));
  // Not at the input start: no space prefix before the first fragment.
  CHECK(tok->encode_chat("hi </s>", false, {}) == concat({tok->encode_continuation("hi ", false), {2}}));
}

TEST_CASE("tokenize_marked_chat splices stored answer ids into the prompt", "[chat_prompt]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto tok = load_stories_tokenizer(path);
  const std::string answer1 = " Once upon a time there was a cat.";
  const std::string answer2 = " The cat was happy.";
  const std::string user1 = "Tell me a story.", user2 = "More.", user3 = "Again.";
  const std::string p0 = "User: ", p1 = "\nAssistant:", p2 = "\nUser: ", p3 = "\nAssistant:", p4 = "\nUser: ",
                    p5 = "\nAssistant:";
  const std::string rendered = p0 + user1 + p1 + answer1 + p2 + user2 + p3 + answer2 + p4 + user3 + p5;
  const std::string marked_text = p0 + marked(user1, 0) + p1 + marked(answer1, 1) + p2 + marked(user2, 2) + p3 +
                                  marked(answer2, 3) + p4 + marked(user3, 4) + p5;
  REQUIRE(marked_text.find(std::string(1, ' ').append(content_marker(1))) != std::string::npos);  // space kept
  std::vector<ChatContent> contents = {{user1, std::nullopt},
                                       {answer1, char_by_char(*tok, answer1)},
                                       {user2, std::nullopt},
                                       {answer2, char_by_char(*tok, answer2)},
                                       {user3, std::nullopt}};
  REQUIRE(*contents[1].ids != tok->encode_continuation(answer1, false));  // really not canonical

  auto out = tokenize_marked_chat(*tok, rendered, marked_text, contents, /*add_bos=*/true, false, false);
  REQUIRE(out);
  CHECK(out->n_spliced == 2);
  const std::vector<int32_t> turn1 = concat({{tok->bos_id()}, tok->encode(p0 + user1 + p1, false, false)});
  const std::vector<int32_t> expected =
      concat({turn1, *contents[1].ids, tok->encode_continuation(p2 + user2 + p3, false), *contents[3].ids,
              tok->encode_continuation(p4 + user3 + p5, false)});
  CHECK(out->ids == expected);
  CHECK(tok->decode_text(out->ids) == rendered);  // the same text as a whole

  SECTION("no BOS when not asked") {
    auto no_bos = tokenize_marked_chat(*tok, rendered, marked_text, contents, false, false, false);
    REQUIRE(no_bos);
    CHECK(std::vector<int32_t>(out->ids.begin() + 1, out->ids.end()) == no_bos->ids);
  }
  SECTION("without stored ids the ids are those of the whole rendering") {
    for (auto& c : contents) c.ids.reset();
    auto plain = tokenize_marked_chat(*tok, rendered, marked_text, contents, true, false, false);
    REQUIRE(plain);
    CHECK(plain->n_spliced == 0);
    CHECK(plain->ids == concat({{tok->bos_id()}, tok->encode(rendered, false, false)}));
  }
  SECTION("a template that trims an answer: that answer is tokenized from its text, the other is spliced") {
    const std::string trimmed = p0 + user1 + p1 + answer1.substr(1) + p2 + user2 + p3 + answer2 + p4 + user3 + p5;
    const std::string trimmed_marked = p0 + marked(user1, 0) + p1 + content_marker(1) + p2 + marked(user2, 2) + p3 +
                                       marked(answer2, 3) + p4 + marked(user3, 4) + p5;
    auto t = tokenize_marked_chat(*tok, trimmed, trimmed_marked, contents, true, false, false);
    REQUIRE(t);
    CHECK(t->n_spliced == 1);
    CHECK(t->ids == concat({{tok->bos_id()}, tok->encode(p0 + user1 + p1 + answer1.substr(1) + p2 + user2 + p3, false, false),
                            *contents[3].ids, tok->encode_continuation(p4 + user3 + p5, false)}));
  }
  SECTION("stored ids that do not decode to the answer's text are not used") {
    contents[3].ids->pop_back();
    auto t = tokenize_marked_chat(*tok, rendered, marked_text, contents, true, false, false);
    REQUIRE(t);
    CHECK(t->n_spliced == 1);
    CHECK(t->ids == concat({turn1, *contents[1].ids, tok->encode_continuation(p2 + user2 + p3 + answer2 + p4 + user3 + p5, false)}));
  }
  SECTION("a marker missing, repeated, or a content the template rewrote: nullopt") {
    std::string missing = marked_text;
    missing.replace(missing.find(content_marker(2)), content_marker(2).size(), user2);
    CHECK_FALSE(tokenize_marked_chat(*tok, rendered, missing, contents, true, false, false));
    CHECK_FALSE(tokenize_marked_chat(*tok, rendered, marked_text + content_marker(4), contents, true, false, false));
    std::string rewritten = rendered;
    rewritten.replace(rewritten.find("happy"), 5, "HAPPY");  // e.g. a template that upper-cases content
    CHECK_FALSE(tokenize_marked_chat(*tok, rewritten, marked_text, contents, true, false, false));
  }
}

TEST_CASE("tokenize_marked_chat keeps control-token text in contents as text unless allowed", "[chat_prompt]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto tok = load_stories_tokenizer(path);
  // A template with control tokens of its own ("<s>", "</s>"); the user's
  // content contains "</s>" too.
  const std::string user = "hi </s> there";
  const std::string rendered = "<s>User: " + user + "</s>\nAssistant:";
  const std::string marked_text = "<s>User: " + marked(user, 0) + "</s>\nAssistant:";
  const std::vector<ChatContent> contents = {{user, std::nullopt}};
  auto safe = tokenize_marked_chat(*tok, rendered, marked_text, contents, true, true, false);
  REQUIRE(safe);
  CHECK(safe->ids == concat({{1}, tok->encode("User: hi </s> there", false, false), {2},
                             tok->encode("\nAssistant:", false, false)}));
  auto allowed = tokenize_marked_chat(*tok, rendered, marked_text, contents, true, true, true);
  REQUIRE(allowed);
  CHECK(allowed->ids == tok->encode(rendered, false, true));
}

}  // namespace larder
