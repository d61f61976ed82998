// Syntax tree of a parsed Jinja template (engine/template).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/template/value.h"

namespace larder::tmpl {

enum class ExprKind {
  kLiteral,  // value
  kName,     // name
  kList,     // items
  kTuple,    // items
  kDict,     // items: key0, value0, key1, value1, ...
  kAttr,     // items[0] . name
  kItem,     // items[0] [ items[1] ]
  kSlice,    // items[0] [ items[1] : items[2] : items[3] ] (null parts allowed)
  kCall,     // items[0] ( items[1..] ), kwnames for the trailing keyword args
  kFilter,   // items[0] | name ( items[1..] )
  kTest,     // items[0] is [not] name ( items[1..] ); negated
  kUnary,    // name in {"-", "+", "not"} applied to items[0]
  kBinary,   // items[0] name items[1]; name in + - * / // % ** ~ and or
  kCompare,  // items[0] ops[0] items[1] ops[1] items[2] ...
  kCond,     // items[0] if items[1] else items[2] (items[2] may be null)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value value;
  std::string name;
  std::vector<std::unique_ptr<Expr>> items;
  std::vector<std::string> kwnames;  // kCall/kFilter/kTest: names of the last kwnames.size() args
  std::vector<std::string> ops;      // kCompare
  bool negated = false;              // kTest
  int depth = 1;                     // height of this subtree (parser.cpp keeps it <= kMaxNesting)
};
using ExprPtr = std::unique_ptr<Expr>;

enum class StmtKind {
  kText,      // text
  kOutput,    // {{ expr }}
  kIf,        // conds[i] -> bodies[i]; else_body
  kFor,       // targets in expr [if cond]: body; else_body
  kSet,       // targets (or target.attr) = expr; or {% set x %}body{% endset %}
  kMacro,     // name(params = defaults): body
  kBreak,
  kContinue,
  kBlock,     // a transparent body ({% generation %})
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;                  // kText; kMacro: name; kSet: attribute (ns.attr) or ""
  ExprPtr expr;                      // kOutput, kFor (iterable), kSet (value or null for block set)
  ExprPtr cond;                      // kFor: loop filter
  std::vector<std::string> targets;  // kFor, kSet; kMacro: parameter names
  std::vector<ExprPtr> conds;        // kIf; kMacro: parameter defaults (null: none)
  std::vector<Body> bodies;          // kIf: one per cond
  Body body;                         // kFor, kSet (block), kMacro, kBlock
  Body else_body;                    // kIf, kFor
};

}  // namespace larder::tmpl
