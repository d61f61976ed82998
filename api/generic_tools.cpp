#include "api/generic_tools.h"

#include "engine/template/json_parse.h"

namespace larder {

namespace {

using ojson = nlohmann::ordered_json;

std::string dump_compact(const ojson& j) {
  // Python's json.dumps separators (", ", ": "), as the example shows them.
  std::string out;
  const std::string flat = j.dump(-1, ' ', false, ojson::error_handler_t::replace);
  // Re-serialize with spaces: walk the compact text outside strings.
  bool in_string = false;
  for (size_t i = 0; i < flat.size(); ++i) {
    const char c = flat[i];
    out += c;
    if (in_string) {
      if (c == '\\' && i + 1 < flat.size()) {
        out += flat[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    if (c == ',' || c == ':') out += ' ';
  }
  return out;
}

std::string system_prompt(const ojson& tools, bool parallel) {
  std::string s =
      "Respond in JSON format, either with `tool_call` (a request to call tools) or with `response` reply to the "
      "user's request.\n\nYou can call any of the following tools to satisfy the user's requests: ";
  s += tools.dump(2, ' ', false, ojson::error_handler_t::replace);
  s += "\n\nExample tool call syntax:\n\n";
  s += parallel ? R"({"tool_calls": [{"name": "tool_name", "arguments": {"arg1": "some_value"}, "id": "call_1"}]})"
                : R"({"tool_call": {"name": "tool_name", "arguments": {"arg1": "some_value"}}})";
  s += "\n\nExample reply:\n\n";
  s += R"({"response": "Your reply to the user."})";
  return s;
}

// Arguments as the client sent them: the object when they are JSON text of one.
ojson arguments_value(const std::string& text) {
  ojson j = parse_json_ordered(text);
  if (j.is_discarded()) return text;
  return j;
}

std::string calls_content(const ChatMessage& m) {
  ojson out = ojson::object();
  if (m.tool_calls.size() == 1) {
    const ToolCall& c = m.tool_calls[0];
    out["tool_call"] = {{"name", c.name}, {"arguments", arguments_value(c.arguments)}};
  } else {
    ojson calls = ojson::array();
    for (const ToolCall& c : m.tool_calls) {
      calls.push_back({{"name", c.name}, {"arguments", arguments_value(c.arguments)}, {"id", c.id}});
    }
    out["tool_calls"] = std::move(calls);
  }
  if (!m.content_null && !m.content.empty()) out["content"] = m.content;
  return dump_compact(out);
}

std::string tool_response_content(const ChatMessage& m) {
  ojson r = {{"tool_call_id", m.tool_call_id}};
  if (!m.name.empty()) r["name"] = m.name;
  r["content"] = m.content;
  return dump_compact(ojson{{"tool_response", std::move(r)}});
}

}  // namespace

ChatRequest generic_tool_request(const ChatRequest& request, const ojson& tools, bool parallel) {
  ChatRequest out = request;
  out.tools_json.clear();
  out.messages.clear();
  size_t first = 0;
  const bool offered = tools.is_array() && !tools.empty();
  const std::string prompt = offered ? system_prompt(tools, parallel) : std::string();
  if (!offered) {
    // History only.
  } else if (!request.messages.empty() && request.messages[0].role == "system") {
    out.messages.emplace_back("system", request.messages[0].content + "\n\n" + prompt);
    first = 1;
  } else {
    out.messages.emplace_back("system", prompt);
  }
  for (size_t i = first; i < request.messages.size(); ++i) {
    const ChatMessage& m = request.messages[i];
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      // A finished turn, also when it is the last message (no prefill).
      ChatMessage turn("assistant", calls_content(m));
      turn.ends_turn = true;
      out.messages.push_back(std::move(turn));
    } else if (m.role == "tool") {
      const bool joins = i > first && request.messages[i - 1].role == "tool";
      if (joins) {
        // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "\n" + f().
        out.messages.back().content += '\n';
        out.messages.back().content += tool_response_content(m);
      } else {
        out.messages.emplace_back("user", tool_response_content(m));
      }
    } else {
      ChatMessage copy = m;
      copy.tool_call_id.clear();
      out.messages.push_back(std::move(copy));
    }
  }
  return out;
}

bool use_generic_tools(ToolCallSyntax template_syntax, bool parallel, ChatRequest* chat) {
  if (template_syntax != ToolCallSyntax::kNone || (chat->tools_json.empty() && !has_tool_history(*chat))) return false;
  const ojson tools = chat->tools_json.empty() ? ojson() : parse_json_ordered(chat->tools_json);
  *chat = generic_tool_request(*chat, tools, parallel);
  return true;
}

namespace {

// use_generic_tools, then render(*chat); when the template refuses the
// generic prompt's system message, once more with it folded into the user turn.
template <typename T, typename Render>
Result<T> with_generic_tools(const Generator& generator, bool parallel, ChatRequest* chat, Render render) {
  const bool generic = use_generic_tools(generator.tool_call_syntax(), parallel, chat);
  Result<T> out = render(*chat);
  if (!generic || out.is_ok() || out.status().code() != StatusCode::kInvalidArgument) return out;
  // A template without a system role (Gemma 2): the tool prompt goes into
  // the first user message.
  ChatRequest folded = fold_system_into_user(*chat);
  if (folded.messages.size() == chat->messages.size()) return out;
  Result<T> retried = render(folded);
  if (retried.is_ok()) *chat = std::move(folded);
  return retried.is_ok() ? std::move(retried) : std::move(out);
}

}  // namespace

Result<std::vector<int32_t>> chat_prompt_with_tools(const Generator& generator, bool parallel, ChatRequest* chat,
                                                    ChatPromptInfo* info) {
  return with_generic_tools<std::vector<int32_t>>(
      generator, parallel, chat, [&](const ChatRequest& c) { return generator.chat_prompt(c, info); });
}

Result<std::string> render_chat_with_tools(const Generator& generator, bool parallel, ChatRequest* chat) {
  return with_generic_tools<std::string>(generator, parallel, chat,
                                         [&](const ChatRequest& c) { return generator.render_chat(c); });
}

ChatRequest fold_system_into_user(const ChatRequest& request) {
  ChatRequest out = request;
  if (out.messages.empty() || out.messages[0].role != "system") return out;
  for (size_t i = 1; i < out.messages.size(); ++i) {
    if (out.messages[i].role != "user") continue;
    out.messages[i].content = out.messages[0].content + "\n\n" + out.messages[i].content;
    out.messages.erase(out.messages.begin());
    return out;
  }
  return request;
}

bool has_tool_history(const ChatRequest& request) {
  for (const ChatMessage& m : request.messages) {
    if (m.role == "tool" || !m.tool_calls.empty()) return true;
  }
  return false;
}

}  // namespace larder
