// Chat formats: turn a list of messages into the prompt text a model was
// trained on. We do not run Jinja; the GGUF's tokenizer.chat_template is only
// inspected to pick one of three fixed renderings.
//
//   kChatML  (template contains "<|im_start|>"), per message
//              "<|im_start|>{role}\n{content}<|im_end|>\n"
//            then "<|im_start|>assistant\n". Roles: system, user, assistant, tool.
//   kLlama3  (template contains "<|start_header_id|>"): "<|begin_of_text|>",
//            then per message
//              "<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>"
//            with the content's leading/trailing whitespace trimmed (as Meta's
//            template does), then "<|start_header_id|>assistant<|end_header_id|>\n\n".
//            Roles: system, user, assistant. It renders the BOS text itself,
//            so the caller tokenizes with add_bos = false.
//   kPlain   (no template, or one matching neither marker; e.g. stories260K):
//            a system message renders as "{content}\n\n"; a user turn as
//            "User: {content}\n"; an assistant turn as "Assistant: {content}\n";
//            the text ends with "Assistant:" (no trailing space: the answer's
//            first piece brings its own "▁"). Roles: system, user, assistant.
//            No control tokens, so tokenize it with parse_special = false.
//
// Prefix property (what the KV prefix cache relies on): for every format the
// rendering of turns 1..k is a text prefix of the rendering of turns 1..k plus
// the assistant's answer plus a further user turn. For the plain format this
// also holds for token ids with stories260K's tokenizer, possibly except the
// last token of the shorter prompt (":" could merge with the answer's first
// piece in some vocab); the last page of a prompt is recomputed anyway, since
// only full pages are shared.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/generation.h"
#include "storage/status.h"

namespace larder {

class GgufFile;

enum class ChatFormatKind { kPlain, kChatML, kLlama3 };

class ChatFormat {
 public:
  ChatFormat() = default;  // kPlain

  // From the GGUF's tokenizer.chat_template (absent or not a string: kPlain,
  // with the reason in detect_reason()).
  static ChatFormat detect(const GgufFile& gguf);
  // From a template string; see the top of this file.
  static ChatFormat from_template(std::string_view chat_template);
  // A format by kind (no template involved).
  static ChatFormat of_kind(ChatFormatKind kind);

  ChatFormatKind kind() const { return kind_; }
  const char* name() const;  // "plain", "chatml", "llama3"
  // Why this format was chosen, for a log line, e.g. "template contains
  // <|im_start|>" or "no tokenizer.chat_template in the metadata".
  const std::string& detect_reason() const { return reason_; }

  // Renders `messages`, ending with the prompt of the assistant's turn.
  // Errors (Status::invalid_argument): an empty list; a role the format does
  // not know (the message names the role and the format).
  Result<std::string> render(const std::vector<ChatMessage>& messages) const;

  // ChatML / Llama-3 output contains control-token text: tokenize it with
  // parse_special = true.
  bool uses_special_tokens() const { return kind_ != ChatFormatKind::kPlain; }
  // Llama-3 renders "<|begin_of_text|>" itself: the caller must not add BOS.
  bool adds_bos_itself() const { return kind_ == ChatFormatKind::kLlama3; }

 private:
  ChatFormat(ChatFormatKind kind, std::string reason) : kind_(kind), reason_(std::move(reason)) {}

  ChatFormatKind kind_ = ChatFormatKind::kPlain;
  std::string reason_ = "default";
};

}  // namespace larder
