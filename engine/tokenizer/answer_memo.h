// The token ids of the model's own answers, so that a returning chat reuses
// the KV cache of its earlier turns even where tokenizing the answer's text
// again would give other ids.
//
// Why: the KV pages of a conversation are keyed by the token ids the model
// actually saw (engine/kv/prefix_hash.h): the prompt, then the ids it sampled
// for its answer. When the client sends the conversation back, the answer
// arrives as text. Tokenizing that text need not give the sampled ids (a
// model may sample "▁hel" "lo" where the tokenizer would merge "▁hello"; byte
// tokens of a character the vocabulary also has whole), and every page from
// the first different id on misses the cache. llama.cpp's server and vLLM
// re-tokenize and lose those pages; here the prompt is built from the stored
// ids wherever the answer's text is unchanged.
//
// AnswerMemo: text of an answer (exactly as the client received it) -> the
// ids that produced it. In memory, bounded by the total number of ids kept
// (least recently used answers are dropped first). Thread-safe.
//
// engine/tokenizer/chat_prompt.h builds a chat prompt's ids with them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "storage/page_store.h"

namespace larder {

class Tokenizer;

class AnswerMemo {
 public:
  // max_tokens: bound on the ids kept over all answers (4 bytes each).
  explicit AnswerMemo(size_t max_tokens = size_t(1) << 22);

  // Records that `ids` produced `text` (the answer as sent to the client, its
  // final end-of-generation token excluded). Empty text or ids, or an answer
  // longer than the whole bound, are not kept. Replaces an earlier entry for
  // the same text.
  // `scope` separates tenants (the cache root of a salted request, as
  // bytes): an answer remembered under one scope is not found under another.
  void remember(std::string_view text, std::span<const int32_t> ids, std::string_view scope = {});
  // The ids recorded for exactly this text under `scope`, if still kept.
  std::optional<std::vector<int32_t>> find(std::string_view text, std::string_view scope = {}) const;

  size_t n_answers() const;
  size_t n_tokens() const;

 private:
  struct Key {
    uint64_t hi, lo;  // XXH3-128 of the text
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return size_t(k.lo); }
  };
  struct Entry {
    Key key;
    size_t text_size;
    std::vector<int32_t> ids;
  };
  static Key key_of(std::string_view text, std::string_view scope);

  const size_t max_tokens_;
  mutable std::mutex mu_;
  mutable std::list<Entry> lru_;  // most recently used first
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> index_;
  size_t n_tokens_ = 0;
};

// Disk form of one answer, kept by the disk tier beside the KV pages so that
// a returning chat still splices its answers after a restart. Key: XXH3-128
// of "larder-answer", the cache root key (model, layout, salt) and the text;
// no page key can collide with it short of a 128-bit hash collision.
// Record (little-endian): "LDAN" | u32 version 1 | u64 XXH3-64 of the text |
// u64 text bytes | u32 n | n x i32 ids | u64 XXH3-64 of everything before.
PageKey answer_key(const PageKey& root, std::string_view text);
std::string encode_answer_record(std::string_view text, std::span<const int32_t> ids);
// The ids of a record written for exactly `text`; nullopt for a record that
// is damaged, of another version, for another text, empty, or holding an id
// outside [0, n_vocab) (the caller drops it).
std::optional<std::vector<int32_t>> decode_answer_record(std::string_view record, std::string_view text,
                                                         int n_vocab);

}  // namespace larder
