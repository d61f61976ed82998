// Hand-written pre-tokenizer regexes (see bpe_pretokenize.h). Each matcher
// returns the end of the match that the regex would find at `pos` (its
// leftmost-first alternative, greedy with backtracking), or `pos` for none.
#include "engine/tokenizer/bpe_pretokenize.h"

#include <string>

namespace larder {
namespace {

using unicode::Char;
namespace uc = unicode;

constexpr uint32_t kOut = 0xFFFFFFFFu;  // a position outside the piece

// The piece [begin, end) of the text being split.
class Piece {
 public:
  Piece(std::span<const Char> chars, uint32_t begin, uint32_t end) : chars_(chars), begin_(begin), end_(end) {}
  uint32_t begin() const { return begin_; }
  uint32_t end() const { return end_; }
  uint32_t cpt(uint32_t i) const { return i >= begin_ && i < end_ ? chars_[i].cpt : kOut; }
  uint16_t flags(uint32_t i) const { return i >= begin_ && i < end_ ? uc::flags(chars_[i].cpt) : 0; }
  bool in(uint32_t i) const { return i >= begin_ && i < end_; }
  bool is_letter(uint32_t i) const { return flags(i) & uc::kLetter; }
  bool is_number(uint32_t i) const { return flags(i) & uc::kNumber; }
  bool is_space(uint32_t i) const { return flags(i) & uc::kWhitespace; }
  bool is_crlf(uint32_t i) const { return cpt(i) == '\r' || cpt(i) == '\n'; }
  // [^\s\p{L}\p{N}] (inside the piece)
  bool is_other(uint32_t i) const { return in(i) && !(flags(i) & (uc::kWhitespace | uc::kLetter | uc::kNumber)); }
  // [^\r\n\p{L}\p{N}] (inside the piece)
  bool is_word_prefix(uint32_t i) const { return in(i) && !is_crlf(i) && !(flags(i) & (uc::kLetter | uc::kNumber)); }
  uint32_t run(uint32_t i, uint16_t mask) const {
    while (flags(i) & mask) ++i;
    return i;
  }

 private:
  std::span<const Char> chars_;
  uint32_t begin_, end_;
};

uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// '(s|t|re|ve|m|ll|d), case-insensitive for ASCII when `fold`.
uint32_t match_contraction(const Piece& p, uint32_t pos, bool fold) {
  if (p.cpt(pos) != '\'') return pos;
  auto at = [&](uint32_t i) { return fold ? ascii_lower(p.cpt(i)) : p.cpt(i); };
  const uint32_t a = at(pos + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
  const uint32_t b = at(pos + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return pos + 3;
  return pos;
}

// \s*[\r\n]+ | \s+(?!\S) | \s+  (the last two alone when !crlf_rule)
uint32_t match_spaces(const Piece& p, uint32_t pos, bool crlf_rule) {
  const uint32_t end = p.run(pos, uc::kWhitespace);
  if (end == pos) return pos;
  if (crlf_rule) {
    for (uint32_t i = end; i > pos; --i) {
      if (p.is_crlf(i - 1)) return i;  // the longest prefix that ends in CR/LF
    }
  }
  // \s+(?!\S): all of it at the end of the piece, else all but the last.
  if (end - pos > 1 && p.in(end)) return end - 1;
  return end;  // \s+
}

using Matcher = uint32_t (*)(const Piece&, uint32_t);

// Applies `match` left to right over the piece; matches and the gaps between
// them become words (HF Split with behavior "Isolated").
void split_isolated(const Piece& p, Matcher match, std::vector<CharSpan>& out) {
  uint32_t last = p.begin();
  for (uint32_t pos = p.begin(); pos < p.end();) {
    const uint32_t m = match(p, pos);
    if (m > pos) {
      if (pos > last) out.push_back({last, pos});
      out.push_back({pos, m});
      pos = last = m;
    } else {
      ++pos;
    }
  }
  if (last < p.end()) out.push_back({last, p.end()});
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
uint32_t match_gpt2(const Piece& p, uint32_t pos) {
  if (uint32_t m = match_contraction(p, pos, false); m > pos) return m;
  const uint32_t s = p.cpt(pos) == ' ' ? pos + 1 : pos;
  if (p.is_letter(s)) return p.run(s, uc::kLetter);
  if (p.is_number(s)) return p.run(s, uc::kNumber);
  if (p.is_other(s)) {
    uint32_t i = s;
    while (p.is_other(i)) ++i;
    return i;
  }
  return match_spaces(p, pos, false);
}

// The Llama 3 / Qwen 2 regex with \p{N}{1,max_digits}.
uint32_t match_llama3_like(const Piece& p, uint32_t pos, uint32_t max_digits) {
  if (uint32_t m = match_contraction(p, pos, true); m > pos) return m;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (p.is_letter(pos)) return p.run(pos, uc::kLetter);
  if (p.is_word_prefix(pos) && p.is_letter(pos + 1)) return p.run(pos + 1, uc::kLetter);
  // \p{N}{1,n}
  if (p.is_number(pos)) {
    uint32_t i = pos;
    while (i - pos < max_digits && p.is_number(i)) ++i;
    return i;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  const uint32_t s = p.cpt(pos) == ' ' ? pos + 1 : pos;
  if (p.is_other(s)) {
    uint32_t i = s;
    while (p.is_other(i)) ++i;
    while (p.is_crlf(i)) ++i;
    return i;
  }
  return match_spaces(p, pos, true);
}
uint32_t match_llama3(const Piece& p, uint32_t pos) { return match_llama3_like(p, pos, 3); }
uint32_t match_qwen2(const Piece& p, uint32_t pos) { return match_llama3_like(p, pos, 1); }

uint32_t match_number(const Piece& p, uint32_t pos) { return p.is_number(pos) ? pos + 1 : pos; }

// [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
// |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*
// |\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
uint32_t match_tekken(const Piece& p, uint32_t pos) {
  // U*L+ from s: U* greedy, backing off until an L follows.
  auto upper_lower = [&](uint32_t s) -> uint32_t {
    const uint32_t u_end = p.run(s, uc::kUpperish);
    for (uint32_t j = u_end + 1; j-- > s;) {
      if (p.flags(j) & uc::kLowerish) return p.run(j, uc::kLowerish);
    }
    return s;
  };
  // U+L* from s.
  auto upper_then_lower = [&](uint32_t s) -> uint32_t {
    const uint32_t u_end = p.run(s, uc::kUpperish);
    return u_end > s ? p.run(u_end, uc::kLowerish) : s;
  };
  const bool prefix = p.is_word_prefix(pos);
  if (prefix) {
    if (uint32_t m = upper_lower(pos + 1); m > pos + 1) return m;
  }
  if (uint32_t m = upper_lower(pos); m > pos) return m;
  if (prefix) {
    if (uint32_t m = upper_then_lower(pos + 1); m > pos + 1) return m;
  }
  if (uint32_t m = upper_then_lower(pos); m > pos) return m;
  if (p.is_number(pos)) return pos + 1;
  const uint32_t s = p.cpt(pos) == ' ' ? pos + 1 : pos;
  if (p.is_other(s)) {
    uint32_t i = s;
    while (p.is_other(i)) ++i;
    while (p.is_crlf(i) || p.cpt(i) == '/') ++i;
    return i;
  }
  return match_spaces(p, pos, true);
}

// ---- deepseek-llm: six isolated splits, each over the pieces of the last ----

// The letter class of the second regex: [A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-Ֆ
// Ⴀ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭ
// ℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]
constexpr uint32_t kDeepseekLetters[][2] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA}, {0x1BC, 0x1BF},
    {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377}, {0x37B, 0x37D}, {0x37F, 0x37F},
    {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481},
    {0x48A, 0x52F}, {0x531, 0x556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107},
    {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F},
    {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F},
    {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
// [!-/:-~！-／：-～‘-‟　-。]
constexpr uint32_t kDeepseekPunct[][2] = {
    {0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002},
};
// [一-龥ࠀ-一가-퟿]
constexpr uint32_t kDeepseekCjk[][2] = {{0x4E00, 0x9FA5}, {0x800, 0x4E00}, {0xAC00, 0xD7FF}};

template <size_t N>
bool in_ranges(const uint32_t (&ranges)[N][2], uint32_t c) {
  for (const auto& r : ranges) {
    if (c >= r[0] && c <= r[1]) return true;
  }
  return false;
}

uint32_t match_crlf(const Piece& p, uint32_t pos) { return p.is_crlf(pos) ? pos + 1 : pos; }

// \s?[class]+
template <size_t N>
uint32_t match_space_then_class(const Piece& p, uint32_t pos, const uint32_t (&ranges)[N][2]) {
  auto in_class = [&](uint32_t i) { return p.in(i) && in_ranges(ranges, p.cpt(i)); };
  uint32_t s = pos;
  if (p.is_space(pos) && in_class(pos + 1)) s = pos + 1;
  if (!in_class(s)) return pos;
  while (in_class(s)) ++s;
  return s;
}
uint32_t match_ds_letters(const Piece& p, uint32_t pos) { return match_space_then_class(p, pos, kDeepseekLetters); }
uint32_t match_ds_punct(const Piece& p, uint32_t pos) { return match_space_then_class(p, pos, kDeepseekPunct); }
// \s+$
uint32_t match_trailing_space(const Piece& p, uint32_t pos) {
  const uint32_t end = p.run(pos, uc::kWhitespace);
  return end > pos && end == p.end() ? end : pos;
}
uint32_t match_ds_cjk(const Piece& p, uint32_t pos) {
  uint32_t i = pos;
  while (p.in(i) && in_ranges(kDeepseekCjk, p.cpt(i))) ++i;
  return i;
}
uint32_t match_numbers(const Piece& p, uint32_t pos) { return p.run(pos, uc::kNumber); }

// Runs the splits in order, each over every piece of the one before.
void split_sequence(std::span<const Char> chars, std::span<const Matcher> stages, std::vector<CharSpan>& out) {
  std::vector<CharSpan> pieces{{0, static_cast<uint32_t>(chars.size())}};
  std::vector<CharSpan> next;
  for (Matcher m : stages) {
    next.clear();
    for (const CharSpan& s : pieces) split_isolated(Piece(chars, s.begin, s.end), m, next);
    pieces.swap(next);
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

}  // namespace

Result<BpePreInfo> bpe_pre_from_name(std::string_view name) {
  struct Entry {
    std::string_view name;
    BpePre pre;
    bool ignore_merges;
    bool add_bos;
  };
  static constexpr Entry kEntries[] = {
      {"llama-bpe", BpePre::kLlama3, true, true},  {"llama3", BpePre::kLlama3, true, true},
      {"llama-v3", BpePre::kLlama3, true, true},   {"falcon3", BpePre::kLlama3, true, true},
      {"pixtral", BpePre::kLlama3, true, true},    {"dbrx", BpePre::kLlama3, false, false},
      {"smaug-bpe", BpePre::kLlama3, false, false}, {"qwen2", BpePre::kQwen2, false, false},
      {"deepseek-r1-qwen", BpePre::kQwen2, false, false}, {"stablelm2", BpePre::kQwen2, false, false},
      {"gpt-2", BpePre::kGpt2, false, false},      {"mpt", BpePre::kGpt2, false, false},
      {"olmo", BpePre::kGpt2, false, false},       {"phi-2", BpePre::kGpt2, false, false},
      {"smollm", BpePre::kSmollm, false, false},   {"starcoder", BpePre::kSmollm, false, false},
      {"refact", BpePre::kSmollm, false, false},   {"command-r", BpePre::kSmollm, false, false},
      {"codeshell", BpePre::kSmollm, false, false}, {"deepseek-llm", BpePre::kDeepseekLlm, false, false},
      {"tekken", BpePre::kTekken, true, true},
  };
  for (const Entry& e : kEntries) {
    if (e.name == name) return BpePreInfo{e.pre, e.ignore_merges, e.add_bos};
  }
  return Status::unsupported("byte-level BPE pre-tokenizer '" + std::string(name) +
                             "' (tokenizer.ggml.pre) is not supported");
}

void bpe_pretokenize(BpePre pre, std::span<const Char> chars, std::vector<CharSpan>& out) {
  if (chars.empty()) return;
  const Piece whole(chars, 0, static_cast<uint32_t>(chars.size()));
  switch (pre) {
    case BpePre::kGpt2:
      split_isolated(whole, match_gpt2, out);
      return;
    case BpePre::kLlama3:
      split_isolated(whole, match_llama3, out);
      return;
    case BpePre::kQwen2:
      split_isolated(whole, match_qwen2, out);
      return;
    case BpePre::kSmollm: {
      static constexpr Matcher kStages[] = {match_number, match_gpt2};
      split_sequence(chars, kStages, out);
      return;
    }
    case BpePre::kDeepseekLlm: {
      static constexpr Matcher kStages[] = {match_crlf,           match_ds_letters, match_ds_punct,
                                            match_trailing_space, match_ds_cjk,     match_numbers};
      split_sequence(chars, kStages, out);
      return;
    }
    case BpePre::kTekken:
      split_isolated(whole, match_tekken, out);
      return;
  }
}

}  // namespace larder
