// Small helpers for reading request bodies (api/ only: JSON stays in the
// HTTP layer). Bodies are parsed as ordered_json, so objects keep the
// client's key order ("tools" and schemas reach the template and the
// grammar as sent).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace larder::request_json {

using json = nlohmann::ordered_json;

// The field `name` of `obj`, or nullptr when it is absent or null.
inline const json* field(const json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// A value as compact JSON for error messages (invalid UTF-8 replaced).
inline std::string show(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

// The value of an integer field as an integer JSON number: `v` itself when
// it is one, or a float with an integral value (2.0, which some JSON
// encoders write for 2; OpenAI's server takes it) that an int64 or uint64
// holds, as an unsigned number when >= 0, as the parser reads "2". nullopt
// for anything else (2.5, 1e300, "2", true).
inline std::optional<json> integer_value(const json& v) {
  if (v.is_number_integer()) return v;
  if (!v.is_number_float()) return std::nullopt;
  const double d = v.get<double>();
  if (!std::isfinite(d) || std::trunc(d) != d) return std::nullopt;
  if (d >= 0 && d < 18446744073709551616.0) return json(static_cast<uint64_t>(d));
  if (d < 0 && d >= -9223372036854775808.0) return json(static_cast<int64_t>(d));
  return std::nullopt;
}

// Why integer_value(v) refused v, for its error message.
inline const char* integer_problem(const json& v) {
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && std::trunc(d) == d) return "is outside the 64-bit integer range";
  }
  return "must be an integer";
}

inline bool is_empty_string(const json& v) { return v.is_string() && v.get_ref<const std::string&>().empty(); }
inline bool is_empty_object(const json& v) { return (v.is_object() || v.is_array()) && v.empty(); }

}  // namespace larder::request_json
