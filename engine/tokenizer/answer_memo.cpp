#include "engine/tokenizer/answer_memo.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include <xxhash.h>

#include "engine/tokenizer/tokenizer.h"

namespace larder {

AnswerMemo::AnswerMemo(size_t max_tokens) : max_tokens_(max_tokens) {}

AnswerMemo::Key AnswerMemo::key_of(std::string_view text, std::string_view scope) {
  XXH128_hash_t h;
  if (scope.empty()) {
    h = XXH3_128bits(text.data(), text.size());
  } else {
    // u64 scope size | scope | text: no two (scope, text) pairs share bytes.
    std::string buf;
    const uint64_t n = scope.size();
    for (int i = 0; i < 8; ++i) buf.push_back(char((n >> (8 * i)) & 0xff));
    buf.append(scope);
    buf.append(text);
    h = XXH3_128bits(buf.data(), buf.size());
  }
  return Key{h.high64, h.low64};
}

void AnswerMemo::remember(std::string_view text, std::span<const int32_t> ids, std::string_view scope) {
  if (text.empty() || ids.empty() || ids.size() > max_tokens_) return;
  const Key key = key_of(text, scope);
  std::lock_guard<std::mutex> lk(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    n_tokens_ -= it->second->ids.size();
    lru_.erase(it->second);
    index_.erase(it);
  }
  while (n_tokens_ + ids.size() > max_tokens_ && !lru_.empty()) {
    n_tokens_ -= lru_.back().ids.size();
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
  lru_.push_front(Entry{key, text.size(), std::vector<int32_t>(ids.begin(), ids.end())});
  index_[key] = lru_.begin();
  n_tokens_ += ids.size();
}

std::optional<std::vector<int32_t>> AnswerMemo::find(std::string_view text, std::string_view scope) const {
  if (text.empty()) return std::nullopt;
  const Key key = key_of(text, scope);
  std::lock_guard<std::mutex> lk(mu_);
  auto it = index_.find(key);
  if (it == index_.end() || it->second->text_size != text.size()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);  // most recently used
  return it->second->ids;
}

size_t AnswerMemo::n_answers() const {
  std::lock_guard<std::mutex> lk(mu_);
  return lru_.size();
}

size_t AnswerMemo::n_tokens() const {
  std::lock_guard<std::mutex> lk(mu_);
  return n_tokens_;
}

namespace {

constexpr char kAnswerMagic[4] = {'L', 'D', 'A', 'N'};
constexpr uint32_t kAnswerVersion = 1;
constexpr size_t kAnswerHeader = 4 + 4 + 8 + 8 + 4;

template <typename T>
void put_le(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(char((uint64_t(v) >> (8 * i)) & 0xff));
}

template <typename T>
T get_le(const char* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t(uint8_t(p[i])) << (8 * i);
  return T(v);
}

}  // namespace

PageKey answer_key(const PageKey& root, std::string_view text) {
  std::string buf = "larder-answer";
  buf.push_back('\0');
  buf += root.to_bytes();
  buf.append(text);
  const XXH128_hash_t h = XXH3_128bits(buf.data(), buf.size());
  return PageKey{h.high64, h.low64};
}

std::string encode_answer_record(std::string_view text, std::span<const int32_t> ids) {
  std::string out(kAnswerMagic, sizeof(kAnswerMagic));
  put_le<uint32_t>(out, kAnswerVersion);
  put_le<uint64_t>(out, XXH3_64bits(text.data(), text.size()));
  put_le<uint64_t>(out, text.size());
  put_le<uint32_t>(out, uint32_t(ids.size()));
  for (int32_t id : ids) put_le<uint32_t>(out, uint32_t(id));
  put_le<uint64_t>(out, XXH3_64bits(out.data(), out.size()));
  return out;
}

std::optional<std::vector<int32_t>> decode_answer_record(std::string_view record, std::string_view text,
                                                         int n_vocab) {
  if (record.size() < kAnswerHeader + 8) return std::nullopt;
  const char* p = record.data();
  if (std::string_view(p, 4) != std::string_view(kAnswerMagic, 4)) return std::nullopt;
  if (get_le<uint32_t>(p + 4) != kAnswerVersion) return std::nullopt;
  if (get_le<uint64_t>(p + 8) != XXH3_64bits(text.data(), text.size())) return std::nullopt;
  if (get_le<uint64_t>(p + 16) != text.size()) return std::nullopt;
  const uint64_t n = get_le<uint32_t>(p + 24);
  if (n == 0 || record.size() != kAnswerHeader + 4 * n + 8) return std::nullopt;
  const size_t body = record.size() - 8;
  if (get_le<uint64_t>(p + body) != XXH3_64bits(p, body)) return std::nullopt;
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = get_le<int32_t>(p + kAnswerHeader + 4 * i);
    if (id < 0 || id >= n_vocab) return std::nullopt;
    ids[i] = id;
  }
  return ids;
}

}  // namespace larder
