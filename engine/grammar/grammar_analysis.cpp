// Analyses of a parsed grammar's rules (grammar_analysis.h).
#include "engine/grammar/grammar_analysis.h"

#include <algorithm>
#include <string>
#include <utility>

#include "storage/cancel.h"

namespace larder {

namespace {

// The least fixpoint both analyses need: a rule holds once one of its
// alternatives has only elements that hold; a rule element holds when its
// rule does, a character element when `chars_hold(e)`. A worklist over the
// uses of each rule, linear in the grammar's size (a pass-until-nothing-
// changes fixpoint was quadratic: found in hostile testing, a chain of
// 60,000 rules took 15 s). holds[r] per rule; alt_holds, per alternative in
// rule order, whether it holds. kCancelled when cancel_requested().
template <typename CharsHold>
Status rules_that_hold(const std::vector<GrammarRule>& rules, CharsHold chars_hold, std::vector<bool>* holds,
                       std::vector<bool>* alt_holds) {
  const size_t n = rules.size();
  holds->assign(n, false);
  std::vector<uint32_t> alt_rule;               // per alternative: its rule
  std::vector<size_t> alt_pending;              // its elements not known to hold
  std::vector<std::vector<uint32_t>> users(n);  // per rule: the alternatives that use it, once per use
  std::vector<uint32_t> ready;
  auto hold = [&](uint32_t r) {
    if ((*holds)[r]) return;
    (*holds)[r] = true;
    ready.push_back(r);
  };
  for (uint32_t r = 0; r < n; ++r) {
    for (const GrammarAlternative& alt : rules[r].alternatives) {
      const uint32_t id = static_cast<uint32_t>(alt_rule.size());
      size_t pending = 0;
      for (const GrammarElement& e : alt) {
        if (e.kind == GrammarElement::Kind::kRule) {
          ++pending;
          users[e.rule].push_back(id);
        } else if (!chars_hold(e)) {
          ++pending;  // never released: the alternative never holds
        }
      }
      alt_rule.push_back(r);
      alt_pending.push_back(pending);
      if (pending == 0) hold(r);
    }
  }
  while (!ready.empty()) {
    if (cancel_requested()) return Status::cancelled("grammar: cancelled");
    const uint32_t r = ready.back();
    ready.pop_back();
    for (uint32_t id : users[r]) {
      if (--alt_pending[id] == 0) hold(alt_rule[id]);
    }
  }
  alt_holds->resize(alt_pending.size());
  for (size_t id = 0; id < alt_pending.size(); ++id) (*alt_holds)[id] = alt_pending[id] == 0;
  return Status::ok();
}

}  // namespace

Status check_left_recursion(const std::vector<GrammarRule>& rules, int max_expansion_depth) {
  if (cancel_requested()) return Status::cancelled("grammar: cancelled");
  const size_t n = rules.size();
  // Nullable rules: some alternative of only nullable rules (a character
  // is never empty).
  std::vector<bool> nullable, nullable_alts;
  LARDER_RETURN_IF_ERROR(
      rules_that_hold(rules, [](const GrammarElement&) { return false; }, &nullable, &nullable_alts));
  // r -> x when x can come first in r (after nullable rules only).
  std::vector<std::vector<uint32_t>> first(n);
  for (size_t r = 0; r < n; ++r) {
    for (const GrammarAlternative& alt : rules[r].alternatives) {
      for (const GrammarElement& e : alt) {
        if (e.kind != GrammarElement::Kind::kRule) break;
        first[r].push_back(e.rule);
        if (!nullable[e.rule]) break;
      }
    }
  }
  // A cycle in `first` is left recursion. Iterative DFS with colours.
  std::vector<uint8_t> colour(n, 0);  // 0 new, 1 on the path, 2 done
  for (size_t start = 0; start < n; ++start) {
    if (colour[start] != 0) continue;
    std::vector<std::pair<uint32_t, size_t>> path{{uint32_t(start), 0}};
    colour[start] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next < first[r].size()) {
        const uint32_t x = first[r][next++];
        if (colour[x] == 1) {
          return Status::invalid_argument("grammar: rule \"" + rules[x].name +
                                          "\" is left-recursive (it can expand to itself before matching "
                                          "anything); rewrite it with repetition, e.g. a ::= b (\"+\" b)*");
        }
        if (colour[x] == 0) {
          colour[x] = 1;
          path.push_back({x, 0});
        }
      } else {
        colour[r] = 2;
        path.pop_back();
      }
    }
  }
  // No cycle: `first` is a DAG. Its longest path is how deep the matcher's
  // expansion recurses; nodes in reverse topological order come from the
  // DFS above, so a second DFS pass computes it.
  std::vector<int> depth(n, -1);
  for (size_t start = 0; start < n; ++start) {
    if (depth[start] >= 0) continue;
    std::vector<std::pair<uint32_t, size_t>> path{{uint32_t(start), 0}};
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next < first[r].size()) {
        const uint32_t x = first[r][next++];
        if (depth[x] < 0) path.push_back({x, 0});
        continue;
      }
      int d = 0;
      for (uint32_t x : first[r]) d = std::max(d, depth[x] + 1);
      depth[r] = d;
      if (d > max_expansion_depth) {
        return Status::invalid_argument("grammar: rule \"" + rules[r].name + "\" expands through more than " +
                                        std::to_string(max_expansion_depth) +
                                        " rules before matching a character");
      }
      path.pop_back();
    }
  }
  return Status::ok();
}

Status prune_rules_that_cannot_end(std::vector<GrammarRule>& rules, uint32_t root) {
  if (cancel_requested()) return Status::cancelled("grammar: cancelled");
  // Productive rules: some alternative of characters and productive rules;
  // a character class no character matches ([], a negated class of
  // everything, surrogates only) never is.
  std::vector<bool> productive, alt_productive;
  LARDER_RETURN_IF_ERROR(rules_that_hold(
      rules,
      [](const GrammarElement& e) { return chars_match_any(e, 0, 0xD7FF) || chars_match_any(e, 0xE000, 0x10FFFF); },
      &productive, &alt_productive));
  if (productive[root]) {
    // The ways that can never end go: the matcher must not walk into one
    // (found in hostile testing: an optional property whose schema
    // requires itself was written until max_tokens).
    size_t id = 0;
    for (GrammarRule& rule : rules) {
      std::vector<GrammarAlternative> kept;
      for (GrammarAlternative& alt : rule.alternatives) {
        if (alt_productive[id++]) kept.push_back(std::move(alt));
      }
      rule.alternatives = std::move(kept);
    }
    return Status::ok();
  }
  return Status::invalid_argument("grammar: rule \"" + rules[root].name +
                                  "\" can never end: every way through it expands a rule that cannot be "
                                  "completed (a rule that always needs itself again, as a ::= \"x\" a, or a character class that no "
                                  "character matches)");
}

}  // namespace larder
