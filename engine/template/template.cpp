// Template: parse once, render many times (see template.h).
#include "engine/template/template.h"

#include <algorithm>
#include <ctime>
#include <utility>

#include "engine/template/ast.h"
#include "engine/template/interpreter.h"
#include "engine/template/lexer.h"
#include "engine/template/parser.h"

namespace larder::tmpl {
namespace {

std::string where(int line) { return line > 0 ? "chat template line " + std::to_string(line) + ": " : "chat template: "; }

Value builtin_range(CallArgs& a, Budget& budget) {
  int64_t start = 0, stop = 0, step = 1;
  if (a.args.size() == 1) {
    stop = a.args[0].as_int();
  } else if (a.args.size() >= 2) {
    start = a.args[0].as_int();
    stop = a.args[1].as_int();
    if (a.args.size() > 2) step = a.args[2].as_int();
  }
  if (step == 0) throw TemplateError("range() step must not be zero", 0);
  // Its length first (Python's formula, in 128 bits): range(10**12) fails
  // before anything is built.
  const __int128 span = step > 0 ? __int128{stop} - start : __int128{start} - stop;
  const __int128 mag = step > 0 ? __int128{step} : -__int128{step};
  const __int128 n = span <= 0 ? 0 : (span + mag - 1) / mag;
  if (n > (__int128{1} << 40)) throw TemplateError("the template ran out of its memory budget", 0);
  budget.items(static_cast<size_t>(n), 0);
  List out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t k = 0; k < static_cast<int64_t>(n); ++k) out.push_back(Value(start + k * step));
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
  Result<Rendered> r = render_text(globals, options);
  if (!r.is_ok()) return r.status();
  return std::move(r->text);
}

Result<Rendered> Template::render_text(const Dict& globals, const RenderOptions& options) const {
  Budget budget(options);
  // Every namespace() of this render. Their attributes are cleared when it
  // ends: a namespace can hold itself (a cycle shared_ptr never frees) or a
  // chain of namespaces as long as the template likes (freed recursively,
  // one stack frame per link).
  std::vector<Value> namespaces;
  Dict g;
  g.set("namespace", Value::make_callable("namespace", [&namespaces, &budget](CallArgs& a) {
          Dict d;
          for (const Value& v : a.args) {
            if (!v.is_dict()) throw TemplateError("namespace() positional arguments must be dicts", 0);
            budget.items(v.dict().size(), 0);
            for (const auto& [k, x] : v.dict().items()) d.set(k, x);
          }
          for (const auto& [k, x] : a.kwargs) d.set(Value(k), x);
          namespaces.push_back(Value::make_namespace(std::move(d)));
          return namespaces.back();
        }));
  g.set("range", Value::make_callable("range", [&budget](CallArgs& a) { return builtin_range(a, budget); }));
  g.set("dict", Value::make_callable("dict", [](CallArgs& a) {
          Dict d;
          for (const auto& [k, x] : a.kwargs) d.set(Value(k), x);
          return Value(std::move(d));
        }));
  g.set("raise_exception", Value::make_callable("raise_exception", [](CallArgs& a) -> Value {
          throw TemplateError("raise_exception: " + a.get(0, "message").to_str(), 0);
        }));
  auto clock = options.strftime_now ? options.strftime_now : strftime_now_local;
  g.set("strftime_now", Value::make_callable("strftime_now", [clock](CallArgs& a) {
          // A format from the data prints its own text: marked as it was.
          const Value format = a.get(0, "format");
          TextBuilder out;
          out.append_text(clock(format.to_str()), format.has_untrusted());
          return out.take();
        }));
  for (const auto& [k, v] : globals.items()) g.set(k, v);
  auto clear_namespaces = [&namespaces] {
    // Take every attribute out first (the list above keeps each namespace
    // alive meanwhile, so none is freed from inside another), then free.
    std::vector<Dict> attrs;
    attrs.reserve(namespaces.size());
    for (Value& ns : namespaces) attrs.push_back(std::exchange(ns.dict(), Dict()));
    attrs.clear();
    namespaces.clear();
  };
  Rendered out;
  try {
    TextBuilder text;
    {
      Interpreter interp(g, budget);
      interp.render(*body_, &text);
    }
    clear_namespaces();
    out.text = text.take_text(&out.spans);
    return out;
  } catch (const OutputLimitError& e) {
    clear_namespaces();
    return Status::out_of_range(where(e.line) + e.what());
  } catch (const TemplateError& e) {
    clear_namespaces();
    return Status::invalid_argument(where(e.line) + e.what());
  } catch (const std::bad_alloc&) {
    clear_namespaces();
    return Status::resource_exhausted("chat template: out of memory while rendering");
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
