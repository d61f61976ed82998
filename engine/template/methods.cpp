// Attribute/item access, slicing, membership and the Python str/dict methods
// templates call (see interpreter.h).
#include <algorithm>
#include <cctype>
#include <limits>

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

// Code point offsets of a string value, charged to the budget.
std::vector<size_t> offsets_of(const Value& s, int line, Budget& budget) {
  budget.step(line, static_cast<int64_t>(s.str().size() / 16));
  return utf8_offsets(s.str());
}

// Bytes [begin, end) of string value s, marks kept.
Value sub(const Value& s, size_t begin, size_t end) {
  TextBuilder b;
  b.append_sub(s, begin, end);
  return b.take();
}

List py_split(const Value& self, const Value& sep, int64_t maxsplit, int line, Budget& budget) {
  const std::string& s = self.str();
  List out;
  if (sep.is_undefined() || sep.is_none()) {
    const std::vector<uint32_t> cps = utf8_decode(s);
    const std::vector<size_t> off = offsets_of(self, line, budget);
    size_t i = 0;
    while (true) {
      while (i < cps.size() && is_py_space(cps[i])) ++i;
      if (i >= cps.size()) break;
      budget.items(1, line);
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = cps.size();
        while (e > i && is_py_space(cps[e - 1])) --e;
        out.push_back(sub(self, off[i], off[e]));
        break;
      }
      size_t j = i;
      while (j < cps.size() && !is_py_space(cps[j])) ++j;
      out.push_back(sub(self, off[i], off[j]));
      i = j;
    }
    return out;
  }
  if (!sep.is_string()) fail("split() separator must be a string", line);
  const std::string& d = sep.str();
  if (d.empty()) fail("split(): empty separator", line);
  budget.step(line, static_cast<int64_t>(s.size() / 64));
  size_t pos = 0;
  while (true) {
    budget.items(1, line);
    const size_t f = s.find(d, pos);
    if (f == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit)) {
      out.push_back(sub(self, pos, s.size()));
      break;
    }
    out.push_back(sub(self, pos, f));
    pos = f + d.size();
  }
  return out;
}

// Python str.replace; the kept bytes of `self` and the inserted `to` keep
// their marks.
Value py_replace(const Value& self, const Value& from_v, const Value& to, int64_t count, int line, Budget& budget) {
  const std::string& s = self.str();
  const std::string& from = from_v.str();
  std::vector<size_t> cut;  // start of each replaced occurrence (empty `from`: each code point boundary)
  if (from.empty()) {
    const std::vector<size_t> off = offsets_of(self, line, budget);
    for (size_t i = 0; i < off.size() && (count < 0 || static_cast<int64_t>(cut.size()) < count); ++i) {
      cut.push_back(off[i]);
    }
  } else {
    budget.step(line, static_cast<int64_t>(s.size() / 64));
    for (size_t f = s.find(from); f != std::string::npos && (count < 0 || static_cast<int64_t>(cut.size()) < count);
         f = s.find(from, f + from.size())) {
      cut.push_back(f);
    }
  }
  const size_t to_n = to.str().size();
  if (!cut.empty() && to_n > 0 && cut.size() > (std::numeric_limits<size_t>::max() / 2) / to_n) {
    fail("the template ran out of its memory budget", line);
  }
  budget.string_bytes(s.size() - cut.size() * from.size() + cut.size() * to_n, line);
  TextBuilder out;
  size_t pos = 0;
  for (size_t c : cut) {
    out.append_sub(self, pos, c);
    out.append(to);
    pos = c + from.size();
  }
  out.append_sub(self, pos, s.size());
  return out.take();
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

// Case mappings change ASCII letters in place, so the marks stay where they are.
Value same_marks(const Value& self, std::string mapped, int line, Budget& budget) {
  budget.string_bytes(mapped.size(), line);
  return Value::text(std::move(mapped), self.spans());
}

Value string_method(const Value& self, const std::string& name, int line, Budget& budget) {
  Budget* b = &budget;  // the callable lives within the render
  auto method = [&](auto fn) { return Value::make_callable("str." + name, fn); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool l = name != "rstrip";
    const bool r = name != "lstrip";
    return method([self, l, r, line, b](CallArgs& a) { return py_strip(self, a.get(0, "chars"), l, r, line, *b); });
  }
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return method([self, prefix, line](CallArgs& a) {
      return Value(affix_match(self.str(), a.get(0, "prefix"), prefix, line));
    });
  }
  if (name == "split") {
    return method([self, line, b](CallArgs& a) {
      const Value m = a.get(1, "maxsplit", Value(int64_t{-1}));
      return Value(py_split(self, a.get(0, "sep"), m.as_int(), line, *b));
    });
  }
  if (name == "replace") {
    return method([self, line, b](CallArgs& a) {
      const Value from = a.get(0, "old");
      const Value to = a.get(1, "new");
      if (!from.is_string() || !to.is_string()) fail("replace() needs string arguments", line);
      return py_replace(self, from, to, a.get(2, "count", Value(int64_t{-1})).as_int(), line, *b);
    });
  }
  if (name == "upper") return method([self, line, b](CallArgs&) { return same_marks(self, ascii_map(self.str(), ::toupper), line, *b); });
  if (name == "lower") return method([self, line, b](CallArgs&) { return same_marks(self, ascii_map(self.str(), ::tolower), line, *b); });
  if (name == "title") return method([self, line, b](CallArgs&) { return same_marks(self, py_title(self.str()), line, *b); });
  if (name == "capitalize") {
    return method([self, line, b](CallArgs&) {
      std::string r = ascii_map(self.str(), ::tolower);
      if (!r.empty() && static_cast<unsigned char>(r[0]) < 0x80) r[0] = static_cast<char>(std::toupper(r[0]));
      return same_marks(self, std::move(r), line, *b);
    });
  }
  if (name == "find" || name == "count") {
    const bool find = name == "find";
    return method([self, find, line, b](CallArgs& a) {
      const std::string& s = self.str();
      const Value sub = a.get(0, "sub");
      if (!sub.is_string()) fail("find()/count() need a string", line);
      b->step(line, static_cast<int64_t>(s.size() / 64));
      if (find) {
        const size_t f = s.find(sub.str());
        return f == std::string::npos ? Value(int64_t{-1}) : Value(Value(s.substr(0, f)).length());
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
    return method([self, line, b](CallArgs& a) {
      TextBuilder out;
      bool first = true;
      for (const Value& v : iterate(a.get(0, "iterable"), line, *b)) {
        const Value t = to_text(v, line, *b);
        b->string_bytes(out.size() + t.str().size() + (first ? 0 : self.str().size()), line);
        if (!first) out.append(self);
        first = false;
        out.append(t);
      }
      return out.take();
    });
  }
  return Value::undefined("str." + name);
}

Value dict_method(const Value& self, const std::string& name, int line, Budget& budget) {
  Budget* b = &budget;
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
    return method([self, which, line, b](CallArgs&) {
      b->items(self.dict().size() * (which == 2 ? 3 : 1), line);
      List out;
      for (const auto& [k, v] : self.dict().items()) {
        if (which == 0) out.push_back(k);
        else if (which == 1) out.push_back(v);
        else out.push_back(Value(List{k, v}));
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

Value py_strip(const Value& s, const Value& chars, bool left, bool right, int line, Budget& budget) {
  const Value text = to_text(s, line, budget);
  const std::vector<uint32_t> cps = utf8_decode(text.str());
  const std::vector<size_t> off = offsets_of(text, line, budget);
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
  if (b == 0 && e == cps.size()) return text;
  return sub(text, off[b], off[e]);
}

Value get_attr(const Value& obj, const std::string& name, int line, Budget& budget) {
  if (obj.is_undefined()) {
    fail("'" + (obj.str().empty() ? std::string("value") : obj.str()) + "' is undefined (reading ." + name + ")",
         line);
  }
  if (obj.is_string()) return string_method(obj, name, line, budget);
  if (obj.is_dict()) {
    Value m = dict_method(obj, name, line, budget);
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

Value get_item(const Value& obj, const Value& key, int line, Budget& budget) {
  if (obj.is_undefined()) {
    fail("'" + (obj.str().empty() ? std::string("value") : obj.str()) + "' is undefined (subscript)", line);
  }
  if (obj.is_dict() || obj.type() == ValueType::kNamespace) {
    if (key.is_string()) {
      const Value* v = obj.dict().find(key.str());
      if (v) return *v;
      return obj.is_dict() ? dict_method(obj, key.str(), line, budget) : Value::undefined(key.str());
    }
    return Value::undefined();
  }
  if (key.is_number() && key.type() != ValueType::kFloat) {
    if (obj.is_list()) {
      const int64_t i = norm_index(key.as_int(), static_cast<int64_t>(obj.list().size()));
      return i < 0 ? Value::undefined("list index") : obj.list()[i];
    }
    if (obj.is_string()) {
      const std::vector<size_t> off = offsets_of(obj, line, budget);
      const int64_t i = norm_index(key.as_int(), static_cast<int64_t>(off.size() - 1));
      return i < 0 ? Value::undefined("string index") : sub(obj, off[i], off[i + 1]);
    }
  }
  if (key.is_string()) return get_attr(obj, key.str(), line, budget);
  return Value::undefined();
}

Value slice_value(const Value& obj, const Value* start, const Value* stop, const Value* step, int line,
                  Budget& budget) {
  auto as_opt_int = [&](const Value* v, int64_t dflt) {
    if (v == nullptr || v->is_none()) return dflt;
    if (!v->is_number() || v->type() == ValueType::kFloat) fail("slice indices must be integers", line);
    return v->as_int();
  };
  const int64_t st = as_opt_int(step, 1);
  if (st == 0) fail("slice step cannot be zero", line);
  std::vector<size_t> off;
  int64_t n;
  if (obj.is_list()) {
    n = static_cast<int64_t>(obj.list().size());
  } else if (obj.is_string()) {
    off = offsets_of(obj, line, budget);
    n = static_cast<int64_t>(off.size() - 1);
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
  if (obj.is_string() && st == 1) return sub(obj, off[b], off[std::max(b, e)]);
  std::vector<int64_t> idx;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) idx.push_back(i);
  budget.items(idx.size(), line);
  if (obj.is_list()) {
    List out;
    out.reserve(idx.size());
    for (int64_t i : idx) out.push_back(obj.list()[i]);
    return Value(std::move(out));
  }
  TextBuilder out;
  for (int64_t i : idx) out.append_sub(obj, off[i], off[i + 1]);
  return out.take();
}

bool contains(const Value& c, const Value& item, int line, Budget& budget) {
  if (c.is_string()) {
    if (!item.is_string()) fail("'in <string>' requires string as left operand", line);
    budget.step(line, static_cast<int64_t>(c.str().size() / 64));
    return c.str().find(item.str()) != std::string::npos;
  }
  if (c.is_list()) {
    budget.step(line, static_cast<int64_t>(c.list().size()));
    for (const Value& v : c.list()) {
      if (v.equals(item)) return true;
    }
    return false;
  }
  if (c.is_mapping()) return item.is_string() && c.dict().find(item.str()) != nullptr;
  if (c.is_undefined()) return false;
  fail("argument of type is not iterable", line);
}

List iterate(const Value& v, int line, Budget& budget) {
  if (v.is_list()) {
    budget.items(v.list().size(), line);
    return v.list();
  }
  if (v.is_dict()) {
    budget.items(v.dict().size(), line);
    List out;
    out.reserve(v.dict().size());
    for (const auto& kv : v.dict().items()) out.push_back(kv.first);
    return out;
  }
  if (v.is_string()) {
    const std::vector<size_t> off = offsets_of(v, line, budget);
    budget.items(off.size() - 1, line);
    List out;
    out.reserve(off.size() - 1);
    for (size_t i = 0; i + 1 < off.size(); ++i) out.push_back(sub(v, off[i], off[i + 1]));
    return out;
  }
  if (v.is_undefined()) return {};
  fail("object is not iterable", line);
}

}  // namespace larder::tmpl
