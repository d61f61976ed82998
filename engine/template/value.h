// Values of the Jinja interpreter (engine/template): the Python objects a
// Hugging Face chat template sees. Strings are UTF-8; dicts keep insertion
// order (as Python dicts do, which tojson relies on); lists, dicts and
// namespaces are shared by reference, as Python objects are.
//
// Semantics follow Python 3 / Jinja2 3.x where a template can observe them:
// str() of None is "None", of True "True", of a list its repr
// (['a', 1]); an undefined value prints as "", is false, has length 0 and
// iterates as empty, and fails on attribute/item access or arithmetic.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace larder::tmpl {

class Value;
struct CallArgs;
using List = std::vector<Value>;

// Insertion-ordered string-keyed map (chat data is JSON, keys are strings).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);
};

// A callable: builtin function, bound method or macro.
struct Callable {
  std::string name;
  std::function<Value(CallArgs&)> fn;
};

enum class ValueType { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };

class Value {
 public:
  Value() = default;  // undefined
  static Value undefined(std::string name = {});
  static Value none();
  Value(bool b);                 // NOLINT
  Value(int v) : Value(static_cast<int64_t>(v)) {}  // NOLINT
  Value(int64_t v);              // NOLINT
  Value(double v);               // NOLINT
  Value(std::string s);          // NOLINT
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT
  Value(std::string_view s) : Value(std::string(s)) {}  // NOLINT
  Value(List list);              // NOLINT
  Value(Dict dict);              // NOLINT
  static Value make_namespace(Dict attrs);
  static Value make_callable(std::string name, std::function<Value(CallArgs&)> fn);

  ValueType type() const { return type_; }
  bool is_undefined() const { return type_ == ValueType::kUndefined; }
  bool is_none() const { return type_ == ValueType::kNone; }
  bool is_string() const { return type_ == ValueType::kString; }
  bool is_number() const { return type_ == ValueType::kInt || type_ == ValueType::kFloat || type_ == ValueType::kBool; }
  bool is_list() const { return type_ == ValueType::kList; }
  bool is_dict() const { return type_ == ValueType::kDict; }
  bool is_mapping() const { return type_ == ValueType::kDict || type_ == ValueType::kNamespace; }
  bool is_callable() const { return type_ == ValueType::kCallable; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_double() const;  // int, bool or float widened
  const std::string& str() const { return s_; }  // kString; for kUndefined: its name
  List& list() const { return *list_; }
  Dict& dict() const { return *dict_; }  // kDict and kNamespace
  const Callable& callable() const { return *fn_; }

  // Python truthiness.
  bool truthy() const;
  // Python str(): what {{ value }} prints.
  std::string to_str() const;
  // Python repr() (strings quoted as Python does).
  std::string repr() const;
  // Python ==.
  bool equals(const Value& other) const;
  // len(); -1 when the value has no length.
  int64_t length() const;

 private:
  ValueType type_ = ValueType::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Callable> fn_;
};

// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  // The i-th positional argument, else the keyword `name`, else `fallback`.
  Value get(size_t i, std::string_view name, Value fallback = Value()) const;
};

// Python's json.dumps(value, ensure_ascii=False, indent=indent,
// sort_keys=sort_keys) with the default separators (", ", ": "; "," between
// items when indent is given). indent < 0: none. Errors (undefined, callable)
// are reported by returning false.
bool to_python_json(const Value& value, int indent, bool sort_keys, std::string* out);

// JSON (nlohmann, key order preserved) to Value: objects to dicts, arrays to
// lists, null to none.
Value from_json(const nlohmann::ordered_json& json);

// Python float repr ("1.0", "0.1", "1e-05", "inf").
std::string python_float_repr(double v);

// Python's str.isspace(): what str.strip() and Jinja's trim remove.
bool is_py_space(uint32_t c);

// UTF-8 helpers: code points of `s` (invalid bytes map to U+FFFD), and back.
std::vector<uint32_t> utf8_decode(std::string_view s);
std::string utf8_encode(const std::vector<uint32_t>& cps, size_t begin, size_t end);

}  // namespace larder::tmpl
