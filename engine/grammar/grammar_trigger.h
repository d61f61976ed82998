// Lazy grammars: a grammar that applies only once the output reaches a
// trigger, as llama.cpp's server constrains tool calls under tool_choice
// "auto" (its grammar_lazy and grammar_triggers). Until then the model
// writes freely; from the trigger on, the text is kept inside the grammar,
// which must accept the trigger's own bytes (or, for a trigger that is
// only a marker, such as Mistral's [TOOL_CALLS], the bytes after it).
//
// Where triggers are looked for: the output's content only. A reasoning
// block at the start of the output (block_open ... block_close, such as
// <think> ... </think>; or from the first byte when the prompt opened it)
// is skipped, so a model that thinks about "<tool_call>" is not forced
// into a call (the reasoning rules of api/reasoning.h: the block counts
// only at the start, whitespace before it allowed).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace larder {

struct GrammarTrigger {
  std::string text;
  // Only as the content's first bytes (after leading whitespace), not
  // anywhere in it.
  bool at_start = false;
  // The grammar applies from the byte after the trigger instead of from
  // its first byte.
  bool grammar_after = false;
};

struct GrammarTriggers {
  std::vector<GrammarTrigger> triggers;  // empty: the grammar (if any) applies from the first token
  std::string block_open, block_close;   // a reasoning block to skip; empty: none
  bool starts_in_block = false;          // the prompt opened the block: the output starts inside it
  bool empty() const { return triggers.empty(); }
};

// Watches one output for the first trigger, fed piece by piece. Pure text:
// a trigger split over several pieces is found, as is one in the middle of
// a piece.
class TriggerWatch {
 public:
  TriggerWatch() = default;
  explicit TriggerWatch(const GrammarTriggers* triggers);
  // The output's next bytes. Returns, once a trigger is found, the text the
  // grammar must accept first: from the trigger's first byte (or the byte
  // after it, grammar_after) to the end of what was pushed; nullopt before
  // that, and on every call after it.
  std::optional<std::string> push(std::string_view piece);
  bool fired() const { return state_ == State::kFired; }
  // After a firing whose text the grammar refused: watch the content that
  // follows for the next trigger (at-start triggers no longer count).
  void rearm() {
    if (state_ != State::kFired) return;
    held_.clear();
    state_ = State::kContent;
  }

 private:
  enum class State { kOff, kBlockStart, kInBlock, kContentStart, kContent, kFired };
  std::optional<std::string> scan();

  const GrammarTriggers* triggers_ = nullptr;
  State state_ = State::kOff;  // kOff: no triggers, never fires
  std::string held_;  // pushed bytes not yet ruled out as the start of a tag or trigger
  size_t longest_ = 0;  // the longest anywhere-trigger's length
};

}  // namespace larder
