#include "engine/grammar/token_mask.h"

#include <algorithm>
#include <list>
#include <mutex>
#include <unordered_map>

#include "engine/grammar/mask_tables.h"

namespace larder {

namespace mask_internal {

bool utf8_lead(uint8_t b, uint8_t& pending, uint8_t& lo, uint8_t& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    pending = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    pending = 2;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    pending = 3;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return false;
  }
  return true;
}

NonAscii range_class(const GrammarElement& e, uint32_t lo, uint32_t hi) {
  std::vector<CharRange> r = e.ranges;
  std::sort(r.begin(), r.end(), [](const CharRange& a, const CharRange& b) { return a.lo < b.lo; });
  // A gap [lo, hi] in the ranges matters unless it lies among the surrogates.
  auto real_gap = [](uint32_t lo, uint32_t hi) { return lo <= hi && !(lo >= 0xD800 && hi <= 0xDFFF); };
  bool covered = true, touched = false;
  uint32_t at = lo;  // the first code point not yet covered
  for (const CharRange& x : r) {
    if (x.hi < at) continue;
    if (x.lo > hi) break;
    if (x.lo > at && real_gap(at, x.lo - 1)) covered = false;
    if (real_gap(std::max(x.lo, lo), std::min(x.hi, hi))) touched = true;
    at = std::max(at, x.hi + 1);
  }
  if (at <= hi && real_gap(at, hi)) covered = false;
  const NonAscii in = covered ? NonAscii::kAll : touched ? NonAscii::kSome : NonAscii::kNone;
  if (!e.negated || in == NonAscii::kSome) return in;
  return in == NonAscii::kAll ? NonAscii::kNone : NonAscii::kAll;
}

}  // namespace mask_internal

using mask_internal::NonAscii;
using mask_internal::range_class;
using mask_internal::utf8_lead;

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes) : n_vocab_(int(token_bytes.size())) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < int32_t(token_bytes.size()); ++id) {
    if (!token_bytes[size_t(id)].empty()) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return token_bytes[size_t(a)] < token_bytes[size_t(b)] || (token_bytes[size_t(a)] == token_bytes[size_t(b)] && a < b);
  });
  // Builds the node for sorted ids [lo, hi), all sharing their first
  // `depth` bytes; returns its index. A prefix sorts before its
  // extensions, so the tokens ending here come first.
  struct Frame {
    size_t lo, hi, depth;
    uint32_t node;
  };
  nodes_.push_back(Node{});
  std::vector<Frame> work{{0, ids.size(), 0, 0}};
  while (!work.empty()) {
    const Frame f = work.back();
    work.pop_back();
    size_t i = f.lo;
    const uint32_t first_token = uint32_t(tokens_.size());
    while (i < f.hi && token_bytes[size_t(ids[i])].size() == f.depth) tokens_.push_back(ids[i++]);
    // Children: runs of the same byte at `depth`, edges contiguous.
    std::vector<std::pair<size_t, size_t>> runs;
    while (i < f.hi) {
      const uint8_t b = uint8_t(token_bytes[size_t(ids[i])][f.depth]);
      size_t j = i;
      while (j < f.hi && uint8_t(token_bytes[size_t(ids[j])][f.depth]) == b) ++j;
      runs.push_back({i, j});
      i = j;
    }
    const uint32_t first_child = uint32_t(edges_.size());
    for (const auto& [a, b] : runs) {
      const uint32_t child = uint32_t(nodes_.size());
      nodes_.push_back(Node{});
      edges_.push_back(Edge{uint8_t(token_bytes[size_t(ids[a])][f.depth]), child});
      work.push_back({a, b, f.depth + 1, child});
    }
    Node& n = nodes_[f.node];
    n.first_child = first_child;
    n.n_children = uint32_t(runs.size());
    n.first_token = first_token;
    n.n_tokens = uint32_t(tokens_.size()) - first_token;
  }
  // Subtree summaries, bottom-up: a child's index is above its parent's.
  std::vector<uint32_t> n_below(nodes_.size(), 0);
  std::vector<ByteSet> bytes(nodes_.size(), ByteSet{});
  for (size_t i = nodes_.size(); i-- > 0;) {
    const Node& n = nodes_[i];
    n_below[i] += n.n_tokens;
    for (uint32_t c = 0; c < n.n_children; ++c) {
      const Edge& e = edges_[n.first_child + c];
      n_below[i] += n_below[e.child];
      for (int w = 0; w < 4; ++w) bytes[i][size_t(w)] |= bytes[e.child][size_t(w)];
      bytes[i][e.byte >> 6] |= uint64_t(1) << (e.byte & 63);
    }
  }
  subtree_end_.resize(nodes_.size());
  summary_.assign(nodes_.size(), kNoSummary);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    subtree_end_[i] = nodes_[i].first_token + n_below[i];
    if (n_below[i] >= kSummaryTokens) {
      summary_[i] = uint32_t(byte_sets_.size());
      byte_sets_.push_back(bytes[i]);
    }
  }
}


std::shared_ptr<const TokenTrie::Closure> TokenTrie::closure(const ByteSet& cls) const {
  const ByteSet& key = cls;
  {
    std::lock_guard<std::mutex> lk(closures_mu_);
    for (auto it = closures_.begin(); it != closures_.end(); ++it) {
      if (it->first == key) {
        auto found = it->second;
        closures_.erase(it);
        closures_.emplace_back(key, found);
        return found;
      }
    }
  }
  auto c = std::make_shared<Closure>();
  c->closed.assign(size_t(n_vocab_ + 63) / 64, 0);
  struct Frame {
    uint32_t node;
    uint8_t pending, lo, hi;  // UTF-8 continuation bytes still due, the next one's range
  };
  std::vector<Frame> work{{0, 0, 0, 0}};
  while (!work.empty()) {
    const Frame f = work.back();
    work.pop_back();
    const Node& n = nodes_[f.node];
    for (uint32_t t = 0; t < n.n_tokens; ++t) {
      const int32_t id = tokens_[n.first_token + t];
      c->closed[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
    }
    for (uint32_t k = 0; k < n.n_children; ++k) {
      const Edge& e = edges_[n.first_child + k];
      if (f.pending > 0) {
        if (e.byte >= f.lo && e.byte <= f.hi) work.push_back({e.child, uint8_t(f.pending - 1), 0x80, 0xBF});
        continue;
      }
      uint8_t pending = 0, lo = 0, hi = 0;
      if (((key[e.byte >> 6] >> (e.byte & 63)) & 1) != 0 && (e.byte < 0x80 || utf8_lead(e.byte, pending, lo, hi))) {
        work.push_back({e.child, pending, lo, hi});
      } else {
        c->frontier.push_back({e.child, e.byte});
      }
    }
    if (f.node == 0) c->n_root_frontier = c->frontier.size();
  }
  std::lock_guard<std::mutex> lk(closures_mu_);
  closures_.emplace_back(key, c);
  if (closures_.size() > kClosures) closures_.erase(closures_.begin());
  return c;
}

namespace {

// Sets the mask bits of the tokens that end at trie node n.
void allow_tokens_of(const TokenTrie& trie, const TokenTrie::Node& n, TokenMask& mask) {
  for (uint32_t t = 0; t < n.n_tokens; ++t) {
    const int32_t id = trie.token(n.first_token + t);
    mask[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
  }
}

}  // namespace

TokenMask compute_token_mask(const CompiledGrammar& g, const TokenTrie& trie, const GrammarState& state) {
  TokenMask mask(size_t(trie.n_vocab() + 63) / 64, 0);
  if (state.empty()) return mask;
  struct Frame {
    uint32_t node;
    GrammarState state;
  };
  std::vector<Frame> work;
  // The root's children: every token's first byte.
  work.push_back({0, state});
  while (!work.empty()) {
    Frame f = std::move(work.back());
    work.pop_back();
    const TokenTrie::Node& n = trie.node(f.node);
    if (f.node != 0) allow_tokens_of(trie, n, mask);
    for (uint32_t c = 0; c < n.n_children; ++c) {
      const TokenTrie::Edge& e = trie.edge(n.first_child + c);
      GrammarState next = grammar_advance(g, f.state, e.byte);
      if (!next.empty()) work.push_back({e.child, std::move(next)});
    }
  }
  return mask;
}


int32_t GrammarMasker::Tables::intern(GrammarState state) {
  std::string key = grammar_state_key(state);
  auto it = state_ids.find(key);
  if (it != state_ids.end()) return it->second;
  const int32_t id = int32_t(states.size());
  states.push_back(std::move(state));
  next_ids.emplace_back();
  next_ids.back().fill(kUnknown);
  known.emplace_back();
  loops.emplace_back();
  closure_known.push_back(0);
  closures.emplace_back();
  chain_known.push_back(0);
  chains.emplace_back();
  state_ids.emplace(std::move(key), id);
  return id;
}

int32_t GrammarMasker::Tables::next(const CompiledGrammar& g, int32_t id, uint8_t byte) {
  const int32_t slot = next_ids[size_t(id)][byte];
  if (slot != kUnknown) return slot;
  GrammarState after = grammar_advance(g, states[size_t(id)], byte);
  // intern() may grow the tables: no reference into them is held across it.
  const int32_t to = after.empty() ? kDead : intern(std::move(after));
  next_ids[size_t(id)][byte] = to;
  known[size_t(id)][byte >> 6] |= uint64_t(1) << (byte & 63);
  if (to == id) loops[size_t(id)][byte >> 6] |= uint64_t(1) << (byte & 63);
  return to;
}

bool GrammarMasker::Tables::loops_on(const CompiledGrammar& g, int32_t id, const TokenTrie::ByteSet& set) {
  for (size_t w = 0; w < 4; ++w) {
    if ((set[w] & known[size_t(id)][w] & ~loops[size_t(id)][w]) != 0) return false;  // a known non-loop
  }
  for (size_t w = 0; w < 4; ++w) {
    for (uint64_t todo = set[w] & ~known[size_t(id)][w]; todo != 0; todo &= todo - 1) {
      if (next(g, id, uint8_t(w * 64 + size_t(__builtin_ctzll(todo)))) != id) return false;
    }
  }
  return true;
}

NonAscii GrammarMasker::Tables::set_class(const CompiledGrammar& g, uint32_t set, uint8_t lead) {
  if (set >= set_classes.size()) set_classes.resize(set + 1, std::array<int8_t, 64>{});
  int8_t& c = set_classes[set][lead - 0xC0];
  if (c == 0) {
    // Table 3-7: the code points a sequence with this lead byte can be.
    uint32_t lo = 0, hi = 0;
    if (lead < 0xE0) {
      lo = uint32_t(lead & 0x1F) << 6;
      hi = lo | 0x3F;
    } else if (lead < 0xF0) {
      lo = uint32_t(lead & 0x0F) << 12;
      hi = lo | 0xFFF;
    } else {
      lo = uint32_t(lead & 0x07) << 18;
      hi = std::min<uint32_t>(lo | 0x3FFFF, 0x10FFFF);
    }
    c = int8_t(int(range_class(g.set(set).element, std::max<uint32_t>(lo, 0x80), hi)) + 1);
  }
  return NonAscii(c - 1);
}

// The class of characters that lead state `from` to `to` (the same state or
// another one) when `to` loops on them: ASCII bytes by the tables, and the
// lead bytes of code points that move the same stacks of both states as
// the first such ASCII byte (then they lead where it leads). Empty when no
// ASCII byte qualifies.
TokenTrie::ByteSet GrammarMasker::Tables::class_into(const CompiledGrammar& g, int32_t from, int32_t to) {
  TokenTrie::ByteSet cls{};
  int byte = -1;
  for (int b = 0; b < 128; ++b) {
    if (next(g, from, uint8_t(b)) == to && next(g, to, uint8_t(b)) == to) {
      cls[size_t(b) >> 6] |= uint64_t(1) << (b & 63);
      if (byte < 0) byte = b;
    }
  }
  if (byte < 0) return cls;
  auto boundary = [](const GrammarState& st) {
    for (const GrammarStack& s : st) {
      if (s.pos.empty() || s.pending != 0) return false;
    }
    return true;
  };
  if (!boundary(states[size_t(from)]) || !boundary(states[size_t(to)])) return cls;
  for (int lead = 0xC2; lead <= 0xF4; ++lead) {
    bool same = true;
    for (const int32_t id : {from, to}) {
      for (const GrammarStack& s : states[size_t(id)]) {
        if (!same) break;
        const uint32_t set = g.elem(s.pos.back()).arg;
        const bool moves = g.set(set).matches(uint32_t(byte));
        same = set_class(g, set, uint8_t(lead)) == (moves ? NonAscii::kAll : NonAscii::kNone);
      }
    }
    if (same) cls[size_t(lead) >> 6] |= uint64_t(1) << (lead & 63);
  }
  return cls;
}

GrammarMasker::Tables::ClosureUse GrammarMasker::Tables::closure_of(const CompiledGrammar& g, const TokenTrie& trie,
                                                                    int32_t id) {
  if (closure_known[size_t(id)] != 0) return closures[size_t(id)];
  closure_known[size_t(id)] = 1;
  // The state itself when it loops on some byte (inside a string); other
  // patterns are chains (chain_of).
  const TokenTrie::ByteSet cls = class_into(g, id, id);
  if ((cls[0] | cls[1] | cls[2] | cls[3]) != 0) closures[size_t(id)] = ClosureUse{trie.closure(cls), id};
  return closures[size_t(id)];
}

TokenMask GrammarMasker::Tables::walk(const CompiledGrammar& g, const std::shared_ptr<const TokenTrie>& trie_ptr,
                                      int32_t start, bool fast, size_t* skipped, size_t* closure_walks) {
  const TokenTrie& trie = *trie_ptr;
  TokenMask mask;
  std::vector<std::pair<uint32_t, int32_t>> work;  // (trie node, state id)
  const ClosureUse use = fast ? closure_of(g, trie, start) : ClosureUse{};
  if (use.closure) {
    const TokenTrie::Closure& closure = *use.closure;
    // The tokens that keep `start` as it is, then the walk from where the
    // class is left.
    mask = closure.closed;
    for (size_t i = 0; i < closure.frontier.size(); ++i) {
      const auto [child, byte] = closure.frontier[i];
      const int32_t to = next(g, i < closure.n_root_frontier ? start : use.to, byte);
      if (to != kDead) work.push_back({child, to});
    }
    ++*closure_walks;
  } else if (const Chain chain = fast ? chain_of(g, trie_ptr, start) : Chain{}; chain.closure) {
    // The tokens the chain covers (those not too long for it when it ends),
    // then the walk from where its pattern is left.
    const ChainClosure& cc = *chain.closure;
    const size_t last = chain.states.size() - 1;
    if (chain.loops || cc.max_length <= last) {
      mask = cc.closed;
    } else {
      mask.assign(size_t(trie.n_vocab() + 63) / 64, 0);
      for (size_t i = 0; i < cc.tokens.size(); ++i) {
        if (cc.lengths[i] <= last) mask[size_t(cc.tokens[i]) >> 6] |= uint64_t(1) << (cc.tokens[i] & 63);
      }
    }
    for (const ChainClosure::Exit& x : cc.frontier) {
      if (!chain.loops && x.depth > last) continue;  // past the end: dead
      const int32_t to = next(g, chain.states[std::min<size_t>(x.depth, last)], x.byte);
      if (to != kDead) work.push_back({x.child, to});
    }
    ++*closure_walks;
  } else {
    mask.assign(size_t(trie.n_vocab() + 63) / 64, 0);
    work.push_back({0, start});
  }
  while (!work.empty()) {
    const auto [node, state] = work.back();
    work.pop_back();
    const TokenTrie::Node& n = trie.node(node);
    if (node != 0 && fast) {
      const TokenTrie::ByteSet* below = trie.subtree_bytes(node);
      if (below != nullptr && loops_on(g, state, *below)) {
        // Every path below stays in `state`, which is alive: all allowed.
        for (uint32_t t = n.first_token; t < trie.subtree_end(node); ++t) {
          const int32_t id = trie.token(t);
          mask[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
        }
        ++*skipped;
        continue;
      }
    }
    if (node != 0) allow_tokens_of(trie, n, mask);
    for (uint32_t c = 0; c < n.n_children; ++c) {
      const TokenTrie::Edge& e = trie.edge(n.first_child + c);
      const int32_t to = next(g, state, e.byte);
      if (to != kDead) work.push_back({e.child, to});
    }
  }
  return mask;
}

namespace {

// The registry of shared tables: the last kSharedTables (grammar, trie)
// pairs used, most recent first. An entry whose trie is gone is dropped.
struct SharedEntry {
  std::shared_ptr<const CompiledGrammar> grammar;
  std::weak_ptr<const TokenTrie> trie;
  std::shared_ptr<GrammarMasker::Tables> tables;
};
std::mutex g_registry_mu;
std::list<SharedEntry>& registry() {
  static std::list<SharedEntry> r;
  return r;
}

std::shared_ptr<GrammarMasker::Tables> shared_tables(const std::shared_ptr<const CompiledGrammar>& g,
                                                     const std::shared_ptr<const TokenTrie>& trie,
                                                     const GrammarMasker::Options& o) {
  std::lock_guard<std::mutex> lk(g_registry_mu);
  std::list<SharedEntry>& r = registry();
  std::shared_ptr<GrammarMasker::Tables> found;
  for (auto it = r.begin(); it != r.end();) {
    std::shared_ptr<const TokenTrie> t = it->trie.lock();
    if (!t) {
      it = r.erase(it);
      continue;
    }
    if (!found && t == trie && (it->grammar == g || it->grammar->same_as(*g))) {
      found = it->tables;
      r.splice(r.begin(), r, it++);
      continue;
    }
    ++it;
  }
  if (found) return found;
  r.push_front(SharedEntry{g, trie, std::make_shared<GrammarMasker::Tables>(o)});
  while (r.size() > GrammarMasker::kSharedTables) r.pop_back();
  return r.front().tables;
}

}  // namespace

GrammarMasker::GrammarMasker(std::shared_ptr<const CompiledGrammar> g, std::shared_ptr<const TokenTrie> trie)
    : GrammarMasker(std::move(g), std::move(trie), Options{}) {}

GrammarMasker::GrammarMasker(std::shared_ptr<const CompiledGrammar> g, std::shared_ptr<const TokenTrie> trie,
                             const Options& options)
    : g_(std::move(g)), trie_(std::move(trie)), skip_subtrees_(options.skip_subtrees) {
  tables_ = options.share ? shared_tables(g_, trie_, options) : std::make_shared<Tables>(options);
}

GrammarMasker::GrammarMasker(std::shared_ptr<const CompiledGrammar> g, std::shared_ptr<const TokenTrie> trie,
                             size_t capacity, size_t max_states)
    : GrammarMasker(std::move(g), std::move(trie), Options{capacity, max_states, false, true}) {}

GrammarMasker::~GrammarMasker() = default;

size_t GrammarMasker::n_states() const {
  std::lock_guard<std::mutex> lk(tables_->mu);
  return tables_->states.size();
}

const TokenMask& GrammarMasker::mask(const GrammarState& state) {
  Tables& t = *tables_;
  std::string key = grammar_state_key(state);
  std::lock_guard<std::mutex> lk(t.mu);
  auto it = t.index.find(key);
  if (it != t.index.end()) {
    ++hits_;
    t.lru.splice(t.lru.begin(), t.lru, it->second);
    current_ = it->second->second;
    return *current_;
  }
  ++misses_;
  if (t.states.size() > t.max_states) {  // a grammar with very many states: start the tables again
    t.states.clear();
    t.state_ids.clear();
    t.next_ids.clear();
    t.known.clear();
    t.loops.clear();
    t.closure_known.clear();
    t.closures.clear();
    t.chain_known.clear();
    t.chains.clear();
  }
  const int32_t start = t.intern(state);
  current_ = std::make_shared<const TokenMask>(t.walk(*g_, trie_, start, skip_subtrees_, &skipped_, &closure_walks_));
  t.lru.emplace_front(key, current_);
  t.index[std::move(key)] = t.lru.begin();
  if (t.lru.size() > t.capacity) {
    t.index.erase(t.lru.back().first);
    t.lru.pop_back();
  }
  return *current_;
}

}  // namespace larder
