// The "logprobs" object of a response choice, from the engine's entries
// (GenerationEvent::logprobs, engine/sampling/logprobs.h), in OpenAI's
// shapes:
//   chat:        {"content": [{"token", "logprob", "bytes",
//                  "top_logprobs": [{"token", "logprob", "bytes"}]}],
//                 "refusal": null}
//   completions: {"tokens": [piece], "token_logprobs": [logprob],
//                 "top_logprobs": [{piece: logprob}], "text_offset": [int]}
// "token" / the completions' pieces are the token's text piece as a JSON
// string (a piece that is not whole UTF-8, e.g. one byte of a character,
// shows U+FFFD there); "bytes" holds its raw bytes. A -inf logprob (a token
// the model rules out) is -9999.0, as OpenAI writes it. The echoed first
// prompt token has logprob null and top_logprobs null (completions).
// text_offset counts characters (Unicode code points, as Python's str
// indexes them) from the start of the choice's text, echoed prompt
// included. A completions {piece: logprob} object lists its alternatives in
// rank order, the likeliest first (the engine's order; clients take the key
// order as the rank), and two alternatives with the same piece keep the
// likelier one there. The objects are ordered_json (keys in the order
// written), so they must be serialized as such, not through a
// nlohmann::json (which sorts keys).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/openai_response.h"
#include "engine/generation.h"

namespace larder {

// Collects one choice's entries as its events arrive (loop thread) and
// shapes them: take() returns the object for the entries added since the
// last take (a streamed chunk's), or every entry when called once at the end.
class ResponseLogprobs {
 public:
  explicit ResponseLogprobs(CompletionKind kind) : kind_(kind) {}
  // A non-final event: its text (what the client receives) and entries. A
  // final event: its entries only (its text comes as a non-final piece).
  // The entries are moved out of event.logprobs (an echo of many long
  // prompts with 20 alternatives a token is millions of strings: copying
  // them held the loop thread).
  void add(GenerationEvent& event);
  bool has_pending() const { return !pending_.empty(); }
  // The logprobs object of the pending entries (an empty list when none).
  nlohmann::ordered_json take();
  // The same object as JSON text, byte for byte dump_json(take()), written
  // entry by entry: a non-streamed body with top_logprobs holds no DOM of
  // them all (found in hostile testing: 7-12x the body's bytes).
  std::string take_text();

 private:
  struct Pending {
    TokenLogprob entry;
    size_t byte_offset = 0;  // in text_
  };
  // Code points in text_[0, byte_offset) (offsets asked for never decrease).
  size_t chars_at(size_t byte_offset);

  CompletionKind kind_;
  std::string text_;            // all text of the choice so far (echo included)
  size_t echo_bytes_ = 0;       // bytes of text_ that are the echoed prompt
  std::vector<Pending> pending_;
  size_t counted_bytes_ = 0, counted_chars_ = 0;  // chars_at's cursor
};

}  // namespace larder
