// Values of the Jinja interpreter (engine/template): the Python objects a
// Hugging Face chat template sees. Strings are UTF-8 and immutable (copies
// share the bytes); dicts keep insertion order (as Python dicts do, which
// tojson relies on); lists, dicts and namespaces are shared by reference, as
// Python objects are. Lists and dicts are never changed after they are made;
// only a namespace's attributes are ({% set ns.x = ... %}).
//
// Semantics follow Python 3 / Jinja2 3.x where a template can observe them:
// str() of None is "None", of True "True", of a list its repr
// (['a', 1]); an undefined value prints as "", is false, has length 0 and
// iterates as empty, and fails on attribute/item access or arithmetic.
//
// Untrusted text. A string knows which of its bytes came from the caller's
// data rather than from the template (TextSpan): the caller marks what it
// passes in (Value::untrusted, from_json(..., untrusted)), and every
// operation that makes a string keeps the marks: concatenation, slicing,
// strip and split move them with the bytes they cover; any other string
// made from marked input (upper(), replace's inserted text aside, tojson,
// repr of a list, ...) is marked as a whole. Template text, string
// literals and numbers are never marked. Template::render reports the
// marked byte ranges of its output, so the caller can tokenize them as
// plain text (engine/tokenizer/chat_prompt.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace larder::tmpl {

class Value;
struct CallArgs;
using List = std::vector<Value>;

// Origin of a TextSpan: >= 0 is a number the caller chose (the chat code
// uses the message index of a content); kNoOrigin is untrusted text of no
// particular source (a name, tool data, or text derived from several).
inline constexpr int32_t kNoOrigin = -1;

// Bytes [begin, end) of a string that came from untrusted data.
struct TextSpan {
  size_t begin = 0, end = 0;
  int32_t origin = kNoOrigin;
  bool operator==(const TextSpan&) const = default;
};

// Deepest nesting of lists and dicts a value may have (from_json refuses
// deeper input; the interpreter refuses to build deeper values). Python's
// own repr and json.dumps stop near 1000.
inline constexpr uint32_t kMaxValueDepth = 256;

// Insertion-ordered string-keyed map (chat data is JSON, keys are strings).
// Keys are string Values, so a key from untrusted data stays marked when a
// template prints it. Lookup is O(1) (an index is kept past a few keys).
class Dict {
 public:
  const Value* find(std::string_view key) const;
  // Sets `key` (a string Value; a std::string converts) to `value`.
  void set(Value key, Value value);
  // (Defined after Value below: clang needs Value complete for them.)
  const std::vector<std::pair<Value, Value>>& items() const;
  // Replaces the value of the i-th item (i < size()).
  void set_value(size_t i, Value value);
  size_t size() const;
  bool empty() const;

 private:
  std::vector<std::pair<Value, Value>> items_;
  std::unordered_map<std::string_view, size_t> index_;  // key text -> position, once size() > kIndexFrom
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
  Value(std::string s);          // NOLINT: template text (trusted)
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT
  Value(std::string_view s) : Value(std::string(s)) {}  // NOLINT
  Value(List list);              // NOLINT
  Value(Dict dict);              // NOLINT
  // A string of untrusted data, all of it marked with `origin`.
  static Value untrusted(std::string s, int32_t origin = kNoOrigin);
  // A string with these marked ranges (sorted, disjoint, inside s).
  static Value text(std::string s, std::vector<TextSpan> spans);
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
  const std::string& str() const;  // kString; for kUndefined: its name
  // kString: the marked (untrusted) byte ranges, sorted and disjoint.
  const std::vector<TextSpan>& spans() const;
  List& list() const { return *list_; }
  Dict& dict() const { return *dict_; }  // kDict and kNamespace
  const Callable& callable() const { return *fn_; }
  // Nesting of lists and dicts: 0 for scalars and strings, 1 + the deepest
  // item for a list or dict, 1 for a namespace (whose attributes change).
  uint32_t depth() const { return depth_; }
  // Whether any string in this value (recursively; not through namespaces)
  // has marked bytes, or a dict key does.
  bool has_untrusted() const;

  // Python truthiness.
  bool truthy() const;
  // Python str(): what {{ value }} prints. A list or dict printed past
  // `limit` bytes stops there (the result is then longer than limit).
  std::string to_str(size_t limit = SIZE_MAX) const;
  // to_str() as a string Value: a string itself; anything else printed, and
  // marked as a whole when has_untrusted().
  Value str_value() const;
  // Python repr() (strings quoted as Python does); `limit` as for to_str.
  std::string repr(size_t limit = SIZE_MAX) const;
  // Python ==.
  bool equals(const Value& other) const;
  // len(); -1 when the value has no length.
  int64_t length() const;

 private:
  void repr_to(std::string* out, size_t limit) const;
  struct Str {
    std::string text;
    std::vector<TextSpan> spans;
  };
  ValueType type_ = ValueType::kUndefined;
  bool b_ = false;
  uint32_t depth_ = 0;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const Str> s_;  // kString text; kUndefined name
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Callable> fn_;
};

inline const std::vector<std::pair<Value, Value>>& Dict::items() const { return items_; }
inline size_t Dict::size() const { return items_.size(); }
inline bool Dict::empty() const { return items_.empty(); }

// Builds a string Value piece by piece, keeping the marks of the pieces
// (adjacent marked ranges of the same origin merge into one).
class TextBuilder {
 public:
  // A string Value, with its marks (other values: their str_value()).
  void append(const Value& v);
  // Bytes [begin, end) of string value `v`, with the marks that fall inside.
  void append_sub(const Value& v, size_t begin, size_t end);
  // Template text (unmarked).
  void append_trusted(std::string_view text);
  // Text marked as a whole when `untrusted`.
  void append_text(std::string_view text, bool untrusted, int32_t origin = kNoOrigin);
  size_t size() const { return text_.size(); }
  const std::string& text() const { return text_; }
  const std::vector<TextSpan>& spans() const { return spans_; }
  Value take();
  std::string take_text(std::vector<TextSpan>* spans);

 private:
  void mark(size_t begin, size_t end, int32_t origin);
  std::string text_;
  std::vector<TextSpan> spans_;
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
// are reported by returning false. Output past `limit` bytes stops there
// (true, with out->size() > limit).
bool to_python_json(const Value& value, int indent, bool sort_keys, std::string* out, size_t limit = SIZE_MAX);

// JSON (nlohmann, key order preserved) to Value: objects to dicts, arrays to
// lists, null to none. untrusted: every string and key is marked (origin
// kNoOrigin). Nullopt when the JSON nests deeper than kMaxValueDepth.
std::optional<Value> from_json(const nlohmann::ordered_json& json, bool untrusted = false);

// Python float repr ("1.0", "0.1", "1e-05", "inf").
std::string python_float_repr(double v);

// Python's str.isspace(): what str.strip() and Jinja's trim remove.
bool is_py_space(uint32_t c);

// UTF-8 helpers: code points of `s` (invalid bytes map to U+FFFD), and back.
std::vector<uint32_t> utf8_decode(std::string_view s);
std::string utf8_encode(const std::vector<uint32_t>& cps, size_t begin, size_t end);
// Byte offset of each code point of `s` as utf8_decode splits it, plus
// s.size() at the end (so code point i is bytes [out[i], out[i+1])).
std::vector<size_t> utf8_offsets(std::string_view s);

}  // namespace larder::tmpl
