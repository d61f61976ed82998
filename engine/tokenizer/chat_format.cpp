// Fixed chat renderings (see chat_format.h).
#include "engine/tokenizer/chat_format.h"

#include <algorithm>
#include <cctype>

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

// Text of the token whose id is in metadata `id_key` ("" when absent).
std::string token_text(const GgufFile& gguf, const char* id_key) {
  const GgufValue* id = gguf.find(id_key);
  const GgufValue* tokens = gguf.find("tokenizer.ggml.tokens");
  if (id == nullptr || tokens == nullptr) return {};
  auto i = id->as_int();
  const std::vector<GgufValue>* arr = tokens->as_array();
  if (!i.is_ok() || arr == nullptr || *i < 0 || static_cast<size_t>(*i) >= arr->size()) return {};
  auto s = (*arr)[static_cast<size_t>(*i)].as_string();
  return s.is_ok() ? *s : std::string();
}

}  // namespace

Result<ChatFormat> ChatFormat::load(const GgufFile& gguf) {
  const GgufValue* value = gguf.find("tokenizer.chat_template");
  if (value == nullptr) return ChatFormat(ChatFormatKind::kPlain, "no tokenizer.chat_template in the metadata");
  auto text = value->as_string();
  if (!text) return Status::corruption("tokenizer.chat_template is not a string");
  return from_jinja(*text, token_text(gguf, "tokenizer.ggml.bos_token_id"),
                    token_text(gguf, "tokenizer.ggml.eos_token_id"));
}

ChatFormat ChatFormat::detect(const GgufFile& gguf) {
  const GgufValue* value = gguf.find("tokenizer.chat_template");
  if (value != nullptr && !value->as_string().is_ok()) {
    return {ChatFormatKind::kPlain, "tokenizer.chat_template is not a string"};
  }
  auto loaded = load(gguf);
  if (loaded.is_ok()) return std::move(loaded).value();
  ChatFormat f(ChatFormatKind::kJinja, "chat template rejected: " + loaded.status().message());
  f.load_error_ = loaded.status();
  return f;
}

Result<ChatFormat> ChatFormat::from_jinja(std::string_view chat_template, std::string bos_token,
                                          std::string eos_token) {
  auto t = tmpl::Template::parse(chat_template);
  if (!t.is_ok()) return t.status();
  ChatFormat f(ChatFormatKind::kJinja,
               "Jinja chat template from the metadata (" + std::to_string(chat_template.size()) + " bytes)");
  f.template_ = std::move(t).value();
  f.bos_token_ = std::move(bos_token);
  f.eos_token_ = std::move(eos_token);
  f.probe_tool_support(chat_template);
  if (chat_template.find("<think>") != std::string_view::npos) f.reasoning_syntax_ = ReasoningSyntax::kThinkTags;
  // A template with a developer role compares or prints it as a string.
  f.has_developer_role_ = chat_template.find("'developer'") != std::string_view::npos ||
                          chat_template.find("\"developer\"") != std::string_view::npos;
  return f;
}

bool ChatFormat::opens_reasoning(std::string_view rendered) {
  const size_t open = rendered.rfind("<think>");
  if (open == std::string_view::npos) return false;
  return rendered.find_first_not_of(" \t\n\r", open + 7) == std::string_view::npos;
}

Result<tmpl::Rendered> ChatFormat::render_jinja(const tmpl::Value& messages, const tmpl::Value& tools,
                                                bool add_generation_prompt, const tmpl::Value& extra) const {
  if (kind_ != ChatFormatKind::kJinja) return Status::unsupported("chat: render_values needs a Jinja template");
  if (!load_error_.is_ok()) return load_error_;
  tmpl::Dict g;
  // Template kwargs first: the standard variables below replace any of them.
  if (extra.is_dict()) {
    for (const auto& [key, value] : extra.dict().items()) g.set(key, value);
  }
  g.set("messages", messages);
  g.set("tools", tools);
  g.set("documents", tmpl::Value::none());
  g.set("add_generation_prompt", tmpl::Value(add_generation_prompt));
  g.set("bos_token", tmpl::Value(bos_token_));
  g.set("eos_token", tmpl::Value(eos_token_));
  return template_->render_text(g, render_options_);
}

Result<std::string> ChatFormat::render_values(const tmpl::Value& messages, const tmpl::Value& tools,
                                              bool add_generation_prompt) const {
  Result<tmpl::Rendered> r = render_jinja(messages, tools, add_generation_prompt);
  if (!r.is_ok()) return r.status();
  return std::move(r->text);
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
    case ChatFormatKind::kJinja: return "jinja";
    case ChatFormatKind::kPlain: break;
  }
  return "plain";
}

Result<std::string> ChatFormat::render(const std::vector<ChatMessage>& messages) const {
  Result<tmpl::Rendered> r = render_messages(messages, tmpl::Value::none());
  if (!r.is_ok()) return r.status();
  return std::move(r->text);
}

Result<tmpl::Rendered> ChatFormat::render_messages(const std::vector<ChatMessage>& all_messages,
                                                   const tmpl::Value& tools, const tmpl::Value& extra) const {
  if (all_messages.empty()) return Status::invalid_argument("chat: no messages to render");
  for (const ChatMessage& m : all_messages) {
    if (!is_one_of(m.role, {"system", "developer", "user", "assistant", "tool"})) {
      return Status::invalid_argument("chat: role '" + m.role +
                                      "' is not one of system, developer, user, assistant, tool");
    }
  }
  // OpenAI's developer role: the template's own where it has one, else system.
  std::vector<ChatMessage> adapted;
  const bool has_developer = std::any_of(all_messages.begin(), all_messages.end(),
                                         [](const ChatMessage& m) { return m.role == "developer"; });
  if (has_developer && !has_developer_role_) {
    adapted = all_messages;
    for (ChatMessage& m : adapted) {
      if (m.role == "developer") m.role = "system";
    }
  }
  const std::vector<ChatMessage>& messages = adapted.empty() ? all_messages : adapted;
  auto bad_role = [&](const ChatMessage& m) {
    return Status::invalid_argument("chat: role '" + m.role + "' is not supported by the " + name() +
                                    " chat format");
  };
  if (kind_ != ChatFormatKind::kJinja) {
    for (const ChatMessage& m : messages) {
      if (!m.tool_calls.empty()) {
        return Status::invalid_argument(std::string("chat: tool calls in the messages need a Jinja chat template; "
                                                    "this model uses the ") + name() + " chat format");
      }
    }
  }
  // Assistant prefill: a last assistant message without tool calls is
  // continued, not answered (see chat_format.h).
  const bool prefill = is_prefill(messages);
  const size_t n_turns = prefill ? messages.size() - 1 : messages.size();
  const size_t last = messages.size() - 1;
  if (kind_ == ChatFormatKind::kJinja) {
    if (!prefill) return render_jinja(message_values(messages), tools, true, extra);
    if (std::optional<Result<tmpl::Rendered>> cut = render_continued(messages, tools, extra)) return std::move(*cut);
    const std::vector<ChatMessage> turns(messages.begin(), messages.begin() + static_cast<ptrdiff_t>(n_turns));
    Result<tmpl::Rendered> r = render_jinja(message_values(turns), tools, true, extra);
    if (!r.is_ok() || messages[last].content.empty()) return r;
    const size_t begin = r->text.size();
    r->text += messages[last].content;
    r->spans.push_back({begin, r->text.size(), static_cast<int32_t>(last)});
    return r;
  }
  // The fixed formats: contents are marked with their message index.
  tmpl::TextBuilder out;
  auto content = [&](size_t i, std::string_view text) { out.append_text(text, true, static_cast<int32_t>(i)); };
  switch (kind_) {
    case ChatFormatKind::kJinja: break;
    case ChatFormatKind::kChatML:
      for (size_t i = 0; i < n_turns; ++i) {
        const ChatMessage& m = messages[i];
        if (!is_one_of(m.role, {"system", "user", "assistant", "tool"})) return bad_role(m);
        out.append_trusted("<|im_start|>" + m.role + "\n");
        content(i, m.content);
        out.append_trusted("<|im_end|>\n");
      }
      out.append_trusted("<|im_start|>assistant\n");
      if (prefill) content(last, messages[last].content);
      break;
    case ChatFormatKind::kLlama3:
      out.append_trusted("<|begin_of_text|>");
      for (size_t i = 0; i < n_turns; ++i) {
        const ChatMessage& m = messages[i];
        if (!is_one_of(m.role, {"system", "user", "assistant"})) return bad_role(m);
        out.append_trusted("<|start_header_id|>" + m.role + "<|end_header_id|>\n\n");
        content(i, trim(m.content));
        out.append_trusted("<|eot_id|>");
      }
      out.append_trusted("<|start_header_id|>assistant<|end_header_id|>\n\n");
      if (prefill) content(last, trim(messages[last].content));
      break;
    case ChatFormatKind::kPlain:
      for (size_t i = 0; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (m.role == "system") {
          content(i, m.content);
          out.append_trusted("\n\n");
        } else if (m.role == "user") {
          out.append_trusted("User: ");
          content(i, m.content);
          out.append_trusted("\n");
        } else if (m.role == "assistant") {
          // The model's own answers follow "Assistant:" directly (usually
          // with the space of their first piece, sometimes with '"', '\'',
          // a curly quote); sent back unchanged they must render exactly as
          // the prompt plus those tokens did, or the chat misses the cache.
          // A space is put in only before an ASCII letter or digit (a first
          // piece without a space that starts so is rare): a client-written
          // "Hello" reads "Assistant: Hello". A prefill ends right after its
          // content.
          const unsigned char c0 = m.content.empty() ? 0 : static_cast<unsigned char>(m.content[0]);
          const bool add_space = c0 < 0x80 && std::isalnum(c0) != 0;
          out.append_trusted(add_space ? "Assistant: " : "Assistant:");
          content(i, m.content);
          if (!(prefill && i == last)) out.append_trusted("\n");
        } else {
          return bad_role(m);
        }
      }
      if (!prefill) out.append_trusted("Assistant:");
      break;
  }
  tmpl::Rendered r;
  r.text = out.take_text(&r.spans);
  return r;
}

std::optional<Result<tmpl::Rendered>> ChatFormat::render_continued(const std::vector<ChatMessage>& messages,
                                                                   const tmpl::Value& tools,
                                                                   const tmpl::Value& extra) const {
  Result<tmpl::Rendered> full = render_jinja(message_values(messages), tools, false, extra);
  // Too long for the context: so is the other form.
  if (!full.is_ok() && full.status().code() == StatusCode::kOutOfRange) return full;
  if (!full.is_ok()) return std::nullopt;
  const auto last = static_cast<int32_t>(messages.size() - 1);
  size_t end = 0;
  bool found = false;
  for (const tmpl::TextSpan& sp : full->spans) {
    if (sp.origin == last && sp.end > sp.begin) end = sp.end, found = true;
  }
  if (!found) return std::nullopt;
  tmpl::Rendered r = std::move(full).value();
  r.text.resize(end);
  std::erase_if(r.spans, [&](const tmpl::TextSpan& sp) { return sp.begin >= end; });
  for (tmpl::TextSpan& sp : r.spans) sp.end = std::min(sp.end, end);
  return Result<tmpl::Rendered>(std::move(r));
}

bool ChatFormat::is_prefill(const std::vector<ChatMessage>& messages) {
  return !messages.empty() && messages.back().role == "assistant" && messages.back().tool_calls.empty() &&
         !messages.back().ends_turn;
}

}  // namespace larder
