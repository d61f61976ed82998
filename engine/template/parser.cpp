// Jinja parser (see parser.h). Operator precedence follows Jinja2's parser:
// cond-expr < or < and < not < compare (in, is handled as a postfix) <
// + - < ~ < * / // % < ** < unary - + < postfix (. [] () | is).
#include "engine/template/parser.h"

#include <algorithm>
#include <string>

#include "engine/template/lexer.h"
#include "engine/template/template.h"

namespace larder::tmpl {
namespace {

class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens, int line) : t_(std::move(tokens)), line_(line) {}

  bool at_end() const { return t_[i_].kind == TokKind::kEnd; }
  bool is_op(std::string_view op) const { return t_[i_].kind == TokKind::kOp && t_[i_].text == op; }
  bool is_name(std::string_view n) const { return t_[i_].kind == TokKind::kName && t_[i_].text == n; }
  bool is_name_at(size_t k, std::string_view n) const {
    return i_ + k < t_.size() && t_[i_ + k].kind == TokKind::kName && t_[i_ + k].text == n;
  }
  const Token& peek() const { return t_[i_]; }
  Token next() { return t_[i_].kind == TokKind::kEnd ? t_[i_] : t_[i_++]; }
  [[noreturn]] void fail(const std::string& what) const {
    throw TemplateError(what + (at_end() ? " (at end of tag)" : " near '" + t_[i_].text + "'"), line_);
  }
  void expect_op(std::string_view op) {
    if (!is_op(op)) fail("expected '" + std::string(op) + "'");
    ++i_;
  }
  std::string expect_name() {
    if (peek().kind != TokKind::kName) fail("expected a name");
    return next().text;
  }
  void expect_end() {
    if (!at_end()) fail("unexpected token");
  }

  ExprPtr make(ExprKind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line_;
    return e;
  }
  // Appends a child (null: an omitted part), keeping parent->depth the
  // height of the tree: a long chain such as 1+1+1+... (built by a loop,
  // not by recursion) must not grow a tree that evaluating or freeing
  // recursively would overflow the stack on.
  void add(Expr* parent, ExprPtr child) {
    if (child) {
      parent->depth = std::max(parent->depth, child->depth + 1);
      if (parent->depth > kMaxNesting) too_deep();
    }
    parent->items.push_back(std::move(child));
  }
  [[noreturn]] void too_deep() const {
    throw TemplateError("expression nested more than " + std::to_string(kMaxNesting) + " levels deep", line_);
  }
  // Counts the parser's own recursion ((((x)))), - - - x, not not x).
  struct Nest {
    explicit Nest(ExprParser& p) : p(p) {
      if (++p.nesting_ > kMaxNesting) p.too_deep();
    }
    ~Nest() { --p.nesting_; }
    ExprParser& p;
  };

  // expression (with an optional "x if c else y")
  ExprPtr parse_expression() {
    Nest nest(*this);
    ExprPtr e = parse_or();
    while (is_name("if")) {
      ++i_;
      auto c = make(ExprKind::kCond);
      ExprPtr cond = parse_or();
      ExprPtr other;
      if (is_name("else")) {
        ++i_;
        other = parse_expression();
      }
      add(c.get(), std::move(e));
      add(c.get(), std::move(cond));
      add(c.get(), std::move(other));
      e = std::move(c);
    }
    return e;
  }
  // Expression without a trailing "if" (for-loop iterables, where "if" filters).
  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      ++i_;
      e = binary("or", std::move(e), parse_and());
    }
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      ++i_;
      e = binary("and", std::move(e), parse_not());
    }
    return e;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      Nest nest(*this);
      ++i_;
      auto u = make(ExprKind::kUnary);
      u->name = "not";
      add(u.get(), parse_not());
      return u;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr e = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (peek().kind == TokKind::kOp &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op(">") || is_op("<=") || is_op(">="))) {
        op = next().text;
      } else if (is_name("in")) {
        ++i_;
        op = "in";
      } else if (is_name("not") && is_name_at(1, "in")) {
        i_ += 2;
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(ExprKind::kCompare);
        add(cmp.get(), std::move(e));
      }
      cmp->ops.push_back(op);
      add(cmp.get(), parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(e);
  }
  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = next().text;
      e = binary(op, std::move(e), parse_concat());
    }
    return e;
  }
  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      ++i_;
      e = binary("~", std::move(e), parse_math2());
    }
    return e;
  }
  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = next().text;
      e = binary(op, std::move(e), parse_pow());
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      ++i_;
      e = binary("**", std::move(e), parse_unary(true));
    }
    return e;
  }
  ExprPtr parse_unary(bool with_filter) {
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      Nest nest(*this);
      auto u = make(ExprKind::kUnary);
      u->name = next().text;
      add(u.get(), parse_unary(false));
      e = std::move(u);
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filters(std::move(e));
    return e;
  }
  ExprPtr parse_primary() {
    const Token& t = peek();
    if (t.kind == TokKind::kString) {
      std::string s;
      while (peek().kind == TokKind::kString) s += next().text;  // adjacent literals concatenate
      auto e = make(ExprKind::kLiteral);
      e->value = Value(std::move(s));
      return e;
    }
    if (t.kind == TokKind::kInt || t.kind == TokKind::kFloat) {
      auto e = make(ExprKind::kLiteral);
      e->value = t.kind == TokKind::kInt ? Value(t.int_value) : Value(t.float_value);
      ++i_;
      return e;
    }
    if (t.kind == TokKind::kName) {
      const std::string n = next().text;
      auto e = make(ExprKind::kLiteral);
      if (n == "true" || n == "True") e->value = Value(true);
      else if (n == "false" || n == "False") e->value = Value(false);
      else if (n == "none" || n == "None") e->value = Value::none();
      else {
        e->kind = ExprKind::kName;
        e->name = n;
      }
      return e;
    }
    if (is_op("(")) {
      ++i_;
      if (is_op(")")) {
        ++i_;
        return make(ExprKind::kTuple);
      }
      ExprPtr first = parse_expression();
      if (is_op(",")) {
        auto tup = make(ExprKind::kTuple);
        add(tup.get(), std::move(first));
        while (is_op(",")) {
          ++i_;
          if (is_op(")")) break;
          add(tup.get(), parse_expression());
        }
        expect_op(")");
        return tup;
      }
      expect_op(")");
      return first;
    }
    if (is_op("[")) {
      ++i_;
      auto l = make(ExprKind::kList);
      while (!is_op("]")) {
        add(l.get(), parse_expression());
        if (!is_op(",")) break;
        ++i_;
      }
      expect_op("]");
      return l;
    }
    if (is_op("{")) {
      ++i_;
      auto d = make(ExprKind::kDict);
      while (!is_op("}")) {
        add(d.get(), parse_expression());
        expect_op(":");
        add(d.get(), parse_expression());
        if (!is_op(",")) break;
        ++i_;
      }
      expect_op("}");
      return d;
    }
    fail("expected an expression");
  }
  void parse_call_args(Expr* call) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().kind == TokKind::kName && i_ + 1 < t_.size() && t_[i_ + 1].kind == TokKind::kOp &&
          t_[i_ + 1].text == "=") {
        call->kwnames.push_back(next().text);
        ++i_;
        add(call, parse_expression());
      } else {
        if (!call->kwnames.empty()) fail("positional argument after keyword argument");
        add(call, parse_expression());
      }
      if (!is_op(",")) break;
      ++i_;
    }
    expect_op(")");
  }
  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        ++i_;
        auto a = make(ExprKind::kAttr);
        if (peek().kind == TokKind::kInt) {
          a->kind = ExprKind::kItem;
          add(a.get(), std::move(e));
          auto idx = make(ExprKind::kLiteral);
          idx->value = Value(next().int_value);
          add(a.get(), std::move(idx));
        } else {
          a->name = expect_name();
          add(a.get(), std::move(e));
        }
        e = std::move(a);
      } else if (is_op("[")) {
        ++i_;
        ExprPtr parts[3];
        int n_colons = 0;
        if (!is_op(":")) parts[0] = parse_expression();
        while (is_op(":") && n_colons < 2) {
          ++i_;
          ++n_colons;
          if (!is_op(":") && !is_op("]")) parts[n_colons] = parse_expression();
        }
        expect_op("]");
        auto s = make(n_colons ? ExprKind::kSlice : ExprKind::kItem);
        add(s.get(), std::move(e));
        if (n_colons) {
          for (auto& p : parts) add(s.get(), std::move(p));
        } else {
          if (!parts[0]) fail("empty subscript");
          add(s.get(), std::move(parts[0]));
        }
        e = std::move(s);
      } else if (is_op("(")) {
        auto c = make(ExprKind::kCall);
        add(c.get(), std::move(e));
        parse_call_args(c.get());
        e = std::move(c);
      } else {
        return e;
      }
    }
  }
  ExprPtr parse_filters(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        ++i_;
        auto f = make(ExprKind::kFilter);
        f->name = expect_name();
        while (is_op(".")) {  // dotted filter names are not supported, but report them whole
          ++i_;
          f->name += "." + expect_name();
        }
        if (!is_known_filter(f->name)) throw TemplateError("unsupported filter '" + f->name + "'", line_);
        add(f.get(), std::move(e));
        if (is_op("(")) parse_call_args(f.get());
        e = std::move(f);
      } else if (is_name("is")) {
        ++i_;
        auto t = make(ExprKind::kTest);
        if (is_name("not")) {
          ++i_;
          t->negated = true;
        }
        // "is none" etc.: test names may be keywords
        if (peek().kind != TokKind::kName) fail("expected a test name");
        t->name = next().text;
        if (!is_known_test(t->name)) throw TemplateError("unsupported test '" + t->name + "'", line_);
        add(t.get(), std::move(e));
        if (is_op("(")) {
          parse_call_args(t.get());
        } else if (peek().kind == TokKind::kString || peek().kind == TokKind::kInt ||
                   peek().kind == TokKind::kFloat ||
                   (peek().kind == TokKind::kName && !is_name("and") && !is_name("or") && !is_name("if") &&
                    !is_name("else") && !is_name("is") && !is_name("in") && !is_name("not"))) {
          add(t.get(), parse_primary());  // "is equalto 'x'", "is divisibleby 3"
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b) {
    auto e = make(ExprKind::kBinary);
    e->name = op;
    add(e.get(), std::move(a));
    add(e.get(), std::move(b));
    return e;
  }

 private:
  std::vector<Token> t_;
  size_t i_ = 0;
  int line_;
  int nesting_ = 0;
};

class StmtParser {
 public:
  explicit StmtParser(std::vector<Chunk> chunks) : c_(std::move(chunks)) {}

  // Parses until one of `ends` (a tag name) or the end of input; returns the
  // tag that ended the body ("" at end of input) and leaves its parser in
  // *tag_parser.
  std::string parse_body(Body* body, std::initializer_list<std::string_view> ends,
                         std::unique_ptr<ExprParser>* tag_parser) {
    while (pos_ < c_.size()) {
      const Chunk& ch = c_[pos_++];
      if (ch.kind == ChunkKind::kText) {
        auto s = make(StmtKind::kText, ch.line);
        s->text = ch.text;
        body->push_back(std::move(s));
        continue;
      }
      auto p = std::make_unique<ExprParser>(lex_expression(ch.text, ch.line), ch.line);
      if (ch.kind == ChunkKind::kExpr) {
        auto s = make(StmtKind::kOutput, ch.line);
        s->expr = p->parse_expression();
        p->expect_end();
        body->push_back(std::move(s));
        continue;
      }
      if (p->peek().kind != TokKind::kName) throw TemplateError("expected a tag name in {% %}", ch.line);
      const std::string tag = p->next().text;
      for (std::string_view e : ends) {
        if (tag == e) {
          if (tag_parser) *tag_parser = std::move(p);
          return tag;
        }
      }
      body->push_back(parse_tag(tag, *p, ch.line));
    }
    if (ends.size() != 0) {
      std::string want;
      for (std::string_view e : ends) want += (want.empty() ? "" : "/") + std::string(e);
      throw TemplateError("missing {% " + want + " %} before the end of the template", open_line_);
    }
    return "";
  }

 private:
  StmtPtr make(StmtKind k, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->line = line;
    return s;
  }

  StmtPtr parse_tag(const std::string& tag, ExprParser& p, int line) {
    // Blocks inside blocks recurse here: a template with 100,000 nested
    // {% if %} must fail, not overflow the stack.
    if (nesting_ >= kMaxNesting) {
      throw TemplateError("blocks nested more than " + std::to_string(kMaxNesting) + " levels deep", line);
    }
    ++nesting_;
    struct Unnest {
      int& n;
      ~Unnest() { --n; }
    } unnest{nesting_};
    const int saved_open = open_line_;
    open_line_ = line;
    StmtPtr s;
    if (tag == "if") {
      s = make(StmtKind::kIf, line);
      s->conds.push_back(p.parse_expression());
      p.expect_end();
      while (true) {
        Body b;
        std::unique_ptr<ExprParser> tp;
        const std::string end = parse_body(&b, {"elif", "else", "endif"}, &tp);
        s->bodies.push_back(std::move(b));
        if (end == "elif") {
          s->conds.push_back(tp->parse_expression());
          tp->expect_end();
          continue;
        }
        tp->expect_end();
        if (end == "else") {
          parse_body(&s->else_body, {"endif"}, &tp);
          tp->expect_end();
        }
        break;
      }
    } else if (tag == "for") {
      s = make(StmtKind::kFor, line);
      s->targets.push_back(p.expect_name());
      while (p.is_op(",")) {
        p.next();
        s->targets.push_back(p.expect_name());
      }
      if (!p.is_name("in")) p.fail("expected 'in' in for loop");
      p.next();
      s->expr = p.parse_or();
      if (p.is_name("if")) {
        p.next();
        s->cond = p.parse_expression();
      }
      if (p.is_name("recursive")) throw TemplateError("unsupported construct: recursive for loop", line);
      p.expect_end();
      std::unique_ptr<ExprParser> tp;
      const std::string end = parse_body(&s->body, {"else", "endfor"}, &tp);
      tp->expect_end();
      if (end == "else") {
        parse_body(&s->else_body, {"endfor"}, &tp);
        tp->expect_end();
      }
    } else if (tag == "set") {
      s = make(StmtKind::kSet, line);
      s->targets.push_back(p.expect_name());
      if (p.is_op(".")) {
        p.next();
        s->text = p.expect_name();
      } else {
        while (p.is_op(",")) {
          p.next();
          s->targets.push_back(p.expect_name());
        }
      }
      if (p.is_op("=")) {
        p.next();
        s->expr = p.parse_expression();
        if (p.is_op(",")) {  // set a, b = x, y
          auto tup = p.make(ExprKind::kTuple);
          p.add(tup.get(), std::move(s->expr));
          while (p.is_op(",")) {
            p.next();
            p.add(tup.get(), p.parse_expression());
          }
          s->expr = std::move(tup);
        }
        p.expect_end();
      } else {
        if (p.is_op("|")) throw TemplateError("unsupported construct: filtered block set", line);
        p.expect_end();
        std::unique_ptr<ExprParser> tp;
        parse_body(&s->body, {"endset"}, &tp);
        tp->expect_end();
      }
    } else if (tag == "macro") {
      s = make(StmtKind::kMacro, line);
      s->text = p.expect_name();
      p.expect_op("(");
      while (!p.is_op(")")) {
        s->targets.push_back(p.expect_name());
        if (p.is_op("=")) {
          p.next();
          s->conds.push_back(p.parse_expression());
        } else {
          s->conds.push_back(nullptr);
        }
        if (!p.is_op(",")) break;
        p.next();
      }
      p.expect_op(")");
      p.expect_end();
      std::unique_ptr<ExprParser> tp;
      parse_body(&s->body, {"endmacro"}, &tp);
      if (!tp->at_end() && tp->peek().kind == TokKind::kName) tp->next();  // {% endmacro name %}
      tp->expect_end();
    } else if (tag == "break" || tag == "continue") {
      s = make(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, line);
      p.expect_end();
    } else if (tag == "generation") {
      s = make(StmtKind::kBlock, line);
      p.expect_end();
      std::unique_ptr<ExprParser> tp;
      parse_body(&s->body, {"endgeneration"}, &tp);
      tp->expect_end();
    } else {
      const bool known_closer = tag.rfind("end", 0) == 0 || tag == "else" || tag == "elif";
      throw TemplateError(known_closer ? "unexpected {% " + tag + " %}" : "unsupported tag {% " + tag + " %}", line);
    }
    open_line_ = saved_open;
    return s;
  }

  std::vector<Chunk> c_;
  size_t pos_ = 0;
  int open_line_ = 0;
  int nesting_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) {
  StmtParser parser(lex_template(source));
  Body body;
  parser.parse_body(&body, {}, nullptr);
  return body;
}

}  // namespace larder::tmpl
