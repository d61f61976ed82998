// TriggerWatch (engine/grammar/grammar_trigger.h): where a lazy grammar
// starts, for outputs fed in pieces. Expected texts are written by hand.
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/grammar/grammar_trigger.h"

using namespace larder;

namespace {

// Feeds `pieces` in order; returns the index of the piece that fired the
// watch (or -1) and, in *text, what it returned.
int feed(const GrammarTriggers& g, const std::vector<std::string>& pieces, std::string* text) {
  TriggerWatch w(&g);
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (std::optional<std::string> t = w.push(pieces[i])) {
      *text = *t;
      CHECK(w.fired());
      CHECK_FALSE(w.push("<tool_call>").has_value());  // once only
      return int(i);
    }
  }
  CHECK_FALSE(w.fired());
  return -1;
}

GrammarTriggers hermes() {
  GrammarTriggers g;
  g.triggers = {{"<tool_call>", false, false}};
  return g;
}

}  // namespace

TEST_CASE("trigger watch: a tag anywhere, whole, split over pieces, or in the middle of one", "[grammar][trigger]") {
  std::string text;
  CHECK(feed(hermes(), {"Let me check.", "\n<tool_call>\n{\"na"}, &text) == 1);
  CHECK(text == "<tool_call>\n{\"na");
  CHECK(feed(hermes(), {"Sure", " <to", "ol_c", "all", ">", "\n"}, &text) == 4);
  CHECK(text == "<tool_call>");
  CHECK(feed(hermes(), {"<", "t", "o", "o", "l", "_", "c", "a", "l", "l", ">x"}, &text) == 10);
  CHECK(text == "<tool_call>x");
  // Near misses never fire, however they are split.
  CHECK(feed(hermes(), {"<tool_cal", "l", "l>", "<tool", "call>", "tool_call>"}, &text) == -1);
  // The earliest of two triggers in one piece wins.
  GrammarTriggers two;
  two.triggers = {{"BETA", false, false}, {"ALPHA", false, false}};
  CHECK(feed(two, {"xx ALPHA yy BETA"}, &text) == 0);
  CHECK(text == "ALPHA yy BETA");
}

TEST_CASE("trigger watch: a marker trigger starts the grammar after itself", "[grammar][trigger]") {
  GrammarTriggers g;
  g.triggers = {{"[TOOL_CALLS]", false, /*grammar_after=*/true}};
  std::string text;
  CHECK(feed(g, {"ok [TOOL", "_CALLS]"}, &text) == 1);
  CHECK(text.empty());
  CHECK(feed(g, {"[TOOL_CALLS][{\"name\""}, &text) == 0);
  CHECK(text == "[{\"name\"");
}

TEST_CASE("trigger watch: an at-start trigger only opens the content", "[grammar][trigger]") {
  GrammarTriggers g;
  g.triggers = {{"{\"name\"", /*at_start=*/true, false}};
  std::string text;
  CHECK(feed(g, {"  \n", "{\"", "name\": \"f\""}, &text) == 2);
  CHECK(text == "{\"name\": \"f\"");  // from the trigger: the whitespace before it is not the grammar's
  CHECK(feed(g, {"Here: {\"name\": 1}"}, &text) == -1);
  CHECK(feed(g, {"{\"nam", "es\": []}"}, &text) == -1);  // a prefix that turns out otherwise
  CHECK(feed(g, {"{", "}", "{\"name\""}, &text) == -1);
}

TEST_CASE("trigger watch: a reasoning block at the start is not searched", "[grammar][trigger]") {
  GrammarTriggers g = hermes();
  g.triggers.push_back({"{\"name\"", true, false});
  g.block_open = "<think>";
  g.block_close = "</think>";
  std::string text;
  // The tag inside the block does not count; after it, it does.
  CHECK(feed(g, {" <thi", "nk>I could use <tool_call> here.</thi", "nk>\n\nDone: <tool_call>"}, &text) == 2);
  CHECK(text == "<tool_call>");
  // The content's start is after the block: an at-start trigger there.
  CHECK(feed(g, {"<think>hm</think>", "\n", "{\"name\": \"f\"}"}, &text) == 2);
  CHECK(text == "{\"name\": \"f\"}");
  // A prompt that opened the block: the output starts inside it.
  g.starts_in_block = true;
  CHECK(feed(g, {"<tool_call> is a tag", "</think>ok"}, &text) == -1);
  CHECK(feed(g, {"<tool_call> is a tag", "</think><tool_call>"}, &text) == 1);
  CHECK(text == "<tool_call>");
  // Not at the start, "<think>" is content: the trigger after it counts.
  g.starts_in_block = false;
  CHECK(feed(g, {"Hi <think> <tool_call>"}, &text) == 0);
  CHECK(text == "<tool_call>");
  // A block never closed: nothing fires.
  CHECK(feed(g, {"<think>", "<tool_call>", "{\"name\""}, &text) == -1);
}

TEST_CASE("trigger watch: no triggers never fires", "[grammar][trigger]") {
  GrammarTriggers none;
  TriggerWatch w(&none);
  CHECK_FALSE(w.push("<tool_call>").has_value());
  CHECK_FALSE(w.fired());
  TriggerWatch unset;
  CHECK_FALSE(unset.push("<tool_call>").has_value());
}
