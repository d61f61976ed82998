// Token masks for constrained decoding: which tokens of the vocabulary may
// come next under a grammar state (grammar_matcher.h).
//
// The vocabulary's byte strings sit in a trie built once per model
// (TokenTrie), so that tokens sharing a prefix share the work of matching
// it: the mask is a depth-first walk of the trie that advances the grammar
// state one byte per edge and skips every subtree whose prefix no stack
// accepts. States repeat (inside a JSON string every character leaves the
// same state), so masks are cached by state (GrammarMasker).
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/grammar/grammar_matcher.h"

namespace larder {

class TokenTrie {
 public:
  // token_bytes[id]: the bytes token `id` decodes to; an empty string (a
  // control token such as BOS/EOS, or one with no text) is never allowed by
  // a mask (the caller decides about end of generation).
  explicit TokenTrie(const std::vector<std::string>& token_bytes);

  int n_vocab() const { return n_vocab_; }
  size_t n_nodes() const { return nodes_.size(); }

  struct Node {
    uint32_t first_child = 0;  // index into edges_; children are edges_[first_child, first_child + n_children)
    uint32_t n_children = 0;
    uint32_t first_token = 0;  // index into tokens_: the tokens that end here
    uint32_t n_tokens = 0;
  };
  struct Edge {
    uint8_t byte;
    uint32_t child;
  };
  const Node& node(uint32_t i) const { return nodes_[i]; }
  const Edge& edge(uint32_t i) const { return edges_[i]; }
  int32_t token(uint32_t i) const { return tokens_[i]; }

 private:
  int n_vocab_ = 0;
  std::vector<Node> nodes_;  // nodes_[0]: the root (the empty prefix)
  std::vector<Edge> edges_;
  std::vector<int32_t> tokens_;
};

// A bit per token: bit (id % 64) of word id / 64 set = allowed.
using TokenMask = std::vector<uint64_t>;

inline bool mask_allows(const TokenMask& m, int32_t id) { return ((m[size_t(id) >> 6] >> (id & 63)) & 1) != 0; }

// The mask of `state` by a walk of the whole trie (no cache).
TokenMask compute_token_mask(const CompiledGrammar& g, const TokenTrie& trie, const GrammarState& state);

// Masks with a cache of the last `capacity` states (least recently used
// goes), computed by a trie walk over interned states: every state met is
// given an id, and the state after each (state, byte) is computed once and
// kept in a table, so the walk is mostly table lookups (inside a JSON
// string almost every byte leads back to the same state, and the whole
// vocabulary is walked with a handful of states). The tables are dropped
// and rebuilt when they pass `max_states`. Not thread-safe: one per
// sequence, or guarded by the caller.
class GrammarMasker {
 public:
  GrammarMasker(std::shared_ptr<const CompiledGrammar> g, std::shared_ptr<const TokenTrie> trie,
                size_t capacity = 256, size_t max_states = 20000);

  const TokenMask& mask(const GrammarState& state);

  size_t hits() const { return hits_; }
  size_t misses() const { return misses_; }
  size_t n_states() const { return states_.size(); }

 private:
  static constexpr int32_t kUnknown = -2, kDead = -1;
  int32_t intern(GrammarState state);
  int32_t next(int32_t id, uint8_t byte);
  TokenMask walk(int32_t start);

  std::shared_ptr<const CompiledGrammar> g_;
  std::shared_ptr<const TokenTrie> trie_;
  size_t capacity_;
  size_t max_states_;
  std::vector<GrammarState> states_;
  std::unordered_map<std::string, int32_t> state_ids_;
  std::vector<std::array<int32_t, 256>> next_;  // per state id: the id after each byte (kUnknown, kDead)
  std::list<std::pair<std::string, TokenMask>> lru_;  // most recent first
  std::unordered_map<std::string, std::list<std::pair<std::string, TokenMask>>::iterator> index_;
  size_t hits_ = 0, misses_ = 0;
};

}  // namespace larder
