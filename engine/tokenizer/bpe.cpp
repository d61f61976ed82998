// Byte-level BPE merges (see bpe.h).
#include "engine/tokenizer/bpe.h"

#include <algorithm>
#include <queue>

#include "engine/tokenizer/unicode.h"

namespace larder {
namespace {

// GPT-2 bytes_to_unicode: byte -> code point.
std::array<uint32_t, 256> make_byte_to_cpt() {
  std::array<uint32_t, 256> map{};
  uint32_t n = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    map[b] = printable ? b : 256 + n++;
  }
  return map;
}

struct ByteTables {
  std::array<std::string, 256> text;      // byte -> UTF-8 of its character
  std::array<int16_t, 0x144> cpt_to_byte;  // code point (< 0x144) -> byte, -1
  ByteTables() {
    const auto map = make_byte_to_cpt();
    cpt_to_byte.fill(-1);
    for (uint32_t b = 0; b < 256; ++b) {
      unicode::append_utf8(map[b], text[b]);
      cpt_to_byte[map[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& byte_tables() {
  static const ByteTables tables;
  return tables;
}

// A symbol of a word while merging: a doubly linked list over the bytes.
struct Symbol {
  int32_t id;  // token, -1 if none; -2 once merged into its left neighbour
  int32_t prev;
  int32_t next;
};

struct Candidate {
  int32_t rank;
  int32_t left;  // symbol index
  int32_t left_id;
  int32_t right_id;
  int32_t merged_id;
};

struct CandidateAfter {  // min-heap on (rank, left)
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  }
};

}  // namespace

const std::string& BpeModel::byte_to_text(uint8_t byte) { return byte_tables().text[byte]; }

std::string BpeModel::decode_token_text(std::string_view text) {
  const ByteTables& t = byte_tables();
  std::string out;
  out.reserve(text.size());
  std::vector<unicode::Char> chars;
  unicode::decode_utf8(text, chars);
  for (const unicode::Char& c : chars) {
    if (c.cpt < t.cpt_to_byte.size() && t.cpt_to_byte[c.cpt] >= 0) {
      out.push_back(static_cast<char>(t.cpt_to_byte[c.cpt]));
    } else {
      out.append(text.substr(c.offset, c.n_bytes));
    }
  }
  return out;
}

Result<std::unique_ptr<BpeModel>> BpeModel::create(std::span<const std::string> tokens,
                                                   std::span<const std::string> merges, BpePreInfo pre) {
  auto model = std::unique_ptr<BpeModel>(new BpeModel());
  model->pre_ = pre;
  model->text_to_id_.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    model->text_to_id_.insert_or_assign(std::string_view(tokens[i]), static_cast<int32_t>(i));
  }
  for (int b = 0; b < 256; ++b) {
    auto it = model->text_to_id_.find(byte_to_text(static_cast<uint8_t>(b)));
    model->byte_id_[b] = it == model->text_to_id_.end() ? -1 : it->second;
  }
  model->ranks_.reserve(merges.size());
  std::string joined;
  for (size_t r = 0; r < merges.size(); ++r) {
    const std::string_view m = merges[r];
    const size_t space = m.find(' ', 1);  // a part is never empty
    if (space == std::string_view::npos) {
      return Status::invalid_argument("bpe: merge " + std::to_string(r) + " '" + std::string(m) +
                                      "' has no space between its parts");
    }
    const std::string_view left = m.substr(0, space), right = m.substr(space + 1);
    joined.assign(left).append(right);
    auto l = model->text_to_id_.find(left), rt = model->text_to_id_.find(right), j = model->text_to_id_.find(joined);
    if (l == model->text_to_id_.end() || rt == model->text_to_id_.end() || j == model->text_to_id_.end()) continue;
    // The first (lowest) rank of a pair wins, as in HF and llama.cpp.
    model->ranks_.try_emplace(pair_key(l->second, rt->second), Merge{static_cast<int32_t>(r), j->second});
  }
  return model;
}

void BpeModel::encode(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<unicode::Char> chars;
  chars.reserve(text.size());
  unicode::decode_utf8(text, chars);
  std::vector<CharSpan> words;
  bpe_pretokenize(pre_.pre, chars, words);
  for (const CharSpan& w : words) {
    const uint32_t begin = chars[w.begin].offset;
    const uint32_t end = w.end < chars.size() ? chars[w.end].offset : static_cast<uint32_t>(text.size());
    encode_word(text.substr(begin, end - begin), out);
  }
}

void BpeModel::encode_word(std::string_view bytes, std::vector<int32_t>& out) const {
  if (bytes.empty()) return;
  if (bytes.size() == 1) {
    const int32_t id = byte_id_[static_cast<uint8_t>(bytes[0])];
    if (id >= 0) out.push_back(id);
    return;
  }
  if (pre_.ignore_merges) {
    std::string encoded;
    encoded.reserve(bytes.size() * 2);
    for (char c : bytes) encoded += byte_to_text(static_cast<uint8_t>(c));
    if (auto it = text_to_id_.find(encoded); it != text_to_id_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const auto n = static_cast<int32_t>(bytes.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_id_[static_cast<uint8_t>(bytes[i])], i - 1, i + 1 < n ? i + 1 : -1};
  }
  std::vector<Candidate> heap_storage;
  heap_storage.reserve(n);
  std::priority_queue<Candidate, std::vector<Candidate>, CandidateAfter> queue(CandidateAfter(),
                                                                               std::move(heap_storage));
  auto try_add = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = symbols[left].next;
    if (right < 0) return;
    const int32_t a = symbols[left].id, b = symbols[right].id;
    if (a < 0 || b < 0) return;
    auto it = ranks_.find(pair_key(a, b));
    if (it == ranks_.end()) return;
    queue.push({it->second.rank, left, a, b, it->second.id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) try_add(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    // Stale: the left symbol changed, or its right neighbour is another one.
    if (left.id != c.left_id || left.next < 0 || symbols[left.next].id != c.right_id) continue;
    Symbol& right = symbols[left.next];
    left.id = c.merged_id;
    right.id = -2;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = c.left;
    try_add(left.prev);
    try_add(c.left);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    if (symbols[i].id >= 0) out.push_back(symbols[i].id);
  }
}

}  // namespace larder
