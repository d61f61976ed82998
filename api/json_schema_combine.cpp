#include "api/json_schema_combine.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string_view>
#include <string>
#include <vector>

#include "api/json_schema_values.h"

namespace larder {

namespace {

using json = nlohmann::ordered_json;

constexpr int kMaxDepth = 8;

// OpenAPI's "nullable": true (a non-boolean is the grammar's error to report).
bool nullable(const json& s) {
  const auto it = s.find("nullable");
  return it != s.end() && it->is_boolean() && it->get<bool>();
}

// The values a schema lists (const, enum; null too when nullable, as the
// grammar writes it), if it lists them.
std::optional<std::vector<json>> listed_values(const json& s) {
  if (!s.is_object()) return std::nullopt;
  std::vector<json> out;
  if (const auto it = s.find("const"); it != s.end()) out.push_back(*it);
  else if (const auto it2 = s.find("enum"); it2 != s.end() && it2->is_array()) out = it2->get<std::vector<json>>();
  else return std::nullopt;
  if (nullable(s)) out.push_back(nullptr);
  return out;
}

// The JSON types a schema's values may have ("integer": a whole number),
// if it says.
std::optional<std::set<std::string>> value_types(const json& s) {
  const auto type_of = [](const json& v) -> std::string {
    if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
    if (v.is_number_float()) return std::trunc(v.get<double>()) == v.get<double>() ? "integer" : "number";
    if (v.is_null()) return "null";
    if (v.is_boolean()) return "boolean";
    if (v.is_string()) return "string";
    return v.is_array() ? "array" : "object";
  };
  std::set<std::string> out;
  if (std::optional<std::vector<json>> values = listed_values(s)) {
    for (const json& v : *values) out.insert(type_of(v));
    return out;
  }
  if (!s.is_object() || !s.contains("type")) return std::nullopt;
  const json& t = s.at("type");
  if (t.is_string()) {
    out.insert(t.get<std::string>());
  } else if (t.is_array()) {
    for (const json& e : t) {
      if (!e.is_string()) return std::nullopt;
      out.insert(e.get<std::string>());
    }
  } else {
    return std::nullopt;
  }
  if (nullable(s)) out.insert("null");
  return out;
}

// Whether the interval of a's numbers ends below b's: a's upper bound under
// b's lower one, or equal with either side exclusive.
bool ends_below(const json& a, const json& b) {
  Result<std::optional<SchemaBound>> hi = schema_bound(a, "", /*lower=*/false);
  Result<std::optional<SchemaBound>> lo = schema_bound(b, "", /*lower=*/true);
  if (!hi.is_ok() || !lo.is_ok() || !*hi || !*lo) return false;
  const SchemaBound& h = **hi;
  const SchemaBound& l = **lo;
  return h.value < l.value || (h.value == l.value && (h.exclusive || l.exclusive));
}

bool disjoint(const json& a_in, const json& b_in, const SchemaResolver& resolve, int depth) {
  const json* a = resolve(a_in);
  const json* b = resolve(b_in);
  if (a == nullptr || b == nullptr || depth > kMaxDepth) return false;
  const std::optional<std::vector<json>> va = listed_values(*a), vb = listed_values(*b);
  if (va && vb) {
    // JSON equality: objects regardless of their keys' order (ordered_json's
    // == minds it; found in hostile testing: {"a":1,"b":2} and
    // {"b":2,"a":1} were taken for different values), and 1 equal to 1.0.
    for (const json& x : *va)
      for (const json& y : *vb)
        if (nlohmann::json(x) == nlohmann::json(y)) return false;
    return true;
  }
  const std::optional<std::set<std::string>> ta = value_types(*a), tb = value_types(*b);
  if (ta && tb) {
    bool overlap = false;
    for (const std::string& t : *ta) {
      overlap = overlap || tb->count(t) != 0 || (t == "integer" && tb->count("number") != 0) ||
                (t == "number" && tb->count("integer") != 0);
    }
    if (!overlap) return true;
    // Numbers only on both sides (no listed values): their intervals.
    const auto numeric = [](const std::set<std::string>& ts) {
      for (const std::string& t : ts) {
        if (t != "integer" && t != "number") return false;
      }
      return true;
    };
    if (!va && !vb && numeric(*ta) && numeric(*tb) && (ends_below(*a, *b) || ends_below(*b, *a))) return true;
  }
  const auto required = [](const json& s) {
    std::set<std::string> out;
    if (const auto it = s.find("required"); it != s.end() && it->is_array()) {
      for (const json& e : *it)
        if (e.is_string()) out.insert(e.get<std::string>());
    }
    return out;
  };
  if (!a->is_object() || !b->is_object() || !a->contains("properties") || !b->contains("properties")) return false;
  // A required property's values tell objects apart, nothing else: both
  // branches must allow objects only (found in review: two nullable
  // tagged objects both accept null).
  const auto objects_only = [](const json& s, const std::optional<std::set<std::string>>& types) {
    return types ? *types == std::set<std::string>{"object"} : !nullable(s);
  };
  if (!objects_only(*a, ta) || !objects_only(*b, tb)) return false;
  const std::set<std::string> ra = required(*a), rb = required(*b);
  const json& pa = a->at("properties");
  const json& pb = b->at("properties");
  if (!pa.is_object() || !pb.is_object()) return false;
  for (const std::string& p : ra) {
    if (rb.count(p) != 0 && pa.contains(p) && pb.contains(p) && disjoint(pa.at(p), pb.at(p), resolve, depth + 1)) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool schemas_disjoint(const json& a, const json& b, const SchemaResolver& resolve) {
  return disjoint(a, b, resolve, 0);
}

bool schema_annotation(std::string_view key) {
  static const std::set<std::string_view> kAnnotations = {
      "title", "description", "default", "examples", "$schema", "$id", "$comment",
      "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "strict"};
  return kAnnotations.count(key) != 0;
}

namespace {

// The JSON types `type` names (a string or an array of them); empty when
// it is neither.
std::vector<std::string> type_names(const json& type) {
  std::vector<std::string> out;
  if (type.is_string()) out.push_back(type.get<std::string>());
  if (type.is_array()) {
    for (const json& t : type) {
      if (t.is_string()) out.push_back(t.get<std::string>());
    }
  }
  return out;
}

// Both "type"s at once: the types both allow ("integer" within "number"),
// or kOutOfRange when there is none (such an anyOf branch is left out).
Result<json> intersect_types(const json& a, const json& b, const std::string& where) {
  const std::vector<std::string> x = type_names(a), y = type_names(b);
  if (x.empty() || y.empty()) return schema_error(where, "\"type\" must be a type name or an array of them");
  auto allows = [](const std::vector<std::string>& types, const std::string& t) {
    return std::find(types.begin(), types.end(), t) != types.end() ||
           (t == "integer" && std::find(types.begin(), types.end(), "number") != types.end());
  };
  json both = json::array();
  for (const std::vector<std::string>* side : {&x, &y}) {
    for (const std::string& t : *side) {
      if (allows(x, t) && allows(y, t) && std::find(both.begin(), both.end(), t) == both.end()) both.push_back(t);
    }
  }
  if (both.empty()) {
    return schema_allows_nothing(where, "\"type\" is " + a.dump() + " in one part and " + b.dump() +
                                            " in another: no value is both");
  }
  if (both.size() == 1) return both[0];
  return both;
}

}  // namespace

Result<json> merge_schemas(const json& a, const json& b, const std::string& where) {
  if (!a.is_object() || !b.is_object()) return schema_error(where, "allOf / anyOf branches must be objects to be combined");
  json out = a;
  for (const auto& [key, v] : b.items()) {
    const auto mine = out.find(key);
    if (mine == out.end()) {
      out[key] = v;
    } else if (key == "properties" && mine->is_object() && v.is_object()) {
      for (const auto& [name, schema] : v.items()) {
        const auto had = mine->find(name);
        if (had == mine->end()) (*mine)[name] = schema;
        else if (*had != schema) *had = json{{"allOf", json::array({*had, schema})}};
      }
    } else if (key == "required" && mine->is_array() && v.is_array()) {
      for (const json& name : v) {
        if (std::find(mine->begin(), mine->end(), name) == mine->end()) mine->push_back(name);
      }
    } else if (key == "nullable") {
      continue;  // null only when both allow it: settled below
    } else if (key == "type" && *mine != v) {
      // Found in hostile testing: {"type": "object"} beside {"anyOf":
      // [{"type": "string"}]} was refused as a combination larder cannot
      // make, where it is one that allows no value.
      LARDER_ASSIGN_OR_RETURN(*mine, intersect_types(*mine, v, where));
    } else if (*mine != v && !schema_annotation(key) && key != "additionalProperties") {
      return schema_error(where, "\"" + key + "\" has different values in two schemas that must both hold (allOf "
                                        "branches, or a keyword beside allOf, anyOf or oneOf and in a branch), which "
                                        "larder cannot combine");
    }
  }
  // additionalProperties: false on a side allows only the names it lists.
  const auto closed = [](const json& s) {
    const auto it = s.find("additionalProperties");
    return it != s.end() && it->is_boolean() && !it->get<bool>();
  };
  const auto open_schema = [](const json& s) {
    const auto it = s.find("additionalProperties");
    return it != s.end() && !it->is_boolean();
  };
  // As a schema it would also have to hold for the other branch's
  // properties: not combined (found in review: one was dropped silently).
  if (open_schema(a) || open_schema(b)) {
    const json sa = a.contains("additionalProperties") ? a.at("additionalProperties") : json();
    const json sb = b.contains("additionalProperties") ? b.at("additionalProperties") : json();
    const bool other_lists =
        (open_schema(a) && b.contains("properties")) || (open_schema(b) && a.contains("properties"));
    if (sa != sb || other_lists) {
      return schema_error(where, "\"additionalProperties\" as a schema in an allOf branch cannot be combined with "
                                 "another branch's properties or additionalProperties");
    }
  }
  // nullable: null only when every branch allows it (nullable, or no
  // type, const or enum that rules it out).
  const auto allows_null = [](const json& s) {
    return nullable(s) || (!s.contains("type") && !s.contains("const") && !s.contains("enum"));
  };
  if ((nullable(a) || nullable(b)) && allows_null(a) && allows_null(b)) out["nullable"] = true;
  else out.erase("nullable");
  if ((closed(a) || closed(b)) && out.value("properties", json::object()).is_object()) {
    json allowed = json::object();
    const json none = json::object();
    const json props = out.value("properties", none), props_a = a.value("properties", none),
               props_b = b.value("properties", none), required = out.value("required", json::array());
    for (const auto& [name, schema] : props.items()) {
      const bool in_a = !closed(a) || props_a.contains(name);
      const bool in_b = !closed(b) || props_b.contains(name);
      if (in_a && in_b) allowed[name] = schema;
    }
    for (const json& name : required) {
      if (name.is_string() && !allowed.contains(name.get<std::string>())) {
        return schema_allows_nothing(where, "property \"" + name.get<std::string>() + "\" is required by one allOf branch and "
                              "not allowed by another (\"additionalProperties\": false)");
      }
    }
    out["properties"] = std::move(allowed);
    out["additionalProperties"] = false;
  }
  return out;
}

}  // namespace larder
