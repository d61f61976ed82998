// Values of the Jinja interpreter (see value.h).
#include "engine/template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace larder::tmpl {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::set(std::string key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::undefined(std::string name) {
  Value v;
  v.s_ = std::move(name);
  return v;
}

Value Value::none() {
  Value v;
  v.type_ = ValueType::kNone;
  return v;
}

Value::Value(bool b) : type_(ValueType::kBool), b_(b), i_(b ? 1 : 0) {}
Value::Value(int64_t v) : type_(ValueType::kInt), i_(v) {}
Value::Value(double v) : type_(ValueType::kFloat), f_(v) {}
Value::Value(std::string s) : type_(ValueType::kString), s_(std::move(s)) {}
Value::Value(List list) : type_(ValueType::kList), list_(std::make_shared<List>(std::move(list))) {}
Value::Value(Dict dict) : type_(ValueType::kDict), dict_(std::make_shared<Dict>(std::move(dict))) {}

Value Value::make_namespace(Dict attrs) {
  Value v(std::move(attrs));
  v.type_ = ValueType::kNamespace;
  return v;
}

Value Value::make_callable(std::string name, std::function<Value(CallArgs&)> fn) {
  Value v;
  v.type_ = ValueType::kCallable;
  v.fn_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

double Value::as_double() const {
  if (type_ == ValueType::kFloat) return f_;
  return static_cast<double>(i_);
}

bool Value::truthy() const {
  switch (type_) {
    case ValueType::kUndefined:
    case ValueType::kNone: return false;
    case ValueType::kBool: return b_;
    case ValueType::kInt: return i_ != 0;
    case ValueType::kFloat: return f_ != 0.0;
    case ValueType::kString: return !s_.empty();
    case ValueType::kList: return !list_->empty();
    case ValueType::kDict: return !dict_->items.empty();
    case ValueType::kNamespace:
    case ValueType::kCallable: return true;
  }
  return false;
}

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  // Shortest round-trip digits, then Python's layout: plain notation for
  // exponents in [-4, 16), scientific otherwise.
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  const int exp = std::stoi(sci.substr(epos + 1));
  bool neg = false;
  if (!mant.empty() && mant[0] == '-') {
    neg = true;
    mant.erase(0, 1);
  }
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out = digits + std::string(exp + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    char e[16];
    std::snprintf(e, sizeof(e), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += e;
  }
  return neg ? "-" + out : out;
}

namespace {

std::string python_str_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == quote) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string Value::to_str() const {
  switch (type_) {
    case ValueType::kUndefined: return "";
    case ValueType::kString: return s_;
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (type_) {
    case ValueType::kUndefined: return "";
    case ValueType::kNone: return "None";
    case ValueType::kBool: return b_ ? "True" : "False";
    case ValueType::kInt: return std::to_string(i_);
    case ValueType::kFloat: return python_float_repr(f_);
    case ValueType::kString: return python_str_repr(s_);
    case ValueType::kList: {
      std::string out = "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].repr();
      }
      return out + "]";
    }
    case ValueType::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : dict_->items) {
        if (!first) out += ", ";
        first = false;
        out += python_str_repr(k) + ": " + v.repr();
      }
      return out + "}";
    }
    case ValueType::kNamespace: return "<Namespace>";
    case ValueType::kCallable: return "<function " + fn_->name + ">";
  }
  return "";
}

bool Value::equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (type_ == ValueType::kFloat || o.type_ == ValueType::kFloat) return as_double() == o.as_double();
    return i_ == o.i_;
  }
  if (type_ != o.type_) return false;
  switch (type_) {
    case ValueType::kUndefined:
    case ValueType::kNone: return true;
    case ValueType::kString: return s_ == o.s_;
    case ValueType::kList: {
      if (list_->size() != o.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i) {
        if (!(*list_)[i].equals((*o.list_)[i])) return false;
      }
      return true;
    }
    case ValueType::kDict: {
      if (dict_->items.size() != o.dict_->items.size()) return false;
      for (const auto& [k, v] : dict_->items) {
        const Value* ov = o.dict_->find(k);
        if (ov == nullptr || !v.equals(*ov)) return false;
      }
      return true;
    }
    case ValueType::kNamespace: return dict_ == o.dict_;
    case ValueType::kCallable: return fn_ == o.fn_;
    default: return false;
  }
}

int64_t Value::length() const {
  switch (type_) {
    case ValueType::kUndefined: return 0;
    case ValueType::kString: return static_cast<int64_t>(utf8_decode(s_).size());
    case ValueType::kList: return static_cast<int64_t>(list_->size());
    case ValueType::kDict: return static_cast<int64_t>(dict_->items.size());
    default: return -1;
  }
}

Value CallArgs::get(size_t i, std::string_view name, Value fallback) const {
  if (i < args.size()) return args[i];
  for (const auto& [k, v] : kwargs) {
    if (k == name) return v;
  }
  return fallback;
}

namespace {

void json_string(const std::string& s, std::string* out) {
  *out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}

bool json_value(const Value& v, int indent, bool sort_keys, int depth, std::string* out) {
  auto newline = [&](int d) {
    *out += '\n';
    out->append(static_cast<size_t>(indent * d), ' ');
  };
  switch (v.type()) {
    case ValueType::kNone: *out += "null"; return true;
    case ValueType::kBool: *out += v.as_bool() ? "true" : "false"; return true;
    case ValueType::kInt: *out += std::to_string(v.as_int()); return true;
    case ValueType::kFloat: {
      const double f = v.as_double();
      if (std::isnan(f)) *out += "NaN";
      else if (std::isinf(f)) *out += f > 0 ? "Infinity" : "-Infinity";
      else *out += python_float_repr(f);
      return true;
    }
    case ValueType::kString: json_string(v.str(), out); return true;
    case ValueType::kList: {
      const List& l = v.list();
      if (l.empty()) {
        *out += "[]";
        return true;
      }
      *out += '[';
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) *out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        if (!json_value(l[i], indent, sort_keys, depth + 1, out)) return false;
      }
      if (indent >= 0) newline(depth);
      *out += ']';
      return true;
    }
    case ValueType::kDict:
    case ValueType::kNamespace: {
      if (v.type() == ValueType::kNamespace) return false;
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.dict().items) items.push_back(&kv);
      if (sort_keys) {
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      }
      if (items.empty()) {
        *out += "{}";
        return true;
      }
      *out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) *out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        json_string(items[i]->first, out);
        *out += ": ";
        if (!json_value(items[i]->second, indent, sort_keys, depth + 1, out)) return false;
      }
      if (indent >= 0) newline(depth);
      *out += '}';
      return true;
    }
    default: return false;
  }
}

}  // namespace

bool to_python_json(const Value& value, int indent, bool sort_keys, std::string* out) {
  return json_value(value, indent, sort_keys, 0, out);
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return Value(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List l;
      for (const auto& e : j) l.push_back(from_json(e));
      return Value(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.items.emplace_back(it.key(), from_json(it.value()));
      return Value(std::move(d));
    }
    default: return Value::none();
  }
}

bool is_py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

std::vector<uint32_t> utf8_decode(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > s.size()) {
      out.push_back(0xfffd);
      ++i;
      continue;
    }
    uint32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out.push_back(cp);
    i += n;
  }
  return out;
}

std::string utf8_encode(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) {
    const uint32_t cp = cps[i];
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  return out;
}

}  // namespace larder::tmpl
