// UTF-8 validation with U+FFFD substitution, and the incremental detokenizer.
// Well-formed UTF-8 is Table 3-7 of the Unicode Standard (ch. 3.9): the
// allowed range of the second byte depends on the lead byte (no overlongs,
// no surrogates, nothing above U+10FFFF).
#include <string>

#include "engine/tokenizer/tokenizer.h"

namespace larder {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

struct LeadInfo {
  int n_continuation;  // -1: not a valid lead byte
  unsigned char lo;    // allowed range of the first continuation byte
  unsigned char hi;
};

LeadInfo lead_info(unsigned char b) {
  if (b >= 0xC2 && b <= 0xDF) return {1, 0x80, 0xBF};
  if (b == 0xE0) return {2, 0xA0, 0xBF};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {2, 0x80, 0xBF};
  if (b == 0xED) return {2, 0x80, 0x9F};
  if (b == 0xF0) return {3, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {3, 0x80, 0xBF};
  if (b == 0xF4) return {3, 0x80, 0x8F};
  return {-1, 0, 0};
}

}  // namespace

size_t utf8_sanitize(std::string_view bytes, bool final, std::string& out) {
  size_t i = 0;
  while (i < bytes.size()) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    const LeadInfo lead = lead_info(b);
    if (lead.n_continuation < 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    // Check the continuation bytes; k counts the bytes of the maximal subpart.
    size_t k = 1;
    bool broken = false;
    for (; k <= static_cast<size_t>(lead.n_continuation); ++k) {
      if (i + k >= bytes.size()) break;  // incomplete so far
      const auto c = static_cast<unsigned char>(bytes[i + k]);
      const unsigned char lo = k == 1 ? lead.lo : 0x80;
      const unsigned char hi = k == 1 ? lead.hi : 0xBF;
      if (c < lo || c > hi) {
        broken = true;
        break;
      }
    }
    if (broken) {
      out += kReplacement;
      i += k;
    } else if (k <= static_cast<size_t>(lead.n_continuation)) {
      // Ran out of bytes in the middle of a valid prefix.
      if (!final) return i;
      out += kReplacement;
      i = bytes.size();
    } else {
      out.append(bytes.substr(i, k));
      i += k;
    }
  }
  return i;
}

bool utf8_is_valid(std::string_view s) {
  std::string sanitized;
  sanitized.reserve(s.size());
  return utf8_sanitize(s, true, sanitized) == s.size() && sanitized == s;
}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok, int32_t prev_id)
    : tok_(&tok), prev_id_(prev_id) {}

std::string piece_in_text(const Tokenizer& tok, int32_t prev_id, int32_t id) {
  std::string piece = tok.token_to_piece(id);
  // SentencePiece drops the space prefix at the start of a text; byte-level
  // BPE keeps every byte (" Hi" after <|begin_of_text|> stays " Hi").
  if (tok.model() == TokenizerModel::kSpm && prev_id >= 0 && prev_id == tok.bos_id() && !piece.empty() &&
      piece[0] == ' ') {
    piece.erase(0, 1);
  }
  return piece;
}

std::string IncrementalDetokenizer::push(int32_t id) {
  held_ += piece_in_text(*tok_, prev_id_, id);
  prev_id_ = id;
  std::string out;
  const size_t consumed = utf8_sanitize(held_, /*final=*/false, out);
  held_.erase(0, consumed);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out;
  (void)utf8_sanitize(held_, /*final=*/true, out);
  held_.clear();
  return out;
}

}  // namespace larder
