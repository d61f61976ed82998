// Analyses of a parsed grammar's rules (grammar_analysis.h).
#include "engine/grammar/grammar_analysis.h"

#include <algorithm>
#include <string>
#include <utility>

#include "storage/cancel.h"

namespace larder {

Status check_left_recursion(const std::vector<GrammarRule>& rules, int max_expansion_depth) {
  if (cancel_requested()) return Status::cancelled("grammar: cancelled");
  const size_t n = rules.size();
  // Nullable rules: some alternative of only nullable rules. A worklist,
  // linear in the grammar's size (a pass-until-nothing-changes fixpoint was
  // quadratic: found in hostile testing, a chain of 60,000 rules took 15 s).
  std::vector<bool> nullable(n, false);
  {
    std::vector<uint32_t> alt_rule;    // per alternative of rule elements only: its rule
    std::vector<size_t> alt_pending;   // its rule elements not known nullable
    std::vector<std::vector<uint32_t>> users(n);  // per rule: those alternatives, once per use
    std::vector<uint32_t> ready;
    for (uint32_t r = 0; r < n; ++r) {
      for (const GrammarAlternative& alt : rules[r].alternatives) {
        const bool only_rules = std::all_of(alt.begin(), alt.end(), [](const GrammarElement& e) {
          return e.kind == GrammarElement::Kind::kRule;
        });
        if (!only_rules) continue;  // a character is never empty
        const uint32_t id = static_cast<uint32_t>(alt_rule.size());
        for (const GrammarElement& e : alt) users[e.rule].push_back(id);
        alt_rule.push_back(r);
        alt_pending.push_back(alt.size());
        if (alt.empty() && !nullable[r]) {
          nullable[r] = true;
          ready.push_back(r);
        }
      }
    }
    while (!ready.empty()) {
      if (cancel_requested()) return Status::cancelled("grammar: cancelled");
      const uint32_t r = ready.back();
      ready.pop_back();
      for (uint32_t id : users[r]) {
        if (--alt_pending[id] == 0 && !nullable[alt_rule[id]]) {
          nullable[alt_rule[id]] = true;
          ready.push_back(alt_rule[id]);
        }
      }
    }
  }
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
  const size_t n = rules.size();
  std::vector<bool> productive(n, false);
  std::vector<uint32_t> alt_rule;    // per alternative: its rule
  std::vector<size_t> alt_pending;   // per alternative: its rule elements not known productive
  std::vector<std::vector<uint32_t>> users(n);  // per rule: the alternatives that expand it, once per use
  std::vector<uint32_t> ready;
  for (uint32_t r = 0; r < n; ++r) {
    for (const GrammarAlternative& alt : rules[r].alternatives) {
      const uint32_t id = static_cast<uint32_t>(alt_rule.size());
      size_t pending = 0;
      for (const GrammarElement& e : alt) {
        if (e.kind == GrammarElement::Kind::kRule) {
          ++pending;
          users[e.rule].push_back(id);
        } else if (!chars_match_any(e, 0, 0xD7FF) && !chars_match_any(e, 0xE000, 0x10FFFF)) {
          ++pending;  // matches no character ([], a negated class of everything, surrogates only): never done
        }
      }
      alt_rule.push_back(r);
      alt_pending.push_back(pending);
      if (pending == 0 && !productive[r]) {
        productive[r] = true;
        ready.push_back(r);
      }
    }
  }
  while (!ready.empty()) {
    const uint32_t r = ready.back();
    ready.pop_back();
    for (uint32_t id : users[r]) {
      if (--alt_pending[id] == 0 && !productive[alt_rule[id]]) {
        productive[alt_rule[id]] = true;
        ready.push_back(alt_rule[id]);
      }
    }
  }
  if (productive[root]) {
    // The ways that can never end go: the matcher must not walk into one
    // (found in hostile testing: an optional property whose schema
    // requires itself was written until max_tokens).
    size_t id = 0;
    for (GrammarRule& rule : rules) {
      std::vector<GrammarAlternative> kept;
      for (GrammarAlternative& alt : rule.alternatives) {
        if (alt_pending[id++] == 0) kept.push_back(std::move(alt));
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
