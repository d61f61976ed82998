#include "api/request_constraints.h"

#include <algorithm>
#include <climits>
#include <memory>
#include <string>
#include <string_view>

#include "api/json_schema_grammar.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/json_grammar.h"

namespace larder {

using namespace request_json;

namespace {

// "'<field>': <message>". Built by appending: GCC 12 warns (a false
// -Wrestrict) on "'" + std::string(...) + ... once inlined here.
std::string field_error(const char* field_name, const Status& st) {
  std::string out(1, '\'');
  out += field_name;
  out += "': ";
  out += st.message();
  return out;
}

}  // namespace

// llama.cpp's "grammar" (GBNF text) and "json_schema"
// (a schema), or OpenAI's response_format {"type": "json_object"} or
// {"type": "json_schema", "json_schema": {"schema": ...}} -> out->grammar,
// compiled here (on the pool thread) so that a bad grammar or an
// unsupported schema is a 400 before anything is queued.
std::optional<ApiError> read_grammar(const json& obj, GenerationOptions* out) {
  std::string_view text;
  std::string from_schema;
  const char* param = nullptr;
  // `obj` is an ordered_json: the schema's keys keep the client's order.
  auto schema_grammar = [&](const json& schema, const char* name) -> std::optional<ApiError> {
    if (param != nullptr) {
      return ApiError::invalid("give one of 'grammar', 'json_schema' and 'response_format', not several", name);
    }
    Result<std::string> g = json_schema_to_gbnf(schema);
    if (!g.is_ok()) return ApiError::invalid(field_error(name, g.status()), name);
    from_schema = std::move(g).value();
    text = from_schema;
    param = name;
    return std::nullopt;
  };
  if (const json* v = field(obj, "grammar"); v && !is_empty_string(*v)) {
    if (!v->is_string()) return ApiError::invalid("'grammar' must be a string in GBNF (llama.cpp's grammar format)", "grammar");
    text = v->get_ref<const std::string&>();
    param = "grammar";
  }
  if (const json* v = field(obj, "json_schema"); v && !is_empty_object(*v)) {
    if (auto e = schema_grammar(*v, "json_schema")) return e;
  }
  if (const json* v = field(obj, "response_format")) {
    const json* type = v->is_object() ? field(*v, "type") : nullptr;
    if (type == nullptr || !type->is_string()) {
      return ApiError::invalid("'response_format' must be an object with a string 'type' (\"text\" or \"json_object\")",
                               "response_format");
    }
    const std::string& t = type->get_ref<const std::string&>();
    // The fields each type has (OpenAI's, and llama.cpp's "schema" beside
    // json_object): anything else is a misspelling, not ignored.
    for (const auto& [key, value] : v->items()) {
      const bool known = key == "type" || (t == "json_schema" && key == "json_schema") ||
                         (t == "json_object" && key == "schema");
      if (!known) {
        return ApiError::invalid("'response_format' of type " + show(*type) + " has no field '" + key + "'",
                                 "response_format");
      }
    }
    if (t == "json_object" && field(*v, "schema") != nullptr) {
      // llama.cpp: {"type": "json_object", "schema": {...}} constrains by the schema.
      if (auto e = schema_grammar(*field(*v, "schema"), "response_format")) return e;
    } else if (t == "json_object") {
      if (param != nullptr) {
        return ApiError::invalid("give one of 'grammar', 'json_schema' and 'response_format', not several", "response_format");
      }
      text = kJsonObjectGbnf;
      param = "response_format";
    } else if (t == "json_schema") {
      const json* js = field(*v, "json_schema");
      const json* schema = js && js->is_object() ? field(*js, "schema") : nullptr;
      if (schema == nullptr) {
        return ApiError::invalid("'response_format' of type \"json_schema\" needs 'json_schema': {\"name\": ..., \"schema\": {...}}",
                                 "response_format");
      }
      // OpenAI's fields of json_schema; "strict" is how every answer is
      // made here anyway. Anything else is a misspelling, not ignored.
      for (const auto& [key, value] : js->items()) {
        if (key != "name" && key != "description" && key != "schema" && key != "strict") {
          return ApiError::invalid("'response_format.json_schema' has no field '" + key +
                                       "' (it has name, description, schema and strict)",
                                   "response_format");
        }
        const bool typed = key == "schema" || (key == "strict" ? value.is_boolean() || value.is_null() : value.is_string());
        if (!typed) {
          return ApiError::invalid("'response_format.json_schema." + key + "' must be " +
                                       (key == "strict" ? "a boolean" : "a string") + ", got " + show(value),
                                   "response_format");
        }
      }
      if (auto e = schema_grammar(*schema, "response_format")) return e;
    } else if (t != "text") {
      return ApiError::invalid("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", got " +
                                   show(*type),
                               "response_format");
    }
  }
  if (param == nullptr) return std::nullopt;
  Result<Grammar> g = parse_gbnf(text);
  if (!g.is_ok() && !from_schema.empty() && g.status().message().find("left-recursive") != std::string::npos) {
    // A schema that refers to itself before anything is written ({"anyOf":
    // [{"$ref": "#"}, ...]}): said in the schema's terms, not the grammar's.
    return ApiError::invalid(std::string("'") + param + "': the JSON schema refers back to itself (a $ref) before any "
                             "part of the value is written, which a grammar cannot run (" + g.status().message() + ")",
                             param);
  }
  if (!g.is_ok() && !from_schema.empty() && g.status().message().find("can never end") != std::string::npos) {
    return ApiError::invalid(std::string("'") + param + "': the JSON schema allows no finite value: what it requires "
                             "(a required property, minItems) always needs another value of the same schema (" +
                             g.status().message() + ")",
                             param);
  }
  if (!g.is_ok()) return ApiError::invalid(field_error(param, g.status()), param);
  Result<std::shared_ptr<const CompiledGrammar>> cg = compile_grammar(*g);
  if (!cg.is_ok()) return ApiError::invalid(field_error(param, cg.status()), param);
  out->grammar = std::move(cg).value();
  return std::nullopt;
}

// "logit_bias" -> out->logit_bias (see GenerationOptions).
std::optional<ApiError> read_logit_bias(const json& obj, GenerationOptions* out) {
  const json* v = field(obj, "logit_bias");
  if (v == nullptr || v->is_null()) return std::nullopt;
  constexpr size_t kMaxEntries = 1024;
  auto bad = [](const std::string& why) { return ApiError::invalid("'logit_bias': " + why, "logit_bias"); };
  auto add = [&](int64_t id, const json& bias) -> std::optional<ApiError> {
    if (id < 0 || id > INT32_MAX) return bad("token ids must be non-negative integers");
    float b = 0;
    if (bias.is_boolean() && !bias.get<bool>()) {
      b = -100.0f;  // llama.cpp: false bans the token
    } else if (bias.is_number()) {
      const double d = bias.get<double>();
      if (!(d >= -100.0 && d <= 100.0)) return bad("each bias must lie in [-100, 100], got " + show(bias));
      b = float(d);
    } else {
      return bad("each bias must be a number in [-100, 100] (or false)");
    }
    out->logit_bias.emplace_back(int32_t(id), b);
    return std::nullopt;
  };
  if (v->is_object()) {
    if (v->size() > kMaxEntries) return bad("at most " + std::to_string(kMaxEntries) + " tokens");
    for (const auto& [key, bias] : v->items()) {
      if (key.empty() || key.size() > 10 || !std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return bad("keys must be token ids (decimal integers), got \"" + key + "\"");
      }
      if (auto e = add(std::stoll(key), bias)) return e;
    }
    return std::nullopt;
  }
  if (v->is_array()) {
    if (v->size() > kMaxEntries) return bad("at most " + std::to_string(kMaxEntries) + " tokens");
    for (const json& pair : *v) {
      const std::optional<json> id = pair.is_array() && pair.size() == 2 ? integer_value(pair[0]) : std::nullopt;
      if (!id) return bad("an array must hold [token id, bias] pairs");
      const int64_t i = id->is_number_unsigned() ? int64_t(std::min<uint64_t>(id->get<uint64_t>(), INT64_MAX))
                                                 : id->get<int64_t>();
      if (auto e = add(i, pair[1])) return e;
    }
    return std::nullopt;
  }
  return bad("must be an object of token id -> bias");
}

}  // namespace larder
