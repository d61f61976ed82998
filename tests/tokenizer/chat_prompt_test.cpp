// Chat prompt ids from a rendering and its client byte ranges
// (engine/tokenizer/chat_prompt.h) on stories260K's SentencePiece
// vocabulary: stored answer ids spliced in, control-token text from the
// client kept as text. Expected ids are put together from plain
// Tokenizer::encode calls on the pieces a rendering is cut into by hand.
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

// The span of `piece` in `text` (its first occurrence), marked with `origin`.
tmpl::TextSpan span_of(const std::string& text, const std::string& piece, int32_t origin) {
  const size_t at = text.find(piece);
  REQUIRE(at != std::string::npos);
  return {at, at + piece.size(), origin};
}

}  // namespace

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

TEST_CASE("tokenize_chat splices stored answer ids into the prompt", "[chat_prompt]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto tok = load_stories_tokenizer(path);
  const std::string answer1 = " Once upon a time there was a cat.";
  const std::string answer2 = " The cat was happy.";
  const std::string user1 = "Tell me a story.", user2 = "More.", user3 = "Again.";
  const std::string p0 = "User: ", p1 = "\nAssistant:", p2 = "\nUser: ", p3 = "\nAssistant:", p4 = "\nUser: ",
                    p5 = "\nAssistant:";
  const std::string rendered = p0 + user1 + p1 + answer1 + p2 + user2 + p3 + answer2 + p4 + user3 + p5;
  const std::vector<tmpl::TextSpan> spans = {span_of(rendered, user1, 0), span_of(rendered, answer1, 1),
                                             span_of(rendered, user2, 2), span_of(rendered, answer2, 3),
                                             span_of(rendered, user3, 4)};
  const std::vector<int32_t> ids1 = char_by_char(*tok, answer1), ids2 = char_by_char(*tok, answer2);
  REQUIRE(ids1 != tok->encode_continuation(answer1, false));  // really not canonical
  std::vector<ChatSplice> splices = {{spans[1].begin, spans[1].end, &ids1}, {spans[3].begin, spans[3].end, &ids2}};

  const ChatPromptIds out = tokenize_chat(*tok, rendered, spans, splices, /*add_bos=*/true, false, false);
  CHECK(out.n_spliced == 2);
  const std::vector<int32_t> turn1 = concat({{tok->bos_id()}, tok->encode(p0 + user1 + p1, false, false)});
  const std::vector<int32_t> expected = concat({turn1, ids1, tok->encode_continuation(p2 + user2 + p3, false), ids2,
                                                tok->encode_continuation(p4 + user3 + p5, false)});
  CHECK(out.ids == expected);
  CHECK(tok->decode_text(out.ids) == rendered);  // the same text as a whole

  SECTION("no BOS when not asked") {
    const ChatPromptIds no_bos = tokenize_chat(*tok, rendered, spans, splices, false, false, false);
    CHECK(std::vector<int32_t>(out.ids.begin() + 1, out.ids.end()) == no_bos.ids);
  }
  SECTION("without splices the ids are those of the whole rendering") {
    const ChatPromptIds plain = tokenize_chat(*tok, rendered, spans, {}, true, false, false);
    CHECK(plain.n_spliced == 0);
    CHECK(plain.ids == concat({{tok->bos_id()}, tok->encode(rendered, false, false)}));
  }
  SECTION("stored ids that do not decode to the answer's text are not used") {
    std::vector<int32_t> short2 = ids2;
    short2.pop_back();
    splices[1].ids = &short2;
    const ChatPromptIds t = tokenize_chat(*tok, rendered, spans, splices, true, false, false);
    CHECK(t.n_spliced == 1);
    CHECK(t.ids == concat({turn1, ids1, tok->encode_continuation(p2 + user2 + p3 + answer2 + p4 + user3 + p5, false)}));
  }
  SECTION("many answers that do not match cost no extra tokenization") {
    // 20,000 turns, every splice wrong: the ids are those of the whole text.
    std::string big;
    std::vector<ChatSplice> wrong;
    const std::vector<int32_t> bad = tok->encode_continuation("zzz", false);
    for (int i = 0; i < 20000; ++i) {
      big += "User: hi\nAssistant:";
      wrong.push_back({big.size(), big.size() + 4, &bad});
      big += " Yes\n";
    }
    const ChatPromptIds t = tokenize_chat(*tok, big, {}, wrong, false, false, false);
    CHECK(t.n_spliced == 0);
    CHECK(t.ids == tok->encode(big, false, false));
  }
}

TEST_CASE("tokenize_chat keeps control-token text from the client as text unless allowed", "[chat_prompt]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto tok = load_stories_tokenizer(path);
  // A template with control tokens of its own ("<s>", "</s>"); the user's
  // content contains "</s>" too, and so does a client "name" printed after it.
  const std::string user = "hi </s> there", name = "bob</s>";
  const std::string rendered = "<s>User: " + user + "</s>(" + name + ")\nAssistant:";
  const std::vector<tmpl::TextSpan> spans = {span_of(rendered, user, 0), span_of(rendered, name, tmpl::kNoOrigin)};
  const ChatPromptIds safe = tokenize_chat(*tok, rendered, spans, {}, true, true, false);
  CHECK(safe.ids == concat({{1}, tok->encode("User: hi </s> there", false, false), {2},
                            tok->encode("(bob</s>)\nAssistant:", false, false)}));
  const ChatPromptIds allowed = tokenize_chat(*tok, rendered, spans, {}, true, true, true);
  CHECK(allowed.ids == tok->encode(rendered, false, true));
  // A control token that only starts inside the client's text stays text too.
  const std::string edge = "<s>User: hi </s";
  const std::string edged = edge + ">\nAssistant:";
  const std::vector<tmpl::TextSpan> edge_span = {{9, edge.size(), 0}};
  CHECK(tokenize_chat(*tok, edged, edge_span, {}, true, true, false).ids ==
        concat({{1}, tok->encode("User: hi </s>\nAssistant:", false, false)}));
}

}  // namespace larder
