// Attribute/item access, slicing, membership and the Python str/dict methods
// templates call (see interpreter.h).
#include <algorithm>
#include <cctype>

#include "engine/template/interpreter.h"
#include "engine/template/lexer.h"

namespace larder::tmpl {
namespace {

[[noreturn]] void fail(const std::string& msg, int line) { throw TemplateError(msg, line); }

std::string ascii_map(std::string s, int (*f)(int)) {
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(f(static_cast<unsigned char>(c)));
  }
  return s;
}

std::string py_title(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      c = static_cast<char>(prev_cased ? std::tolower(u) : std::toupper(u));
      prev_cased = true;
    } else {
      prev_cased = u >= 0x80 && prev_cased;
    }
  }
  return out;
}

List py_split(const std::string& s, const Value& sep, int64_t maxsplit, int line) {
  List out;
  if (sep.is_undefined() || sep.is_none()) {
    const std::vector<uint32_t> cps = utf8_decode(s);
    size_t i = 0;
    while (true) {
      while (i < cps.size() && is_py_space(cps[i])) ++i;
      if (i >= cps.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = cps.size();
        while (e > i && is_py_space(cps[e - 1])) --e;
        out.push_back(Value(utf8_encode(cps, i, e)));
        break;
      }
      size_t j = i;
      while (j < cps.size() && !is_py_space(cps[j])) ++j;
      out.push_back(Value(utf8_encode(cps, i, j)));
      i = j;
    }
    return out;
  }
  if (!sep.is_string()) fail("split() separator must be a string", line);
  const std::string& d = sep.str();
  if (d.empty()) fail("split(): empty separator", line);
  size_t pos = 0;
  while (true) {
    const size_t f = s.find(d, pos);
    if (f == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit)) {
      out.push_back(Value(s.substr(pos)));
      break;
    }
    out.push_back(Value(s.substr(pos, f - pos)));
    pos = f + d.size();
  }
  return out;
}

std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  size_t pos = 0;
  int64_t n = 0;
  if (from.empty()) {
    // Python inserts `to` between every character (and at both ends).
    const std::vector<uint32_t> cps = utf8_decode(s);
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      if (i < cps.size()) out += utf8_encode(cps, i, i + 1);
    }
    return out;
  }
  while (count < 0 || n < count) {
    const size_t f = s.find(from, pos);
    if (f == std::string::npos) break;
    out.append(s, pos, f - pos);
    out += to;
    pos = f + from.size();
    ++n;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

bool affix_match(const std::string& s, const Value& affix, bool prefix, int line) {
  if (affix.is_list()) {
    for (const Value& a : affix.list()) {
      if (affix_match(s, a, prefix, line)) return true;
    }
    return false;
  }
  if (!affix.is_string()) fail(std::string(prefix ? "startswith" : "endswith") + "() needs a string", line);
  const std::string& a = affix.str();
  if (a.size() > s.size()) return false;
  return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
}

Value string_method(const Value& self, const std::string& name, int line) {
  const std::string s = self.str();
  auto method = [&](auto fn) { return Value::make_callable("str." + name, fn); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool l = name != "rstrip";
    const bool r = name != "lstrip";
    return method([s, l, r](CallArgs& a) { return Value(py_strip(s, a.get(0, "chars"), l, r)); });
  }
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return method([s, prefix, line](CallArgs& a) { return Value(affix_match(s, a.get(0, "prefix"), prefix, line)); });
  }
  if (name == "split") {
    return method([s, line](CallArgs& a) {
      const Value m = a.get(1, "maxsplit", Value(int64_t{-1}));
      return Value(py_split(s, a.get(0, "sep"), m.as_int(), line));
    });
  }
  if (name == "replace") {
    return method([s, line](CallArgs& a) {
      const Value from = a.get(0, "old");
      const Value to = a.get(1, "new");
      if (!from.is_string() || !to.is_string()) fail("replace() needs string arguments", line);
      return Value(py_replace(s, from.str(), to.str(), a.get(2, "count", Value(int64_t{-1})).as_int()));
    });
  }
  if (name == "upper") return method([s](CallArgs&) { return Value(ascii_map(s, ::toupper)); });
  if (name == "lower") return method([s](CallArgs&) { return Value(ascii_map(s, ::tolower)); });
  if (name == "title") return method([s](CallArgs&) { return Value(py_title(s)); });
  if (name == "capitalize") {
    return method([s](CallArgs&) {
      std::string r = ascii_map(s, ::tolower);
      if (!r.empty() && static_cast<unsigned char>(r[0]) < 0x80) r[0] = static_cast<char>(std::toupper(r[0]));
      return Value(r);
    });
  }
  if (name == "find" || name == "count") {
    const bool find = name == "find";
    return method([s, find, line](CallArgs& a) {
      const Value sub = a.get(0, "sub");
      if (!sub.is_string()) fail("find()/count() need a string", line);
      if (find) {
        const size_t f = s.find(sub.str());
        return f == std::string::npos ? Value(int64_t{-1})
                                       : Value(static_cast<int64_t>(utf8_decode(s.substr(0, f)).size()));
      }
      int64_t n = 0;
      for (size_t p = s.find(sub.str()); p != std::string::npos && !sub.str().empty();
           p = s.find(sub.str(), p + sub.str().size())) {
        ++n;
      }
      return Value(n);
    });
  }
  if (name == "join") {
    return method([s, line](CallArgs& a) {
      std::string out;
      bool first = true;
      for (const Value& v : iterate(a.get(0, "iterable"), line)) {
        if (!first) out += s;
        first = false;
        out += v.to_str();
      }
      return Value(out);
    });
  }
  return Value::undefined("str." + name);
}

Value dict_method(const Value& self, const std::string& name) {
  auto method = [&](auto fn) { return Value::make_callable("dict." + name, fn); };
  if (name == "get") {
    return method([self](CallArgs& a) {
      const Value k = a.get(0, "key");
      const Value* v = k.is_string() ? self.dict().find(k.str()) : nullptr;
      return v ? *v : a.get(1, "default", Value::none());
    });
  }
  if (name == "keys" || name == "values" || name == "items") {
    const int which = name == "keys" ? 0 : name == "values" ? 1 : 2;
    return method([self, which](CallArgs&) {
      List out;
      for (const auto& [k, v] : self.dict().items) {
        if (which == 0) out.push_back(Value(k));
        else if (which == 1) out.push_back(v);
        else out.push_back(Value(List{Value(k), v}));
      }
      return Value(std::move(out));
    });
  }
  return Value::undefined("dict." + name);
}

// Python index normalization for a[i]; -1 if out of range.
int64_t norm_index(int64_t i, int64_t n) {
  if (i < 0) i += n;
  return (i < 0 || i >= n) ? -1 : i;
}

}  // namespace

std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
  const std::vector<uint32_t> cps = utf8_decode(s);
  std::vector<uint32_t> set;
  const bool ws = chars.is_undefined() || chars.is_none();
  if (!ws) set = utf8_decode(chars.to_str());
  auto strip_it = [&](uint32_t c) {
    return ws ? is_py_space(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t b = 0;
  size_t e = cps.size();
  if (left) {
    while (b < e && strip_it(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(cps[e - 1])) --e;
  }
  return utf8_encode(cps, b, e);
}

Value get_attr(const Value& obj, const std::string& name, int line) {
  if (obj.is_undefined()) {
    fail("'" + (obj.str().empty() ? std::string("value") : obj.str()) + "' is undefined (reading ." + name + ")",
         line);
  }
  if (obj.is_string()) return string_method(obj, name, line);
  if (obj.is_dict()) {
    Value m = dict_method(obj, name);
    if (!m.is_undefined()) return m;
    const Value* v = obj.dict().find(name);
    return v ? *v : Value::undefined(name);
  }
  if (obj.type() == ValueType::kNamespace) {
    const Value* v = obj.dict().find(name);
    return v ? *v : Value::undefined(name);
  }
  return Value::undefined(name);
}

Value get_item(const Value& obj, const Value& key, int line) {
  if (obj.is_undefined()) {
    fail("'" + (obj.str().empty() ? std::string("value") : obj.str()) + "' is undefined (subscript)", line);
  }
  if (obj.is_dict() || obj.type() == ValueType::kNamespace) {
    if (key.is_string()) {
      const Value* v = obj.dict().find(key.str());
      if (v) return *v;
      return obj.is_dict() ? dict_method(obj, key.str()) : Value::undefined(key.str());
    }
    return Value::undefined();
  }
  if (key.is_number() && key.type() != ValueType::kFloat) {
    if (obj.is_list()) {
      const int64_t i = norm_index(key.as_int(), static_cast<int64_t>(obj.list().size()));
      return i < 0 ? Value::undefined("list index") : obj.list()[i];
    }
    if (obj.is_string()) {
      const std::vector<uint32_t> cps = utf8_decode(obj.str());
      const int64_t i = norm_index(key.as_int(), static_cast<int64_t>(cps.size()));
      return i < 0 ? Value::undefined("string index") : Value(utf8_encode(cps, i, i + 1));
    }
  }
  if (key.is_string()) return get_attr(obj, key.str(), line);
  return Value::undefined();
}

Value slice_value(const Value& obj, const Value* start, const Value* stop, const Value* step, int line) {
  auto as_opt_int = [&](const Value* v, int64_t dflt) {
    if (v == nullptr || v->is_none()) return dflt;
    if (!v->is_number() || v->type() == ValueType::kFloat) fail("slice indices must be integers", line);
    return v->as_int();
  };
  const int64_t st = as_opt_int(step, 1);
  if (st == 0) fail("slice step cannot be zero", line);
  std::vector<uint32_t> cps;
  int64_t n;
  if (obj.is_list()) {
    n = static_cast<int64_t>(obj.list().size());
  } else if (obj.is_string()) {
    cps = utf8_decode(obj.str());
    n = static_cast<int64_t>(cps.size());
  } else {
    fail("only lists and strings can be sliced", line);
  }
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](const Value* v, int64_t dflt_pos, int64_t dflt_neg) {
    if (v == nullptr || v->is_none()) return st > 0 ? dflt_pos : dflt_neg;
    int64_t i = as_opt_int(v, 0);
    if (i < 0) {
      i += n;
      if (i < 0) i = st < 0 ? -1 : 0;
    } else if (i >= n) {
      i = st < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t b = adjust(start, 0, n - 1);
  const int64_t e = adjust(stop, n, -1);
  std::vector<int64_t> idx;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) idx.push_back(i);
  if (obj.is_list()) {
    List out;
    for (int64_t i : idx) out.push_back(obj.list()[i]);
    return Value(std::move(out));
  }
  std::vector<uint32_t> pick;
  for (int64_t i : idx) pick.push_back(cps[i]);
  return Value(utf8_encode(pick, 0, pick.size()));
}

bool contains(const Value& c, const Value& item, int line) {
  if (c.is_string()) {
    if (!item.is_string()) fail("'in <string>' requires string as left operand", line);
    return c.str().find(item.str()) != std::string::npos;
  }
  if (c.is_list()) {
    for (const Value& v : c.list()) {
      if (v.equals(item)) return true;
    }
    return false;
  }
  if (c.is_mapping()) return item.is_string() && c.dict().find(item.str()) != nullptr;
  if (c.is_undefined()) return false;
  fail("argument of type is not iterable", line);
}

List iterate(const Value& v, int line) {
  if (v.is_list()) return v.list();
  if (v.is_dict()) {
    List out;
    for (const auto& [k, x] : v.dict().items) out.push_back(Value(k));
    return out;
  }
  if (v.is_string()) {
    const std::vector<uint32_t> cps = utf8_decode(v.str());
    List out;
    for (size_t i = 0; i < cps.size(); ++i) out.push_back(Value(utf8_encode(cps, i, i + 1)));
    return out;
  }
  if (v.is_undefined()) return {};
  fail("object is not iterable", line);
}

}  // namespace larder::tmpl
