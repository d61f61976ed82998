// Jinja interpreter: statements and expressions (see interpreter.h).
#include "engine/template/interpreter.h"

#include <pthread.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/template/lexer.h"

namespace larder::tmpl {
namespace {

[[noreturn]] void fail(const std::string& msg, int line) { throw TemplateError(msg, line); }

void require_defined(const Value& v, int line) {
  if (v.is_undefined()) fail("'" + (v.str().empty() ? std::string("value") : v.str()) + "' is undefined", line);
}

const char* type_name(const Value& v) {
  switch (v.type()) {
    case ValueType::kUndefined: return "undefined";
    case ValueType::kNone: return "NoneType";
    case ValueType::kBool: return "bool";
    case ValueType::kInt: return "int";
    case ValueType::kFloat: return "float";
    case ValueType::kString: return "str";
    case ValueType::kList: return "list";
    case ValueType::kDict: return "dict";
    case ValueType::kNamespace: return "Namespace";
    case ValueType::kCallable: return "function";
  }
  return "?";
}

// Python floor division and modulo on integers.
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

bool less_than(const Value& a, const Value& b, int line) {
  if (a.is_number() && b.is_number()) {
    if (a.type() == ValueType::kFloat || b.type() == ValueType::kFloat) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_list() && b.is_list()) {
    const List& x = a.list();
    const List& y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!x[i].equals(y[i])) return less_than(x[i], y[i], line);
    }
    return x.size() < y.size();
  }
  fail(std::string("'<' not supported between ") + type_name(a) + " and " + type_name(b), line);
}

// Bytes of stack below `here` that this thread may still use (its whole
// stack when the size cannot be found).
size_t stack_room(uintptr_t here) {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return std::numeric_limits<size_t>::max();
  void* lowest = nullptr;
  size_t size = 0;
  const int rc = pthread_attr_getstack(&attr, &lowest, &size);
  pthread_attr_destroy(&attr);
  const auto low = reinterpret_cast<uintptr_t>(lowest);
  if (rc != 0 || here <= low) return std::numeric_limits<size_t>::max();
  return here - low;
}

// Stack kept free below the render's limit for what runs between two
// checks (a filter, repr or tojson of a value up to kMaxValueDepth deep,
// freeing such a value).
constexpr size_t kStackReserve = size_t{256} << 10;

}  // namespace

Budget::Budget(const RenderOptions& o)
    : steps_left_(o.max_steps),
      memory_left_(o.max_memory_bytes),
      max_output_bytes_(o.max_output_bytes),
      max_call_depth_(o.max_call_depth) {
  const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  const size_t room = stack_room(here);
  const size_t usable = room > kStackReserve ? room - kStackReserve : 0;
  const size_t limit = std::min(o.max_stack_bytes, usable);
  stack_floor_ = here > limit ? here - limit : 0;
}

void Budget::step(int line, int64_t n) {
  steps_left_ -= n;
  if (steps_left_ < 0) fail("the template ran out of its budget of steps (an endless loop?)", line);
}

void Budget::string_bytes(size_t bytes, int line) {
  if (bytes > max_output_bytes_) {
    throw OutputLimitError("the rendered text would pass the limit of " + std::to_string(max_output_bytes_) + " bytes",
                           line);
  }
  step(line, 1 + static_cast<int64_t>(bytes / 64));
  memory_left_ -= static_cast<int64_t>(bytes);
  if (memory_left_ < 0) fail("the template ran out of its memory budget", line);
}

void Budget::items(size_t n, int line) {
  if (n > static_cast<size_t>(std::numeric_limits<int64_t>::max() / int64_t{sizeof(Value)})) {
    fail("the template ran out of its memory budget", line);
  }
  step(line, static_cast<int64_t>(n));
  memory_left_ -= static_cast<int64_t>(n * sizeof(Value));
  if (memory_left_ < 0) fail("the template ran out of its memory budget", line);
}

void Budget::check_stack(int line) const {
  if (reinterpret_cast<uintptr_t>(__builtin_frame_address(0)) < stack_floor_) {
    fail("the template nests calls and blocks too deeply (maximum recursion depth exceeded)", line);
  }
}

Value to_text(const Value& v, int line, Budget& budget) {
  if (v.is_string()) return v;
  std::string s = v.to_str(budget.max_output_bytes());
  budget.string_bytes(s.size(), line);
  TextBuilder b;
  b.append_text(s, v.has_untrusted());
  return b.take();
}

Interpreter::Interpreter(const Dict& globals, Budget& budget) : budget_(budget) {
  scopes_.emplace_back();
  for (const auto& [k, v] : globals.items()) scopes_[0][k.str()] = v;
}

void Interpreter::render(const Body& body, TextBuilder* out) { exec(body, out); }

Interpreter::Flow Interpreter::exec(const Body& body, TextBuilder* out) {
  for (const StmtPtr& s : body) {
    const Flow f = exec_stmt(*s, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

void Interpreter::emit(TextBuilder* out, const Value& v, int line) {
  const Value text = to_text(v, line, budget_);
  const size_t n = text.str().size();
  if (out->size() + n > budget_.max_output_bytes()) budget_.string_bytes(out->size() + n, line);  // fails
  budget_.step(line, static_cast<int64_t>(n / 64));
  out->append(text);
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, TextBuilder* out) {
  budget_.step(s.line);
  budget_.check_stack(s.line);
  switch (s.kind) {
    case StmtKind::kText:
      if (out->size() + s.text.size() > budget_.max_output_bytes()) budget_.string_bytes(out->size() + s.text.size(), s.line);
      budget_.step(s.line, static_cast<int64_t>(s.text.size() / 64));
      out->append_trusted(s.text);
      break;
    case StmtKind::kOutput: emit(out, eval(*s.expr), s.line); break;
    case StmtKind::kIf:
      for (size_t i = 0; i < s.conds.size(); ++i) {
        if (eval(*s.conds[i]).truthy()) return exec(s.bodies[i], out);
      }
      return exec(s.else_body, out);
    case StmtKind::kFor: exec_for(s, out); break;
    case StmtKind::kSet: exec_set(s); break;
    case StmtKind::kMacro: assign(s.text, make_macro(s)); break;
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
    case StmtKind::kBlock: return exec(s.body, out);
  }
  return Flow::kNormal;
}

void Interpreter::exec_for(const Stmt& s, TextBuilder* out) {
  const Value seq = eval(*s.expr);
  if (!seq.is_undefined() && !seq.is_list() && !seq.is_mapping() && !seq.is_string()) {
    fail(std::string("'") + type_name(seq) + "' object is not iterable", s.line);
  }
  List all = iterate(seq, s.line, budget_);
  scopes_.emplace_back();
  auto bind = [&](const Value& item) {
    if (s.targets.size() == 1) {
      scopes_.back()[s.targets[0]] = item;
      return;
    }
    List parts = iterate(item, s.line, budget_);
    if (parts.size() != s.targets.size()) {
      fail("cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(s.targets.size()),
           s.line);
    }
    for (size_t k = 0; k < parts.size(); ++k) scopes_.back()[s.targets[k]] = parts[k];
  };
  List items;
  if (s.cond) {
    for (const Value& v : all) {
      bind(v);
      if (eval(*s.cond).truthy()) items.push_back(v);
    }
  } else {
    items = std::move(all);
  }
  const int64_t n = static_cast<int64_t>(items.size());
  // One loop object for the whole loop, updated in place (as Jinja2's
  // LoopContext is): building a fresh one per iteration costs more than
  // most loop bodies. A namespace, as it is no mapping in Jinja2 either.
  enum { kIndex, kIndex0, kRevindex, kRevindex0, kFirst, kLast, kPrevitem, kNextitem };
  auto position = std::make_shared<int64_t>(0);
  Dict attrs;
  for (const char* name : {"index", "index0", "revindex", "revindex0", "first", "last", "previtem", "nextitem"}) {
    attrs.set(Value(name), Value());
  }
  attrs.set(Value("length"), Value(n));
  attrs.set(Value("cycle"), Value::make_callable("loop.cycle", [position](CallArgs& a) -> Value {
              if (a.args.empty()) throw TemplateError("loop.cycle() needs at least one argument", 0);
              return a.args[static_cast<size_t>(*position) % a.args.size()];
            }));
  const Value loop = Value::make_namespace(std::move(attrs));
  Dict& l = loop.dict();
  for (int64_t i = 0; i < n; ++i) {
    budget_.step(s.line);
    bind(items[i]);
    *position = i;
    l.set_value(kIndex, Value(i + 1));
    l.set_value(kIndex0, Value(i));
    l.set_value(kRevindex, Value(n - i));
    l.set_value(kRevindex0, Value(n - i - 1));
    l.set_value(kFirst, Value(i == 0));
    l.set_value(kLast, Value(i == n - 1));
    l.set_value(kPrevitem, i > 0 ? items[i - 1] : Value::undefined("loop.previtem"));
    l.set_value(kNextitem, i + 1 < n ? items[i + 1] : Value::undefined("loop.nextitem"));
    scopes_.back()["loop"] = loop;
    if (exec(s.body, out) == Flow::kBreak) break;
  }
  scopes_.pop_back();
  if (n == 0) exec(s.else_body, out);
}

void Interpreter::exec_set(const Stmt& s) {
  Value v;
  if (s.expr) {
    v = eval(*s.expr);
  } else {
    TextBuilder captured;
    exec(s.body, &captured);
    v = captured.take();
  }
  if (!s.text.empty()) {
    Value ns = lookup(s.targets[0]);
    if (ns.type() != ValueType::kNamespace) fail("cannot assign attribute on non-namespace object", s.line);
    ns.dict().set(Value(s.text), std::move(v));
    return;
  }
  if (s.targets.size() == 1) {
    assign(s.targets[0], std::move(v));
    return;
  }
  List parts = iterate(v, s.line, budget_);
  if (parts.size() != s.targets.size()) fail("cannot unpack values in {% set %}", s.line);
  for (size_t k = 0; k < parts.size(); ++k) assign(s.targets[k], parts[k]);
}

Value Interpreter::make_macro(const Stmt& s) {
  const Stmt* def = &s;
  return Value::make_callable(s.text, [this, def](CallArgs& a) -> Value {
    // Jinja2 raises RecursionError for a macro that calls itself without
    // end (Hermes 3's tool template does on a parameter typed
    // ["string", "null"]); the line is the call's (Interpreter::call).
    if (call_depth_ >= budget_.max_call_depth()) {
      throw TemplateError("maximum recursion depth exceeded: macro '" + def->text + "' is called more than " +
                              std::to_string(budget_.max_call_depth()) + " levels deep",
                          0);
    }
    Scope frame;
    if (a.args.size() > def->targets.size()) fail("macro '" + def->text + "' takes fewer arguments", def->line);
    for (size_t k = 0; k < def->targets.size(); ++k) {
      Value v = a.get(k, def->targets[k], Value::undefined(def->targets[k]));
      if (v.is_undefined() && def->conds[k]) v = eval(*def->conds[k]);
      frame[def->targets[k]] = std::move(v);
    }
    std::vector<Scope> saved;
    saved.swap(scopes_);
    scopes_.push_back(saved.front());
    scopes_.push_back(std::move(frame));
    TextBuilder out;
    ++call_depth_;
    try {
      exec(def->body, &out);
    } catch (...) {
      --call_depth_;
      saved.front() = std::move(scopes_.front());
      scopes_.swap(saved);
      throw;
    }
    --call_depth_;
    saved.front() = std::move(scopes_.front());
    scopes_.swap(saved);
    return out.take();
  });
}

Value Interpreter::lookup(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto f = it->find(name);
    if (f != it->end()) return f->second;
  }
  return Value::undefined(name);
}

void Interpreter::assign(const std::string& name, Value v) { scopes_.back()[name] = std::move(v); }

Value Interpreter::call(const Value& fn, CallArgs& args, int line) {
  require_defined(fn, line);
  if (!fn.is_callable()) fail(std::string("'") + type_name(fn) + "' object is not callable", line);
  try {
    return fn.callable().fn(args);
  } catch (TemplateError& e) {
    if (e.line == 0) e.line = line;
    throw;
  }
}

Value Interpreter::eval(const Expr& e) {
  budget_.step(e.line);
  budget_.check_stack(e.line);
  Value v = eval_node(e);
  if (v.depth() > kMaxValueDepth) {
    fail("a value nests lists and dicts more than " + std::to_string(kMaxValueDepth) + " levels deep", e.line);
  }
  return v;
}

Value Interpreter::eval_node(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kLiteral: return e.value;
    case ExprKind::kName: return lookup(e.name);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      budget_.items(e.items.size(), e.line);
      List l;
      for (const auto& it : e.items) l.push_back(eval(*it));
      return Value(std::move(l));
    }
    case ExprKind::kDict: {
      budget_.items(e.items.size(), e.line);
      Dict d;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value k = eval(*e.items[i]);
        if (!k.is_string()) fail("only string dict keys are supported", e.line);
        d.set(std::move(k), eval(*e.items[i + 1]));
      }
      return Value(std::move(d));
    }
    case ExprKind::kAttr: return get_attr(eval(*e.items[0]), e.name, e.line, budget_);
    case ExprKind::kItem: return get_item(eval(*e.items[0]), eval(*e.items[1]), e.line, budget_);
    case ExprKind::kSlice: {
      const Value obj = eval(*e.items[0]);
      Value parts[3];
      const Value* ptr[3] = {nullptr, nullptr, nullptr};
      for (int k = 0; k < 3; ++k) {
        if (e.items[k + 1]) {
          parts[k] = eval(*e.items[k + 1]);
          ptr[k] = &parts[k];
        }
      }
      return slice_value(obj, ptr[0], ptr[1], ptr[2], e.line, budget_);
    }
    case ExprKind::kCall:
    case ExprKind::kFilter:
    case ExprKind::kTest: {
      CallArgs args;
      const size_t n_pos = e.items.size() - 1 - e.kwnames.size();
      for (size_t k = 1; k < e.items.size(); ++k) {
        Value v = eval(*e.items[k]);
        if (k - 1 < n_pos) args.args.push_back(std::move(v));
        else args.kwargs.emplace_back(e.kwnames[k - 1 - n_pos], std::move(v));
      }
      if (e.kind == ExprKind::kCall) return call(eval(*e.items[0]), args, e.line);
      if (e.kind == ExprKind::kFilter) return apply_filter(e.name, eval(*e.items[0]), args, e.line);
      return Value(apply_test(e.name, eval(*e.items[0]), args, e.line) != e.negated);
    }
    case ExprKind::kUnary: {
      const Value v = eval(*e.items[0]);
      if (e.name == "not") return Value(!v.truthy());
      require_defined(v, e.line);
      if (!v.is_number()) fail(std::string("bad operand type for unary ") + e.name + ": " + type_name(v), e.line);
      if (e.name == "+") return v.type() == ValueType::kBool ? Value(v.as_int()) : v;
      return v.type() == ValueType::kFloat ? Value(-v.as_double()) : Value(-v.as_int());
    }
    case ExprKind::kBinary: return binary(e);
    case ExprKind::kCompare: return compare(e);
    case ExprKind::kCond: {
      if (eval(*e.items[1]).truthy()) return eval(*e.items[0]);
      return e.items[2] ? eval(*e.items[2]) : Value::undefined();
    }
  }
  return Value();
}

namespace {

Value concat_text(const Value& a, const Value& b, int line, Budget& budget) {
  const Value x = to_text(a, line, budget);
  const Value y = to_text(b, line, budget);
  budget.string_bytes(x.str().size() + y.str().size(), line);
  TextBuilder out;
  out.append(x);
  out.append(y);
  return out.take();
}

// Work units of comparing or copying a value (its items, or its bytes / 64).
int64_t size_units(const Value& v) {
  if (v.is_string()) return static_cast<int64_t>(v.str().size() / 64);
  if (v.is_list()) return static_cast<int64_t>(v.list().size());
  if (v.is_mapping()) return static_cast<int64_t>(v.dict().size());
  return 0;
}

}  // namespace

Value Interpreter::binary(const Expr& e) {
  const std::string& op = e.name;
  Value a = eval(*e.items[0]);
  if (op == "and") return a.truthy() ? eval(*e.items[1]) : a;
  if (op == "or") return a.truthy() ? a : eval(*e.items[1]);
  Value b = eval(*e.items[1]);
  if (op == "~") return concat_text(a, b, e.line, budget_);
  require_defined(a, e.line);
  require_defined(b, e.line);
  auto bad = [&]() -> Value {
    fail("unsupported operand types for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'", e.line);
  };
  if (op == "+") {
    if (a.is_string() && b.is_string()) return concat_text(a, b, e.line, budget_);
    if (a.is_list() && b.is_list()) {
      budget_.items(a.list().size() + b.list().size(), e.line);
      List l = a.list();
      l.insert(l.end(), b.list().begin(), b.list().end());
      return Value(std::move(l));
    }
  }
  if (op == "*" && ((a.is_string() || a.is_list()) && b.is_number() && b.type() != ValueType::kFloat)) {
    const int64_t times = std::max<int64_t>(b.as_int(), 0);
    const size_t unit = a.is_string() ? a.str().size() : a.list().size();
    // Checked before anything is built: 'x' * 10**12 fails at once.
    if (unit != 0 && static_cast<uint64_t>(times) > std::numeric_limits<size_t>::max() / 2 / unit) {
      fail("the template ran out of its memory budget", e.line);
    }
    if (a.is_string()) {
      budget_.string_bytes(unit * static_cast<size_t>(times), e.line);
      TextBuilder r;
      for (int64_t k = 0; k < times && unit != 0; ++k) r.append(a);
      return r.take();
    }
    budget_.items(unit * static_cast<size_t>(times), e.line);
    List l;
    for (int64_t k = 0; k < times && unit != 0; ++k) l.insert(l.end(), a.list().begin(), a.list().end());
    return Value(std::move(l));
  }
  if (!a.is_number() || !b.is_number()) return bad();
  const bool fl = a.type() == ValueType::kFloat || b.type() == ValueType::kFloat;
  const double x = a.as_double();
  const double y = b.as_double();
  const int64_t i = a.as_int();
  const int64_t j = b.as_int();
  if (op == "+") return fl ? Value(x + y) : Value(i + j);
  if (op == "-") return fl ? Value(x - y) : Value(i - j);
  if (op == "*") return fl ? Value(x * y) : Value(i * j);
  if (op == "/") {
    if (y == 0) fail("division by zero", e.line);
    return Value(x / y);
  }
  if (op == "//") {
    if (y == 0) fail("division by zero", e.line);
    return fl ? Value(std::floor(x / y)) : Value(floor_div(i, j));
  }
  if (op == "%") {
    if (y == 0) fail("modulo by zero", e.line);
    if (fl) {
      double r = std::fmod(x, y);
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      return Value(r);
    }
    return Value(i - floor_div(i, j) * j);
  }
  if (op == "**") {
    if (!fl && j >= 0) {
      // Square and multiply: 2 ** 10**12 takes 40 steps, not 10**12.
      int64_t r = 1, base = i;
      for (int64_t k = j; k > 0; k >>= 1) {
        if (k & 1) r = static_cast<int64_t>(static_cast<uint64_t>(r) * static_cast<uint64_t>(base));
        base = static_cast<int64_t>(static_cast<uint64_t>(base) * static_cast<uint64_t>(base));
      }
      return Value(r);
    }
    return Value(std::pow(x, y));
  }
  return bad();
}

Value Interpreter::compare(const Expr& e) {
  Value left = eval(*e.items[0]);
  for (size_t k = 0; k < e.ops.size(); ++k) {
    Value right = eval(*e.items[k + 1]);
    const std::string& op = e.ops[k];
    budget_.step(e.line, size_units(left) + size_units(right));
    bool r;
    if (op == "==") r = left.equals(right);
    else if (op == "!=") r = !left.equals(right);
    else if (op == "in") r = contains(right, left, e.line, budget_);
    else if (op == "not in") r = !contains(right, left, e.line, budget_);
    else {
      require_defined(left, e.line);
      require_defined(right, e.line);
      if (op == "<") r = less_than(left, right, e.line);
      else if (op == ">") r = less_than(right, left, e.line);
      else if (op == "<=") r = !less_than(right, left, e.line);
      else r = !less_than(left, right, e.line);
    }
    if (!r) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

}  // namespace larder::tmpl
