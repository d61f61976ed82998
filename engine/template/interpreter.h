// Jinja interpreter (engine/template): renders a parsed template against a
// set of global variables with Jinja2's semantics as HF chat templates use
// them (Environment(trim_blocks=True, lstrip_blocks=True), default
// Undefined, no autoescape).
//
// Scoping: each for loop opens a scope that {% set %} inside it writes to
// (so a set inside a loop does not leak out, as in Jinja2; namespace()
// attributes are the way out); if/elif/else share their enclosing scope; a
// macro call runs in a scope above the template's top level.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "engine/template/ast.h"

namespace larder::tmpl {

class Interpreter {
 public:
  explicit Interpreter(const Dict& globals);

  // Throws TemplateError (message names what failed; line is set).
  std::string render(const Body& body);

  // Evaluates one expression in the current scope.
  Value eval(const Expr& e);
  // Calls a callable value (used by filters such as map).
  Value call(const Value& fn, CallArgs& args, int line);
  // Applies a named filter/test (filters.cpp).
  Value apply_filter(const std::string& name, const Value& input, CallArgs& args, int line);
  bool apply_test(const std::string& name, const Value& input, CallArgs& args, int line);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec(const Body& body, std::string* out);
  Flow exec_stmt(const Stmt& s, std::string* out);
  void exec_for(const Stmt& s, std::string* out);
  void exec_set(const Stmt& s, std::string* out);
  Value make_macro(const Stmt& s);
  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);
  Value binary(const Expr& e);
  Value compare(const Expr& e);

  using Scope = std::unordered_map<std::string, Value>;
  std::vector<Scope> scopes_;
};

// Attribute access obj.name (Python getattr, then getitem): string and dict
// methods as bound callables, dict keys, namespace attributes. Missing:
// undefined. Throws TemplateError when obj itself is undefined.
Value get_attr(const Value& obj, const std::string& name, int line);
// Subscript obj[key] (getitem, then getattr for string keys).
Value get_item(const Value& obj, const Value& key, int line);
// Python slice obj[start:stop:step] of a list or string (null: omitted).
Value slice_value(const Value& obj, const Value* start, const Value* stop, const Value* step, int line);
// Python "in".
bool contains(const Value& container, const Value& item, int line);
// Iteration: list items, dict keys, string characters; undefined: empty.
List iterate(const Value& v, int line);
// Python str.strip family on code points; chars null: Unicode whitespace.
std::string py_strip(const std::string& s, const Value& chars, bool left, bool right);

}  // namespace larder::tmpl
