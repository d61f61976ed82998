#include "api/json_schema_grammar.h"

#include <cctype>
#include <cmath>
#include <optional>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "api/json_schema_combine.h"
#include "api/json_schema_properties.h"
#include "api/json_schema_values.h"
#include "engine/grammar/json_grammar.h"
#include "engine/grammar/string_dfa.h"
#include "storage/cancel.h"

namespace larder {

namespace {

using json = nlohmann::ordered_json;

constexpr int kMaxDepth = 64;
// Properties in all the schema's objects, and bytes of the grammar: past
// them a schema is refused (a client's 8 MiB body could otherwise ask for a
// grammar the parser refuses with a less telling message, after seconds).
constexpr size_t kMaxProperties = 10000;
constexpr size_t kMaxGrammarBytes = 4 << 20;
// Subschemas visited (with repeats: a type list visits its schema once per
// type): a 10000-property schema takes about 20000.
constexpr size_t kMaxVisits = 200000;

// A GBNF string literal of `bytes` (UTF-8 passes through).
std::string literal(std::string_view bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20 || c == 0x7F) {
      static const char* hex = "0123456789ABCDEF";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}


class Converter {
 public:
  Converter(const json& root, DfaBudget* budget) : root_(root), budget_(budget != nullptr ? budget : &own_budget_) {}

  Result<std::string> run() {
    std::string top;
    LARDER_ASSIGN_OR_RETURN(top, visit(root_, "root", "#", 0));
    std::string out = "root ::= " + top + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    // The JSON primitives (value, object, array, string, char, hex,
    // number) without their root rule, and compact whitespace: at most one
    // space between tokens (a small model otherwise spends its max_tokens
    // on blank lines between the fields).
    const std::string_view base = kJsonValueGbnf;
    std::string_view rules = base.substr(base.find('\n') + 1);
    const size_t ws = rules.find("\nws ");
    out += std::string(rules.substr(0, ws + 1));
    out += "ws ::= \" \"?\n";
    out += "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n";
    out += "boolean ::= \"true\" | \"false\"\n";
    out += "null ::= \"null\"\n";
    // A character of a string with minLength / maxLength: one that every
    // validator counts as one. JSON Schema counts code points, JavaScript's
    // string length (zod's .max()) UTF-16 units: a character past U+FFFF,
    // raw or as an escaped surrogate pair, is one to the first and two to
    // the second, so it is left out.
    out += "bchar ::= [^\"\\\\\\x00-\\x1F\\U00010000-\\U0010FFFF] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" "
           "( [0-9a-cA-Ce-fE-F] hex{3} | [dD] [0-7] hex{2} ) )\n";
    if (out.size() > kMaxGrammarBytes) {
      return refuse("#", "its grammar would take over " + std::to_string(kMaxGrammarBytes >> 20) +
                             " MiB (a schema that large is not supported)");
    }
    return out;
  }

 private:
  static Status refuse(const std::string& where, const std::string& what) { return schema_error(where, what); }
  // A (sub)schema that allows no value the grammar writes (kOutOfRange):
  // an anyOf drops that branch and keeps the others.
  static Status nothing(const std::string& where, const std::string& what) {
    return schema_allows_nothing(where, what);
  }

  // The alternatives of a choice (anyOf / oneOf branches, a type list's
  // types): one that allows nothing is left out; when all are, the first
  // one's reason stands.
  struct Choice {
    std::string alts;
    Status first_empty;
    // Adds r; false (with r's status to return) on any other error.
    bool add(Result<std::string> r, Status* error) {
      if (r.is_ok()) {
        alts += (alts.empty() ? "" : " | ") + *r;
        return true;
      }
      if (r.status().code() == StatusCode::kOutOfRange) {
        if (first_empty.is_ok()) first_empty = r.status();
        return true;
      }
      *error = r.status();
      return false;
    }
  };

  std::string new_rule(const std::string& hint, std::string body) {
    std::string name;
    for (char c : hint) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0]))) name = "s-" + name;
    if (name.size() > 40) name.resize(40);
    name = "s-" + name + "-" + std::to_string(++n_rules_);
    rule_bytes_ += name.size() + body.size() + 6;
    rules_.emplace_back(name, std::move(body));
    return name;
  }

  // The rule (or inline expression) for `s`.
  Result<std::string> visit(const json& s, const std::string& hint, const std::string& where, int depth) {
    if (cancel_requested()) return Status::cancelled("json_schema: cancelled");
    if (depth > kMaxDepth) return refuse(where, "nested more than " + std::to_string(kMaxDepth) + " deep");
    // Type lists and nullable visit a schema once per branch, so nesting
    // them multiplies the visits (20 levels of ["array","array"]: a
    // million); the visits and the rules' bytes are bounded as they grow.
    if (++n_visits_ > kMaxVisits || rule_bytes_ > kMaxGrammarBytes) {
      return refuse(where, "the schema expands to too large a grammar (over " + std::to_string(kMaxVisits) +
                               " subschemas or " + std::to_string(kMaxGrammarBytes >> 20) + " MiB)");
    }
    if (s.is_boolean()) {
      if (s.get<bool>()) return std::string("value");
      return nothing(where, "the schema false allows nothing");
    }
    if (!s.is_object()) return refuse(where, "a schema must be an object or a boolean");
    for (const auto& [key, v] : s.items()) {
      static const std::set<std::string_view> known = {
          "type",     "properties", "required",  "additionalProperties", "items",   "minItems",
          "maxItems", "enum",       "const",     "anyOf",                "oneOf",   "allOf",
          "$ref",     "minLength",  "maxLength", "format",               "pattern", "nullable",
          "minimum",  "maximum",    "exclusiveMinimum", "exclusiveMaximum"};
      // A keyword whose value asks nothing ("uniqueItems": false) holds as is.
      if (key == "uniqueItems" && v.is_boolean() && !v.get<bool>()) continue;
      if (!known.count(key) && !schema_annotation(key)) {
        return refuse(where, "\"" + key + "\" is not supported (constrained decoding cannot enforce it)");
      }
    }
    // OpenAPI 3.0's "nullable": true (zod 3's .nullable() through the
    // openai SDK): the schema, or null.
    if (const auto it = s.find("nullable"); it != s.end()) {
      if (!it->is_boolean()) return refuse(where + "/nullable", "must be a boolean");
      Result<std::string> r = body(s, hint, where, depth);
      // A schema that allows nothing, made nullable: null.
      if (!r.is_ok() && r.status().code() == StatusCode::kOutOfRange && it->get<bool>()) return std::string("null");
      if (!r.is_ok()) return r.status();
      return it->get<bool>() ? new_rule(hint, *r + " | null") : *r;
    }
    return body(s, hint, where, depth);
  }

  // The keywords of `s` that constrain a value (not annotations, not
  // nullable) other than those in `except`.
  static std::vector<std::string> constraints(const json& s, std::initializer_list<std::string_view> except) {
    std::vector<std::string> out;
    for (const auto& [key, v] : s.items()) {
      if (schema_annotation(key) || key == "nullable") continue;
      if (std::find(except.begin(), except.end(), key) != except.end()) continue;
      out.push_back(key);
    }
    return out;
  }

  Result<std::string> body(const json& s, const std::string& hint, const std::string& where, int depth) {
    if (const auto it = s.find("$ref"); it != s.end()) {
      if (const auto others = constraints(s, {"$ref"}); !others.empty()) {
        return refuse(where, "\"" + others[0] + "\" beside \"$ref\" is not supported (move it into the definition)");
      }
      return ref(*it, where);
    }
    for (const char* key : {"const", "enum"}) {
      if (const auto it = s.find(key); it != s.end()) return constant(s, *it, key, where);
    }
    for (const char* choice : {"anyOf", "oneOf"}) {
      if (const auto it = s.find(choice); it != s.end()) {
        if (!it->is_array() || it->empty()) return refuse(where + "/" + choice, "must be a non-empty array");
        // oneOf: a value valid under exactly one branch. The grammar writes
        // a value of some branch, which is that only where no value fits two.
        for (size_t i = 0; std::string_view(choice) == "oneOf" && i < it->size(); ++i) {
          for (size_t j = i + 1; j < it->size(); ++j) {
            if (!schemas_disjoint((*it)[i], (*it)[j], [this](const json& x) { return resolved(x); })) {
              return refuse(where + "/oneOf", "branches " + std::to_string(i) + " and " + std::to_string(j) +
                                                  " may both match one value, which oneOf forbids and larder cannot "
                                                  "rule out (use anyOf if a value may match both; oneOf is taken "
                                                  "where its branches differ in type, in a const / enum or in "
                                                  "numeric ranges, also of a property both require)");
            }
          }
        }
        // Keywords beside the choice hold for every branch: merged into each.
        json siblings = json::object();
        for (const std::string& k : constraints(s, {choice})) siblings[k] = s.at(k);
        Choice c;
        Status error;
        for (size_t i = 0; i < it->size(); ++i) {
          const std::string at = where + "/" + choice + "/" + std::to_string(i);
          Result<std::string> r = Status::ok();
          if (siblings.empty()) {
            r = visit((*it)[i], hint, at, depth + 1);
          } else if (Result<json> branch = merge_schemas((*it)[i], siblings, at); branch.is_ok()) {
            r = visit(*branch, hint, at, depth + 1);
          } else {
            r = branch.status();  // allowing no value beside its siblings, it is left out
          }
          if (!c.add(std::move(r), &error)) return error;
        }
        if (c.alts.empty()) return c.first_empty;
        return new_rule(hint, c.alts);
      }
    }
    if (const auto it = s.find("allOf"); it != s.end()) {
      if (!it->is_array() || it->empty()) return refuse(where + "/allOf", "must be a non-empty array");
      json all = json::object();
      for (const std::string& k : constraints(s, {"allOf"})) all[k] = s.at(k);
      for (size_t i = 0; i < it->size(); ++i) {
        const std::string at = where + "/allOf/" + std::to_string(i);
        const json* branch = &(*it)[i];
        // A branch that is only a $ref (pydantic's form) stands for its definition.
        if (branch->is_object() && branch->contains("$ref") && constraints(*branch, {"$ref"}).empty()) {
          branch = resolved(*branch);
          if (branch == nullptr) return refuse(at + "/$ref", "does not name a definition in $defs or definitions");
        }
        LARDER_ASSIGN_OR_RETURN(all, merge_schemas(all, *branch, at));
      }
      return visit(all, hint, where + "/allOf", depth + 1);
    }
    const auto type = s.find("type");
    if (type == s.end()) {
      // The type the keywords constrain (a value of another type would be
      // valid too: the grammar writes a subset).
      if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
        return object(s, hint, where, depth);
      }
      if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) return array(s, hint, where, depth);
      for (const char* k : {"pattern", "format", "minLength", "maxLength"}) {
        if (s.contains(k)) return string(s, hint, where);
      }
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
        if (s.contains(k)) return number(s, hint, where, false);
      }
      return std::string("value");  // no constraint: any JSON value
    }
    if (type->is_array()) {
      Choice c;  // a type the keywords leave nothing of is left out, as in anyOf
      Status error;
      for (const json& t : *type) {
        if (!t.is_string()) return refuse(where + "/type", "must be a string or an array of strings");
        if (++n_visits_ > kMaxVisits) return refuse(where, "the schema expands to too large a grammar");
        if (!c.add(typed(s, t.get_ref<const std::string&>(), hint, where, depth + 1), &error)) return error;
      }
      if (c.alts.empty() && !c.first_empty.is_ok()) return c.first_empty;
      if (c.alts.empty()) return nothing(where + "/type", "an empty list of types allows nothing");
      return new_rule(hint, c.alts);
    }
    if (!type->is_string()) return refuse(where + "/type", "must be a string or an array of strings");
    return typed(s, type->get_ref<const std::string&>(), hint, where, depth);
  }

  Result<std::string> typed(const json& s, const std::string& t, const std::string& hint, const std::string& where,
                            int depth) {
    if (t == "object") return object(s, hint, where, depth);
    if (t == "array") return array(s, hint, where, depth);
    if (t == "string") return string(s, hint, where);
    if (t == "number") return number(s, hint, where, false);
    if (t == "integer") return number(s, hint, where, true);
    if (t == "boolean") return std::string("boolean");
    if (t == "null") return std::string("null");
    return refuse(where + "/type", "unknown type \"" + t + "\"");
  }

  // "const" / "enum": the listed values that also satisfy the keywords
  // beside them (type, bounds, lengths, pattern, format).
  Result<std::string> constant(const json& s, const json& values_in, const char* key, const std::string& where) {
    const bool is_enum = std::string_view(key) == "enum";
    // The schema's enum, whether it is the listed values or sits beside a const.
    if (const auto e = s.find("enum"); e != s.end() && (!e->is_array() || e->empty())) {
      return refuse(where + "/enum", "must be a non-empty array");
    }
    const json values = is_enum ? values_in : json::array({values_in});
    static const std::initializer_list<std::string_view> kValueKeywords = {
        "const", "enum", "type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
        "minLength", "maxLength", "pattern", "format"};
    if (const auto others = constraints(s, kValueKeywords); !others.empty()) {
      return refuse(where, "\"" + others[0] + "\" beside \"" + key + "\" is not supported");
    }
    // The bounds and the string keywords' automaton, once for all the values.
    std::optional<SchemaBound> lo, hi;
    if (std::any_of(values.begin(), values.end(), [](const json& v) { return v.is_number(); })) {
      LARDER_ASSIGN_OR_RETURN(lo, schema_bound(s, where, true));
      LARDER_ASSIGN_OR_RETURN(hi, schema_bound(s, where, false));
    }
    std::optional<StringDfa> strings;
    LARDER_ASSIGN_OR_RETURN(strings, string_automaton(s, where, budget_));
    std::string alts;
    // The enum itself is the value list: each value is in it (checking
    // that was quadratic: found in hostile testing, 100,000 values took 79 s).
    const bool check_enum = !is_enum;
    for (size_t i = 0; i < values.size(); ++i) {
      if (i % 1024 == 1023 && cancel_requested()) return Status::cancelled("json_schema: cancelled");
      const json& v = values[i];
      if (satisfies(s, v, lo, hi, strings ? &*strings : nullptr, check_enum)) {
        alts += (alts.empty() ? "" : " | ") + literal(v.dump());
      }
    }
    if (alts.empty()) return nothing(where + "/" + key, "no listed value satisfies the keywords beside it");
    return is_enum ? "(" + alts + ")" : alts;
  }

  // Whether the value v satisfies s's type, enum, the bounds lo / hi and,
  // for a string, `strings` (the automaton of s's lengths, pattern and
  // format; null: none).
  static bool satisfies(const json& s, const json& v, const std::optional<SchemaBound>& lo,
                        const std::optional<SchemaBound>& hi, const StringDfa* strings, bool check_enum) {
    // An enum beside a const (found in hostile testing: {"const": "a",
    // "enum": ["b"]} wrote "a"). JSON Schema's equality: 1 and 1.0 are equal,
    // as nlohmann's == has it.
    if (const auto e = s.find("enum");
        check_enum && e != s.end() && e->is_array() && std::find(e->begin(), e->end(), v) == e->end()) {
      return false;
    }
    if (const auto t = s.find("type"); t != s.end()) {
      auto is = [&](const json& name) {
        if (!name.is_string()) return false;
        const std::string& n = name.get_ref<const std::string&>();
        if (n == "integer") return v.is_number_integer() || (v.is_number_float() && std::trunc(v.get<double>()) == v.get<double>());
        return (n == "number" && v.is_number()) || (n == "string" && v.is_string()) ||
               (n == "boolean" && v.is_boolean()) || (n == "null" && v.is_null()) || (n == "object" && v.is_object()) ||
               (n == "array" && v.is_array());
      };
      bool any = t->is_array() ? std::any_of(t->begin(), t->end(), is) : is(*t);
      if (!any) return false;
    }
    if (v.is_number()) {
      const long double x = json_number(v);
      if (lo && (lo->exclusive ? x <= lo->value : x < lo->value)) return false;
      if (hi && (hi->exclusive ? x >= hi->value : x > hi->value)) return false;
    }
    // The string's automaton decides, as for a written string.
    if (v.is_string() && strings != nullptr && !strings->accepts(v.get_ref<const std::string&>())) return false;
    return true;
  }

  // "#/$defs/x" -> ("$defs", "x"); false for any other form. The fragment
  // is %XX-decoded (RFC 3986 2.1), then read as a JSON Pointer: '/' splits
  // it, and ~1 -> '/' and ~0 -> '~' in its tokens (RFC 6901 sections 4 and
  // 6), as ajv reads it (found in hostile testing: "#/$defs/a~1b" was "not
  // defined" beside a definition "a/b").
  static bool split_ref(const std::string& path, std::string* section, std::string* name) {
    if (path.empty() || path[0] != '#') return false;
    const auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    std::string pointer;
    for (size_t i = 1; i < path.size(); ++i) {
      if (path[i] == '%' && i + 2 < path.size() && hex(path[i + 1]) >= 0 && hex(path[i + 2]) >= 0) {
        pointer += static_cast<char>(hex(path[i + 1]) * 16 + hex(path[i + 2]));
        i += 2;
      } else {
        pointer += path[i];
      }
    }
    for (const char* prefix : {"/$defs/", "/definitions/"}) {
      const std::string p = prefix;
      if (pointer.rfind(p, 0) != 0 || pointer.find('/', p.size()) != std::string::npos) continue;
      *section = p.substr(1, p.size() - 2);
      name->clear();
      for (size_t i = p.size(); i < pointer.size(); ++i) {
        if (pointer[i] == '~' && i + 1 < pointer.size() && (pointer[i + 1] == '0' || pointer[i + 1] == '1')) {
          *name += pointer[i + 1] == '0' ? '~' : '/';
          ++i;
        } else {
          *name += pointer[i];
        }
      }
      return true;
    }
    return false;
  }

  Result<std::string> ref(const json& r, const std::string& where) {
    if (!r.is_string()) return refuse(where + "/$ref", "must be a string");
    std::string path = r.get_ref<const std::string&>();
    std::string section, name;
    const json* def = nullptr;
    // A definition that is only a $ref (an alias) is its target: a chain of
    // aliases takes no rules (as rules it would be a chain the grammar
    // parser bounds at 1000); a cycle of them allows nothing.
    std::set<std::string> seen;
    while (true) {
      if (path == "#") return std::string("root");
      if (!split_ref(path, &section, &name)) {
        return refuse(where + "/$ref", "only refs to #/$defs/... or #/definitions/... are supported");
      }
      if (const auto done = refs_.find(path); done != refs_.end()) return done->second;
      def = find_def(section, name);
      if (def == nullptr) return refuse(where + "/$ref", "\"" + path + "\" is not defined");
      bool alias = def->is_object() && def->contains("$ref") && def->at("$ref").is_string();
      if (alias) {
        for (const auto& [key, v] : def->items()) alias = alias && (key == "$ref" || schema_annotation(key));
      }
      if (!alias) break;
      if (!seen.insert(path).second) return refuse(where + "/$ref", "\"" + path + "\" refers only to itself");
      path = def->at("$ref").get<std::string>();
    }
    // Named before it is visited, so a recursive schema refers to itself.
    const std::string rule = new_rule(name, "");
    const size_t slot = rules_.size() - 1;
    refs_[path] = rule;
    Result<std::string> body = visit(*def, name, path, 1);
    if (!body.is_ok()) {
      // The rule stays (others may already name it) but matches nothing,
      // and is not found again by its path.
      rules_[slot].second = "[^\\x00-\\U0010FFFF]";
      refs_.erase(path);
      return body.status();
    }
    rules_[slot].second = *body;
    return rule;
  }

  // s, or the definition its $ref (a chain of them) names; nullptr when it
  // names none.
  const json* resolved(const json& s) {
    const json* at = &s;
    for (int hops = 0; at->is_object() && at->contains("$ref"); ++hops) {
      std::string section, name;
      const json& r = at->at("$ref");
      if (hops > 16 || !r.is_string() || !split_ref(r.get<std::string>(), &section, &name)) return nullptr;
      at = find_def(section, name);
      if (at == nullptr) return nullptr;
    }
    return at;
  }

  // The definition `name` in the root's `section` ("$defs" or
  // "definitions"), or null. An index per section is built on first use: a
  // lookup in an ordered_json object scans its keys, so many refs into many
  // definitions were quadratic (20000 of each: seconds).
  const json* find_def(const std::string& section, const std::string& name) {
    auto [index, fresh] = def_index_.try_emplace(section);
    if (fresh) {
      const auto defs = root_.find(section);
      if (defs != root_.end() && defs->is_object()) {
        for (const auto& [key, value] : defs->items()) index->second.emplace(key, &value);
      }
    }
    const auto it = index->second.find(name);
    return it == index->second.end() ? nullptr : it->second;
  }

  Result<std::string> object(const json& s, const std::string& hint, const std::string& where, int depth) {
    if (const auto ap = s.find("additionalProperties"); ap != s.end() && !(ap->is_boolean() && !ap->get<bool>())) {
      return refuse(where + "/additionalProperties", "only false (or absent) is supported: the object has only its listed properties");
    }
    std::set<std::string> required;
    if (const auto req = s.find("required"); req != s.end()) {
      if (!req->is_array()) return refuse(where + "/required", "must be an array of names");
      for (const json& n : *req) {
        if (!n.is_string()) return refuse(where + "/required", "must be an array of names");
        required.insert(n.get<std::string>());
      }
    }
    std::vector<PropRule> props;
    if (const auto p = s.find("properties"); p != s.end()) {
      if (!p->is_object()) return refuse(where + "/properties", "must be an object");
      n_properties_ += p->size();
      if (n_properties_ > kMaxProperties) {
        return refuse(where + "/properties", "the schema has more than " + std::to_string(kMaxProperties) +
                                                 " properties in all (a grammar that large is not supported)");
      }
      for (const auto& [name, sub] : p->items()) {
        std::string value;
        LARDER_ASSIGN_OR_RETURN(value, visit(sub, name, where + "/properties/" + name, depth + 1));
        const std::string kv = new_rule(hint + "-" + name + "-kv", literal(json(name).dump()) + " ws \":\" ws " + value + " ws");
        props.push_back({kv, required.count(name) != 0});
        required.erase(name);
      }
    }
    if (!required.empty()) return refuse(where + "/required", "\"" + *required.begin() + "\" is required but not among the properties");
    if (props.empty()) return new_rule(hint, "\"{\" ws \"}\"");
    PropertySequence seq(props, [&](const std::string& h, std::string body) { return new_rule(hint + "-" + h, std::move(body)); });
    const std::string body = seq.nonempty(0, props.size(), false);
    return new_rule(hint, "\"{\" ws " + (seq.any_required(0, props.size()) ? body : "( " + body + " )?") + " \"}\"");
  }

  Result<std::string> array(const json& s, const std::string& hint, const std::string& where, int depth) {
    std::string item = "value";
    if (const auto it = s.find("items"); it != s.end()) {
      LARDER_ASSIGN_OR_RETURN(item, visit(*it, hint + "-item", where + "/items", depth + 1));
    }
    int64_t min = 0, max = -1;
    if (const auto v = s.find("minItems"); v != s.end()) {
      if (!v->is_number_unsigned()) return refuse(where + "/minItems", "must be a non-negative integer");
      min = v->get<int64_t>();
    }
    if (const auto v = s.find("maxItems"); v != s.end()) {
      if (!v->is_number_unsigned()) return refuse(where + "/maxItems", "must be a non-negative integer");
      max = v->get<int64_t>();
    }
    if (min > 1000 || max > 1000) return refuse(where, "minItems / maxItems above 1000 are not supported");
    if (max >= 0 && max < min) return nothing(where, "maxItems is below minItems");
    if (max == 0) return new_rule(hint, "\"[\" ws \"]\"");
    const std::string more = "( \",\" ws " + item + " ws )";
    std::string reps;
    const int64_t lo = std::max<int64_t>(min - 1, 0);
    if (max < 0) reps = lo == 0 ? "*" : "{" + std::to_string(lo) + ",}";
    else reps = "{" + std::to_string(lo) + "," + std::to_string(max - 1) + "}";
    std::string items = item + " ws " + more + reps;
    if (min == 0) items = "( " + items + " )?";
    return new_rule(hint, "\"[\" ws " + items + " \"]\"");
  }

  // "integer" or "number", within the schema's bounds (json_schema_values.h).
  Result<std::string> number(const json& s, const std::string& hint, const std::string& where, bool integer) {
    std::string expr;
    LARDER_ASSIGN_OR_RETURN(expr, number_gbnf(s, where, integer));
    return expr == "integer" || expr == "number" ? expr : new_rule(hint, expr);
  }

  Result<std::string> string(const json& s, const std::string& hint, const std::string& where) {
    std::pair<int64_t, int64_t> len;
    LARDER_ASSIGN_OR_RETURN(len, string_lengths(s, where));
    const auto [min, max] = len;
    const auto format = s.find("format");
    const auto pattern = s.find("pattern");
    if (format == s.end() && pattern == s.end()) {
      if (min == 0 && max < 0) return std::string("string");
      const std::string reps = max < 0 ? "{" + std::to_string(min) + ",}" : "{" + std::to_string(min) + "," + std::to_string(max) + "}";
      return new_rule(hint, "\"\\\"\" bchar" + reps + " \"\\\"\"");
    }
    // The same constraints again (a pattern in every item of a list) reuse the rule.
    const std::string memo_key = (format != s.end() ? format->dump() : "") + "\n" +
                                 (pattern != s.end() ? pattern->dump() : "") + "\n" + std::to_string(min) + "," +
                                 std::to_string(max);
    if (const auto it = string_rules_.find(memo_key); it != string_rules_.end()) return it->second;
    Result<std::optional<StringDfa>> automaton = string_automaton(s, where, budget_);
    if (!automaton.is_ok()) return automaton.status();
    if (!*automaton) return std::string("string");  // not reached: a format or a pattern is there
    const StringDfa& dfa = **automaton;
    if (dfa.empty()) {
      return nothing(where, "its pattern, format and lengths together allow no string the grammar can write "
                           "(printable characters; no control characters)");
    }
    std::vector<std::pair<std::string, std::string>> rules;
    const std::string top = dfa.to_gbnf("s-re" + std::to_string(++n_rules_), &rules);
    for (auto& r : rules) {
      rule_bytes_ += r.first.size() + r.second.size() + 6;
      rules_.push_back(std::move(r));
    }
    const std::string rule = new_rule(hint, top);
    string_rules_.emplace(memo_key, rule);
    return rule;
  }

  const json& root_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> refs_;
  std::map<std::string, std::unordered_map<std::string, const json*>> def_index_;
  int n_rules_ = 0;
  size_t n_properties_ = 0;
  size_t n_visits_ = 0;
  size_t rule_bytes_ = 0;
  // One budget for all the schema's automata, and the rule of each
  // distinct string constraint.
  DfaBudget own_budget_{kSchemaDfaBudget};
  DfaBudget* budget_;
  std::unordered_map<std::string, std::string> string_rules_;
};

}  // namespace

Result<std::string> json_schema_to_gbnf(const json& schema, DfaBudget* budget) {
  return Converter(schema, budget).run();
}

}  // namespace larder
