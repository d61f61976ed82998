// Whole-grammar analyses run once a GBNF grammar is parsed (gbnf_parser.cpp),
// before a matcher (grammar_matcher.h) ever walks it.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/grammar/grammar.h"
#include "storage/status.h"

namespace larder {

// kInvalidArgument when a rule can expand to itself before matching a code
// point (left recursion: a top-down matcher would loop), or when a chain of
// more than max_expansion_depth rules expands before a character matches
// (the matcher recurses that deep). Nullable rules are found by a fixpoint;
// the "can come first" graph is then checked for a cycle and its longest
// path by iterative depth-first search (linear in the grammar's size).
Status check_left_recursion(const std::vector<GrammarRule>& rules, int max_expansion_depth);

// kInvalidArgument when rules[root] can never be completed (every way
// through it expands a rule that cannot end, as a ::= "x" a): it would
// generate until max_tokens. Otherwise removes each alternative that cannot
// end, so a matcher never walks into one. A rule is productive once an
// alternative has only characters and productive rules: a worklist, linear
// in the grammar's size.
Status prune_rules_that_cannot_end(std::vector<GrammarRule>& rules, uint32_t root);

}  // namespace larder
