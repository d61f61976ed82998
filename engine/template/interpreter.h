// Jinja interpreter (engine/template): renders a parsed template against a
// set of global variables with Jinja2's semantics as HF chat templates use
// them (Environment(trim_blocks=True, lstrip_blocks=True), default
// Undefined, no autoescape).
//
// Scoping: each for loop opens a scope that {% set %} inside it writes to
// (so a set inside a loop does not leak out, as in Jinja2; namespace()
// attributes are the way out); if/elif/else share their enclosing scope; a
// macro call runs in a scope above the template's top level.
//
// Limits (RenderOptions; a render that passes one fails with a
// TemplateError naming the line): steps of work, bytes of any string made
// (the output included), bytes made in all, macro call depth, and the
// machine stack the render may use. Every operation whose cost grows with
// its input charges the budget before it builds its result, so no
// template, with any data, runs unbounded or allocates without bound.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/template/ast.h"
#include "engine/template/lexer.h"
#include "engine/template/template.h"

namespace larder::tmpl {

// What one render may still spend (see the top of this file).
class Budget {
 public:
  explicit Budget(const RenderOptions& options);
  // n units of work (an evaluation, a statement, an item copied or compared).
  void step(int line, int64_t n = 1);
  // Before making a string of `bytes`: fails (OutputLimitError) past
  // max_output_bytes; charges its steps and memory.
  void string_bytes(size_t bytes, int line);
  // Before making a list or dict of n items: charges steps and memory.
  void items(size_t n, int line);
  // Fails when the render's machine stack use passes its limit.
  void check_stack(int line) const;
  size_t max_output_bytes() const { return max_output_bytes_; }
  int max_call_depth() const { return max_call_depth_; }

 private:
  int64_t steps_left_;
  int64_t memory_left_;
  size_t max_output_bytes_;
  int max_call_depth_;
  uintptr_t stack_floor_;  // lowest frame address allowed (the stack grows down)
};

// The output passed RenderOptions::max_output_bytes (or a string would).
struct OutputLimitError : TemplateError {
  using TemplateError::TemplateError;
};

class Interpreter {
 public:
  Interpreter(const Dict& globals, Budget& budget);

  // Throws TemplateError (message names what failed; line is set).
  void render(const Body& body, TextBuilder* out);

  // Evaluates one expression in the current scope.
  Value eval(const Expr& e);
  // Calls a callable value (used by filters such as map).
  Value call(const Value& fn, CallArgs& args, int line);
  // Applies a named filter/test (filters.cpp).
  Value apply_filter(const std::string& name, const Value& input, CallArgs& args, int line);
  bool apply_test(const std::string& name, const Value& input, CallArgs& args, int line);
  Budget& budget() { return budget_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec(const Body& body, TextBuilder* out);
  Flow exec_stmt(const Stmt& s, TextBuilder* out);
  void exec_for(const Stmt& s, TextBuilder* out);
  void exec_set(const Stmt& s);
  void emit(TextBuilder* out, const Value& v, int line);
  Value eval_node(const Expr& e);
  Value make_macro(const Stmt& s);
  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);
  Value binary(const Expr& e);
  Value compare(const Expr& e);

  using Scope = std::unordered_map<std::string, Value>;
  std::vector<Scope> scopes_;
  Budget& budget_;
  int call_depth_ = 0;
};

// Attribute access obj.name (Python getattr, then getitem): string and dict
// methods as bound callables, dict keys, namespace attributes. Missing:
// undefined. Throws TemplateError when obj itself is undefined.
Value get_attr(const Value& obj, const std::string& name, int line, Budget& budget);
// Subscript obj[key] (getitem, then getattr for string keys).
Value get_item(const Value& obj, const Value& key, int line, Budget& budget);
// Python slice obj[start:stop:step] of a list or string (null: omitted).
Value slice_value(const Value& obj, const Value* start, const Value* stop, const Value* step, int line,
                  Budget& budget);
// Python "in".
bool contains(const Value& container, const Value& item, int line, Budget& budget);
// Iteration: list items, dict keys, string characters; undefined: empty.
List iterate(const Value& v, int line, Budget& budget);
// A value as a string (Value::str_value), its size checked and charged.
Value to_text(const Value& v, int line, Budget& budget);
// Python str.strip family on code points; chars null: Unicode whitespace.
// The result keeps the marks of the bytes it keeps.
Value py_strip(const Value& s, const Value& chars, bool left, bool right, int line, Budget& budget);

}  // namespace larder::tmpl
