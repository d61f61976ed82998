#include "engine/grammar/grammar_matcher.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>

#include "storage/cancel.h"

namespace larder {

CompiledGrammar::CompiledGrammar(const Grammar& g) : root_(g.root) {
  size_t n_elems = 0;
  for (const GrammarRule& rule : g.rules) {
    for (const GrammarAlternative& alt : rule.alternatives) n_elems += alt.size() + 1;
  }
  elems_.reserve(n_elems);
  rule_alts_.resize(g.rules.size());
  // Equal character sets are stored once (a grammar from a large schema has
  // millions of elements and a few hundred distinct sets): keyed by the
  // negation flag and the ranges' bytes.
  std::unordered_map<std::string, uint32_t> set_ids;
  std::string key;
  for (size_t r = 0; r < g.rules.size(); ++r) {
    rule_alts_[r].reserve(g.rules[r].alternatives.size());
    for (const GrammarAlternative& alt : g.rules[r].alternatives) {
      rule_alts_[r].push_back(uint32_t(elems_.size()));
      for (const GrammarElement& e : alt) {
        if (e.kind == GrammarElement::Kind::kRule) {
          elems_.push_back({Op::kRule, e.rule});
          continue;
        }
        key.assign(1, e.negated ? '^' : '=');
        key.append(reinterpret_cast<const char*>(e.ranges.data()), e.ranges.size() * sizeof(CharRange));
        auto [it, added] = set_ids.try_emplace(key, uint32_t(sets_.size()));
        if (added) {
          // The ASCII bits, range by range.
          CharSet cs;
          cs.element = e;
          for (const CharRange& cr : e.ranges) {
            for (uint32_t cp = cr.lo; cp <= std::min<uint32_t>(cr.hi, 127); ++cp) {
              cs.ascii[cp >> 6] |= uint64_t(1) << (cp & 63);
            }
          }
          if (e.negated) cs.ascii = {~cs.ascii[0], ~cs.ascii[1]};
          sets_.push_back(std::move(cs));
        }
        elems_.push_back({Op::kChars, it->second});
      }
      elems_.push_back({Op::kEnd, 0});
    }
  }
  // FNV-1a over the elements, the character sets and the alternatives.
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xFF;
      h *= 0x100000001b3ull;
    }
  };
  mix(root_);
  for (const Elem& e : elems_) mix(uint64_t(e.op) << 32 | e.arg);
  for (const CharSet& cs : sets_) {
    mix(cs.element.negated);
    for (const CharRange& r : cs.element.ranges) mix(uint64_t(r.lo) << 32 | r.hi);
    mix(~uint64_t(0));
  }
  for (const std::vector<uint32_t>& alts : rule_alts_) {
    for (uint32_t a : alts) mix(a);
    mix(~uint64_t(0));
  }
  fingerprint_ = h;
}

bool CompiledGrammar::same_as(const CompiledGrammar& o) const {
  if (fingerprint_ != o.fingerprint_ || root_ != o.root_ || elems_.size() != o.elems_.size() ||
      sets_.size() != o.sets_.size() || rule_alts_ != o.rule_alts_) {
    return false;
  }
  for (size_t i = 0; i < elems_.size(); ++i) {
    if (elems_[i].op != o.elems_[i].op || elems_[i].arg != o.elems_[i].arg) return false;
  }
  for (size_t i = 0; i < sets_.size(); ++i) {
    const GrammarElement& a = sets_[i].element;
    const GrammarElement& b = o.sets_[i].element;
    if (a.negated != b.negated || a.ranges.size() != b.ranges.size()) return false;
    for (size_t r = 0; r < a.ranges.size(); ++r) {
      if (a.ranges[r].lo != b.ranges[r].lo || a.ranges[r].hi != b.ranges[r].hi) return false;
    }
  }
  return true;
}

namespace {

// Expands s until its top is a kChars element (or it is empty), adding
// every result to out. Left recursion was refused by the parser, so this
// ends: every cycle through rules matches a code point first. Once out
// holds kMaxGrammarStacks readings (duplicates included: they are merged
// later) it stops and sets *overflow: nested nullable repetitions or
// duplicate alternatives can make the readings grow exponentially.
void expand(const CompiledGrammar& g, GrammarStack& s, GrammarState& out, bool* overflow) {
  if (out.size() >= kMaxGrammarStacks) {
    *overflow = true;
    return;
  }
  if (s.pos.empty()) {
    out.push_back(s);
    return;
  }
  const uint32_t at = s.pos.back();
  const CompiledGrammar::Elem& e = g.elem(at);
  if (e.op == CompiledGrammar::Op::kChars) {
    out.push_back(s);
    return;
  }
  // kRule (kEnd is never on a stack): continue after it, inside one of its
  // alternatives first.
  s.pos.pop_back();
  if (g.elem(at + 1).op != CompiledGrammar::Op::kEnd) s.pos.push_back(at + 1);
  const size_t depth = s.pos.size();
  for (uint32_t start : g.alternatives(e.arg)) {
    if (*overflow) break;
    GrammarStack next = s;
    if (g.elem(start).op != CompiledGrammar::Op::kEnd) next.pos.push_back(start);
    expand(g, next, out, overflow);
  }
  s.pos.resize(depth);
}

void canonicalize(GrammarState& st) {
  auto less = [](const GrammarStack& a, const GrammarStack& b) {
    if (a.pending != b.pending) return a.pending < b.pending;
    if (a.width != b.width) return a.width < b.width;
    if (a.partial != b.partial) return a.partial < b.partial;
    return a.pos < b.pos;
  };
  std::sort(st.begin(), st.end(), less);
  st.erase(std::unique(st.begin(), st.end()), st.end());
}

// Code points a UTF-8 sequence of `width` bytes can still become: its bits
// so far followed by `pending` continuation bytes of anything, within the
// well-formed range of that width. False when none is left (an overlong
// form, or past U+10FFFF).
bool partial_range(uint32_t bits, uint8_t pending, uint8_t width, uint32_t& lo, uint32_t& hi) {
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  static constexpr uint32_t kMax[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  lo = std::max(bits << (6 * pending), kMin[width]);
  hi = std::min(bits << (6 * pending) | ((uint32_t(1) << (6 * pending)) - 1), kMax[width]);
  if (lo > hi) return false;
  // Surrogates (U+D800..U+DFFF) are not characters: trim them off the ends.
  if (lo >= 0xD800 && lo <= 0xDFFF) lo = 0xE000;
  if (hi >= 0xD800 && hi <= 0xDFFF) hi = 0xD7FF;
  return lo <= hi;
}

// Moves s past its top (which matched) and expands it into out.
void step_past(const CompiledGrammar& g, GrammarStack s, GrammarState& out, bool* overflow) {
  const uint32_t at = s.pos.back();
  s.pos.pop_back();
  s.partial = 0;
  s.pending = 0;
  s.width = 0;
  if (g.elem(at + 1).op != CompiledGrammar::Op::kEnd) s.pos.push_back(at + 1);
  expand(g, s, out, overflow);
}

}  // namespace

GrammarState grammar_start(const CompiledGrammar& g, bool* overflowed) {
  GrammarState out;
  bool overflow = false;
  for (uint32_t start : g.alternatives(g.root())) {
    GrammarStack s;
    if (g.elem(start).op != CompiledGrammar::Op::kEnd) s.pos.push_back(start);
    expand(g, s, out, &overflow);
  }
  if (overflowed != nullptr) *overflowed = overflow;
  if (overflow) return {};
  canonicalize(out);
  return out;
}

GrammarState grammar_advance(const CompiledGrammar& g, const GrammarState& state, uint8_t byte, bool* overflowed) {
  GrammarState out;
  bool overflow = false;
  for (const GrammarStack& s : state) {
    if (overflow) break;
    if (s.pos.empty()) continue;  // complete: nothing may follow on this reading
    const CompiledGrammar::CharSet& cs = g.set(g.elem(s.pos.back()).arg);
    if (s.pending == 0) {
      if (byte < 0x80) {
        if (cs.matches(byte)) step_past(g, s, out, &overflow);
        continue;
      }
      uint8_t pending = 0;
      uint32_t bits = 0;
      if ((byte >> 5) == 0x6) {
        pending = 1;
        bits = byte & 0x1F;
      } else if ((byte >> 4) == 0xE) {
        pending = 2;
        bits = byte & 0x0F;
      } else if ((byte >> 3) == 0x1E) {
        pending = 3;
        bits = byte & 0x07;
      } else {
        continue;  // not a lead byte
      }
      uint32_t lo = 0, hi = 0;
      const uint8_t width = uint8_t(pending + 1);
      if (!partial_range(bits, pending, width, lo, hi) || !chars_match_any(cs.element, lo, hi)) continue;
      GrammarStack next = s;
      next.partial = bits;
      next.pending = pending;
      next.width = width;
      out.push_back(std::move(next));
      continue;
    }
    if ((byte >> 6) != 0x2) continue;  // a continuation byte was due
    const uint32_t bits = (s.partial << 6) | (byte & 0x3F);
    const uint8_t pending = uint8_t(s.pending - 1);
    uint32_t lo = 0, hi = 0;
    if (!partial_range(bits, pending, s.width, lo, hi)) continue;  // overlong, surrogate or too large
    if (pending == 0) {
      if (chars_match(cs.element, bits)) step_past(g, s, out, &overflow);
      continue;
    }
    if (!chars_match_any(cs.element, lo, hi)) continue;
    GrammarStack next = s;
    next.partial = bits;
    next.pending = pending;
    out.push_back(std::move(next));
  }
  if (overflowed != nullptr) *overflowed = overflow;
  if (overflow) return {};
  canonicalize(out);
  return out;
}

Result<std::shared_ptr<const CompiledGrammar>> compile_grammar(const Grammar& g) {
  if (cancel_requested()) return Status::cancelled("grammar: cancelled");
  auto cg = std::make_shared<const CompiledGrammar>(g);
  if (cancel_requested()) return Status::cancelled("grammar: cancelled");
  bool overflow = false;
  (void)grammar_start(*cg, &overflow);
  if (overflow) {
    return Status::invalid_argument("the grammar is too ambiguous: its start alone has more than " +
                                    std::to_string(kMaxGrammarStacks) +
                                    " readings (nested optional repetitions such as (\"a\"{0,100}){0,100}, or "
                                    "alternatives that repeat each other)");
  }
  return std::shared_ptr<const CompiledGrammar>(std::move(cg));
}

bool grammar_can_end(const GrammarState& state) {
  for (const GrammarStack& s : state) {
    if (s.pos.empty() && s.pending == 0) return true;
  }
  return false;
}

bool grammar_is_done(const GrammarState& state) {
  for (const GrammarStack& s : state) {
    if (!s.pos.empty()) return false;
  }
  return true;
}

std::string grammar_state_key(const GrammarState& state) {
  std::string key;
  for (const GrammarStack& s : state) {
    const uint32_t head[3] = {uint32_t(s.pos.size()), s.partial, uint32_t(s.pending) | uint32_t(s.width) << 8};
    key.append(reinterpret_cast<const char*>(head), sizeof head);
    key.append(reinterpret_cast<const char*>(s.pos.data()), s.pos.size() * sizeof(uint32_t));
  }
  return key;
}

}  // namespace larder
