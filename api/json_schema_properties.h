// The properties of one JSON Schema object as GBNF, for json_schema_grammar:
// in schema order, required ones present, optional ones maybe absent, with
// commas between them, as a balanced split so that any number of optional
// properties stays shallow.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace larder {

// One property: the rule of its `"name" ws ":" ws value ws`.
struct PropRule {
  std::string kv;
  bool required;
};

// nonempty(l, r, after): a non-empty in-order selection of [l, r) that has
// every required one of them, led by a comma when `after` (one was written
// before). With m the middle of [l, r):
//   nonempty(l, r, a) ::= nonempty(l, m, a) rest(m, r)
//                       | nonempty(m, r, a)       (only when [l, m) has no required one)
//   rest(m, r)        ::= nonempty(m, r, true), or that or "" when [m, r) has no required one
// The two alternatives differ in whether [l, m) contributes, so a text has
// one reading; a rule's first element expands to a rule of half its range,
// so a top-down expansion goes through about 2 log2(n) rules before
// matching a character (a chain "kv_i rest_(i+1) | rest_(i+1)" went
// through n, past the parser's bound for a thousand optional properties),
// and there are about 4 n rules in all.
class PropertySequence {
 public:
  // new_rule(hint, body): adds a rule, returns its name.
  using NewRule = std::function<std::string(const std::string& hint, std::string body)>;
  PropertySequence(const std::vector<PropRule>& props, NewRule new_rule)
      : props_(props), new_rule_(std::move(new_rule)), n_required_(props.size() + 1, 0) {
    for (size_t i = 0; i < props.size(); ++i) n_required_[i + 1] = n_required_[i] + (props[i].required ? 1 : 0);
  }

  bool any_required(size_t l, size_t r) const { return n_required_[r] > n_required_[l]; }

  // The rule (or, for one property, the expression) of nonempty(l, r, after); l < r.
  std::string nonempty(size_t l, size_t r, bool after) {
    if (r - l == 1) return after ? "\",\" ws " + props_[l].kv : props_[l].kv;
    const auto key = std::make_tuple(l, r, after);
    if (const auto it = memo_.find(key); it != memo_.end()) return it->second;
    const size_t m = l + (r - l) / 2;
    std::string rest = nonempty(m, r, true);
    if (!any_required(m, r)) rest = "( " + rest + " )?";
    std::string body = nonempty(l, m, after) + " " + rest;
    if (!any_required(l, m)) body += " | " + nonempty(m, r, after);
    std::string name = new_rule_(std::to_string(l) + "-" + std::to_string(r) + (after ? "-more" : ""), std::move(body));
    memo_.emplace(key, name);
    return name;
  }

 private:
  const std::vector<PropRule>& props_;
  NewRule new_rule_;
  std::vector<size_t> n_required_;  // n_required_[i]: required ones among [0, i)
  std::map<std::tuple<size_t, size_t, bool>, std::string> memo_;
};

}  // namespace larder
