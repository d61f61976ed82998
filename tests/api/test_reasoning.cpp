// Splitting a reasoning model's thinking off its answer (api/reasoning.h):
// whole answers and the same answers streamed in pieces (every byte apart,
// too) give the same reasoning and content, written out by hand.
#include <catch2/catch.hpp>

#include "api/reasoning.h"

using namespace larder;

namespace {

ReasoningOptions think(bool starts_open = false) {
  return {ReasoningSyntax::kThinkTags, ReasoningFormat::kDeepseek, starts_open};
}

// Streams `text` one byte per push (each counted as one token).
ReasoningSplit by_bytes(const ReasoningOptions& o, std::string_view text, int* n_reasoning = nullptr) {
  ReasoningStream s(o);
  ReasoningSplit out;
  for (char c : text) {
    ReasoningSplit p = s.push(std::string_view(&c, 1), 1);
    out.reasoning += p.reasoning;
    out.content += p.content;
  }
  ReasoningSplit rest = s.finish();
  out.reasoning += rest.reasoning;
  out.content += rest.content;
  if (n_reasoning) *n_reasoning = s.reasoning_tokens();
  return out;
}

}  // namespace

TEST_CASE("reasoning: <think> ... </think> before the answer is split off", "[api][reasoning]") {
  struct Case {
    const char* text;
    bool starts_open;
    const char* reasoning;
    const char* content;
  };
  const Case cases[] = {
      {"<think>\nThe user greets me.\n</think>\n\nHello!", false, "The user greets me.", "Hello!"},
      {"\n <think>a</think>b", false, "a", "b"},                        // whitespace before the tag
      {"<think>\n\n</think>\n\nHi", false, "", "Hi"},                    // empty thinking (enable_thinking false)
      {"Step one.\n</think>\n\nDone.", true, "Step one.", "Done."},     // the prompt opened the block
      {"<think>cut off by max_tok", false, "cut off by max_tok", ""},   // never closed: all reasoning
      {"Hello <think>x</think> y", false, "", "Hello <think>x</think> y"},  // not at the start: content
      {"No thinking here.", false, "", "No thinking here."},
      {"<thinking>is not the tag</thinking>", false, "", "<thinking>is not the tag</thinking>"},
      {"<thi", false, "", "<thi"},                                      // a tag's start that never finished
      {"a </think> b </think> c", true, "a", "b </think> c"},           // only the first close ends it
      {"  lead and trail  \n</think>  \n  text  ", true, "lead and trail", "text  "},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    ReasoningSplit whole = split_reasoning(think(c.starts_open), c.text);
    CHECK(whole.reasoning == c.reasoning);
    CHECK(whole.content == c.content);
    ReasoningSplit streamed = by_bytes(think(c.starts_open), c.text);
    CHECK(streamed.reasoning == c.reasoning);
    CHECK(streamed.content == c.content);
  }
}

TEST_CASE("reasoning: format none and models without tags leave everything in content", "[api][reasoning]") {
  const std::string text = "\n<think>x </think>\n\ny <think>";
  ReasoningOptions none = think();
  none.format = ReasoningFormat::kNone;
  // "none": the block is found (so that tool calls in it are not looked
  // for) and handed back verbatim, to be sent as content.
  ReasoningSplit raw = split_reasoning(none, text);
  CHECK(raw.reasoning == "\n<think>x </think>\n\n");
  CHECK(raw.content == "y <think>");
  int n = -1;
  ReasoningSplit raw_bytes = by_bytes(none, text, &n);
  CHECK(raw_bytes.reasoning == raw.reasoning);
  CHECK(raw_bytes.content == raw.content);
  CHECK(n == 0);
  CHECK(ReasoningStream(none).raw());
  CHECK_FALSE(ReasoningStream(think()).raw());
  CHECK(split_reasoning(ReasoningOptions{}, text).content == text);
  CHECK(split_reasoning(ReasoningOptions{}, text).reasoning.empty());
  CHECK(reasoning_format_from_name("auto") == ReasoningFormat::kDeepseek);
  CHECK(reasoning_format_from_name("deepseek") == ReasoningFormat::kDeepseek);
  CHECK(reasoning_format_from_name("none") == ReasoningFormat::kNone);
  CHECK_FALSE(reasoning_format_from_name("deepseek-legacy").has_value());
}

TEST_CASE("reasoning: streamed pieces go out at once, reasoning tokens are counted", "[api][reasoning]") {
  // Pieces as a Qwen 3 model samples them (one token each).
  ReasoningStream s(think());
  const std::vector<std::string> pieces = {"<think>", "\n", "Hmm", ",", " ok", "\n", "</think>", "\n\n", "Hi", "!"};
  std::vector<ReasoningSplit> out;
  for (const std::string& p : pieces) out.push_back(s.push(p, 1));
  CHECK(out[2].reasoning == "Hmm");   // sent as soon as it is known
  CHECK(out[4].reasoning == " ok");
  CHECK(out[5].reasoning.empty());    // a newline that may end the block waits
  CHECK(out[6].reasoning.empty());    // ... and is dropped at the close
  CHECK(out[7].content.empty());      // whitespace after the close is dropped
  CHECK(out[8].content == "Hi");
  CHECK(out[9].content == "!");
  ReasoningSplit rest = s.finish();
  CHECK(rest.reasoning.empty());
  CHECK(rest.content.empty());
  // <think>, \n, Hmm, ",", " ok", \n, </think>: 7 tokens.
  CHECK(s.reasoning_tokens() == 7);

  // Held-back text before the tag resolves: "<" "th" "ink>" counts once it is the tag.
  int n = 0;
  by_bytes(think(), "<think>ab</think>c", &n);
  CHECK(n == 17);  // every byte up to and including the close tag
  by_bytes(think(), "<thx", &n);
  CHECK(n == 0);
  by_bytes(think(true), "ab</think>cd", &n);
  CHECK(n == 10);
}
