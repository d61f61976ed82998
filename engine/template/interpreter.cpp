// Jinja interpreter: statements and expressions (see interpreter.h).
#include "engine/template/interpreter.h"

#include <cmath>

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

}  // namespace

Interpreter::Interpreter(const Dict& globals) {
  scopes_.emplace_back();
  for (const auto& [k, v] : globals.items) scopes_[0][k] = v;
}

std::string Interpreter::render(const Body& body) {
  std::string out;
  exec(body, &out);
  return out;
}

Interpreter::Flow Interpreter::exec(const Body& body, std::string* out) {
  for (const StmtPtr& s : body) {
    const Flow f = exec_stmt(*s, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, std::string* out) {
  switch (s.kind) {
    case StmtKind::kText: *out += s.text; break;
    case StmtKind::kOutput: *out += eval(*s.expr).to_str(); break;
    case StmtKind::kIf:
      for (size_t i = 0; i < s.conds.size(); ++i) {
        if (eval(*s.conds[i]).truthy()) return exec(s.bodies[i], out);
      }
      return exec(s.else_body, out);
    case StmtKind::kFor: exec_for(s, out); break;
    case StmtKind::kSet: exec_set(s, out); break;
    case StmtKind::kMacro: assign(s.text, make_macro(s)); break;
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
    case StmtKind::kBlock: return exec(s.body, out);
  }
  return Flow::kNormal;
}

void Interpreter::exec_for(const Stmt& s, std::string* out) {
  const Value seq = eval(*s.expr);
  if (!seq.is_undefined() && !seq.is_list() && !seq.is_mapping() && !seq.is_string()) {
    fail(std::string("'") + type_name(seq) + "' object is not iterable", s.line);
  }
  List all = iterate(seq, s.line);
  scopes_.emplace_back();
  auto bind = [&](const Value& item) {
    if (s.targets.size() == 1) {
      scopes_.back()[s.targets[0]] = item;
      return;
    }
    List parts = iterate(item, s.line);
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
  for (int64_t i = 0; i < n; ++i) {
    bind(items[i]);
    Dict loop;
    loop.set("index", Value(i + 1));
    loop.set("index0", Value(i));
    loop.set("revindex", Value(n - i));
    loop.set("revindex0", Value(n - i - 1));
    loop.set("first", Value(i == 0));
    loop.set("last", Value(i == n - 1));
    loop.set("length", Value(n));
    loop.set("previtem", i > 0 ? items[i - 1] : Value::undefined("loop.previtem"));
    loop.set("nextitem", i + 1 < n ? items[i + 1] : Value::undefined("loop.nextitem"));
    loop.set("cycle", Value::make_callable("loop.cycle", [i](CallArgs& a) -> Value {
               if (a.args.empty()) throw TemplateError("loop.cycle() needs at least one argument", 0);
               return a.args[static_cast<size_t>(i) % a.args.size()];
             }));
    scopes_.back()["loop"] = Value(std::move(loop));
    if (exec(s.body, out) == Flow::kBreak) break;
  }
  scopes_.pop_back();
  if (n == 0) exec(s.else_body, out);
}

void Interpreter::exec_set(const Stmt& s, std::string* out) {
  Value v;
  if (s.expr) {
    v = eval(*s.expr);
  } else {
    std::string captured;
    exec(s.body, &captured);
    v = Value(std::move(captured));
  }
  if (!s.text.empty()) {
    Value ns = lookup(s.targets[0]);
    if (ns.type() != ValueType::kNamespace) fail("cannot assign attribute on non-namespace object", s.line);
    ns.dict().set(s.text, std::move(v));
    return;
  }
  if (s.targets.size() == 1) {
    assign(s.targets[0], std::move(v));
    return;
  }
  List parts = iterate(v, s.line);
  if (parts.size() != s.targets.size()) fail("cannot unpack values in {% set %}", s.line);
  for (size_t k = 0; k < parts.size(); ++k) assign(s.targets[k], parts[k]);
}

Value Interpreter::make_macro(const Stmt& s) {
  const Stmt* def = &s;
  return Value::make_callable(s.text, [this, def](CallArgs& a) -> Value {
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
    std::string out;
    try {
      exec(def->body, &out);
    } catch (...) {
      saved.front() = std::move(scopes_.front());
      scopes_.swap(saved);
      throw;
    }
    saved.front() = std::move(scopes_.front());
    scopes_.swap(saved);
    return Value(std::move(out));
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
  switch (e.kind) {
    case ExprKind::kLiteral: return e.value;
    case ExprKind::kName: return lookup(e.name);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      List l;
      for (const auto& it : e.items) l.push_back(eval(*it));
      return Value(std::move(l));
    }
    case ExprKind::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value k = eval(*e.items[i]);
        if (!k.is_string()) fail("only string dict keys are supported", e.line);
        d.set(k.str(), eval(*e.items[i + 1]));
      }
      return Value(std::move(d));
    }
    case ExprKind::kAttr: return get_attr(eval(*e.items[0]), e.name, e.line);
    case ExprKind::kItem: return get_item(eval(*e.items[0]), eval(*e.items[1]), e.line);
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
      return slice_value(obj, ptr[0], ptr[1], ptr[2], e.line);
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

Value Interpreter::binary(const Expr& e) {
  const std::string& op = e.name;
  Value a = eval(*e.items[0]);
  if (op == "and") return a.truthy() ? eval(*e.items[1]) : a;
  if (op == "or") return a.truthy() ? a : eval(*e.items[1]);
  Value b = eval(*e.items[1]);
  if (op == "~") return Value(a.to_str() + b.to_str());
  require_defined(a, e.line);
  require_defined(b, e.line);
  auto bad = [&]() -> Value {
    fail("unsupported operand types for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'", e.line);
  };
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value(a.str() + b.str());
    if (a.is_list() && b.is_list()) {
      List l = a.list();
      l.insert(l.end(), b.list().begin(), b.list().end());
      return Value(std::move(l));
    }
  }
  if (op == "*" && ((a.is_string() || a.is_list()) && b.is_number() && b.type() != ValueType::kFloat)) {
    if (a.is_string()) {
      std::string r;
      for (int64_t k = 0; k < b.as_int(); ++k) r += a.str();
      return Value(std::move(r));
    }
    List l;
    for (int64_t k = 0; k < b.as_int(); ++k) l.insert(l.end(), a.list().begin(), a.list().end());
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
      int64_t r = 1;
      for (int64_t k = 0; k < j; ++k) r *= i;
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
    bool r;
    if (op == "==") r = left.equals(right);
    else if (op == "!=") r = !left.equals(right);
    else if (op == "in") r = contains(right, left, e.line);
    else if (op == "not in") r = !contains(right, left, e.line);
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
