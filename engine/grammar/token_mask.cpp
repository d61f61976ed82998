#include "engine/grammar/token_mask.h"

#include <algorithm>
#include <numeric>

namespace larder {

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

GrammarMasker::GrammarMasker(std::shared_ptr<const CompiledGrammar> g, std::shared_ptr<const TokenTrie> trie,
                             size_t capacity, size_t max_states)
    : g_(std::move(g)),
      trie_(std::move(trie)),
      capacity_(std::max<size_t>(capacity, 1)),
      max_states_(std::max<size_t>(max_states, 16)) {}

int32_t GrammarMasker::intern(GrammarState state) {
  std::string key = grammar_state_key(state);
  auto it = state_ids_.find(key);
  if (it != state_ids_.end()) return it->second;
  const int32_t id = int32_t(states_.size());
  states_.push_back(std::move(state));
  next_.emplace_back();
  next_.back().fill(kUnknown);
  state_ids_.emplace(std::move(key), id);
  return id;
}

int32_t GrammarMasker::next(int32_t id, uint8_t byte) {
  int32_t& slot = next_[size_t(id)][byte];
  if (slot != kUnknown) return slot;
  GrammarState after = grammar_advance(*g_, states_[size_t(id)], byte);
  // intern() may grow next_: the reference above must not be used after it.
  const int32_t to = after.empty() ? kDead : intern(std::move(after));
  next_[size_t(id)][byte] = to;
  return to;
}

TokenMask GrammarMasker::walk(int32_t start) {
  const TokenTrie& trie = *trie_;
  TokenMask mask(size_t(trie.n_vocab() + 63) / 64, 0);
  std::vector<std::pair<uint32_t, int32_t>> work{{0, start}};  // (trie node, state id)
  while (!work.empty()) {
    const auto [node, state] = work.back();
    work.pop_back();
    const TokenTrie::Node& n = trie.node(node);
    if (node != 0) allow_tokens_of(trie, n, mask);
    for (uint32_t c = 0; c < n.n_children; ++c) {
      const TokenTrie::Edge& e = trie.edge(n.first_child + c);
      const int32_t to = next(state, e.byte);
      if (to != kDead) work.push_back({e.child, to});
    }
  }
  return mask;
}

const TokenMask& GrammarMasker::mask(const GrammarState& state) {
  std::string key = grammar_state_key(state);
  auto it = index_.find(key);
  if (it != index_.end()) {
    ++hits_;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  ++misses_;
  if (states_.size() > max_states_) {  // a grammar with very many states: start the tables again
    states_.clear();
    state_ids_.clear();
    next_.clear();
  }
  const int32_t start = intern(state);
  lru_.emplace_front(key, walk(start));
  index_[std::move(key)] = lru_.begin();
  if (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return lru_.front().second;
}

}  // namespace larder
