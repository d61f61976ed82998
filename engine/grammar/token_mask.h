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
#include <memory>
#include <mutex>
#include <string>
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

  // The tokens in node i's subtree (its own and every descendant's) are
  // token(t) for t in [node(i).first_token, subtree_end(i)): a subtree's
  // tokens are contiguous.
  uint32_t subtree_end(uint32_t i) const { return subtree_end_[i]; }
  // A bit per byte value (bit b % 64 of word b / 64): the bytes on the
  // edges below node i; kept for nodes with at least kSummaryTokens tokens
  // in their subtree (null for the others: too small to be worth a check).
  using ByteSet = std::array<uint64_t, 4>;
  static constexpr uint32_t kSummaryTokens = 8;
  const ByteSet* subtree_bytes(uint32_t i) const {
    return summary_[i] == kNoSummary ? nullptr : &byte_sets_[summary_[i]];
  }

  // The part of the trie a state that loops on a class of characters
  // covers without changing. The class: the bytes < 0x80 whose bit is set
  // in `cls`, and the well-formed UTF-8 sequences (Unicode 15 table 3-7, as
  // the matcher reads them) whose lead byte's bit is set (bits >= 0x80;
  // others are ignored). `closed`: the tokens whose bytes are all in the
  // class (a sequence may be cut off at the token's end); `frontier`: the
  // edges (child node, byte) that leave it from a node at a code point
  // boundary. Edges inside a UTF-8 sequence that break it are in neither:
  // a state that loops on every code point of a lead byte accepts no such
  // byte there. Computed on first use and kept (the last kClosures
  // classes); safe to call from several threads.
  struct Closure {
    std::vector<uint64_t> closed;  // a TokenMask
    std::vector<std::pair<uint32_t, uint8_t>> frontier;
    size_t n_root_frontier = 0;  // frontier[0, n): the root's own edges
  };
  static constexpr size_t kClosures = 8;
  std::shared_ptr<const Closure> closure(const ByteSet& cls) const;

 private:
  static constexpr uint32_t kNoSummary = 0xFFFFFFFFu;
  int n_vocab_ = 0;
  std::vector<Node> nodes_;  // nodes_[0]: the root (the empty prefix)
  std::vector<Edge> edges_;
  std::vector<int32_t> tokens_;
  std::vector<uint32_t> subtree_end_;  // per node
  std::vector<uint32_t> summary_;      // per node: index into byte_sets_, or kNoSummary
  std::vector<ByteSet> byte_sets_;
  mutable std::mutex closures_mu_;
  mutable std::vector<std::pair<ByteSet, std::shared_ptr<const Closure>>> closures_;  // most recent last
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
// and rebuilt when they pass `max_states`.
//
// Three things make a first visit (a state not in the cache) cheaper than
// walking every viable trie node:
//  - closures: when the state loops on a class of characters (the inside
//    of a JSON string: every character but the quote, the backslash and
//    controls, UTF-8 included), the tokens made of that class are allowed
//    at once (TokenTrie::closure, computed once per trie and class) and the
//    walk starts only from the edges that leave the class; likewise for a
//    chain of states that the same classes lead through (the first
//    character before such a loop; a string with maxLength, one state per
//    character, where a token is allowed when it is short enough), whose
//    closure is kept per trie and class pattern in a process-wide cache;
//  - subtree skipping: a trie node knows the bytes on the edges below it
//    (TokenTrie::subtree_bytes); when every one of them leads the walk's
//    state back to itself, every token below is allowed with no further
//    walk;
//  - sharing: maskers of equal grammars (CompiledGrammar::same_as) on the
//    same trie share one set of tables and one mask cache, kept in a small
//    process-wide registry (the last kSharedTables grammars used, alive
//    while their trie is), so a request repeating an earlier request's
//    grammar (an agent's tool schema, response_format on every call) finds
//    its masks computed. Memory per shared grammar: at most `capacity`
//    masks of n_vocab / 8 bytes and `max_states` table rows of 1 KiB.
// Both give the masks of compute_token_mask (tests/grammar compare them on
// many states); Options turn them off (tests, benchmarks).
//
// One masker serves one sequence at a time (mask() is not reentrant for
// one object); maskers sharing tables may run on different threads (a
// mutex guards the tables). The reference mask() returns stays valid until
// the next mask() call on the same masker.
class GrammarMasker {
 public:
  struct Options {
    size_t capacity = 256;      // masks kept in the cache
    size_t max_states = 20000;  // interned states before the tables are rebuilt
    bool share = true;          // use the registry (else private tables)
    bool skip_subtrees = true;  // closures and subtree skipping in the walk
  };
  static constexpr size_t kSharedTables = 4;

  GrammarMasker(std::shared_ptr<const CompiledGrammar> g, std::shared_ptr<const TokenTrie> trie);
  GrammarMasker(std::shared_ptr<const CompiledGrammar> g, std::shared_ptr<const TokenTrie> trie,
                const Options& options);
  // The older signature: private tables (no sharing) of this size.
  GrammarMasker(std::shared_ptr<const CompiledGrammar> g, std::shared_ptr<const TokenTrie> trie, size_t capacity,
                size_t max_states = 20000);
  ~GrammarMasker();

  // The mask of `state` (a state of g; non-empty).
  const TokenMask& mask(const GrammarState& state);

  // Calls of mask() on this masker answered from the cache / by a walk.
  size_t hits() const { return hits_; }
  size_t misses() const { return misses_; }
  // States interned in the (maybe shared) tables.
  size_t n_states() const;
  // Trie subtrees this masker's walks allowed whole without walking them,
  // and walks that started from a trie closure.
  size_t skipped_subtrees() const { return skipped_; }
  size_t closure_walks() const { return closure_walks_; }

  struct Tables;  // token_mask.cpp

 private:
  std::shared_ptr<const CompiledGrammar> g_;
  std::shared_ptr<const TokenTrie> trie_;
  bool skip_subtrees_ = true;
  std::shared_ptr<Tables> tables_;
  std::shared_ptr<const TokenMask> current_;  // keeps mask()'s answer alive
  size_t hits_ = 0, misses_ = 0, skipped_ = 0, closure_walks_ = 0;
};

}  // namespace larder
