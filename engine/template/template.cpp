// Template: parse once, render many times (see template.h).
#include "engine/template/template.h"

#include <algorithm>
#include <ctime>

#include "engine/template/ast.h"
#include "engine/template/interpreter.h"
#include "engine/template/lexer.h"
#include "engine/template/parser.h"

namespace larder::tmpl {
namespace {

std::string where(int line) { return line > 0 ? "chat template line " + std::to_string(line) + ": " : "chat template: "; }

Value builtin_namespace(CallArgs& a) {
  Dict d;
  for (const Value& v : a.args) {
    if (!v.is_dict()) throw TemplateError("namespace() positional arguments must be dicts", 0);
    for (const auto& [k, x] : v.dict().items) d.set(k, x);
  }
  for (const auto& [k, x] : a.kwargs) d.set(k, x);
  return Value::make_namespace(std::move(d));
}

Value builtin_range(CallArgs& a) {
  int64_t start = 0, stop = 0, step = 1;
  if (a.args.size() == 1) {
    stop = a.args[0].as_int();
  } else if (a.args.size() >= 2) {
    start = a.args[0].as_int();
    stop = a.args[1].as_int();
    if (a.args.size() > 2) step = a.args[2].as_int();
  }
  if (step == 0) throw TemplateError("range() step must not be zero", 0);
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    out.push_back(Value(i));
    if (out.size() > 1000000) throw TemplateError("range() too long", 0);
  }
  return Value(std::move(out));
}

}  // namespace

std::string strftime_now_local(const std::string& format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[256];
  const size_t n = std::strftime(buf, sizeof(buf), format.c_str(), &tm);
  return std::string(buf, n);
}

Result<Template> Template::parse(std::string_view source) {
  try {
    Template t;
    t.body_ = std::make_shared<const Body>(parse_template(source));
    return t;
  } catch (const TemplateError& e) {
    const std::string msg = e.what();
    const bool unsupported = msg.rfind("unsupported", 0) == 0;
    return Status(unsupported ? StatusCode::kUnsupported : StatusCode::kInvalidArgument, where(e.line) + msg);
  }
}

Result<std::string> Template::render(const Dict& globals, const RenderOptions& options) const {
  Dict g;
  g.set("namespace", Value::make_callable("namespace", builtin_namespace));
  g.set("range", Value::make_callable("range", builtin_range));
  g.set("dict", Value::make_callable("dict", [](CallArgs& a) {
          Dict d;
          for (const auto& [k, x] : a.kwargs) d.set(k, x);
          return Value(std::move(d));
        }));
  g.set("raise_exception", Value::make_callable("raise_exception", [](CallArgs& a) -> Value {
          throw TemplateError("raise_exception: " + a.get(0, "message").to_str(), 0);
        }));
  auto clock = options.strftime_now ? options.strftime_now : strftime_now_local;
  g.set("strftime_now", Value::make_callable("strftime_now", [clock](CallArgs& a) {
          return Value(clock(a.get(0, "format").to_str()));
        }));
  for (const auto& [k, v] : globals.items) g.set(k, v);
  try {
    Interpreter interp(g);
    return interp.render(*body_);
  } catch (const TemplateError& e) {
    return Status::invalid_argument(where(e.line) + e.what());
  }
}

}  // namespace larder::tmpl

namespace larder::tmpl {

int64_t first_difference(std::string_view before, std::string_view after) {
  const size_t n = std::min(before.size(), after.size());
  for (size_t i = 0; i < n; ++i) {
    if (before[i] != after[i]) return static_cast<int64_t>(i);
  }
  return before.size() <= after.size() ? -1 : static_cast<int64_t>(n);
}

}  // namespace larder::tmpl
