#include "engine/tokenizer/answer_memo.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <utility>

#include <xxhash.h>

#include "engine/tokenizer/tokenizer.h"

namespace larder {

AnswerMemo::AnswerMemo(size_t max_tokens) : max_tokens_(max_tokens) {}

AnswerMemo::Key AnswerMemo::key_of(std::string_view text) {
  const XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  return Key{h.high64, h.low64};
}

void AnswerMemo::remember(std::string_view text, std::span<const int32_t> ids) {
  if (text.empty() || ids.empty() || ids.size() > max_tokens_) return;
  const Key key = key_of(text);
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

std::optional<std::vector<int32_t>> AnswerMemo::find(std::string_view text) const {
  if (text.empty()) return std::nullopt;
  const Key key = key_of(text);
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

std::string answer_marker(size_t k) {
  static const uint64_t tag = [] {
    std::random_device rd;
    return (uint64_t(rd()) << 32) ^ rd();
  }();
  char buf[64];
  std::snprintf(buf, sizeof(buf), "@@larder-answer-%zu-%016llx@@", k, static_cast<unsigned long long>(tag));
  return buf;
}

namespace {

constexpr std::string_view kWhitespace = " \t\n\r";

// Lengths of the leading and trailing whitespace of `text`; nullopt when it
// is all whitespace.
std::optional<std::pair<size_t, size_t>> whitespace_edges(std::string_view text) {
  const size_t first = text.find_first_not_of(kWhitespace);
  if (first == std::string_view::npos) return std::nullopt;
  const size_t last = text.find_last_not_of(kWhitespace);
  return std::make_pair(first, text.size() - last - 1);
}

}  // namespace

std::optional<std::string> answer_marked_content(std::string_view text, size_t k) {
  auto edges = whitespace_edges(text);
  if (!edges) return std::nullopt;
  std::string out(text.substr(0, edges->first));
  out += answer_marker(k);
  out.append(text.substr(text.size() - edges->second));
  return out;
}

std::optional<std::vector<int32_t>> splice_answers(const Tokenizer& tok, std::string_view rendered,
                                                   std::string_view marked,
                                                   std::span<const SplicedAnswer> answers, bool add_bos,
                                                   bool parse_special) {
  if (answers.empty()) return std::nullopt;
  // Split `marked` at the markers, in order, each exactly once; check that
  // the answers' texts put back give `rendered`.
  std::vector<std::string_view> pieces;
  pieces.reserve(answers.size() + 1);
  size_t pos = 0;
  std::string rebuilt;
  rebuilt.reserve(rendered.size());
  for (size_t k = 0; k < answers.size(); ++k) {
    const std::string_view text = answers[k].text;
    auto edges = whitespace_edges(text);
    if (!edges) return std::nullopt;
    const std::string marker = answer_marker(k);
    const size_t hit = marked.find(marker, pos);
    if (hit == std::string_view::npos) return std::nullopt;
    if (marked.find(marker, hit + marker.size()) != std::string_view::npos) return std::nullopt;
    // The answer spans its whitespace edges around the marker, if the
    // template kept them.
    const size_t begin = hit - std::min(hit - pos, edges->first);
    const size_t end = hit + marker.size() + edges->second;
    if (hit - begin != edges->first || end > marked.size()) return std::nullopt;
    if (marked.substr(begin, hit - begin) != text.substr(0, edges->first)) return std::nullopt;
    if (marked.substr(hit + marker.size(), edges->second) != text.substr(text.size() - edges->second)) {
      return std::nullopt;
    }
    pieces.push_back(marked.substr(pos, begin - pos));
    rebuilt.append(pieces.back());
    rebuilt.append(text);
    pos = end;
  }
  pieces.push_back(marked.substr(pos));
  rebuilt.append(pieces.back());
  if (rebuilt != rendered) return std::nullopt;

  std::vector<int32_t> ids = tok.encode(pieces[0], /*add_bos=*/false, parse_special);
  if (add_bos && tok.bos_id() >= 0 && (ids.empty() || ids.front() != tok.bos_id())) {
    ids.insert(ids.begin(), tok.bos_id());
  }
  for (size_t k = 0; k < answers.size(); ++k) {
    const int32_t prev = ids.empty() ? -1 : ids.back();
    if (tok.decode_text(answers[k].ids, prev) != answers[k].text) return std::nullopt;
    ids.insert(ids.end(), answers[k].ids.begin(), answers[k].ids.end());
    std::vector<int32_t> rest = tok.encode_continuation(pieces[k + 1], parse_special);
    ids.insert(ids.end(), rest.begin(), rest.end());
  }
  return ids;
}

}  // namespace larder
