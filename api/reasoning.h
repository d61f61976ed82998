// Reasoning ("thinking") in a model's answer: the text a reasoning model
// writes between <think> and </think> before its answer (Qwen 3, QwQ,
// DeepSeek R1 distills; engine ReasoningSyntax::kThinkTags) is returned
// apart from the answer, as llama.cpp's server does with its default
// `reasoning_format` ("auto", i.e. "deepseek"): message.reasoning_content
// and, streaming, delta.reasoning_content.
//
// The rules (one answer, whole or streamed, gives the same split):
//   - The thinking starts at the beginning of the answer: either the
//     answer opens with "<think>" (whitespace before it allowed), or the
//     prompt ended inside an open block (ReasoningOptions::starts_open, a
//     generation prompt ending in "<think>\n"). Anywhere else, "<think>" is
//     content.
//   - It ends at the first "</think>"; whitespace after the tag is
//     dropped, the rest is content. An answer that never closes the block
//     (cut off by max_tokens) is all reasoning.
//   - Whitespace at either end of the reasoning is dropped; the tags are
//     in neither part.
// Tool calls are looked for in the content only, never in the reasoning
// (the caller parses the content). Reasoning tokens: the tokens of every
// delta that held any part of the block, its tags included.
//
// reasoning_format "none" leaves the whole answer in content, tags and all:
// the block is still found (push() returns it, verbatim, as `reasoning`,
// with raw() true) so that the caller passes it on as content without
// looking for tool calls in it, and no reasoning tokens are counted. A
// model without reasoning markers: everything is content.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "engine/generation.h"

namespace larder {

// The reasoning block's tags (ReasoningSyntax::kThinkTags).
inline constexpr std::string_view kReasoningOpen = "<think>";
inline constexpr std::string_view kReasoningClose = "</think>";

enum class ReasoningFormat {
  kNone,      // "none": the thinking stays in content
  kDeepseek,  // "auto" (the default) or "deepseek": reasoning_content
};
// "none", "auto", "deepseek" -> the format; anything else: nullopt.
std::optional<ReasoningFormat> reasoning_format_from_name(std::string_view name);

struct ReasoningOptions {
  ReasoningSyntax syntax = ReasoningSyntax::kNone;  // the model's; kNone: nothing is split off
  ReasoningFormat format = ReasoningFormat::kDeepseek;
  bool starts_open = false;  // the prompt ended inside an open <think> block
  bool splits() const { return syntax != ReasoningSyntax::kNone && format != ReasoningFormat::kNone; }
  bool finds_block() const { return syntax != ReasoningSyntax::kNone; }
};

// The options of one chat answer. Under a grammar (response_format, a
// forced tool call, llama.cpp's grammar / json_schema) the answer is
// constrained from its first token, so none of it is thinking: a <think>
// the grammar lets the model write stays in content, and nothing is split
// off (also after a prompt that opened a block).
ReasoningOptions reasoning_options(ReasoningSyntax syntax, ReasoningFormat format, bool prompt_opens_block,
                                   bool under_grammar);

struct ReasoningSplit {
  std::string reasoning;
  std::string content;
};

// Splits answers, whole or streamed: push() each delta (with the number of
// tokens it covers) and send what it returns at once; a tail that may be
// the start of a tag, or whitespace that may end the reasoning, is held
// back. finish() at the end returns what was held.
class ReasoningStream {
 public:
  explicit ReasoningStream(ReasoningOptions options = {});
  ReasoningSplit push(std::string_view delta, size_t n_tokens = 0);
  ReasoningSplit finish();
  int reasoning_tokens() const { return reasoning_tokens_; }
  // reasoning_format "none": `reasoning` is the block's raw text, to be sent
  // as content.
  bool raw() const { return raw_; }
  // A reasoning model's answer (whatever the format): the response reports
  // reasoning_tokens.
  bool active() const { return options_.finds_block(); }

 private:
  enum class State {
    kStart,       // only whitespace so far: "<think>" may still open the answer
    kReasoning,   // inside the block
    kAfterClose,  // after </think>: whitespace is dropped
    kContent,     // the rest is content
  };
  // Appends reasoning text, dropping whitespace at its start and holding
  // whitespace at its end until more text (or the close) follows.
  void append_reasoning(std::string_view text, bool closing, std::string* out);

  ReasoningOptions options_;
  bool raw_ = false;
  State state_ = State::kStart;
  std::string held_;         // text not yet classified
  std::string trailing_ws_;  // reasoning whitespace that may end the block
  bool reasoning_started_ = false;
  size_t pending_tokens_ = 0;  // tokens of held_ in kStart
  int reasoning_tokens_ = 0;
};

// The whole answer at once (push + finish).
ReasoningSplit split_reasoning(const ReasoningOptions& options, std::string_view text);

}  // namespace larder
