// Values of the Jinja interpreter (see value.h).
#include "engine/template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace larder::tmpl {

namespace {

// Past this many keys a Dict keeps a hash index (tool schemas from a client
// can have many properties; a template looking each one up must not be
// quadratic).
constexpr size_t kIndexFrom = 8;

}  // namespace

const Value* Dict::find(std::string_view key) const {
  if (!index_.empty()) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  for (const auto& [k, v] : items_) {
    if (k.str() == key) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value value) {
  if (!key.is_string()) key = key.str_value();
  for (size_t i = 0; index_.empty() && i < items_.size(); ++i) {
    if (items_[i].first.str() == key.str()) {
      items_[i].second = std::move(value);
      return;
    }
  }
  if (!index_.empty()) {
    auto it = index_.find(key.str());
    if (it != index_.end()) {
      items_[it->second].second = std::move(value);
      return;
    }
  }
  items_.emplace_back(std::move(key), std::move(value));
  // The views point into the keys' shared, immutable bytes, which stay put
  // when items_ grows or the Dict is copied.
  if (items_.size() > kIndexFrom) {
    if (index_.empty()) {
      for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first.str(), i);
    } else {
      index_.emplace(items_.back().first.str(), items_.size() - 1);
    }
  }
}

void Dict::set_value(size_t i, Value value) { items_[i].second = std::move(value); }

Value Value::undefined(std::string name) {
  Value v;
  if (!name.empty()) v.s_ = std::make_shared<const Str>(Str{std::move(name), {}});
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
Value::Value(std::string s) : type_(ValueType::kString), s_(std::make_shared<const Str>(Str{std::move(s), {}})) {}
Value::Value(List list) : type_(ValueType::kList) {
  uint32_t d = 0;
  for (const Value& v : list) d = std::max(d, v.depth_);
  depth_ = d + 1;
  list_ = std::make_shared<List>(std::move(list));
}
Value::Value(Dict dict) : type_(ValueType::kDict) {
  uint32_t d = 0;
  for (const auto& kv : dict.items()) d = std::max(d, kv.second.depth_);
  depth_ = d + 1;
  dict_ = std::make_shared<Dict>(std::move(dict));
}

Value Value::untrusted(std::string s, int32_t origin) {
  std::vector<TextSpan> spans;
  if (!s.empty()) spans.push_back({0, s.size(), origin});
  return text(std::move(s), std::move(spans));
}

Value Value::text(std::string s, std::vector<TextSpan> spans) {
  Value v;
  v.type_ = ValueType::kString;
  v.s_ = std::make_shared<const Str>(Str{std::move(s), std::move(spans)});
  return v;
}

Value Value::make_namespace(Dict attrs) {
  Value v(std::move(attrs));
  v.type_ = ValueType::kNamespace;
  v.depth_ = 1;
  return v;
}

Value Value::make_callable(std::string name, std::function<Value(CallArgs&)> fn) {
  Value v;
  v.type_ = ValueType::kCallable;
  v.fn_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

const std::string& Value::str() const {
  static const std::string kEmpty;
  return s_ ? s_->text : kEmpty;
}

const std::vector<TextSpan>& Value::spans() const {
  static const std::vector<TextSpan> kNone;
  return s_ ? s_->spans : kNone;
}

bool Value::has_untrusted() const {
  switch (type_) {
    case ValueType::kString: return !s_->spans.empty();
    case ValueType::kList:
      return std::any_of(list_->begin(), list_->end(), [](const Value& v) { return v.has_untrusted(); });
    case ValueType::kDict:
      return std::any_of(dict_->items().begin(), dict_->items().end(), [](const auto& kv) {
        return kv.first.has_untrusted() || kv.second.has_untrusted();
      });
    default: return false;
  }
}

Value Value::str_value() const {
  if (type_ == ValueType::kString) return *this;
  TextBuilder b;
  b.append_text(to_str(), has_untrusted());
  return b.take();
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
    case ValueType::kString: return !s_->text.empty();
    case ValueType::kList: return !list_->empty();
    case ValueType::kDict: return !dict_->empty();
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

std::string Value::to_str(size_t limit) const {
  switch (type_) {
    case ValueType::kUndefined: return "";
    case ValueType::kString: return s_->text;
    default: return repr(limit);
  }
}

std::string Value::repr(size_t limit) const {
  std::string out;
  repr_to(&out, limit);
  return out;
}

void Value::repr_to(std::string* out, size_t limit) const {
  if (out->size() > limit) return;
  switch (type_) {
    case ValueType::kUndefined: return;
    case ValueType::kNone: *out += "None"; return;
    case ValueType::kBool: *out += b_ ? "True" : "False"; return;
    case ValueType::kInt: *out += std::to_string(i_); return;
    case ValueType::kFloat: *out += python_float_repr(f_); return;
    case ValueType::kString: *out += python_str_repr(s_->text); return;
    case ValueType::kList:
      *out += '[';
      for (size_t i = 0; i < list_->size() && out->size() <= limit; ++i) {
        if (i) *out += ", ";
        (*list_)[i].repr_to(out, limit);
      }
      *out += ']';
      return;
    case ValueType::kDict: {
      *out += '{';
      bool first = true;
      for (const auto& [k, v] : dict_->items()) {
        if (out->size() > limit) break;
        if (!first) *out += ", ";
        first = false;
        *out += python_str_repr(k.str());
        *out += ": ";
        v.repr_to(out, limit);
      }
      *out += '}';
      return;
    }
    case ValueType::kNamespace: *out += "<Namespace>"; return;
    case ValueType::kCallable: *out += "<function " + fn_->name + ">"; return;
  }
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
    case ValueType::kString: return s_->text == o.s_->text;
    case ValueType::kList: {
      if (list_->size() != o.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i) {
        if (!(*list_)[i].equals((*o.list_)[i])) return false;
      }
      return true;
    }
    case ValueType::kDict: {
      if (dict_->size() != o.dict_->size()) return false;
      for (const auto& [k, v] : dict_->items()) {
        const Value* ov = o.dict_->find(k.str());
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
    case ValueType::kString: {
      int64_t n = 0;  // code points as utf8_decode counts them
      const std::string& t = s_->text;
      for (size_t i = 0; i < t.size(); ++n) {
        const unsigned char c = static_cast<unsigned char>(t[i]);
        const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        i += (len == 0 || i + len > t.size()) ? 1 : len;
      }
      return n;
    }
    case ValueType::kList: return static_cast<int64_t>(list_->size());
    case ValueType::kDict: return static_cast<int64_t>(dict_->size());
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

bool json_value(const Value& v, int indent, bool sort_keys, int depth, std::string* out, size_t limit) {
  if (out->size() > limit) return true;
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
        if (!json_value(l[i], indent, sort_keys, depth + 1, out, limit)) return false;
      }
      if (indent >= 0) newline(depth);
      *out += ']';
      return true;
    }
    case ValueType::kDict:
    case ValueType::kNamespace: {
      if (v.type() == ValueType::kNamespace) return false;
      std::vector<const std::pair<Value, Value>*> items;
      for (const auto& kv : v.dict().items()) items.push_back(&kv);
      if (sort_keys) {
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first.str() < b->first.str(); });
      }
      if (items.empty()) {
        *out += "{}";
        return true;
      }
      *out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) *out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        json_string(items[i]->first.str(), out);
        *out += ": ";
        if (!json_value(items[i]->second, indent, sort_keys, depth + 1, out, limit)) return false;
      }
      if (indent >= 0) newline(depth);
      *out += '}';
      return true;
    }
    default: return false;
  }
}

}  // namespace

bool to_python_json(const Value& value, int indent, bool sort_keys, std::string* out, size_t limit) {
  return json_value(value, indent, sort_keys, 0, out, limit);
}

namespace {

std::optional<Value> from_json_at(const nlohmann::ordered_json& j, bool untrusted, uint32_t depth) {
  using J = nlohmann::ordered_json;
  switch (j.type()) {
    case J::value_t::null: return Value::none();
    case J::value_t::boolean: return Value(j.get<bool>());
    case J::value_t::number_integer: return Value(j.get<int64_t>());
    case J::value_t::number_unsigned: return Value(static_cast<int64_t>(j.get<uint64_t>()));
    case J::value_t::number_float: return Value(j.get<double>());
    case J::value_t::string:
      return untrusted ? Value::untrusted(j.get<std::string>()) : Value(j.get<std::string>());
    case J::value_t::array: {
      if (depth >= kMaxValueDepth) return std::nullopt;
      List l;
      l.reserve(j.size());
      for (const auto& e : j) {
        std::optional<Value> v = from_json_at(e, untrusted, depth + 1);
        if (!v) return std::nullopt;
        l.push_back(std::move(*v));
      }
      return Value(std::move(l));
    }
    case J::value_t::object: {
      if (depth >= kMaxValueDepth) return std::nullopt;
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) {
        std::optional<Value> v = from_json_at(it.value(), untrusted, depth + 1);
        if (!v) return std::nullopt;
        d.set(untrusted ? Value::untrusted(it.key()) : Value(it.key()), std::move(*v));
      }
      return Value(std::move(d));
    }
    default: return Value::none();
  }
}

}  // namespace

std::optional<Value> from_json(const nlohmann::ordered_json& j, bool untrusted) {
  return from_json_at(j, untrusted, 0);
}

}  // namespace larder::tmpl
