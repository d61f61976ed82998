// Tokenizer::encode: special-token partition, then SentencePiece BPE merges
// with a priority queue (the scheme of llama.cpp's llm_tokenizer_spm_session,
// re-implemented from its description in tokenizer.h).
#include <algorithm>
#include <queue>
#include <string>
#include <vector>

#include "engine/tokenizer/bpe.h"
#include "engine/tokenizer/tokenizer.h"

namespace larder {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 "▁"

// Byte length a UTF-8 lead byte announces (a stray continuation byte: 1).
size_t utf8_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

// A piece of text while merging; a doubly linked list over the fragment.
struct Symbol {
  int32_t prev;
  int32_t next;
  size_t offset;  // into the fragment
  size_t n;       // bytes; 0 once merged into its left neighbour
};

// A candidate merge of symbols left and right (adjacent when queued).
struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  size_t size;  // bytes of the merged piece
};

// Orders the heap: highest score on top, ties to the leftmost pair.
struct BigramLess {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

struct Fragment {
  int32_t token;  // >= 0: a special token; -1: raw text
  size_t offset;
  size_t length;
};

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  return encode_impl(text, add_bos, parse_special, /*at_input_start=*/true);
}

std::vector<int32_t> Tokenizer::encode_continuation(std::string_view text, bool parse_special) const {
  return encode_impl(text, /*add_bos=*/false, parse_special, /*at_input_start=*/false);
}

std::vector<int32_t> Tokenizer::encode_chat(std::string_view text, bool at_input_start,
                                            std::span<const ByteRange> plain) const {
  return encode_impl(text, /*add_bos=*/false, /*parse_special=*/true, at_input_start, plain);
}

std::vector<int32_t> Tokenizer::encode_impl(std::string_view text, bool add_bos, bool parse_special,
                                            bool at_input_start, std::span<const ByteRange> plain) const {
  std::vector<int32_t> out;
  const bool add_special = add_bos && vocab_.bos_id >= 0;
  if (add_special) out.push_back(vocab_.bos_id);

  // 1. Cut special-token texts out of the raw text, longest token first.
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (int32_t id : special_ids_) {
    const TokenType type = vocab_.types[id];
    if (!parse_special && (type == TokenType::kControl || type == TokenType::kUnknown)) continue;
    const std::string_view special = vocab_.tokens[id];
    // Control/unknown token text inside a plain range stays text.
    const bool restricted = !plain.empty() && (type == TokenType::kControl || type == TokenType::kUnknown);
    const auto in_plain = [&](size_t begin) {
      // The first range that ends after `begin` (ranges are sorted and
      // disjoint: a binary search, so a chat of many messages stays linear).
      auto r = std::upper_bound(plain.begin(), plain.end(), begin,
                                [](size_t b, const ByteRange& x) { return b < x.end; });
      return r != plain.end() && r->begin < begin + special.size();
    };
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0 || f.length < special.size()) {
        next.push_back(f);
        continue;
      }
      const std::string_view raw = text.substr(f.offset, f.length);
      size_t pos = 0;
      for (size_t search = 0, hit; (hit = raw.find(special, search)) != std::string_view::npos;) {
        if (restricted && in_plain(f.offset + hit)) {
          search = hit + 1;
          continue;
        }
        if (hit > pos) next.push_back({-1, f.offset + pos, hit - pos});
        next.push_back({id, 0, 0});
        pos = search = hit + special.size();
      }
      if (pos < raw.size()) next.push_back({-1, f.offset + pos, raw.size() - pos});
    }
    fragments.swap(next);
  }

  // 2. Escape and merge each raw fragment.
  bool is_prev_special = at_input_start;  // the input start counts as "after a special token"
  std::string escaped;
  for (const Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
      is_prev_special = true;
      continue;
    }
    if (bpe_) {  // byte-level BPE (bpe.h): no space prefix, no escaping
      bpe_->encode(text.substr(f.offset, f.length), out);
      continue;
    }
    escaped.clear();
    if (vocab_.add_space_prefix && is_prev_special) escaped += kSpaceMarker;
    for (char c : text.substr(f.offset, f.length)) {
      if (c == ' ') escaped += kSpaceMarker;
      else escaped.push_back(c);
    }
    encode_fragment(escaped, out);
    is_prev_special = false;
  }

  if (add_special && vocab_.add_eos && vocab_.eos_id >= 0) out.push_back(vocab_.eos_id);
  return out;
}

void Tokenizer::encode_fragment(std::string_view text, std::vector<int32_t>& out) const {
  // Split into UTF-8 characters.
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    // A character is its lead byte plus the continuation bytes that follow
    // (llama.cpp takes utf8_len bytes blindly, which on broken input can
    // swallow the next character, e.g. half of an escaped "▁").
    const size_t max_n = std::min(utf8_len(static_cast<unsigned char>(text[offset])), text.size() - offset);
    size_t n = 1;
    while (n < max_n && (static_cast<unsigned char>(text[offset + n]) & 0xC0) == 0x80) ++n;
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, index + 1, offset, n});
    offset += n;
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const size_t size = symbols[left].n + symbols[right].n;
    auto it = piece_to_id_.find(text.substr(symbols[left].offset, size));
    if (it == piece_to_id_.end()) return;
    queue.push({vocab_.scores[it->second], left, right, size});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  // Merge the best pair until none is left. A queued pair is stale when one
  // side was merged away or grew since (its size no longer matches).
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& left = symbols[b.left];
    Symbol& right = symbols[b.right];
    if (left.n == 0 || right.n == 0 || left.n + right.n != b.size) continue;
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = b.left;
    try_add(left.prev, b.left);
    try_add(b.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].offset, symbols[i].n);
    auto it = piece_to_id_.find(piece);
    if (it != piece_to_id_.end()) {
      out.push_back(it->second);
    } else {
      emit_bytes(piece, out);
    }
  }
}

void Tokenizer::emit_bytes(std::string_view bytes, std::vector<int32_t>& out) const {
  for (char c : bytes) {
    const int32_t byte_id = byte_to_id_[static_cast<unsigned char>(c)];
    if (byte_id >= 0) {
      out.push_back(byte_id);
      continue;
    }
    auto it = piece_to_id_.find(std::string_view(&c, 1));
    if (it != piece_to_id_.end()) {
      out.push_back(it->second);
    } else if (vocab_.unk_id >= 0) {
      out.push_back(vocab_.unk_id);
    }
  }
}

}  // namespace larder
