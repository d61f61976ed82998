// StringDfa (string_dfa.h): an ECMAScript pattern is parsed into a syntax
// tree, built into a Thompson NFA (Thompson 1968; Aho, Lam, Sethi, Ullman,
// "Compilers", 2nd ed., section 3.7.4), determinized by the subset
// construction (section 3.7.1), trimmed and minimized by Moore's partition
// refinement (section 3.9.6), and written as one GBNF rule per state.
#include "engine/grammar/string_dfa.h"

#include <algorithm>
#include <bitset>
#include <map>
#include <unordered_map>

#include "engine/grammar/regex_syntax.h"
#include "engine/tokenizer/unicode.h"

namespace larder {

namespace {

using Symbols = regex::Symbols;
using Table = std::vector<std::array<int32_t, StringDfa::kSymbols>>;

constexpr size_t kMaxNfaStates = 200000;

// A nondeterministic automaton under construction: edges on symbol sets
// and empty (epsilon) moves.
struct Nfa {
  struct State {
    std::vector<std::pair<Symbols, int>> edges;
    std::vector<int> eps;
  };
  struct Frag {
    int in, out;
  };
  std::vector<State> st;
  bool too_large = false;
  // Build character sets from their upper bounds (regex::Node::upper): for
  // the body of a negative lookahead, whose complement is taken.
  bool upper = false;

  int add() {
    if (st.size() >= kMaxNfaStates) too_large = true;
    st.emplace_back();
    return int(st.size()) - 1;
  }
  Frag chain(Frag a, Frag b) {
    st[a.out].eps.push_back(b.in);
    return {a.in, b.out};
  }
  Frag any_string() {  // every string over the alphabet
    const int s = add();
    st[s].edges.push_back({Symbols().set(), s});
    return {s, s};
  }

  Frag build(const regex::Tree& t, int node) {
    const regex::Node& n = t.nodes[node];
    if (too_large) return {add(), add()};
    switch (n.kind) {
      case regex::Node::kSet: {
        const int a = add(), b = add();
        st[a].edges.push_back({upper ? n.upper : n.set, b});
        return {a, b};
      }
      case regex::Node::kSeq: {
        const int a = add();
        Frag f{a, a};
        for (int k : n.kids) f = chain(f, build(t, k));
        return f;
      }
      case regex::Node::kAlt: {
        const int a = add(), b = add();
        for (int k : n.kids) {
          const Frag f = build(t, k);
          st[a].eps.push_back(f.in);
          st[f.out].eps.push_back(b);
        }
        return {a, b};
      }
      case regex::Node::kRepeat: {
        const int a = add();
        Frag f{a, a};
        for (int i = 0; i < n.min && !too_large; ++i) f = chain(f, build(t, n.kids[0]));
        if (n.max < 0) {
          const int s = add();
          const Frag body = build(t, n.kids[0]);
          st[s].eps.push_back(body.in);
          st[body.out].eps.push_back(s);
          return chain(f, {s, s});
        }
        // X{0,k} as (X (X ...)?)?: every optional copy may stop at one
        // common end, so a subset holds O(1) states of the chain, not O(k)
        // (a chain of k optionals each skipping to the next does).
        const int end = add();
        int at = f.out;
        for (int i = n.min; i < n.max && !too_large; ++i) {
          const Frag body = build(t, n.kids[0]);
          st[at].eps.push_back(end);
          st[at].eps.push_back(body.in);
          at = body.out;
        }
        st[at].eps.push_back(end);
        return {f.in, end};
      }
      case regex::Node::kLook:
        break;  // regex_syntax keeps lookaheads at the top level, handled by compile_sequence
    }
    return {add(), add()};
  }

  // A finished automaton as a fragment (its accepting states lead to out).
  Frag embed(const StringDfa& d) {
    if (d.empty()) return {add(), add()};  // no string: nothing leads to out
    const Table& next = d.transitions();
    const std::vector<bool>& accept = d.accepting();
    const int base = int(st.size());
    for (size_t i = 0; i < next.size(); ++i) add();
    const int out = add();
    for (size_t s = 0; s < next.size(); ++s) {
      std::map<int32_t, Symbols> by_target;
      for (int c = 0; c < StringDfa::kSymbols; ++c) {
        if (next[s][c] >= 0) by_target[next[s][c]].set(c);
      }
      for (const auto& [t, set] : by_target) st[base + s].edges.push_back({set, base + t});
      if (accept[s]) st[base + s].eps.push_back(out);
    }
    return {base, out};
  }
};

// Charges `units` to the budget; false when it is spent.
bool charge(DfaBudget* budget, size_t units) {
  if (budget->left < units) {
    budget->left = 0;
    return false;
  }
  budget->left -= units;
  return true;
}

// The symbols split into classes that no edge tells apart (a pattern of
// [a-z] and . has three: a-z, the other printable ones, kOther): the
// subset construction runs once per class, not once per symbol.
struct SymbolClasses {
  std::array<int, StringDfa::kSymbols> of{};  // symbol -> class
  std::vector<int> rep;                       // class -> one of its symbols
};
SymbolClasses symbol_classes(const Nfa& nfa) {
  SymbolClasses out;
  std::unordered_map<Symbols, bool> seen;
  int n = 1;
  for (const Nfa::State& s : nfa.st) {
    for (const auto& [set, target] : s.edges) {
      if (!seen.emplace(set, true).second) continue;
      std::map<std::pair<int, bool>, int> split;
      for (int c = 0; c < StringDfa::kSymbols; ++c) {
        out.of[c] = split.emplace(std::make_pair(out.of[c], bool(set.test(c))), int(split.size())).first->second;
      }
      n = int(split.size());
    }
  }
  out.rep.assign(size_t(n), -1);
  for (int c = 0; c < StringDfa::kSymbols; ++c) {
    if (out.rep[out.of[c]] < 0) out.rep[out.of[c]] = c;
  }
  return out;
}

// The subset construction: the DFA of `nfa` from `start` accepting at `final`.
Result<StringDfa> determinize(const Nfa& nfa, int start, int final, DfaBudget* budget) {
  const SymbolClasses classes = symbol_classes(nfa);
  const size_t n_classes = classes.rep.size();
  // Every step is charged: the edge scan (states x edges x classes), the
  // closure (states and empty moves visited), the hashing and comparing of
  // subsets, and the subsets kept (their memory).
  size_t work = 0;
  std::vector<uint32_t> seen(nfa.st.size(), 0);
  uint32_t stamp = 0;
  auto closure = [&](std::vector<int>& set) {
    ++stamp;
    std::vector<int> todo;
    for (int s : set) {
      if (seen[s] != stamp) {
        seen[s] = stamp;
        todo.push_back(s);
      }
    }
    set.clear();
    while (!todo.empty()) {
      const int s = todo.back();
      todo.pop_back();
      set.push_back(s);
      work += 1 + nfa.st[s].eps.size();
      for (int e : nfa.st[s].eps) {
        if (seen[e] != stamp) {
          seen[e] = stamp;
          todo.push_back(e);
        }
      }
    }
    std::sort(set.begin(), set.end());
  };
  auto hash_of = [](const std::vector<int>& set) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the ids
    for (int x : set) h = (h ^ uint64_t(uint32_t(x))) * 1099511628211ull;
    return h;
  };
  std::unordered_multimap<uint64_t, int32_t> ids;  // subset hash -> state
  std::vector<std::vector<int>> sets;
  Table next;
  std::vector<bool> accept;
  std::vector<int> first = {start};
  closure(first);
  ids.emplace(hash_of(first), 0);
  sets.push_back(first);
  std::vector<std::vector<int>> moves(n_classes);
  const Status too_complex = Status::invalid_argument("pattern: too complex to turn into an automaton in the time allowed");
  for (size_t i = 0; i < sets.size(); ++i) {
    for (auto& m : moves) m.clear();
    for (int s : sets[i]) {
      work += 1 + nfa.st[s].edges.size() * n_classes;
      for (const auto& [set, target] : nfa.st[s].edges) {
        for (size_t k = 0; k < n_classes; ++k) {
          if (set.test(size_t(classes.rep[k]))) moves[k].push_back(target);
        }
      }
    }
    std::vector<int32_t> class_row(n_classes, -1);
    for (size_t k = 0; k < n_classes; ++k) {
      if (moves[k].empty()) continue;
      closure(moves[k]);
      const uint64_t h = hash_of(moves[k]);
      work += 16 + moves[k].size();
      int32_t id = -1;
      for (auto [it, end] = ids.equal_range(h); it != end && id < 0; ++it) {
        work += moves[k].size();
        if (sets[size_t(it->second)] == moves[k]) id = it->second;
      }
      if (id < 0) {
        if (sets.size() >= StringDfa::kMaxDfaStates) {
          return Status::invalid_argument("pattern: its automaton has over " +
                                          std::to_string(StringDfa::kMaxDfaStates) + " states (too complex)");
        }
        work += 4 * moves[k].size();  // kept: memory
        id = int32_t(sets.size());
        ids.emplace(h, id);
        sets.push_back(moves[k]);
      }
      class_row[k] = id;
    }
    if (!charge(budget, work)) return too_complex;
    work = 0;
    std::array<int32_t, StringDfa::kSymbols> row;
    for (int c = 0; c < StringDfa::kSymbols; ++c) row[c] = class_row[classes.of[c]];
    next.push_back(row);
    accept.push_back(std::binary_search(sets[i].begin(), sets[i].end(), final));
  }
  if (!charge(budget, work)) return too_complex;
  sets.clear();
  return StringDfa(std::move(next), std::move(accept), budget);
}

// The language of the items [k, end) of a top-level alternative followed
// by `tail` (any string, when the alternative has no $), with each
// lookahead (?=X) / (?!X) among them intersecting what follows it with (or
// with the complement of) X followed by anything.
Result<StringDfa> compile_sequence(const regex::Tree& t, const regex::TopAlternative& alt, size_t k,
                                   DfaBudget* budget) {
  size_t j = k;
  while (j < alt.items.size() && t.nodes[alt.items[j]].kind != regex::Node::kLook) ++j;
  Nfa nfa;
  const int start = nfa.add();
  Nfa::Frag f{start, start};
  for (size_t i = k; i < j; ++i) f = nfa.chain(f, nfa.build(t, alt.items[i]));
  if (j == alt.items.size()) {
    if (!alt.anchored_end) f = nfa.chain(f, nfa.any_string());
  } else {
    StringDfa rest;
    LARDER_ASSIGN_OR_RETURN(rest, compile_sequence(t, alt, j + 1, budget));
    const regex::Node& look = t.nodes[alt.items[j]];
    Nfa la;
    la.upper = look.negative;
    Nfa::Frag lf = la.build(t, look.kids[0]);
    if (!look.anchored) lf = la.chain(lf, la.any_string());
    if (la.too_large) return Status::invalid_argument("pattern: too large once its counts are expanded");
    StringDfa ahead;
    LARDER_ASSIGN_OR_RETURN(ahead, determinize(la, lf.in, lf.out, budget));
    StringDfa both;
    LARDER_ASSIGN_OR_RETURN(both, rest.intersect(ahead, look.negative, budget));
    f = nfa.chain(f, nfa.embed(both));
  }
  if (nfa.too_large) return Status::invalid_argument("pattern: too large once its counts are expanded");
  return determinize(nfa, f.in, f.out, budget);
}

// Printable ASCII symbol of a byte, or -1.
int ascii_symbol(uint32_t cp) { return cp >= 0x20 && cp <= 0x7E ? int(cp - 0x20) : -1; }

}  // namespace

StringDfa::StringDfa(Table next, std::vector<bool> accept, DfaBudget* budget) {
  DfaBudget own;
  if (budget == nullptr) budget = &own;
  const size_t n = next.size();
  // Live states: reachable from 0 (all are, by construction) and able to
  // reach an accepting state.
  std::vector<std::vector<int32_t>> back(n);
  for (size_t s = 0; s < n; ++s) {
    for (int32_t t : next[s]) {
      if (t >= 0) back[t].push_back(int32_t(s));
    }
  }
  std::vector<bool> live(n, false);
  std::vector<int32_t> todo;
  for (size_t s = 0; s < n; ++s) {
    if (accept[s]) {
      live[s] = true;
      todo.push_back(int32_t(s));
    }
  }
  while (!todo.empty()) {
    const int32_t s = todo.back();
    todo.pop_back();
    for (int32_t p : back[s]) {
      if (!live[p]) {
        live[p] = true;
        todo.push_back(p);
      }
    }
  }
  if (n == 0 || !live[0]) return;
  // Moore: split classes by (class, successors' classes) until stable.
  std::vector<int32_t> cls(n, -1);
  for (size_t s = 0; s < n; ++s) {
    if (live[s]) cls[s] = accept[s] ? 1 : 0;
  }
  size_t n_classes = 0;
  size_t n_live = 0;
  for (size_t s = 0; s < n; ++s) n_live += live[s] ? 1 : 0;
  // Moore's rounds cost n states each and a chain of n states takes n
  // rounds: it may spend a quarter of what is left (at most 8M units), so
  // that giving up leaves the rest of the budget to the next steps.
  size_t rounds_left = std::min<size_t>(budget->left / 4, size_t(8) << 20) / (n_live * (kSymbols + 1));
  while (true) {
    if (rounds_left-- == 0) {
      // Past the budget (a long chain splits one class per round): each
      // live state is its own class; the automaton stays correct, unminimized.
      int32_t k = 0;
      for (size_t s = 0; s < n; ++s) cls[s] = live[s] ? k++ : -1;
      n_classes = size_t(k);
      break;
    }
    std::map<std::vector<int32_t>, int32_t> sig_ids;
    std::vector<int32_t> fresh(n, -1);
    for (size_t s = 0; s < n; ++s) {
      if (!live[s]) continue;
      std::vector<int32_t> sig(kSymbols + 1);
      sig[0] = cls[s];
      for (int c = 0; c < kSymbols; ++c) sig[c + 1] = next[s][c] >= 0 ? cls[next[s][c]] : -1;
      fresh[s] = sig_ids.emplace(std::move(sig), int32_t(sig_ids.size())).first->second;
    }
    cls.swap(fresh);
    charge(budget, n_live * (kSymbols + 1));
    if (sig_ids.size() == n_classes) break;
    n_classes = sig_ids.size();
  }
  // Number the classes breadth-first from the start's.
  std::vector<int32_t> order(n_classes, -1), rep(n_classes, -1);
  for (size_t s = 0; s < n; ++s) {
    if (live[s] && rep[cls[s]] < 0) rep[cls[s]] = int32_t(s);
  }
  std::vector<int32_t> queue = {cls[0]};
  order[cls[0]] = 0;
  for (size_t i = 0; i < queue.size(); ++i) {
    const auto& row = next[rep[queue[i]]];
    for (int c = 0; c < kSymbols; ++c) {
      if (row[c] < 0 || !live[row[c]]) continue;
      const int32_t k = cls[row[c]];
      if (order[k] < 0) {
        order[k] = int32_t(queue.size());
        queue.push_back(k);
      }
    }
  }
  next_.resize(queue.size());
  accept_.resize(queue.size());
  for (size_t i = 0; i < queue.size(); ++i) {
    const int32_t s = rep[queue[i]];
    accept_[i] = accept[s];
    for (int c = 0; c < kSymbols; ++c) {
      const int32_t t = next[s][c];
      next_[i][c] = t >= 0 && live[t] ? order[cls[t]] : -1;
    }
  }
}

Result<StringDfa> StringDfa::from_pattern(std::string_view pattern, DfaBudget* budget) {
  DfaBudget own;
  if (budget == nullptr) budget = &own;
  regex::Tree tree;
  LARDER_ASSIGN_OR_RETURN(tree, regex::parse(pattern));
  Nfa nfa;
  const int in = nfa.add(), out = nfa.add();
  for (const regex::TopAlternative& alt : tree.top) {
    StringDfa d;
    LARDER_ASSIGN_OR_RETURN(d, compile_sequence(tree, alt, 0, budget));
    if (d.empty()) continue;
    Nfa::Frag f = nfa.embed(d);
    if (!alt.anchored_start) f = nfa.chain(nfa.any_string(), f);
    nfa.st[in].eps.push_back(f.in);
    nfa.st[f.out].eps.push_back(out);
  }
  if (nfa.too_large) return Status::invalid_argument("pattern: too large once its counts are expanded");
  return determinize(nfa, in, out, budget);
}

StringDfa StringDfa::length_range(int64_t min, int64_t max) {
  // Already trimmed, minimal and numbered breadth-first: state i has read i
  // characters (the last loops when there is no upper bound).
  const int64_t last = max < 0 ? min : max;
  StringDfa out;
  out.next_.resize(size_t(last) + 1);
  out.accept_.resize(size_t(last) + 1);
  for (int64_t i = 0; i <= last; ++i) {
    const int32_t to = i < last ? int32_t(i + 1) : max < 0 ? int32_t(i) : -1;
    out.next_[size_t(i)].fill(to);
    out.accept_[size_t(i)] = i >= min;
  }
  return out;
}

Result<StringDfa> StringDfa::intersect(const StringDfa& other, bool complement_other, DfaBudget* budget) const {
  DfaBudget own;
  if (budget == nullptr) budget = &own;
  if (empty()) return StringDfa();
  // States are pairs (a, b); b = -1 is other's dead state (no string of it
  // continues), which with complement_other accepts everything after it.
  std::unordered_map<int64_t, int32_t> ids;
  std::vector<std::pair<int32_t, int32_t>> pairs;
  auto id_of = [&](int32_t a, int32_t b) -> int32_t {
    const int64_t key = (int64_t(a) << 32) | uint32_t(b);
    auto [it, fresh] = ids.emplace(key, int32_t(pairs.size()));
    if (fresh) pairs.push_back({a, b});
    return it->second;
  };
  const int32_t b0 = other.empty() ? -1 : 0;
  if (b0 < 0 && !complement_other) return StringDfa();
  id_of(0, b0);
  Table next;
  std::vector<bool> accept;
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (pairs.size() > kMaxDfaStates) {
      return Status::invalid_argument("pattern: the automaton of the string's constraints has over " +
                                      std::to_string(kMaxDfaStates) + " states (too complex)");
    }
    if (!charge(budget, kSymbols)) {
      return Status::invalid_argument("pattern: the string's constraints are too complex to meet in the time allowed");
    }
    const auto [a, b] = pairs[i];
    std::array<int32_t, kSymbols> row;
    for (int c = 0; c < kSymbols; ++c) {
      const int32_t na = next_[a][c];
      const int32_t nb = b < 0 ? -1 : other.next_[b][c];
      row[c] = na < 0 || (nb < 0 && !complement_other) ? -1 : id_of(na, nb);
    }
    next.push_back(row);
    const bool in_other = b >= 0 && other.accept_[b];
    accept.push_back(accept_[a] && (complement_other ? !in_other : in_other));
  }
  return StringDfa(std::move(next), std::move(accept), budget);
}

bool StringDfa::accepts(std::string_view text) const {
  if (empty()) return false;
  int32_t s = 0;
  std::vector<unicode::Char> chars;
  unicode::decode_utf8(text, chars);  // an ill-formed byte is kInvalidBase + byte: in no symbol
  for (const unicode::Char& c : chars) {
    const uint32_t cp = c.cpt;
    const int sym = cp < 0x80 ? ascii_symbol(cp) : regex::in_other(cp) ? kOther : -1;
    if (sym < 0) return false;
    s = next_[s][sym];
    if (s < 0) return false;
  }
  return accept_[s];
}

std::string StringDfa::to_gbnf(const std::string& prefix, std::vector<std::pair<std::string, std::string>>* rules) const {
  auto final_only = [&](int32_t s) {
    return accept_[s] && std::all_of(next_[s].begin(), next_[s].end(), [](int32_t t) { return t < 0; });
  };
  auto name = [&](int32_t s) { return prefix + "-" + std::to_string(s); };
  static const char* hex = "0123456789ABCDEF";
  auto byte = [&](int c) {
    std::string out = "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
    return out;
  };
  constexpr int kQuote = '"' - 0x20, kBackslash = '\\' - 0x20;
  for (size_t s = 0; s < next_.size(); ++s) {
    if (final_only(int32_t(s)) && s != 0) continue;
    std::map<int32_t, Symbols> by_target;
    for (int c = 0; c < kSymbols; ++c) {
      if (next_[s][c] >= 0) by_target[next_[s][c]].set(c);
    }
    std::string body;
    auto alt = [&](const std::string& text) { body += (body.empty() ? "" : " | ") + text; };
    for (const auto& [t, set] : by_target) {
      std::string ref;
      if (!final_only(t)) ref.append(" ").append(name(t));
      std::string cls;
      for (int c = 0; c < kOther; ++c) {
        if (!set.test(c) || c == kQuote || c == kBackslash) continue;
        int e = c;
        while (e + 1 < kOther && set.test(e + 1) && e + 1 != kQuote && e + 1 != kBackslash) ++e;
        cls += byte(c + 0x20);
        if (e > c) cls.append("-").append(byte(e + 0x20));
        c = e;
      }
      if (!cls.empty()) alt("[" + cls + "]" + ref);
      if (set.test(kQuote)) alt("\"\\\\\\\"\"" + ref);      // the JSON text \"
      if (set.test(kBackslash)) alt("\"\\\\\\\\\"" + ref);  // the JSON text \\ (a GBNF literal of two backslashes)
      if (set.test(kOther)) alt(std::string(regex::kOtherGbnf) + ref);
    }
    if (accept_[s]) alt("\"\"");
    rules->emplace_back(name(int32_t(s)), body);
  }
  return final_only(0) ? "\"\\\"\" \"\\\"\"" : "\"\\\"\" " + name(0) + " \"\\\"\"";
}

}  // namespace larder
