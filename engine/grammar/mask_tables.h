// Internal to engine/grammar (token_mask.cpp, token_mask_chain.cpp): the
// tables a GrammarMasker works on, and the UTF-8 and character-class
// helpers they share. Not part of the grammar engine's interface.
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/grammar/token_mask.h"

namespace larder {

namespace mask_internal {

// Table 3-7 of Unicode 15: after lead byte `b`, the continuation bytes still
// due and the range the next one must lie in; false for a byte that cannot
// start a sequence (a continuation byte, C0, C1, F5..FF).
bool utf8_lead(uint8_t b, uint8_t& pending, uint8_t& lo, uint8_t& hi);

// Whether a character set matches every code point in [lo, hi]
// (surrogates, which the matcher never reads, aside), none of them, or some.
enum class NonAscii : int8_t { kAll, kNone, kSome };
NonAscii range_class(const GrammarElement& e, uint32_t lo, uint32_t hi);

}  // namespace mask_internal

// The interned states, their transitions and the mask cache of one grammar
// on one trie; shared by maskers of equal grammars (see the registry below).
struct GrammarMasker::Tables {
  static constexpr int32_t kUnknown = -2, kDead = -1;

  explicit Tables(const GrammarMasker::Options& o)
      : capacity(std::max<size_t>(o.capacity, 1)), max_states(std::max<size_t>(o.max_states, 16)) {}

  int32_t intern(GrammarState state);
  int32_t next(const CompiledGrammar& g, int32_t id, uint8_t byte);
  // Whether every byte of `set` leads state `id` back to itself.
  bool loops_on(const CompiledGrammar& g, int32_t id, const TokenTrie::ByteSet& set);
  // The mask of state `start`; counts the subtrees skipped and the closures used.
  TokenMask walk(const CompiledGrammar& g, const std::shared_ptr<const TokenTrie>& trie_ptr, int32_t start, bool fast,
                 size_t* skipped, size_t* closures);
  // The trie closure that state `id` covers at once (TokenTrie::closure),
  // if any: of a class it loops on (the closure is shared by every grammar
  // on the trie).
  struct ClosureUse {
    std::shared_ptr<const TokenTrie::Closure> closure;  // null: none
    int32_t to = -1;  // the state on the closure's nodes below the root
  };
  ClosureUse closure_of(const CompiledGrammar& g, const TokenTrie& trie, int32_t id);

  // A chain: from state X_0, every character of class C_j leads X_j to
  // X_{j+1}, the classes equal from C_p on; it either loops (X_m = X_{m+1},
  // inside a string after its first character) or ends at X_n, where no
  // character of C_p is accepted (a string with maxLength: a state per
  // character). Its closure: the trie nodes reached by such characters
  // (UTF-8 as in TokenTrie::closure), each token with the number of
  // characters it takes, and the edges that leave the pattern with the
  // number of characters before them.
  struct ChainClosure {
    std::vector<uint64_t> closed;  // a TokenMask: every token of the region
    std::vector<int32_t> tokens;   // the same tokens, and the characters each takes
    std::vector<uint16_t> lengths;
    uint16_t max_length = 0;
    struct Exit {
      uint32_t child;
      uint8_t byte;
      uint16_t depth;  // characters before the edge
    };
    std::vector<Exit> frontier;
  };
  struct Chain {
    std::shared_ptr<const ChainClosure> closure;  // null: no chain
    std::vector<int32_t> states;                  // X_0..X_m (loops) or X_0..X_n (ends)
    bool loops = false;
  };
  static constexpr size_t kMaxChain = 256, kChainClosures = 32;
  Chain chain_of(const CompiledGrammar& g, const std::shared_ptr<const TokenTrie>& trie, int32_t id);
  // The class of characters leading `from` to its most common successor
  // by ASCII bytes (*to), with the lead bytes whose code points do the same.
  TokenTrie::ByteSet class_from(const CompiledGrammar& g, int32_t from, int32_t* to);
  // Kept per trie in a process-wide cache (the last kChainClosures
  // patterns): a pattern's closure does not depend on the grammar.
  static std::shared_ptr<const ChainClosure> chain_closure(const std::shared_ptr<const TokenTrie>& trie,
                                                           const std::vector<TokenTrie::ByteSet>& cls);
  // Whether state x accepts no character of the class.
  bool accepts_none(const CompiledGrammar& g, int32_t x, const TokenTrie::ByteSet& cls);
  TokenTrie::ByteSet class_into(const CompiledGrammar& g, int32_t from, int32_t to);
  // range_class of character set `set` over the code points lead byte
  // `lead` (0xC2..0xF4) begins.
  mask_internal::NonAscii set_class(const CompiledGrammar& g, uint32_t set, uint8_t lead);

  std::mutex mu;
  size_t capacity;
  size_t max_states;
  std::vector<GrammarState> states;
  std::unordered_map<std::string, int32_t> state_ids;
  std::vector<std::array<int32_t, 256>> next_ids;  // per state id: the id after each byte (kUnknown, kDead)
  // per state id: bytes whose transition is known / known to loop back to the state
  std::vector<TokenTrie::ByteSet> known, loops;
  std::vector<int8_t> closure_known;  // per state id: closure_of computed
  std::vector<ClosureUse> closures;  // per state id
  std::vector<int8_t> chain_known;   // per state id: chain_of computed
  std::vector<Chain> chains;         // per state id
  std::vector<std::array<int8_t, 64>> set_classes;  // per character set, per lead byte: mask_internal::NonAscii + 1 (0: not computed)
  using Entry = std::pair<std::string, std::shared_ptr<const TokenMask>>;
  std::list<Entry> lru;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index;
};

}  // namespace larder
