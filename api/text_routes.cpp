#include "api/text_routes.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "api/api_error.h"
#include "api/json_depth.h"
#include "api/openai_response.h"
#include "api/request_json.h"
#include "engine/template/json_parse.h"

namespace larder {

using namespace request_json;

namespace {

// Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, <= U+10FFFF).
bool is_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      n = 1, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2, cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i < n + 1) return false;  // cut short
    for (size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF))) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

// Body -> object whose keys are all in `allowed` (else the ApiError).
std::optional<ApiError> parse_body(const std::string& body, std::initializer_list<std::string_view> allowed,
                                   json* out) {
  if (json_nesting_exceeds(body)) {
    return ApiError::invalid("the request body nests arrays/objects more than " + std::to_string(kMaxJsonDepth) +
                             " levels deep");
  }
  *out = parse_json_ordered(body);
  if (out->is_discarded()) return ApiError::invalid("the request body is not valid JSON");
  if (!out->is_object()) return ApiError::invalid("the request body must be a JSON object");
  for (auto it = out->begin(); it != out->end(); ++it) {
    bool known = false;
    for (std::string_view a : allowed) known = known || it.key() == a;
    if (!known) {
      const std::string key = it.key().substr(0, 128);
      return ApiError::invalid("Unrecognized request argument supplied: " + key, key);
    }
  }
  return std::nullopt;
}

std::optional<ApiError> check_model(const json& obj, const ModelInfo& info) {
  const json* m = field(obj, "model");
  if (!m) return std::nullopt;
  if (!m->is_string()) return ApiError::invalid("'model' must be a string", "model");
  if (m->get_ref<const std::string&>() != info.id) {
    return ApiError::not_found("the model '" + clip_for_message(m->get_ref<const std::string&>()) +
                                   "' does not exist; this server serves '" + info.id + "'",
                               "model", "model_not_found");
  }
  return std::nullopt;
}

std::optional<ApiError> read_flag(const json& obj, const char* name, bool* out) {
  const json* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return ApiError::invalid(std::string("'") + name + "' must be a boolean", name);
  *out = v->get<bool>();
  return std::nullopt;
}

}  // namespace

HttpResponse tokenize_response(const Generator& generator, const std::string& body) {
  json obj;
  if (auto e = parse_body(body, {"content", "add_special", "parse_special", "with_pieces", "model"}, &obj)) {
    return error_response(*e);
  }
  if (auto e = check_model(obj, generator.model_info())) return error_response(*e);
  const json* content = field(obj, "content");
  if (!content) return error_response(ApiError::invalid("'content' is required", "content"));
  if (!content->is_string()) return error_response(ApiError::invalid("'content' must be a string", "content"));
  const std::string& text = content->get_ref<const std::string&>();
  if (text.size() > kMaxTokenizeBytes) {
    return error_response(ApiError::invalid("'content' is " + std::to_string(text.size()) + " bytes long; at most " +
                                                std::to_string(kMaxTokenizeBytes) + " bytes are tokenized at once",
                                            "content"));
  }
  bool add_special = false, parse_special = true, with_pieces = false;
  if (auto e = read_flag(obj, "add_special", &add_special)) return error_response(*e);
  if (auto e = read_flag(obj, "parse_special", &parse_special)) return error_response(*e);
  if (auto e = read_flag(obj, "with_pieces", &with_pieces)) return error_response(*e);

  const std::vector<int32_t> ids = generator.tokenize_text(text, add_special, parse_special);
  nlohmann::json tokens = nlohmann::json::array();
  for (int32_t id : ids) {
    if (!with_pieces) {
      tokens.push_back(id);
      continue;
    }
    const std::string piece = generator.token_piece(id);
    nlohmann::json p;
    if (is_utf8(piece)) {
      p = piece;
    } else {
      p = nlohmann::json::array();
      for (unsigned char c : piece) p.push_back(int(c));
    }
    tokens.push_back({{"id", id}, {"piece", std::move(p)}});
  }
  return json_response(200, {{"tokens", std::move(tokens)}});
}

HttpResponse detokenize_response(const Generator& generator, const std::string& body) {
  json obj;
  if (auto e = parse_body(body, {"tokens", "model"}, &obj)) return error_response(*e);
  const ModelInfo& info = generator.model_info();
  if (auto e = check_model(obj, info)) return error_response(*e);
  const json* tokens = field(obj, "tokens");
  if (!tokens) return error_response(ApiError::invalid("'tokens' is required", "tokens"));
  if (!tokens->is_array()) return error_response(ApiError::invalid("'tokens' must be an array of token ids", "tokens"));
  if (tokens->size() > kMaxDetokenizeTokens) {
    return error_response(ApiError::invalid("'tokens' holds " + std::to_string(tokens->size()) + " ids; at most " +
                                                std::to_string(kMaxDetokenizeTokens) + " are detokenized at once",
                                            "tokens"));
  }
  std::string text;
  for (size_t i = 0; i < tokens->size(); ++i) {
    const std::string at = "tokens[" + std::to_string(i) + "]";
    const std::optional<json> integer = integer_value((*tokens)[i]);  // 410.0 counts as 410
    if (!integer) {
      return error_response(ApiError::invalid("'" + at + "' " + integer_problem((*tokens)[i]) + ", got " +
                                                  show((*tokens)[i]), at));
    }
    const json& t = *integer;
    const bool in_vocab = t.is_number_unsigned() ? t.get<uint64_t>() < static_cast<uint64_t>(info.n_vocab)
                                                 : t.get<int64_t>() >= 0 && t.get<int64_t>() < info.n_vocab;
    if (!in_vocab) {
      return error_response(ApiError::invalid("'" + at + "': token id " + show(t) + " is outside the vocabulary [0, " +
                                                  std::to_string(info.n_vocab) + ")",
                                              at));
    }
    text += generator.token_piece(static_cast<int32_t>(t.get<int64_t>()));
  }
  // dump_json replaces bytes that are not UTF-8 with U+FFFD.
  return json_response(200, {{"content", std::move(text)}});
}

}  // namespace larder
