#include "api/tool_calls.h"

#include <algorithm>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "api/json_depth.h"
#include "engine/template/json_parse.h"

namespace larder {
namespace {

using OrderedJson = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralTag = "[TOOL_CALLS]";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view trim_left(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s;
}

// `text` with the raw control characters inside its JSON strings escaped
// (\n, \t, \r, \u00XX); empty when it has none.
std::string escape_raw_controls(std::string_view text) {
  std::string out;
  bool in_string = false, found = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (in_string && c < 0x20) {
      found = true;
      static constexpr char kHex[] = "0123456789abcdef";
      switch (c) {
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default: out += "\\u00"; out += kHex[c >> 4]; out += kHex[c & 15];
      }
      continue;
    }
    out += static_cast<char>(c);
    if (in_string && c == '\\' && i + 1 < text.size()) {
      out += text[++i];
    } else if (c == '"') {
      in_string = !in_string;
    }
  }
  return found ? out : std::string();
}

// JSON, or nullopt. A raw newline or tab inside a string is taken as its
// escape: models write code and multi-line text into argument strings that
// way (found in hostile testing: the whole call became content).
std::optional<OrderedJson> parse_json(std::string_view text) {
  if (json_nesting_exceeds(text)) return std::nullopt;  // plain text, never a call
  OrderedJson j = parse_json_ordered(text);
  if (j.is_discarded()) {
    const std::string escaped = escape_raw_controls(text);
    if (escaped.empty()) return std::nullopt;
    j = parse_json_ordered(escaped);
    if (j.is_discarded()) return std::nullopt;
  }
  return j;
}

std::string dump(const OrderedJson& j) { return j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace); }

// {"name": N, "arguments" | "parameters": {...} or "<JSON object>"} -> a call.
std::optional<ParsedToolCall> call_from_json(const OrderedJson& j) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return std::nullopt;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  ParsedToolCall call;
  call.name = name->get<std::string>();
  if (args == j.end() || args->is_null()) {
    call.arguments = "{}";
  } else if (args->is_object()) {
    call.arguments = dump(*args);
  } else if (args->is_string()) {
    std::optional<OrderedJson> inner = parse_json(args->get_ref<const std::string&>());
    if (!inner || !inner->is_object()) return std::nullopt;
    call.arguments = dump(*inner);
  } else {
    return std::nullopt;
  }
  return call;
}

ToolCallParse no_calls(std::string_view text) { return {std::string(text), {}}; }

// Length of the longest proper prefix of `tag` that `s` ends with.
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t k = std::min(s.size(), tag.size() - 1); k > 0; --k) {
    if (s.substr(s.size() - k) == tag.substr(0, k)) return k;
  }
  return 0;
}

// One past the end of the JSON object, array or string that `s` starts
// with; npos when `s` ends first (strings and escapes are skipped).
size_t json_value_end(std::string_view s) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
        if (depth == 0) return i + 1;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth <= 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// Whether `s`, read as JSON from its start, ends inside a string (escapes
// skipped).
bool inside_json_string(std::string_view s) {
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (in_string && s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      in_string = !in_string;
    }
  }
  return in_string;
}

std::string_view trim_right(std::string_view s) {
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Content around calls: the text before the first call keeps its leading
// whitespace (a stream has sent it before any call shows), the whitespace
// next to each call is dropped, and the pieces after calls are joined to
// it by a newline each (found in hostile testing: a streamed answer and the
// same answer whole came back with different content).
void append_piece(std::string* content, std::string_view piece) {
  piece = trim(piece);
  if (piece.empty()) return;
  if (!content->empty()) *content += '\n';
  *content += piece;
}

ToolCallParse parse_hermes(std::string_view text, bool cut) {
  ToolCallParse out;
  std::string content;
  size_t pos = 0;
  for (size_t open; (open = text.find(kHermesOpen, pos)) != std::string_view::npos;) {
    if (pos == 0) {
      content = trim_right(text.substr(0, open));
      if (trim(content).empty()) content.clear();
    } else {
      append_piece(&content, text.substr(pos, open - pos));
    }
    const size_t body = open + kHermesOpen.size();
    auto call_closed_at = [&](size_t close) {
      std::string_view inner = close == std::string_view::npos ? text.substr(body) : text.substr(body, close - body);
      // A last block without its closing tag (the answer was cut, or the
      // model ended there): the start of that tag is not part of the call.
      if (close == std::string_view::npos) inner.remove_suffix(partial_tag_suffix(inner, kHermesClose));
      std::optional<OrderedJson> j = parse_json(trim(inner));
      return j ? call_from_json(*j) : std::nullopt;
    };
    size_t close = text.find(kHermesClose, body);
    std::optional<ParsedToolCall> call = call_closed_at(close);
    if (!call && close != std::string_view::npos) {
      // The closing tag may be inside a string of the call (code that
      // writes tool calls): the tag after the call's JSON value ends it,
      // and a call whose JSON runs on to the end is unfinished, as a block
      // with no closing tag (found in hostile testing: the call became
      // content; cut there, the whole calls before it were lost too).
      const size_t start = text.find_first_not_of(" \t\r\n", body);
      if (start < close && text[start] == '{' && inside_json_string(text.substr(start, close - start))) {
        const size_t length = json_value_end(text.substr(start));
        if (length == std::string_view::npos) {
          close = std::string_view::npos;
        } else if (start + length > close) {
          const size_t later = text.find(kHermesClose, start + length);
          if (std::optional<ParsedToolCall> c = call_closed_at(later); c || later == std::string_view::npos) {
            call = std::move(c);
            close = later;
          }
        }
      }
    }
    if (!call && close == std::string_view::npos && (cut || !out.calls.empty())) {
      // A tag followed by what cannot open a call is a mention of it, not
      // a call: text (found in hostile testing: a cut answer lost "<tool_call>
      // followed by JSON. For example").
      const std::string_view after = trim_left(text.substr(body));
      if (!after.empty() && after.front() != '{') {
        if (out.calls.empty()) return no_calls(text);
        append_piece(&content, text.substr(open));
        out.content = std::move(content);
        return out;
      }
      // A call cut short (max_tokens), alone or after whole ones: the whole
      // ones stand, the cut one is dropped (found in hostile testing: every
      // call came back as raw content).
      pos = text.size();
      break;
    }
    if (!call) return no_calls(text);
    out.calls.push_back(std::move(*call));
    pos = close == std::string_view::npos ? text.size() : close + kHermesClose.size();
  }
  if (out.calls.empty() && !cut) return no_calls(text);
  // The start of one more tag where the answer was cut (max_tokens) is not
  // content (found in hostile testing: "<too" after two calls).
  std::string_view tail = text.substr(pos);
  if (const size_t partial = partial_tag_suffix(tail, kHermesOpen);
      partial > 0 && (cut || partial == trim(tail).size())) {
    tail.remove_suffix(partial);
    tail = trim_right(tail);
  }
  // A cut answer with no tag at all keeps its text as streamed.
  if (pos == 0) {
    out.content = tail;
  } else {
    append_piece(&content, tail);
    out.content = std::move(content);
  }
  return out;
}

bool offered(const ToolCallOptions& options, const std::string& name) {
  return options.tool_names.empty() ||
         std::find(options.tool_names.begin(), options.tool_names.end(), name) != options.tool_names.end();
}

// The whole answer is one call object, maybe after <|python_tag|>.
ToolCallParse parse_bare_json(const ToolCallOptions& options, std::string_view text) {
  std::string_view t = trim(text);
  if (t.starts_with(kPythonTag)) t = trim(t.substr(kPythonTag.size()));
  std::optional<OrderedJson> j = parse_json(t);
  std::optional<ParsedToolCall> call = j ? call_from_json(*j) : std::nullopt;
  if (!call || !offered(options, call->name)) return no_calls(text);
  ToolCallParse out;
  out.calls.push_back(std::move(*call));
  return out;
}

// [TOOL_CALLS] then a list of calls (or one call object); without the tag
// (a control token, so usually not in the text) only a list whose every
// call names an offered tool: a JSON list the user asked for stays content
// (found in hostile testing: [{"name": "Alice"}, {"name": "Bob"}] became two
// calls, and a bare object a call that the stream had sent as content).
ToolCallParse parse_mistral(const ToolCallOptions& options, std::string_view text) {
  std::string_view t = trim(text);
  const bool tagged = t.starts_with(kMistralTag);
  if (tagged) t = trim(t.substr(kMistralTag.size()));
  std::optional<OrderedJson> j = parse_json(t);
  if (!j || (!tagged && !j->is_array())) return no_calls(text);
  ToolCallParse out;
  const OrderedJson items = j->is_array() ? *j : OrderedJson::array({*j});
  for (const OrderedJson& item : items) {
    std::optional<ParsedToolCall> call = call_from_json(item);
    if (!call || (!tagged && !offered(options, call->name))) return no_calls(text);
    out.calls.push_back(std::move(*call));
  }
  if (out.calls.empty()) return no_calls(text);
  return out;
}

// A generic tool prompt's answer cut short (when it opens as the envelope;
// anything else stays content): {"tool_calls": [...] gives the calls whole
// before the cut, {"tool_call": {...} its call if that is whole, and
// {"response": "... the text written so far (a cut escape dropped); the
// envelope's markup is never content (found in hostile testing: the whole
// calls before a cut one were lost, and a cut \ud83d\ude00 left raw JSON).
ToolCallParse parse_cut_envelope(std::string_view text) {
  constexpr std::string_view kCalls = "\"tool_calls\"", kCall = "\"tool_call\"", kResponse = "\"response\"";
  const std::string_view t = trim_left(text);
  if (!t.starts_with('{')) return no_calls(text);
  const std::string_view rest = trim_left(t.substr(1));
  if (rest.empty()) return no_calls(text);  // "{" alone: nothing says what it was
  std::string_view key;
  for (std::string_view k : {kCalls, kCall, kResponse}) {
    if (k.starts_with(rest)) return {};  // cut inside the key
    if (rest.starts_with(k)) key = k;
  }
  if (key.empty()) return no_calls(text);
  std::string_view v = trim_left(rest.substr(key.size()));
  if (v.empty()) return {};
  if (v.front() != ':') return no_calls(text);
  v = trim_left(v.substr(1));
  if (v.empty()) return {};
  ToolCallParse out;
  auto add_call = [&](std::string_view item) {
    std::optional<OrderedJson> j = parse_json(item);
    std::optional<ParsedToolCall> call = j ? call_from_json(*j) : std::nullopt;
    if (!call) return false;
    out.calls.push_back(std::move(*call));
    return true;
  };
  if (key == kCall) {
    const size_t end = v.front() == '{' ? json_value_end(v) : std::string_view::npos;
    if (end != std::string_view::npos && !add_call(v.substr(0, end))) return no_calls(text);
    return out;
  }
  if (key == kCalls) {
    if (v.front() != '[') return no_calls(text);
    for (v = trim_left(v.substr(1)); !v.empty();) {
      if (v.front() == ',') {
        v = trim_left(v.substr(1));
        continue;
      }
      const size_t end = v.front() == '{' ? json_value_end(v) : std::string_view::npos;
      if (end == std::string_view::npos) break;  // the cut one
      if (!add_call(v.substr(0, end))) return no_calls(text);
      v = trim_left(v.substr(end));
    }
    return out;
  }
  // "response": its string, whole or cut (then closed; a cut escape such as
  // \ or \ud83d\ude0 is dropped). Another kind of value: nothing.
  if (v.front() != '"') return {};
  if (const size_t end = json_value_end(v); end != std::string_view::npos) {
    std::optional<OrderedJson> j = parse_json(v.substr(0, end));
    if (j && j->is_string()) out.content = j->get<std::string>();
    return out;
  }
  for (size_t drop = 0; drop <= 12 && drop < v.size(); ++drop) {
    std::optional<OrderedJson> j = parse_json(std::string(v.substr(0, v.size() - drop)) + "\"");
    if (j && j->is_string()) {
      out.content = j->get<std::string>();
      return out;
    }
  }
  return out;
}

// The generic tool prompt's answer (api/generic_tools.h): {"tool_call":
// call}, {"tool_calls": [call, ...]} or {"response": "..."}.
ToolCallParse parse_envelope(std::string_view text, bool cut) {
  std::optional<OrderedJson> j = parse_json(trim(text));
  if (!j && cut) return parse_cut_envelope(text);
  if (!j || !j->is_object()) return no_calls(text);
  ToolCallParse out;
  OrderedJson calls;
  auto r = j->find("response");
  if (auto c = j->find("tool_call"); c != j->end()) {
    calls = OrderedJson::array({*c});
  } else if (auto cs = j->find("tool_calls"); cs != j->end() && cs->is_array()) {
    calls = *cs;
  } else if (r != j->end()) {
    if (!r->is_null()) out.content = r->is_string() ? r->get<std::string>() : dump(*r);
    return out;
  } else {
    return no_calls(text);
  }
  for (const OrderedJson& item : calls) {
    std::optional<ParsedToolCall> call = call_from_json(item);
    if (!call) return no_calls(text);
    out.calls.push_back(std::move(*call));
  }
  // Text beside the calls ({"tool_calls": [], "response": "Hi"} included):
  // "response", or "content" as the prompt renders an earlier turn's text.
  if (r == j->end()) r = j->find("content");
  if (r != j->end() && r->is_string()) out.content = r->get<std::string>();
  return out;
}

}  // namespace

ToolCallParse parse_tool_calls(const ToolCallOptions& options, std::string_view text, bool cut) {
  if (cut && options.forced && options.syntax != ToolCallSyntax::kNone) {
    // The answer could only be calls: a cut one is unfinished, not content.
    ToolCallOptions free = options;
    free.forced = false;
    ToolCallParse out = parse_tool_calls(free, text, cut);
    if (out.calls.empty()) out.content.clear();
    return out;
  }
  switch (options.syntax) {
    case ToolCallSyntax::kHermes: return parse_hermes(text, cut);
    case ToolCallSyntax::kLlama3Json: return parse_bare_json(options, text);
    case ToolCallSyntax::kMistral: return parse_mistral(options, text);
    case ToolCallSyntax::kJsonEnvelope: return parse_envelope(text, cut);
    case ToolCallSyntax::kGeneric: {
      // A bare call first: its arguments may spell a tag (found in hostile
      // testing: {"name": "f", "arguments": {"s": "<tool_call>"}} came back
      // as content). Then tags, or a cut answer ending in the start of one.
      ToolCallParse bare = parse_bare_json(options, text);
      if (!bare.calls.empty()) return bare;
      if (text.find(kHermesOpen) != std::string_view::npos || (cut && partial_tag_suffix(text, kHermesOpen) > 0)) {
        return parse_hermes(text, cut);
      }
      return bare;
    }
    case ToolCallSyntax::kNone: break;
  }
  return no_calls(text);
}

std::string ToolCallStream::push(std::string_view delta) {
  const ToolCallSyntax syntax = options_.syntax;
  if (syntax == ToolCallSyntax::kNone) return std::string(delta);
  held_ += delta;
  if (mode_ == Mode::kHeld) return {};
  const bool scans_tags = syntax == ToolCallSyntax::kHermes || syntax == ToolCallSyntax::kGeneric;

  if (mode_ == Mode::kStart) {
    std::string_view t = trim_left(held_);
    if (t.empty()) return {};
    // Syntaxes where a call opens the answer.
    std::string_view tag;
    if (syntax == ToolCallSyntax::kLlama3Json || syntax == ToolCallSyntax::kGeneric) tag = kPythonTag;
    if (syntax == ToolCallSyntax::kMistral) tag = kMistralTag;
    const bool opens_with_object = syntax == ToolCallSyntax::kGeneric || syntax == ToolCallSyntax::kJsonEnvelope;
    if (!tag.empty() || opens_with_object) {
      const bool opens = (syntax == ToolCallSyntax::kMistral ? t.front() == '[' : t.front() == '{') ||
                         (!tag.empty() && t.starts_with(tag));
      if (opens) {
        mode_ = Mode::kHeld;
        return {};
      }
      if (!tag.empty() && tag.starts_with(t)) return {};  // could still become the tag
    }
    mode_ = Mode::kContent;
  }

  // kContent
  if (!scans_tags) return std::exchange(held_, {});
  size_t cut;
  const size_t open = held_.find(kHermesOpen);
  if (open != std::string::npos) {
    cut = open;
    mode_ = Mode::kHeld;
  } else {
    cut = held_.size() - partial_tag_suffix(held_, kHermesOpen);
  }
  // Whitespace right before a (possible) call waits too: content is trimmed
  // around calls.
  while (cut > 0 && is_space(held_[cut - 1])) --cut;
  std::string out = held_.substr(0, cut);
  held_.erase(0, cut);
  if (!trim(out).empty()) sent_text_ = true;
  return out;
}

ToolCallParse ToolCallStream::finish(bool cut) {
  std::string rest = std::exchange(held_, {});
  if (mode_ != Mode::kHeld) {
    // A cut answer's last bytes may be the start of a tag that was held
    // back: not content.
    const bool tags = options_.syntax == ToolCallSyntax::kHermes || options_.syntax == ToolCallSyntax::kGeneric;
    if (const size_t partial = partial_tag_suffix(rest, kHermesOpen); cut && tags && partial > 0) {
      rest.resize(rest.size() - partial);
      while (!rest.empty() && is_space(rest.back())) rest.pop_back();
    }
    return no_calls(rest);
  }
  ToolCallParse out = parse_tool_calls(options_, rest, cut);
  // Text after the calls joins the text sent before them by a newline, as
  // in a whole answer (see append_piece); a held answer that was no call is
  // the raw rest.
  if (sent_text_ && !out.content.empty() && out.content != rest) out.content.insert(0, "\n");
  return out;
}

}  // namespace larder
