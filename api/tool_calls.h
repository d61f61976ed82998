// Tool calls in a model's output: finds them in the generated text by the
// syntax the model's chat template uses (engine ToolCallSyntax), for one
// whole answer (parse_tool_calls) or while it streams (ToolCallStream).
//
// Syntaxes (what the templates tell the model to write; llama.cpp's
// common/chat.cpp parses the same families):
//   kHermes      text <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call> ...
//                (Hermes, Qwen 2.5, Qwen 3; one block per call; text around
//                the blocks is content; a last block without </tool_call>
//                counts when its JSON is complete)
//   kLlama3Json  the whole answer (after an optional <|python_tag|>) is
//                {"name": N, "parameters": {...}} (Llama 3.1/3.2)
//   kMistral     the answer starts with [TOOL_CALLS] (a control token, so
//                usually not in the text) and then a JSON array of
//                {"name": N, "arguments": {...}} (Mistral, Nemo); without
//                the tag, only an array whose every call names an offered
//                tool
//   kGeneric     kHermes blocks, or the whole answer is one JSON object as
//                for kLlama3Json
//   kJsonEnvelope the whole answer is {"tool_call": {"name": N, "arguments":
//                {...}}}, {"tool_calls": [...]} or {"response": "text"} (the
//                generic tool prompt, api/generic_tools.h); a response's
//                text is the content, also beside calls ("content" too, as
//                the prompt renders earlier turns); {"tool_calls": []} is
//                no call and no content (as llama.cpp's generic format)
// In every call object "arguments" and "parameters" are both accepted, and
// the arguments must be a JSON object (or a string holding one). A raw
// newline, tab or other control character inside a JSON string is read as
// its escape (models write code into arguments that way). A bare JSON
// answer (kLlama3Json, kGeneric without tags) only counts as a call when it
// names one of the offered tools, so a JSON answer that merely looks like a
// call stays content; tags and the envelope say plainly that they hold a
// call, so a name that was not offered is still a call there (llama.cpp and
// vLLM do the same; the client's tool runner reports the unknown name).
//
// Content around Hermes calls: the text before the first call keeps its
// leading whitespace, the whitespace next to each call is dropped, and text
// after calls joins it by a newline; a stream gives the same.
//
// Malformed calls (JSON that does not parse, a missing name, arguments that
// are not an object) never fail a request: the whole answer is then content,
// as if no call had been found.
//
// An answer cut short (finish_reason "length": max_tokens or the context
// ran out; or a stop string ended it) is parsed with `cut`: a call it cut
// is unfinished, not malformed.
// Such a call is dropped and its markup never becomes content (found in
// hostile testing: a forced call cut by max_tokens came back as the content
// "<tool_call>\n{ \"name\" : \"get_wea"):
//   kHermes / kGeneric tags: an unterminated last block that does not parse
//                (its JSON cut, also inside a string holding </tool_call>),
//                and a partial opening tag at the very end, are dropped;
//                the text around them is the content (an unterminated
//                block after whole calls is dropped even when not cut);
//   kJsonEnvelope: a cut {"response": "..." gives the text written so far
//                as content (a cut escape dropped); a cut {"tool_calls":
//                [...] gives the calls whole before the cut, a cut
//                {"tool_call": ... its call if that is whole, and no content.
// The bare-JSON syntaxes (kLlama3Json, kMistral) keep a cut answer as
// content, as it cannot be told from a JSON answer that is not a call,
// unless the call was forced (ToolCallOptions::forced): a forced answer cut
// before a whole call gives no content in any syntax.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/generation.h"

namespace larder {

struct ToolCallOptions {
  ToolCallSyntax syntax = ToolCallSyntax::kNone;  // kNone: never look for calls
  std::vector<std::string> tool_names;            // the offered functions' names
  bool forced = false;  // a grammar makes the answer calls (tool_choice "required" or a named function)
};

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // compact JSON text of the arguments object, key order kept
};

struct ToolCallParse {
  std::string content;                 // the text outside the calls (trimmed when there are calls)
  std::vector<ParsedToolCall> calls;   // empty: no (well-formed) call; content is then the whole text
};

// Parses one whole answer; `cut`: it was cut short (see above).
ToolCallParse parse_tool_calls(const ToolCallOptions& options, std::string_view text, bool cut = false);

// Streaming: push() each text delta and send what it returns as content at
// once; text that may still turn out to be (part of) a tool call is held
// back. finish() at the end of generation parses what was held: its content
// (not sent yet) and the calls (`cut` as for parse_tool_calls). Content that
// push() returned is never part of a call.
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolCallOptions options) : options_(std::move(options)) {}
  std::string push(std::string_view delta);
  ToolCallParse finish(bool cut = false);

 private:
  enum class Mode {
    kStart,    // only whitespace so far: the answer may still open with a call
    kContent,  // content streams, except a tail that may begin an opening tag
    kHeld,     // a call may have started: everything from held_ on waits for finish()
  };
  ToolCallOptions options_;
  Mode mode_ = Mode::kStart;
  std::string held_;  // text not sent yet
  bool sent_text_ = false;  // push() has returned content that is not only whitespace
};

}  // namespace larder
