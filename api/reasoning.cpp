#include "api/reasoning.h"

namespace larder {

namespace {

constexpr std::string_view kOpen = kReasoningOpen;
constexpr std::string_view kClose = kReasoningClose;
constexpr std::string_view kSpace = " \t\n\r";

// Length of the longest proper prefix of `tag` that `text` ends with.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

std::optional<ReasoningFormat> reasoning_format_from_name(std::string_view name) {
  if (name == "none") return ReasoningFormat::kNone;
  if (name == "auto" || name == "deepseek") return ReasoningFormat::kDeepseek;
  return std::nullopt;
}

ReasoningOptions reasoning_options(ReasoningSyntax syntax, ReasoningFormat format, bool prompt_opens_block,
                                   bool under_grammar) {
  if (under_grammar) return {ReasoningSyntax::kNone, format, false};
  return {syntax, format, prompt_opens_block};
}

ReasoningStream::ReasoningStream(ReasoningOptions options)
    : options_(options), raw_(options.finds_block() && !options.splits()) {
  if (options_.finds_block() && options_.starts_open) state_ = State::kReasoning;
  if (!options_.finds_block()) state_ = State::kContent;
}

void ReasoningStream::append_reasoning(std::string_view text, bool closing, std::string* out) {
  if (raw_) {
    *out += text;
    return;
  }
  if (!reasoning_started_) {
    const size_t first = text.find_first_not_of(kSpace);
    if (first == std::string_view::npos) return;
    text = text.substr(first);
    reasoning_started_ = true;
  }
  std::string t = std::move(trailing_ws_);
  trailing_ws_.clear();
  t += text;
  const size_t last = t.find_last_not_of(kSpace);
  if (last == std::string::npos) {
    if (!closing) trailing_ws_ = std::move(t);
    return;
  }
  if (!closing) trailing_ws_ = t.substr(last + 1);
  t.resize(last + 1);
  *out += t;
}

ReasoningSplit ReasoningStream::push(std::string_view delta, size_t n_tokens) {
  ReasoningSplit out;
  if (state_ == State::kContent) {
    out.content = delta;
    return out;
  }
  std::string buf = std::move(held_);
  held_.clear();
  buf += delta;
  bool touched = false;  // some of this delta belongs to the block
  size_t i = 0;
  while (i < buf.size()) {
    const std::string_view rest = std::string_view(buf).substr(i);
    switch (state_) {
      case State::kStart: {
        const size_t j = rest.find_first_not_of(kSpace);
        const std::string_view from = j == std::string_view::npos ? std::string_view() : rest.substr(j);
        if (from.starts_with(kOpen)) {
          state_ = State::kReasoning;
          reasoning_tokens_ += static_cast<int>(pending_tokens_);
          pending_tokens_ = 0;
          touched = true;
          if (raw_) out.reasoning += rest.substr(0, j + kOpen.size());
          i += j + kOpen.size();
          continue;
        }
        if (kOpen.starts_with(from)) {  // only whitespace, or the tag's beginning
          held_ = rest;
          pending_tokens_ += n_tokens;
          return out;
        }
        state_ = State::kContent;
        pending_tokens_ = 0;
        continue;  // the whitespace before is content
      }
      case State::kReasoning: {
        touched = true;
        const size_t close = rest.find(kClose);
        if (close != std::string_view::npos) {
          append_reasoning(rest.substr(0, close), true, &out.reasoning);
          if (raw_) out.reasoning += kClose;
          state_ = State::kAfterClose;
          i += close + kClose.size();
          continue;
        }
        const size_t keep = partial_tag_suffix(rest, kClose);
        append_reasoning(rest.substr(0, rest.size() - keep), false, &out.reasoning);
        held_ = rest.substr(rest.size() - keep);
        i = buf.size();
        break;
      }
      case State::kAfterClose: {
        const size_t j = rest.find_first_not_of(kSpace);
        if (raw_) out.reasoning += rest.substr(0, j == std::string_view::npos ? rest.size() : j);
        if (j == std::string_view::npos) {
          i = buf.size();
          break;
        }
        state_ = State::kContent;
        i += j;
        continue;
      }
      case State::kContent:
        out.content += rest;
        i = buf.size();
        break;
    }
  }
  if (touched) reasoning_tokens_ += static_cast<int>(n_tokens);
  if (raw_) reasoning_tokens_ = 0;
  return out;
}

ReasoningSplit ReasoningStream::finish() {
  ReasoningSplit out;
  std::string held = std::move(held_);
  held_.clear();
  if (state_ == State::kStart) {
    out.content = std::move(held);  // whitespace, or a "<thi" that never became the tag
  } else if (state_ == State::kReasoning) {
    append_reasoning(held, true, &out.reasoning);  // never closed: all of it is reasoning
  }
  trailing_ws_.clear();
  return out;
}

ReasoningSplit split_reasoning(const ReasoningOptions& options, std::string_view text) {
  ReasoningStream s(options);
  ReasoningSplit out = s.push(text);
  ReasoningSplit rest = s.finish();
  out.reasoning += rest.reasoning;
  out.content += rest.content;
  return out;
}

}  // namespace larder
