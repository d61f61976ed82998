// Fixed chat renderings (see chat_format.h).
#include "engine/tokenizer/chat_format.h"

#include "engine/gguf/gguf.h"

namespace larder {
namespace {

constexpr std::string_view kChatMLMarker = "<|im_start|>";
constexpr std::string_view kLlama3Marker = "<|start_header_id|>";

// Jinja's `trim` on ASCII whitespace.
std::string_view trim(std::string_view s) {
  constexpr std::string_view kWhitespace = " \t\n\r\f\v";
  const size_t begin = s.find_first_not_of(kWhitespace);
  if (begin == std::string_view::npos) return {};
  const size_t end = s.find_last_not_of(kWhitespace);
  return s.substr(begin, end - begin + 1);
}

bool is_one_of(const std::string& role, std::initializer_list<std::string_view> roles) {
  for (std::string_view r : roles) {
    if (role == r) return true;
  }
  return false;
}

}  // namespace

ChatFormat ChatFormat::detect(const GgufFile& gguf) {
  const GgufValue* value = gguf.find("tokenizer.chat_template");
  if (value == nullptr) return {ChatFormatKind::kPlain, "no tokenizer.chat_template in the metadata"};
  auto text = value->as_string();
  if (!text) return {ChatFormatKind::kPlain, "tokenizer.chat_template is not a string"};
  return from_template(*text);
}

ChatFormat ChatFormat::from_template(std::string_view chat_template) {
  if (chat_template.empty()) return {ChatFormatKind::kPlain, "the chat template is empty"};
  if (chat_template.find(kChatMLMarker) != std::string_view::npos) {
    return {ChatFormatKind::kChatML, "template contains <|im_start|>"};
  }
  if (chat_template.find(kLlama3Marker) != std::string_view::npos) {
    return {ChatFormatKind::kLlama3, "template contains <|start_header_id|>"};
  }
  return {ChatFormatKind::kPlain,
          "template not recognised (neither <|im_start|> nor <|start_header_id|> in its " +
              std::to_string(chat_template.size()) + " bytes)"};
}

ChatFormat ChatFormat::of_kind(ChatFormatKind kind) { return {kind, "chosen explicitly"}; }

const char* ChatFormat::name() const {
  switch (kind_) {
    case ChatFormatKind::kChatML: return "chatml";
    case ChatFormatKind::kLlama3: return "llama3";
    case ChatFormatKind::kPlain: break;
  }
  return "plain";
}

Result<std::string> ChatFormat::render(const std::vector<ChatMessage>& messages) const {
  if (messages.empty()) return Status::invalid_argument("chat: no messages to render");
  std::string out;
  auto bad_role = [&](const ChatMessage& m) {
    return Status::invalid_argument("chat: role '" + m.role + "' is not supported by the " + name() +
                                    " chat format");
  };
  switch (kind_) {
    case ChatFormatKind::kChatML:
      for (const ChatMessage& m : messages) {
        if (!is_one_of(m.role, {"system", "user", "assistant", "tool"})) return bad_role(m);
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      }
      out += "<|im_start|>assistant\n";
      break;
    case ChatFormatKind::kLlama3:
      out += "<|begin_of_text|>";
      for (const ChatMessage& m : messages) {
        if (!is_one_of(m.role, {"system", "user", "assistant"})) return bad_role(m);
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
        out += trim(m.content);
        out += "<|eot_id|>";
      }
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatFormatKind::kPlain:
      for (const ChatMessage& m : messages) {
        if (m.role == "system") {
          out += m.content + "\n\n";
        } else if (m.role == "user") {
          out += "User: " + m.content + "\n";
        } else if (m.role == "assistant") {
          out += "Assistant: " + m.content + "\n";
        } else {
          return bad_role(m);
        }
      }
      out += "Assistant:";
      break;
  }
  return out;
}

}  // namespace larder
