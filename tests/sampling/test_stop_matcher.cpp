// StopMatcher over streamed deltas. Every expected output is written by hand:
// what the client may see after each push, given what could still grow into
// a stop string.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/sampling/stop_matcher.h"

using larder::StopMatcher;

namespace {

struct Case {
  const char* name;
  std::vector<std::string> stops;
  std::vector<std::string> deltas;
  std::vector<std::string> released;  // push(deltas[i]).text, one per delta
  int stopped_at;                     // index of the push that reports stopped; -1: none
  std::string flushed;                // flush() at the end
};

}  // namespace

TEST_CASE("stop strings over deltas", "[sampling]") {
  const std::vector<Case> table = {
      {"inside one delta", {"END"}, {"hello END world"}, {"hello "}, 0, ""},
      // "E" could start "END": held until "ND" completes it.
      {"spanning two deltas", {"END"}, {"hello E", "ND more"}, {"hello ", ""}, 1, ""},
      {"spanning three deltas", {"<|end|>"}, {"ab<|", "en", "d|>x"}, {"ab", "", ""}, 2, ""},
      // "EN" held, then "ENEx" cannot be the start of "END": released intact.
      {"false start released", {"END"}, {"hello EN", "Ex", "y"}, {"hello ", "ENEx", "y"}, -1, ""},
      // "E" held; "ENE": only the last "E" may start "END", "EN" goes out;
      // then "END" completes with nothing before it.
      {"false start, then the stop", {"END"}, {"E", "NE", "ND"}, {"", "EN", ""}, 2, ""},
      // "</s" is a prefix of both; "</st" only of "</stop>".
      {"common prefix, longer one", {"</s>", "</stop>"}, {"a</s", "t", "op> tail"}, {"a", "", ""}, 2, ""},
      {"common prefix, shorter one", {"</s>", "</stop>"}, {"a</s", "> b"}, {"a", ""}, 1, ""},
      {"common prefix, neither", {"</s>", "</stop>"}, {"a</s", "x"}, {"a", "</sx"}, -1, ""},
      // Overlapping stops: "cat" starts at 4, "at!" at 5: the earliest wins.
      {"earliest of overlapping stops", {"at!", "cat"}, {"the cat!"}, {"the "}, 0, ""},
      {"stop at the very start", {"STOP"}, {"STOP and more"}, {""}, 0, ""},
      {"stop as the first delta's prefix, later pushes", {"STOP"}, {"ST", "OP", "ignored"}, {"", "", ""}, 1, ""},
      // Multi-byte text around the stop: "→" (3 bytes) is held as the start of
      // "→stop"; the text before it is released whole.
      {"utf-8 around the stop", {"→stop"}, {"naïve ", "café →", "sto", "p 日本"},
       {"naïve ", "café ", "", ""}, 3, ""},
      {"utf-8 stop spanning deltas", {"日本"}, {"東京と日", "本語"}, {"東京と", ""}, 1, ""},
      // "日" held twice; at the end it was not a stop after all.
      {"utf-8 false start then flush", {"日本"}, {"日", "曜日"}, {"", "日曜"}, -1, "日"},
      {"flush without a stop", {"END"}, {"abc E"}, {"abc "}, -1, "E"},
      {"no stops at all", {}, {"a", "b"}, {"a", "b"}, -1, ""},
      {"empty stop string ignored", {""}, {"abc"}, {"abc"}, -1, ""},
      // A delta ending inside "é" (C3 A9): the lone lead byte is held.
      {"delta splitting a character", {"X"}, {"a\xC3", "\xA9" "b"}, {"a", "\xC3\xA9" "b"}, -1, ""},
  };
  for (const Case& c : table) {
    INFO(c.name);
    REQUIRE(c.deltas.size() == c.released.size());
    StopMatcher m(c.stops);
    for (size_t i = 0; i < c.deltas.size(); ++i) {
      INFO("push " << i);
      const StopMatcher::Output out = m.push(c.deltas[i]);
      CHECK(out.text == c.released[i]);
      CHECK(out.stopped == (c.stopped_at >= 0 && static_cast<int>(i) >= c.stopped_at));
    }
    CHECK(m.stopped() == (c.stopped_at >= 0));
    CHECK(m.flush() == c.flushed);
  }
}

TEST_CASE("nothing is lost or duplicated without a stop", "[sampling]") {
  // The released pieces plus the flush concatenate to the input, whatever the
  // split (all 1-byte deltas here), with a stop string that keeps almost
  // matching: "abab" against stop "abac".
  const std::string text = "xxabababab abac";  // the stop completes at the end
  StopMatcher m({"abac"});
  std::string seen;
  bool stopped = false;
  for (char ch : text) {
    const auto out = m.push(std::string(1, ch));
    seen += out.text;
    stopped = out.stopped;
  }
  CHECK(stopped);
  CHECK(seen == "xxabababab ");  // by hand: everything before "abac"
  StopMatcher m2({"abac"});
  std::string seen2;
  for (char ch : std::string("xxababab ab")) seen2 += m2.push(std::string(1, ch)).text;
  seen2 += m2.flush();
  CHECK(seen2 == "xxababab ab");
}
