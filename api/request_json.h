// Small helpers for reading request bodies (api/ only: JSON stays in the
// HTTP layer). Bodies are parsed as ordered_json, so objects keep the
// client's key order ("tools" and schemas reach the template and the
// grammar as sent).
#pragma once

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

inline bool is_empty_string(const json& v) { return v.is_string() && v.get_ref<const std::string&>().empty(); }
inline bool is_empty_object(const json& v) { return (v.is_object() || v.is_array()) && v.empty(); }

}  // namespace larder::request_json
