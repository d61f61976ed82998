// Jinja filters and tests (the subset HF chat templates use).
//
// tojson is transformers' override, not Jinja2's: json.dumps(x,
// ensure_ascii=False, indent=indent, separators=None, sort_keys=sort_keys),
// with no HTML escaping.
#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>

#include "engine/template/interpreter.h"
#include "engine/template/lexer.h"
#include "engine/template/parser.h"

namespace larder::tmpl {
namespace {

constexpr std::string_view kFilters[] = {
    "trim", "length", "count", "tojson", "items", "list", "first", "last", "join", "upper", "lower",
    "capitalize", "title", "replace", "default", "d", "string", "int", "float", "abs", "round", "selectattr",
    "rejectattr", "select", "reject", "map", "unique", "reverse", "sort", "safe", "min", "max", "sum", "e",
    "escape", "wordcount"};
constexpr std::string_view kTests[] = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "boolean", "true", "false",
    "mapping", "iterable", "sequence", "callable", "equalto", "eq", "==", "ne", "!=", "sameas", "in", "odd",
    "even", "divisibleby", "lower", "upper", "gt", "ge", "lt", "le", "greaterthan", "lessthan", "escaped"};

[[noreturn]] void fail(const std::string& msg, int line) { throw TemplateError(msg, line); }

// Attribute lookup with dots ("function.name"), as Jinja's make_attrgetter.
Value attr_path(const Value& v, const std::string& path, int line, Budget& budget) {
  Value cur = v;
  size_t pos = 0;
  while (true) {
    const size_t dot = path.find('.', pos);
    const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = digits ? get_item(cur, Value(static_cast<int64_t>(std::stoll(part))), line, budget)
                 : get_item(cur, Value(part), line, budget);
    if (dot == std::string::npos) return cur;
    pos = dot + 1;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_double() < b.as_double();
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  return false;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

bool is_known_filter(std::string_view name) {
  return std::find(std::begin(kFilters), std::end(kFilters), name) != std::end(kFilters);
}

bool is_known_test(std::string_view name) {
  return std::find(std::begin(kTests), std::end(kTests), name) != std::end(kTests);
}

Value Interpreter::apply_filter(const std::string& name, const Value& in, CallArgs& a, int line) {
  const std::string& n = name;
  if (n == "default" || n == "d") {
    const bool boolean = a.get(1, "boolean", Value(false)).truthy();
    const bool use = boolean ? !in.truthy() : in.is_undefined();
    return use ? a.get(0, "default_value", Value("")) : in;
  }
  if (n == "length" || n == "count") {
    const int64_t len = in.length();
    if (len < 0) fail("object of this type has no len()", line);
    return Value(len);
  }
  if (n == "string") return to_text(in, line, budget_);
  if (n == "safe") return in;
  if (n == "e" || n == "escape") {
    const Value text = to_text(in, line, budget_);
    std::string escaped = html_escape(text.str());
    budget_.string_bytes(escaped.size(), line);
    TextBuilder b;
    b.append_text(escaped, text.has_untrusted());
    return b.take();
  }
  if (n == "list") return Value(iterate(in, line, budget_));
  if (n == "items") {
    if (in.is_undefined()) return Value(List{});
    if (!in.is_mapping()) fail("items filter needs a mapping", line);
    budget_.items(in.dict().size() * 3, line);
    List out;
    for (const auto& [k, v] : in.dict().items()) out.push_back(Value(List{k, v}));
    return Value(std::move(out));
  }
  if (n == "tojson") {
    std::string out;
    const Value indent = a.get(1, "indent", Value::none());
    const bool sort_keys = a.get(3, "sort_keys", Value(false)).truthy();
    if (a.get(0, "ensure_ascii", Value(false)).truthy()) fail("tojson(ensure_ascii=true) is not supported", line);
    if (!a.get(2, "separators", Value::none()).is_none()) fail("tojson(separators=...) is not supported", line);
    if (!to_python_json(in, indent.is_none() ? -1 : static_cast<int>(indent.as_int()), sort_keys, &out,
                        budget_.max_output_bytes())) {
      fail("tojson: value is not JSON serializable", line);
    }
    budget_.string_bytes(out.size(), line);
    // Marked as a whole when any string in it is: JSON text holds no
    // control token of the template's own.
    TextBuilder b;
    b.append_text(out, in.has_untrusted());
    return b.take();
  }
  if (n == "first" || n == "last") {
    List l = iterate(in, line, budget_);
    if (l.empty()) return Value::undefined(n);
    return n == "first" ? l.front() : l.back();
  }
  if (n == "reverse") {
    if (in.is_string()) {
      const Value step(int64_t{-1});
      return slice_value(in, nullptr, nullptr, &step, line, budget_);
    }
    List l = iterate(in, line, budget_);
    std::reverse(l.begin(), l.end());
    return Value(std::move(l));
  }
  if (n == "join") {
    const Value sep = to_text(a.get(0, "d", Value("")), line, budget_);
    const Value attr = a.get(1, "attribute", Value::none());
    TextBuilder out;
    bool first = true;
    for (const Value& v : iterate(in, line, budget_)) {
      const Value t = to_text(attr.is_none() ? v : attr_path(v, attr.to_str(), line, budget_), line, budget_);
      budget_.string_bytes(out.size() + t.str().size() + (first ? 0 : sep.str().size()), line);
      if (!first) out.append(sep);
      first = false;
      out.append(t);
    }
    return out.take();
  }
  if (n == "trim") return py_strip(in, a.get(0, "chars", Value::none()), true, true, line, budget_);
  if (n == "upper" || n == "lower" || n == "capitalize" || n == "title") {
    CallArgs none;
    return call(get_attr(to_text(in, line, budget_), n, line, budget_), none, line);
  }
  if (n == "replace") {
    CallArgs r;
    r.args = {a.get(0, "old"), a.get(1, "new"), a.get(2, "count", Value(int64_t{-1}))};
    return call(get_attr(to_text(in, line, budget_), "replace", line, budget_), r, line);
  }
  if (n == "int") {
    if (in.is_number()) return Value(in.type() == ValueType::kFloat ? static_cast<int64_t>(in.as_double()) : in.as_int());
    if (in.is_string()) {
      char* end = nullptr;
      const std::string s = py_strip(in, Value::none(), true, true, line, budget_).str();
      const long long v = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && end && *end == 0) return Value(static_cast<int64_t>(v));
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end && *end == 0) return Value(static_cast<int64_t>(d));
    }
    return a.get(0, "default", Value(int64_t{0}));
  }
  if (n == "float") {
    if (in.is_number()) return Value(in.as_double());
    if (in.is_string()) {
      char* end = nullptr;
      const double d = std::strtod(in.str().c_str(), &end);
      if (!in.str().empty() && end && *end == 0) return Value(d);
    }
    return a.get(0, "default", Value(0.0));
  }
  if (n == "abs") {
    if (!in.is_number()) fail("abs needs a number", line);
    return in.type() == ValueType::kFloat ? Value(std::fabs(in.as_double())) : Value(static_cast<int64_t>(std::llabs(in.as_int())));
  }
  if (n == "round") {
    const int64_t prec = a.get(0, "precision", Value(int64_t{0})).as_int();
    const double scale = std::pow(10.0, static_cast<double>(prec));
    return Value(std::round(in.as_double() * scale) / scale);
  }
  if (n == "selectattr" || n == "rejectattr" || n == "select" || n == "reject") {
    const bool by_attr = n == "selectattr" || n == "rejectattr";
    const bool keep = n == "selectattr" || n == "select";
    const size_t first_arg = by_attr ? 1 : 0;
    const std::string attr = by_attr ? a.get(0, "attr").to_str() : "";
    List out;
    for (const Value& v : iterate(in, line, budget_)) {
      const Value x = by_attr ? attr_path(v, attr, line, budget_) : v;
      bool ok;
      if (a.args.size() > first_arg) {
        CallArgs targs;
        targs.args.assign(a.args.begin() + static_cast<long>(first_arg) + 1, a.args.end());
        const std::string test = a.args[first_arg].to_str();
        if (!is_known_test(test)) fail("unsupported test '" + test + "'", line);
        ok = apply_test(test, x, targs, line);
      } else {
        ok = x.truthy();
      }
      if (ok == keep) out.push_back(v);
    }
    return Value(std::move(out));
  }
  if (n == "map") {
    List out;
    const Value attr = a.get(99, "attribute", Value::none());
    for (const Value& v : iterate(in, line, budget_)) {
      if (!attr.is_none()) {
        Value x = attr_path(v, attr.to_str(), line, budget_);
        if (x.is_undefined()) x = a.get(99, "default", x);
        out.push_back(x);
      } else {
        if (a.args.empty()) fail("map needs a filter name or attribute=", line);
        const std::string f = a.args[0].to_str();
        if (!is_known_filter(f)) fail("unsupported filter '" + f + "'", line);
        CallArgs fargs;
        fargs.args.assign(a.args.begin() + 1, a.args.end());
        out.push_back(apply_filter(f, v, fargs, line));
      }
    }
    return Value(std::move(out));
  }
  if (n == "unique") {
    List out;
    for (const Value& v : iterate(in, line, budget_)) {
      budget_.step(line, static_cast<int64_t>(out.size()));  // pairwise: a long list runs out of steps
      if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return o.equals(v); })) out.push_back(v);
    }
    return Value(std::move(out));
  }
  if (n == "sort" || n == "min" || n == "max") {
    List l = iterate(in, line, budget_);
    budget_.step(line, static_cast<int64_t>(l.size() * (1 + std::bit_width(l.size()))));
    const Value attr = a.get(n == "sort" ? 2 : 1, "attribute", Value::none());
    auto key = [&](const Value& v) { return attr.is_none() ? v : attr_path(v, attr.to_str(), line, budget_); };
    std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) { return less(key(x), key(y)); });
    if (n == "sort") {
      if (a.get(0, "reverse", Value(false)).truthy()) std::reverse(l.begin(), l.end());
      return Value(std::move(l));
    }
    if (l.empty()) return Value::undefined(n);
    return n == "min" ? l.front() : l.back();
  }
  if (n == "sum") {
    Value total = a.get(1, "start", Value(int64_t{0}));
    for (const Value& v : iterate(in, line, budget_)) {
      total = (total.type() == ValueType::kFloat || v.type() == ValueType::kFloat)
                  ? Value(total.as_double() + v.as_double())
                  : Value(total.as_int() + v.as_int());
    }
    return total;
  }
  if (n == "wordcount") {
    CallArgs none;
    return Value(static_cast<int64_t>(
        call(get_attr(to_text(in, line, budget_), "split", line, budget_), none, line).list().size()));
  }
  fail("unsupported filter '" + n + "'", line);
}

bool Interpreter::apply_test(const std::string& n, const Value& v, CallArgs& a, int line) {
  const ValueType t = v.type();
  if (n == "defined") return !v.is_undefined();
  if (n == "undefined") return v.is_undefined();
  if (n == "none") return v.is_none();
  if (n == "string") return v.is_string();
  if (n == "number") return t == ValueType::kInt || t == ValueType::kFloat || t == ValueType::kBool;
  if (n == "integer") return t == ValueType::kInt;
  if (n == "float") return t == ValueType::kFloat;
  if (n == "boolean") return t == ValueType::kBool;
  if (n == "true") return t == ValueType::kBool && v.as_bool();
  if (n == "false") return t == ValueType::kBool && !v.as_bool();
  if (n == "mapping") return v.is_dict();
  if (n == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (n == "sequence") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (n == "callable") return v.is_callable();
  if (n == "escaped") return false;
  if (n == "lower" || n == "upper") {
    if (!v.is_string()) return false;
    bool cased = false;
    for (char c : v.str()) {
      if (std::isalpha(static_cast<unsigned char>(c))) {
        cased = true;
        if (n == "lower" ? std::isupper(static_cast<unsigned char>(c)) : std::islower(static_cast<unsigned char>(c))) {
          return false;
        }
      }
    }
    return cased;
  }
  if (n == "odd" || n == "even" || n == "divisibleby") {
    if (t != ValueType::kInt) fail("test '" + n + "' needs an integer", line);
    const int64_t d = n == "divisibleby" ? a.get(0, "num").as_int() : 2;
    if (d == 0) fail("divisibleby 0", line);
    const int64_t r = ((v.as_int() % d) + d) % d;
    return n == "odd" ? r == 1 : r == 0;
  }
  const Value other = a.get(0, "other");
  if (n == "equalto" || n == "eq" || n == "==") return v.equals(other);
  if (n == "ne" || n == "!=") return !v.equals(other);
  if (n == "sameas") {
    if (v.type() != other.type()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (t == ValueType::kBool) return v.as_bool() == other.as_bool();
    return v.equals(other) && (t == ValueType::kInt || t == ValueType::kString);
  }
  if (n == "in") return contains(other, v, line, budget_);
  if (n == "gt" || n == "greaterthan") return less(other, v);
  if (n == "lt" || n == "lessthan") return less(v, other);
  if (n == "ge") return !less(v, other);
  if (n == "le") return !less(other, v);
  fail("unsupported test '" + n + "'", line);
}

}  // namespace larder::tmpl
