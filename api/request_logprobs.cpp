#include "api/request_logprobs.h"

#include "engine/sampling/logprobs.h"

namespace larder {

using namespace request_json;

namespace {

// An integer in [0, kMaxTopLogprobs].
std::optional<ApiError> read_count(const json& given, const char* name, int* out) {
  // Built by appending: GCC 12 warns (a false -Wrestrict) on "'" + std::string(...) once inlined.
  std::string must(1, '\'');
  must += name;
  must += "' must be an integer from 0 to ";
  must += std::to_string(kMaxTopLogprobs);
  const std::optional<json> integer = integer_value(given);  // 2.0 counts as 2
  if (!integer) return ApiError::invalid(must + ", got " + show(given), name);
  const json& v = *integer;
  const bool ok = v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(kMaxTopLogprobs)
                                         : v.get<int64_t>() >= 0 && v.get<int64_t>() <= kMaxTopLogprobs;
  if (!ok) return ApiError::invalid(must + ", got " + show(v), name);
  *out = v.get<int>();
  return std::nullopt;
}

}  // namespace

bool asks_for_echo(const json& obj) {
  const json* v = field(obj, "echo");
  return v && v->is_boolean() && v->get<bool>();
}

std::optional<ApiError> read_chat_logprobs(const json& obj, GenerationOptions* out) {
  bool on = false;
  if (const json* v = field(obj, "logprobs")) {
    if (!v->is_boolean()) return ApiError::invalid("'logprobs' must be a boolean", "logprobs");
    on = v->get<bool>();
  }
  int n_top = 0;
  if (const json* v = field(obj, "top_logprobs")) {
    if (!on) return ApiError::invalid("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    if (auto e = read_count(*v, "top_logprobs", &n_top)) return e;
  }
  if (const json* v = field(obj, "echo"); v && !(v->is_boolean() && !v->get<bool>())) {
    return ApiError::invalid("'echo' is a field of /v1/completions, not of chat completions", "echo");
  }
  out->logprobs = on ? n_top : -1;
  return std::nullopt;
}

std::optional<ApiError> read_completion_logprobs(const json& obj, GenerationOptions* out) {
  if (const json* v = field(obj, "logprobs")) {
    int n = 0;
    if (auto e = read_count(*v, "logprobs", &n)) return e;
    out->logprobs = n;
  }
  if (const json* v = field(obj, "top_logprobs"); v && integer_value(*v) != json(0)) {
    return ApiError::invalid("'top_logprobs' is a chat field; completions take 'logprobs': N", "top_logprobs");
  }
  if (const json* v = field(obj, "echo")) {
    if (!v->is_boolean()) return ApiError::invalid("'echo' must be a boolean", "echo");
    out->echo = v->get<bool>();
  }
  return std::nullopt;
}

}  // namespace larder
