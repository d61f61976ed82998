// Chains of grammar states (mask_tables.h, GrammarMasker::Tables::Chain):
// finding them, and their trie closures, kept per trie and class pattern.
#include <algorithm>

#include "engine/grammar/mask_tables.h"

namespace larder {

using mask_internal::NonAscii;
using mask_internal::utf8_lead;

TokenTrie::ByteSet GrammarMasker::Tables::class_from(const CompiledGrammar& g, int32_t from, int32_t* to) {
  TokenTrie::ByteSet cls{};
  std::unordered_map<int32_t, int> count;
  int32_t best = kDead;
  for (int b = 0; b < 128; ++b) {
    const int32_t after = next(g, from, uint8_t(b));
    if (after == kDead) continue;
    if (++count[after] > (best == kDead ? 0 : count[best])) best = after;
  }
  *to = best;
  if (best == kDead) return cls;
  int byte = -1;
  for (int b = 0; b < 128; ++b) {
    if (next(g, from, uint8_t(b)) != best) continue;
    cls[size_t(b) >> 6] |= uint64_t(1) << (b & 63);
    if (byte < 0) byte = b;
  }
  for (const GrammarStack& s : states[size_t(from)]) {
    if (s.pos.empty() || s.pending != 0) return cls;
  }
  for (int lead = 0xC2; lead <= 0xF4; ++lead) {
    bool same = true;
    for (const GrammarStack& s : states[size_t(from)]) {
      const uint32_t set = g.elem(s.pos.back()).arg;
      const bool moves = g.set(set).matches(uint32_t(byte));
      same = same && set_class(g, set, uint8_t(lead)) == (moves ? NonAscii::kAll : NonAscii::kNone);
    }
    if (same) cls[size_t(lead) >> 6] |= uint64_t(1) << (lead & 63);
  }
  return cls;
}

bool GrammarMasker::Tables::accepts_none(const CompiledGrammar& g, int32_t x, const TokenTrie::ByteSet& cls) {
  for (int b = 0; b < 128; ++b) {
    if (((cls[size_t(b) >> 6] >> (b & 63)) & 1) != 0 && next(g, x, uint8_t(b)) != kDead) return false;
  }
  for (const GrammarStack& s : states[size_t(x)]) {
    if (s.pos.empty()) continue;  // complete: accepts nothing
    if (s.pending != 0) return false;
    for (int lead = 0xC2; lead <= 0xF4; ++lead) {
      if (((cls[size_t(lead) >> 6] >> (lead & 63)) & 1) != 0 &&
          set_class(g, g.elem(s.pos.back()).arg, uint8_t(lead)) != NonAscii::kNone) {
        return false;
      }
    }
  }
  return true;
}

GrammarMasker::Tables::Chain GrammarMasker::Tables::chain_of(const CompiledGrammar& g,
                                                           const std::shared_ptr<const TokenTrie>& trie, int32_t id) {
  if (chain_known[size_t(id)] != 0) return chains[size_t(id)];
  chain_known[size_t(id)] = 1;
  Chain c;
  std::vector<TokenTrie::ByteSet> cls;  // C_0..C_p, C_p repeated
  c.states.push_back(id);
  bool repeating = false;
  for (size_t j = 0; j < kMaxChain; ++j) {
    const int32_t x = c.states.back();
    int32_t y = kDead;
    const TokenTrie::ByteSet cj = class_from(g, x, &y);
    if (y != kDead && y == x) {  // loops here: C_j repeats for ever
      if (repeating && cj != cls.back()) return Chain{};
      if (!repeating) cls.push_back(cj);
      c.loops = true;
      break;
    }
    if (!cls.empty() && (y == kDead || cj != cls.back())) {
      if (accepts_none(g, x, cls.back())) break;  // the end X_n
      if (repeating) return Chain{};
    }
    if (y == kDead || cls.size() >= 4) return Chain{};  // no chain, or a prefix too long to be one
    repeating = !cls.empty() && cj == cls.back();
    if (!repeating) cls.push_back(cj);
    c.states.push_back(y);
    if (j + 1 == kMaxChain) return Chain{};
  }
  if (c.states.size() < 2 && !c.loops) return Chain{};
  c.closure = chain_closure(trie, cls);
  chains[size_t(id)] = c;
  return c;
}

namespace {

struct ChainEntry {
  std::weak_ptr<const TokenTrie> trie;
  std::string pattern;
  std::shared_ptr<const GrammarMasker::Tables::ChainClosure> closure;
};
std::mutex g_chains_mu;
std::list<ChainEntry>& chain_cache() {  // most recent first
  static std::list<ChainEntry> c;
  return c;
}

}  // namespace

std::shared_ptr<const GrammarMasker::Tables::ChainClosure> GrammarMasker::Tables::chain_closure(
    const std::shared_ptr<const TokenTrie>& trie_ptr, const std::vector<TokenTrie::ByteSet>& cls) {
  const TokenTrie& trie = *trie_ptr;
  std::string key(reinterpret_cast<const char*>(cls.data()), cls.size() * sizeof(TokenTrie::ByteSet));
  {
    std::lock_guard<std::mutex> lk(g_chains_mu);
    std::list<ChainEntry>& cache = chain_cache();
    for (auto it = cache.begin(); it != cache.end();) {
      std::shared_ptr<const TokenTrie> t = it->trie.lock();
      if (!t) {
        it = cache.erase(it);
        continue;
      }
      if (t == trie_ptr && it->pattern == key) {
        cache.splice(cache.begin(), cache, it);
        return cache.front().closure;
      }
      ++it;
    }
  }
  auto c = std::make_shared<ChainClosure>();
  c->closed.assign(size_t(trie.n_vocab() + 63) / 64, 0);
  struct Frame {
    uint32_t node;
    uint16_t depth;           // characters begun
    uint8_t pending, lo, hi;  // UTF-8 continuation bytes still due, the next one's range
  };
  std::vector<Frame> work{{0, 0, 0, 0, 0}};
  while (!work.empty()) {
    const Frame f = work.back();
    work.pop_back();
    const TokenTrie::Node& n = trie.node(f.node);
    for (uint32_t t = 0; t < n.n_tokens; ++t) {
      const int32_t id = trie.token(n.first_token + t);
      c->closed[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
      c->tokens.push_back(id);
      c->lengths.push_back(f.depth);
      c->max_length = std::max(c->max_length, f.depth);
    }
    const TokenTrie::ByteSet& k = cls[std::min<size_t>(f.depth, cls.size() - 1)];
    for (uint32_t e = 0; e < n.n_children; ++e) {
      const TokenTrie::Edge& edge = trie.edge(n.first_child + e);
      const uint8_t b = edge.byte;
      if (f.pending > 0) {
        if (b >= f.lo && b <= f.hi) work.push_back({edge.child, f.depth, uint8_t(f.pending - 1), 0x80, 0xBF});
        continue;
      }
      uint8_t pending = 0, lo = 0, hi = 0;
      if (f.depth < 0xFFFF && ((k[b >> 6] >> (b & 63)) & 1) != 0 && (b < 0x80 || utf8_lead(b, pending, lo, hi))) {
        work.push_back({edge.child, uint16_t(f.depth + 1), pending, lo, hi});
      } else {
        c->frontier.push_back({edge.child, b, f.depth});
      }
    }
  }
  std::lock_guard<std::mutex> lk(g_chains_mu);
  chain_cache().push_front(ChainEntry{trie_ptr, std::move(key), c});
  if (chain_cache().size() > kChainClosures) chain_cache().pop_back();
  return c;
}

}  // namespace larder
