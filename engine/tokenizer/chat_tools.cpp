// Chat requests with tools: messages as template data, the probe that finds
// what a template needs, and the tool-call syntax (see chat_format.h, "Tools").
#include <nlohmann/json.hpp>

#include "engine/template/json_parse.h"
#include "engine/tokenizer/chat_format.h"

namespace larder {

const char* tool_call_syntax_name(ToolCallSyntax s) {
  switch (s) {
    case ToolCallSyntax::kHermes: return "hermes";
    case ToolCallSyntax::kLlama3Json: return "llama3_json";
    case ToolCallSyntax::kMistral: return "mistral";
    case ToolCallSyntax::kGeneric: return "generic";
    case ToolCallSyntax::kJsonEnvelope: return "json_envelope";
    case ToolCallSyntax::kNone: break;
  }
  return "none";
}

namespace {

using OrderedJson = nlohmann::ordered_json;

bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

// JSON text from the client -> template value, every string and key
// marked; nullopt when it does not parse or nests deeper than
// tmpl::kMaxValueDepth.
std::optional<tmpl::Value> parse_value(std::string_view text) {
  OrderedJson j = parse_json_ordered(text);
  if (j.is_discarded()) return std::nullopt;
  return tmpl::from_json(j, /*untrusted=*/true);
}

// The probe conversation: a user turn, an assistant turn calling one tool,
// the tool's result. `arguments` and `content` of the assistant turn vary.
constexpr std::string_view kProbeArguments = R"({"probe_arg": "probe_value"})";
// What a template prints when it renders the arguments as JSON (Python's
// json.dumps separators); a tojson'd string shows it with escaped quotes.
constexpr std::string_view kProbeMarker = R"("probe_arg": "probe_value")";

ChatRequest probe_request(bool content_null) {
  ChatRequest r;
  ChatMessage user{"user", "probe question"};
  ChatMessage call{"assistant", ""};
  call.content_null = content_null;
  call.tool_calls.push_back({"probe0001", "probe_fn", std::string(kProbeArguments)});
  ChatMessage result{"tool", "probe result"};
  result.tool_call_id = "probe0001";
  r.messages = {user, call, result};
  r.tools_json = R"([{"type": "function", "function": {"name": "probe_fn", "description": "probe",)"
                 R"( "parameters": {"type": "object", "properties": {"probe_arg": {"type": "string"}}}}}])";
  return r;
}

}  // namespace

tmpl::Value ChatFormat::message_values(const std::vector<ChatMessage>& messages) const {
  // Roles are checked (render_messages) and stay unmarked: templates build
  // control tokens around them ('<|' + role + '|>' in Phi 3).
  const auto client = [](const std::string& s) { return tmpl::Value::untrusted(s); };
  tmpl::List list;
  list.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    tmpl::Dict d;
    d.set("role", tmpl::Value(m.role));
    if (m.content_null) {
      d.set("content", requires_non_null_content_ ? tmpl::Value(std::string()) : tmpl::Value::none());
    } else {
      d.set("content", tmpl::Value::untrusted(m.content, static_cast<int32_t>(i)));
    }
    if (!m.tool_calls.empty()) {
      tmpl::List calls;
      for (const ToolCall& c : m.tool_calls) {
        tmpl::Value arguments = client(c.arguments);
        if (requires_object_arguments_) {
          std::optional<tmpl::Value> parsed = parse_value(c.arguments);
          if (parsed && parsed->is_dict()) arguments = *parsed;
        }
        tmpl::Dict function;
        function.set("name", client(c.name));
        function.set("arguments", std::move(arguments));
        tmpl::Dict call;
        call.set("id", client(c.id));
        call.set("type", tmpl::Value("function"));
        call.set("function", tmpl::Value(std::move(function)));
        calls.push_back(tmpl::Value(std::move(call)));
      }
      d.set("tool_calls", tmpl::Value(std::move(calls)));
    }
    if (m.reasoning_content) d.set("reasoning_content", client(*m.reasoning_content));
    if (!m.tool_call_id.empty()) d.set("tool_call_id", client(m.tool_call_id));
    if (!m.name.empty()) d.set("name", client(m.name));
    list.push_back(tmpl::Value(std::move(d)));
  }
  return tmpl::Value(std::move(list));
}

Result<std::string> ChatFormat::render_request(const ChatRequest& request) const {
  Result<tmpl::Rendered> r = render_text(request);
  if (!r.is_ok()) return r.status();
  return std::move(r->text);
}

Result<tmpl::Rendered> ChatFormat::render_text(const ChatRequest& request) const {
  tmpl::Value kwargs = tmpl::Value::none();
  if (!request.template_kwargs_json.empty()) {
    std::optional<tmpl::Value> parsed = parse_value(request.template_kwargs_json);
    if (!parsed || !parsed->is_dict()) {
      return Status::invalid_argument("chat: chat_template_kwargs must be a JSON object nested at most " +
                                      std::to_string(tmpl::kMaxValueDepth) + " levels deep");
    }
    kwargs = std::move(*parsed);
  }
  if (request.tools_json.empty()) return render_messages(request.messages, tmpl::Value::none(), kwargs);
  if (tool_syntax_ == ToolCallSyntax::kNone) {
    if (kind_ != ChatFormatKind::kJinja) {
      return Status::unsupported(std::string("this model has no Jinja chat template (it uses the ") + name() +
                                 " chat format), so it cannot be offered tools");
    }
    return Status::unsupported("this model's chat template does not render tools, so it cannot be offered tools");
  }
  if (request.messages.empty()) return Status::invalid_argument("chat: no messages to render");
  std::optional<tmpl::Value> tools = parse_value(request.tools_json);
  if (!tools || !tools->is_list()) {
    return Status::invalid_argument("chat: tools must be a JSON array nested at most " +
                                    std::to_string(tmpl::kMaxValueDepth) + " levels deep");
  }
  return render_messages(request.messages, *tools, kwargs);
}

void ChatFormat::probe_tool_support(std::string_view chat_template) {
  if (!contains(chat_template, "tools")) {
    tool_syntax_ = ToolCallSyntax::kNone;
  } else if (contains(chat_template, "<tool_call>")) {
    tool_syntax_ = ToolCallSyntax::kHermes;
  } else if (contains(chat_template, "[TOOL_CALLS]")) {
    tool_syntax_ = ToolCallSyntax::kMistral;
  } else if (contains(chat_template, "<|start_header_id|>")) {
    tool_syntax_ = ToolCallSyntax::kLlama3Json;
  } else {
    tool_syntax_ = ToolCallSyntax::kGeneric;
  }

  // The probes render with the flags off, i.e. the data as the client sent it.
  requires_object_arguments_ = false;
  requires_non_null_content_ = false;
  auto render_probe = [&](const ChatRequest& r) -> Result<std::string> {
    std::optional<tmpl::Value> tools = parse_value(r.tools_json);
    return render_values(message_values(r.messages), tools ? *tools : tmpl::Value::none(), true);
  };
  // Arguments: first with content null (DeepSeek renders tool calls only
  // then), then with "". Templates that show them in neither form keep strings.
  bool found = false;
  for (bool content_null : {true, false}) {
    ChatRequest probe = probe_request(content_null);
    requires_object_arguments_ = false;
    Result<std::string> as_string = render_probe(probe);
    if (as_string.is_ok() && contains(*as_string, kProbeMarker)) {
      found = true;
      break;
    }
    requires_object_arguments_ = true;
    Result<std::string> as_object = render_probe(probe);
    if (as_object.is_ok() && contains(*as_object, kProbeMarker)) {
      found = true;
      break;
    }
  }
  if (!found) requires_object_arguments_ = false;
  ChatRequest probe = probe_request(/*content_null=*/false);
  Result<std::string> with_empty = render_probe(probe);
  Result<std::string> with_null = render_probe(probe_request(/*content_null=*/true));
  // Only when "" does better: a template that fails on the probe either way
  // (Gemma: no tool role) keeps the client's data.
  requires_non_null_content_ = with_empty.is_ok() && (!with_null.is_ok() || (contains(*with_null, "None") &&
                                                                             !contains(*with_empty, "None")));
}

}  // namespace larder
