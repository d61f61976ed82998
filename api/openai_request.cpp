#include "api/openai_request.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "api/json_depth.h"
#include "api/request_constraints.h"
#include "api/request_fields.h"
#include "api/request_json.h"
#include "api/request_logprobs.h"
#include "engine/template/json_parse.h"

namespace larder {
namespace {

// json is ordered (api/request_json.h): "tools" reach the chat template
// with the client's key order, as Python's json keeps it for transformers.
using namespace request_json;

constexpr size_t kMaxStopStrings = 4;  // OpenAI: "Up to 4 sequences"
constexpr size_t kMaxCacheSaltBytes = 1024;


std::string quoted(const std::string& name) { return "'" + name + "'"; }


// A number field with a range. Bounds are inclusive unless the *_open flag
// says otherwise. Leaves *out alone when the field is absent.
std::optional<ApiError> read_float(const json& obj, const char* name, double lo, bool lo_open,
                                   double hi, bool hi_open, float* out) {
  const json* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) return ApiError::invalid(quoted(name) + " must be a number", name);
  double x = v->get<double>();
  bool below = lo_open ? !(x > lo) : !(x >= lo);
  bool above = hi_open ? !(x < hi) : !(x <= hi);
  // The sampler works in float: check the value it will see too (1e-50 is
  // above 0 as a double and exactly 0 as a float; 1e39 becomes inf).
  const float f = static_cast<float>(x);
  const double fx = static_cast<double>(f);
  below = below || (lo_open ? !(fx > lo) : !(fx >= lo));
  above = above || (hi_open ? !(fx < hi) : !(fx <= hi)) || !std::isfinite(f);
  if (below || above) {
    std::string range = std::string(lo_open ? "(" : "[") + show(json(lo)) + ", " +
                        (hi == INFINITY ? std::string("inf") : show(json(hi))) + (hi_open ? ")" : "]");
    // (An overflow to inf would show as null: found in hostile testing.)
    const std::string fx_text = std::isinf(fx) ? (fx > 0 ? "inf" : "-inf") : show(json(fx));
    std::string as_float = fx != x ? " (" + fx_text + " as a 32-bit float)" : "";
    return ApiError::invalid(quoted(name) + " must be in " + range + ", got " + show(*v) + as_float, name);
  }
  *out = f;
  return std::nullopt;
}

// An integer field >= lo, clamped to INT_MAX.
std::optional<ApiError> read_int(const json& obj, const char* name, int64_t lo,
                                 std::optional<int>* out) {
  const json* given = field(obj, name);
  if (!given) return std::nullopt;
  const std::optional<json> integer = integer_value(*given);  // 2.0 counts as 2
  if (!integer) return ApiError::invalid(quoted(name) + " " + integer_problem(*given) + ", got " + show(*given), name);
  const json* v = &*integer;
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (lo > 0 && u < static_cast<uint64_t>(lo)) {
      return ApiError::invalid(quoted(name) + " must be >= " + std::to_string(lo) + ", got " + show(*v), name);
    }
    *out = u > static_cast<uint64_t>(INT_MAX) ? INT_MAX : static_cast<int>(u);
    return std::nullopt;
  }
  int64_t i = v->get<int64_t>();
  if (i < lo) {
    return ApiError::invalid(quoted(name) + " must be >= " + std::to_string(lo) + ", got " + show(*v), name);
  }
  *out = i > INT_MAX ? INT_MAX : static_cast<int>(i);
  return std::nullopt;
}

std::optional<ApiError> read_bool(const json& obj, const char* name, const char* param, bool* out) {
  const json* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return ApiError::invalid(quoted(param) + " must be a boolean", param);
  *out = v->get<bool>();
  return std::nullopt;
}

// Body -> JSON object.
std::optional<ApiError> parse_object(std::string_view body, json* out) {
  if (json_nesting_exceeds(body)) {
    return ApiError::invalid("the request body nests arrays/objects more than " + std::to_string(kMaxJsonDepth) +
                             " levels deep");
  }
  *out = parse_json_ordered(body);  // linear in the keys (json_parse.h)
  if (out->is_discarded()) return ApiError::invalid("the request body is not valid JSON");
  if (!out->is_object()) return ApiError::invalid("the request body must be a JSON object");
  return std::nullopt;
}

// min_tokens: the least max_tokens accepted (0 for a completion with echo).
std::optional<ApiError> parse_options(const json& obj, const SamplingParams& defaults,
                                      GenerationOptions* out, int min_tokens = 1) {
  out->sampling = defaults;
  if (const json* v = field(obj, "model")) {
    if (!v->is_string()) return ApiError::invalid("'model' must be a string", "model");
    out->model = v->get<std::string>();
  }
  // max_completion_tokens is the newer name; it wins when both are given.
  // llama.cpp's n_predict counts least; its -1 means "no limit" (not given).
  std::optional<int> n_predict;
  if (auto e = read_int(obj, "n_predict", -1, &n_predict)) return e;
  // 0 (no token: the echoed prompt only) where max_tokens may be 0 too.
  if (n_predict == 0 && min_tokens > 0) {
    return ApiError::invalid("'n_predict' must be -1 or >= 1, got 0", "n_predict");
  }
  out->max_tokens = n_predict == -1 ? std::nullopt : n_predict;
  if (auto e = read_int(obj, "max_tokens", min_tokens, &out->max_tokens)) return e;
  if (auto e = read_int(obj, "max_completion_tokens", min_tokens, &out->max_tokens)) return e;

  SamplingParams& s = out->sampling;
  if (auto e = read_float(obj, "temperature", 0, false, 2, false, &s.temperature)) return e;
  if (auto e = read_float(obj, "top_p", 0, true, 1, false, &s.top_p)) return e;
  if (auto e = read_float(obj, "min_p", 0, false, 1, false, &s.min_p)) return e;
  if (auto e = read_float(obj, "presence_penalty", -2, false, 2, false, &s.presence_penalty)) return e;
  if (auto e = read_float(obj, "frequency_penalty", -2, false, 2, false, &s.frequency_penalty)) return e;
  if (auto e = read_float(obj, "repeat_penalty", 0, true, INFINITY, true, &s.repeat_penalty)) return e;
  std::optional<int> top_k;
  if (auto e = read_int(obj, "top_k", 0, &top_k)) return e;
  if (top_k) s.top_k = *top_k;

  if (const json* given = field(obj, "seed")) {
    const std::optional<json> integer = integer_value(*given);
    if (!integer) return ApiError::invalid(std::string("'seed' ") + integer_problem(*given) + ", got " + show(*given), "seed");
    const json* v = &*integer;
    if (v->is_number_unsigned()) {
      s.seed = v->get<uint64_t>();
    } else {
      int64_t seed = v->get<int64_t>();
      if (seed == -1) {
        s.seed.reset();  // llama.cpp convention: -1 asks for a random seed
      } else {
        s.seed = static_cast<uint64_t>(seed);
      }
    }
  }

  if (const json* v = field(obj, "stop")) {
    if (v->is_string()) {
      if (!v->get_ref<const std::string&>().empty()) out->stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      if (v->size() > kMaxStopStrings) {
        return ApiError::invalid("'stop' may hold at most 4 strings", "stop");
      }
      for (const json& s : *v) {
        if (!s.is_string()) return ApiError::invalid("'stop' must be a string or an array of strings", "stop");
        if (!s.get_ref<const std::string&>().empty()) out->stop.push_back(s.get<std::string>());
      }
    } else {
      return ApiError::invalid("'stop' must be a string or an array of strings", "stop");
    }
  }

  if (const json* given = field(obj, "n")) {
    // The upper bound is the server's (router: [server] max_n).
    const std::optional<json> integer = integer_value(*given);
    if (!integer) return ApiError::invalid(std::string("'n' ") + integer_problem(*given) + ", got " + show(*given), "n");
    const json* v = &*integer;
    const bool below_one = v->is_number_unsigned() ? v->get<uint64_t>() < 1 : v->get<int64_t>() < 1;
    if (below_one) return ApiError::invalid("'n' must be at least 1, got " + show(*v), "n");
    out->n = int(std::min<uint64_t>(v->get<uint64_t>(), uint64_t(INT32_MAX)));
  }

  std::optional<int> repeat_last_n;  // -1: the whole context
  if (auto e = read_int(obj, "repeat_last_n", -1, &repeat_last_n)) return e;
  if (repeat_last_n) s.repeat_last_n = *repeat_last_n;

  if (const json* v = field(obj, "cache_salt")) {
    if (!v->is_string() || v->get_ref<const std::string&>().empty() ||
        v->get_ref<const std::string&>().size() > kMaxCacheSaltBytes) {
      return ApiError::invalid("'cache_salt' must be a non-empty string of at most " +
                                   std::to_string(kMaxCacheSaltBytes) + " bytes",
                               "cache_salt");
    }
    out->cache_salt = v->get<std::string>();
  }

  if (auto e = refuse_unsupported(obj)) return e;

  if (auto e = read_grammar(obj, out)) return e;
  if (auto e = read_logit_bias(obj, out)) return e;

  if (auto e = read_bool(obj, "stream", "stream", &out->stream)) return e;
  if (auto e = read_bool(obj, "ignore_eos", "ignore_eos", &out->ignore_eos)) return e;
  if (auto e = read_bool(obj, "return_tokens", "return_tokens", &out->return_tokens)) return e;
  if (auto e = read_bool(obj, "parse_special", "parse_special", &out->parse_special)) return e;
  if (const json* v = field(obj, "stream_options")) {
    if (!v->is_object()) return ApiError::invalid("'stream_options' must be an object", "stream_options");
    // As OpenAI answers (found in hostile testing: accepted and ignored).
    if (!out->stream) {
      return ApiError::invalid("The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                               "stream_options");
    }
    if (auto e = read_bool(*v, "include_usage", "stream_options.include_usage", &out->include_usage)) return e;
    // include_obfuscation (OpenAI: random padding against length side
    // channels on the network) is accepted and ignored: larder serves localhost.
    bool obfuscation = false;
    if (auto e = read_bool(*v, "include_obfuscation", "stream_options.include_obfuscation", &obfuscation)) return e;
    for (auto it = v->begin(); it != v->end(); ++it) {
      if (it.key() != "include_usage" && it.key() != "include_obfuscation") {
        return ApiError::invalid("Unrecognized request argument supplied: stream_options." + it.key(),
                                 "stream_options." + it.key());
      }
    }
  }
  return std::nullopt;
}

// One message's content -> text.
std::optional<ApiError> parse_content(const json& msg, const std::string& role, std::string* out,
                                      bool* is_null) {
  const json* c = field(msg, "content");
  if (!c) {
    // Assistant turns that only carried tool calls have no content.
    *is_null = true;
    if (role == "assistant") return std::nullopt;
    return ApiError::invalid("each message needs 'content' (only assistant messages may omit it)", "messages");
  }
  if (c->is_string()) {
    *out = c->get<std::string>();
    return std::nullopt;
  }
  if (!c->is_array()) {
    return ApiError::invalid("message 'content' must be a string or an array of content parts", "messages");
  }
  for (const json& part : *c) {
    if (!part.is_object()) return ApiError::invalid("each content part must be an object", "messages");
    const json* type = field(part, "type");
    if (!type || !type->is_string()) {
      return ApiError::invalid("each content part needs a string 'type'", "messages");
    }
    if (type->get_ref<const std::string&>() != "text") {
      return ApiError::invalid("content part type " + show(*type) + " is not supported (only \"text\")",
                               "messages");
    }
    const json* text = field(part, "text");
    if (!text || !text->is_string()) {
      return ApiError::invalid("a text content part needs a string 'text'", "messages");
    }
    *out += text->get_ref<const std::string&>();
  }
  return std::nullopt;
}

bool is_known_role(const std::string& role) {
  return role == "system" || role == "developer" || role == "user" || role == "assistant" || role == "tool";
}

bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-';
  });
}

constexpr size_t kMaxTemplateKwargsBytes = 64 << 10;

// "reasoning_format" and "chat_template_kwargs".
std::optional<ApiError> parse_template_fields(const json& obj, ChatCompletionRequest* out) {
  if (const json* v = field(obj, "reasoning_format")) {
    std::optional<ReasoningFormat> f = v->is_string() ? reasoning_format_from_name(v->get_ref<const std::string&>())
                                                      : std::nullopt;
    if (!f) {
      return ApiError::invalid("'reasoning_format' must be \"none\", \"auto\" or \"deepseek\", got " + show(*v),
                               "reasoning_format");
    }
    out->reasoning_format = *f;
  }
  if (const json* v = field(obj, "chat_template_kwargs")) {
    if (!v->is_object()) return ApiError::invalid("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    // Template variables are flags and short strings; a big object only
    // costs render time (converting it into template values), so it is
    // refused before that work.
    if (v->dump().size() > kMaxTemplateKwargsBytes) {
      return ApiError::invalid("'chat_template_kwargs' is over " + std::to_string(kMaxTemplateKwargsBytes) +
                                   " bytes of JSON",
                               "chat_template_kwargs");
    }
    for (const char* reserved : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token", "documents"}) {
      if (v->contains(reserved)) {
        return ApiError::invalid(std::string("'chat_template_kwargs' cannot set '") + reserved +
                                     "': the chat template gets it from the request",
                                 std::string("chat_template_kwargs.") + reserved);
      }
    }
    if (!v->empty()) out->chat.template_kwargs_json = v->dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return std::nullopt;
}

// "tools" -> out->chat.tools_json and out->tool_names; "tool_choice" "none"
// leaves both empty.
std::optional<ApiError> parse_tools(const json& obj, ChatCompletionRequest* out) {
  bool choice_none = false;
  if (const json* v = field(obj, "tool_choice")) {
    if (v->is_string()) {
      const std::string& c = v->get_ref<const std::string&>();
      if (c == "none") {
        choice_none = true;
      } else if (c == "required") {
        out->tool_required = true;
      } else if (c != "auto") {
        return ApiError::invalid("'tool_choice' must be \"none\", \"auto\" or \"required\", got " + show(*v),
                                 "tool_choice");
      }
    } else if (v->is_object()) {
      const json* type = field(*v, "type");
      const json* fn = field(*v, "function");
      const json* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
      if (!type || *type != "function" || !name || !name->is_string()) {
        return ApiError::invalid("a 'tool_choice' object must be {\"type\": \"function\", \"function\": {\"name\": ...}}",
                                 "tool_choice");
      }
      out->tool_required = true;
      out->forced_tool = name->get<std::string>();
    } else {
      return ApiError::invalid("'tool_choice' must be a string or an object", "tool_choice");
    }
  }
  if (const json* v = field(obj, "parallel_tool_calls")) {
    if (!v->is_boolean()) return ApiError::invalid("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
    out->parallel_tool_calls = v->get<bool>();
  }
  const json* tools = field(obj, "tools");
  if (out->tool_required && (!tools || !tools->is_array() || tools->empty())) {
    return ApiError::invalid("tool_choice \"required\" or naming a function needs 'tools'", "tool_choice");
  }
  if (out->tool_required && out->options.grammar) {
    return ApiError::invalid("a forced tool call cannot be combined with 'grammar', 'json_schema' or 'response_format'",
                             "tool_choice");
  }
  if (!tools) return std::nullopt;
  if (!tools->is_array()) return ApiError::invalid("'tools' must be an array", "tools");
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (size_t i = 0; i < tools->size(); ++i) {
    const json& t = (*tools)[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) return ApiError::invalid("'" + at + "' must be an object", at);
    const json* type = field(t, "type");
    if (!type || !type->is_string() || type->get_ref<const std::string&>() != "function") {
      return ApiError::invalid("'" + at + ".type' must be \"function\" (the only tool type supported)", at + ".type");
    }
    const json* fn = field(t, "function");
    if (!fn || !fn->is_object()) return ApiError::invalid("'" + at + ".function' must be an object", at + ".function");
    const json* name = field(*fn, "name");
    if (!name || !name->is_string() || !valid_function_name(name->get_ref<const std::string&>())) {
      return ApiError::invalid("'" + at + ".function.name' must be a string of 1 to 64 letters, digits, '_' or '-'",
                               at + ".function.name");
    }
    if (!seen.insert(name->get<std::string>()).second) {
      return ApiError::invalid("'" + at + ".function.name': the function " + show(*name) + " is offered twice",
                               at + ".function.name");
    }
    if (const json* d = field(*fn, "description"); d && !d->is_string()) {
      return ApiError::invalid("'" + at + ".function.description' must be a string", at + ".function.description");
    }
    if (const json* p = field(*fn, "parameters"); p && !p->is_object()) {
      return ApiError::invalid("'" + at + ".function.parameters' must be a JSON Schema object",
                               at + ".function.parameters");
    } else if (const json* type = p ? field(*p, "type") : nullptr; type && *type != "object") {
      // A call's arguments are a JSON object, as OpenAI requires of the
      // schema (found in hostile testing: a forced call by a string schema
      // was written, then refused as a call and answered as content).
      return ApiError::invalid("'" + at + ".function.parameters' must describe an object (\"type\": \"object\"), got "
                                   "\"type\": " + show(*type) + ": a function's arguments are a JSON object",
                               at + ".function.parameters");
    }
    if (const json* st = field(*fn, "strict"); st && !st->is_boolean()) {
      return ApiError::invalid("'" + at + ".function.strict' must be a boolean", at + ".function.strict");
    }
    names.push_back(name->get<std::string>());
  }
  if (!out->forced_tool.empty() && std::find(names.begin(), names.end(), out->forced_tool) == names.end()) {
    return ApiError::invalid("'tool_choice' names \"" + out->forced_tool + "\", which is not among the offered tools",
                             "tool_choice");
  }
  if (names.empty() || choice_none) return std::nullopt;
  out->chat.tools_json = tools->dump(-1, ' ', false, json::error_handler_t::replace);
  out->tool_names = std::move(names);
  return std::nullopt;
}

// An assistant message's "tool_calls" -> msg->tool_calls. `at` is the
// message's path, e.g. "messages[2]".
std::optional<ApiError> parse_tool_calls_field(const json& m, const std::string& at, ChatMessage* msg) {
  const json* calls = field(m, "tool_calls");
  if (!calls) return std::nullopt;
  const std::string base = at + ".tool_calls";
  if (msg->role != "assistant") {
    return ApiError::invalid("'" + base + "': only assistant messages may carry tool calls", base);
  }
  if (!calls->is_array()) return ApiError::invalid("'" + base + "' must be an array", base);
  for (size_t i = 0; i < calls->size(); ++i) {
    const json& c = (*calls)[i];
    const std::string ci = base + "[" + std::to_string(i) + "]";
    if (!c.is_object()) return ApiError::invalid("'" + ci + "' must be an object", ci);
    ToolCall call;
    const json* id = field(c, "id");
    if (!id || !id->is_string()) return ApiError::invalid("'" + ci + ".id' must be a string", ci + ".id");
    call.id = id->get<std::string>();
    if (const json* type = field(c, "type"); type && !(type->is_string() && type->get_ref<const std::string&>() == "function")) {
      return ApiError::invalid("'" + ci + ".type' must be \"function\"", ci + ".type");
    }
    const json* fn = field(c, "function");
    if (!fn || !fn->is_object()) return ApiError::invalid("'" + ci + ".function' must be an object", ci + ".function");
    const json* name = field(*fn, "name");
    if (!name || !name->is_string() || name->get_ref<const std::string&>().empty()) {
      return ApiError::invalid("'" + ci + ".function.name' must be a non-empty string", ci + ".function.name");
    }
    call.name = name->get<std::string>();
    const json* args = field(*fn, "arguments");
    if (!args) {
      call.arguments = "{}";
    } else if (args->is_string()) {
      call.arguments = args->get<std::string>();
      // The template may parse it (engine/tokenizer/chat_tools.cpp): bound
      // its nesting like the body's.
      if (json_nesting_exceeds(call.arguments)) {
        return ApiError::invalid("'" + ci + ".function.arguments' nests arrays/objects more than " +
                                     std::to_string(kMaxJsonDepth) + " levels deep",
                                 ci + ".function.arguments");
      }
    } else if (args->is_object()) {
      call.arguments = args->dump(-1, ' ', false, json::error_handler_t::replace);
    } else {
      return ApiError::invalid("'" + ci + ".function.arguments' must be a string of JSON (or an object)",
                               ci + ".function.arguments");
    }
    msg->tool_calls.push_back(std::move(call));
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_chat_completion_request(std::string_view body,
                                                      const SamplingParams& defaults,
                                                      ChatCompletionRequest* out) {
  json obj;
  if (auto e = parse_object(body, &obj)) return e;
  if (auto e = check_known_fields(obj, RequestEndpoint::kChat)) return e;
  if (auto e = parse_options(obj, defaults, &out->options)) return e;
  if (auto e = read_chat_logprobs(obj, &out->options)) return e;

  const json* msgs = field(obj, "messages");
  if (!msgs) return ApiError::invalid("'messages' is required", "messages");
  if (!msgs->is_array()) return ApiError::invalid("'messages' must be an array", "messages");
  if (msgs->empty()) return ApiError::invalid("'messages' must not be empty", "messages");
  out->chat.messages.clear();
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return ApiError::invalid("each message must be an object", "messages");
    const json* role = field(m, "role");
    if (!role || !role->is_string()) {
      return ApiError::invalid("each message needs a string 'role'", "messages");
    }
    ChatMessage msg;
    msg.role = role->get<std::string>();
    if (!is_known_role(msg.role)) {
      return ApiError::invalid("'" + at + ".role' must be one of \"system\", \"developer\", \"user\", "
                               "\"assistant\" or \"tool\", got " + show(*role),
                               at + ".role");
    }
    // "developer" reaches the chat format as is: it becomes "system" there
    // unless the template has a developer role (engine/tokenizer/chat_format.h).
    if (auto e = parse_content(m, msg.role, &msg.content, &msg.content_null)) return e;
    if (auto e = parse_tool_calls_field(m, at, &msg)) return e;
    if (msg.role == "tool") {
      const json* id = field(m, "tool_call_id");
      if (!id || !id->is_string()) {
        return ApiError::invalid("'" + at + ".tool_call_id' must be a string: a tool message answers one tool call",
                                 at + ".tool_call_id");
      }
      msg.tool_call_id = id->get<std::string>();
    }
    if (const json* rc = field(m, "reasoning_content")) {
      if (!rc->is_string() || msg.role != "assistant") {
        return ApiError::invalid("'" + at + ".reasoning_content' must be a string, on an assistant message",
                                 at + ".reasoning_content");
      }
      msg.reasoning_content = rc->get<std::string>();
    }
    if (const json* name = field(m, "name")) {
      if (!name->is_string()) return ApiError::invalid("'" + at + ".name' must be a string", at + ".name");
      msg.name = name->get<std::string>();
    }
    out->chat.messages.push_back(std::move(msg));
  }
  if (auto e = parse_template_fields(obj, out)) return e;
  return parse_tools(obj, out);
}

namespace {

constexpr const char* kPromptShape =
    "'prompt' must be a string, an array of token ids, or a non-empty array of strings or of token-id arrays";

// A JSON array of token ids -> ids in [0, n_vocab) (any id >= 0 when n_vocab <= 0).
std::optional<ApiError> parse_token_ids(const json& a, int n_vocab, std::vector<int32_t>* out) {
  for (const json& given : a) {
    const std::optional<json> integer = integer_value(given);  // 410.0 counts as 410
    if (!integer) return ApiError::invalid(kPromptShape, "prompt");
    const json& t = *integer;
    int64_t id = t.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(t.get<uint64_t>(), INT64_MAX))
                                        : t.get<int64_t>();
    if (id < 0 || id > INT32_MAX || (n_vocab > 0 && id >= n_vocab)) {
      return ApiError::invalid("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                               std::to_string(n_vocab) + ")", "prompt");
    }
    out->push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

// A completion's "prompt": a string, an array of token ids, or an array of
// strings and token-id arrays (a batch, at most kMaxPrompts); ids in
// [0, n_vocab) when n_vocab > 0. Errors name "prompt".
std::optional<ApiError> parse_prompts(const json& p, int n_vocab, std::vector<CompletionPrompt>* out) {
  out->clear();
  if (p.is_string()) {
    out->push_back({false, p.get<std::string>(), {}});
    return std::nullopt;
  }
  if (!p.is_array() || p.empty()) return ApiError::invalid(kPromptShape, "prompt");
  if (p[0].is_number()) {  // one prompt of token ids
    out->push_back({true, {}, {}});
    return parse_token_ids(p, n_vocab, &out->back().tokens);
  }
  if (p.size() > kMaxPrompts) {
    return ApiError::invalid("'prompt' may hold at most " + std::to_string(kMaxPrompts) + " prompts", "prompt");
  }
  for (const json& one : p) {
    if (one.is_string()) {
      out->push_back({false, one.get<std::string>(), {}});
    } else if (one.is_array() && !one.empty()) {
      out->push_back({true, {}, {}});
      if (auto e = parse_token_ids(one, n_vocab, &out->back().tokens)) return e;
    } else {
      return ApiError::invalid(kPromptShape, "prompt");
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_completion_request(std::string_view body,
                                                 const SamplingParams& defaults, int n_vocab,
                                                 CompletionRequest* out) {
  json obj;
  if (auto e = parse_object(body, &obj)) return e;
  if (auto e = check_known_fields(obj, RequestEndpoint::kCompletion)) return e;
  // A raw completion prompt is the client's own rendering (its template, FIM
  // tokens): control-token text in it is parsed unless parse_special is
  // false, as llama.cpp's server and vLLM do.
  out->options.parse_special = true;
  if (auto e = parse_options(obj, defaults, &out->options, asks_for_echo(obj) ? 0 : 1)) return e;
  if (auto e = read_completion_logprobs(obj, &out->options)) return e;

  const json* p = field(obj, "prompt");
  if (!p) return ApiError::invalid("'prompt' is required", "prompt");
  std::vector<CompletionPrompt> prompts;
  if (auto e = parse_prompts(*p, n_vocab, &prompts)) return e;
  out->prompt_is_tokens = prompts[0].is_tokens;
  out->prompt_text = std::move(prompts[0].text);
  out->prompt_tokens = std::move(prompts[0].tokens);
  out->more_prompts.assign(std::make_move_iterator(prompts.begin() + 1), std::make_move_iterator(prompts.end()));
  return std::nullopt;
}

}  // namespace larder
