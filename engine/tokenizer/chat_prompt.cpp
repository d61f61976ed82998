#include "engine/tokenizer/chat_prompt.h"

#include <cstdio>
#include <random>
#include <utility>

#include "engine/tokenizer/tokenizer.h"

namespace larder {

namespace {

// Bytes of the whitespace character (Python's str.isspace(), what Jinja's
// trim and str.strip remove) that starts at text[i], or 0.
size_t space_at(std::string_view t, size_t i) {
  const auto b = [&](size_t k) { return i + k < t.size() ? uint8_t(t[i + k]) : 0; };
  const uint8_t c = b(0);
  if ((c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20)) return 1;
  if (c == 0xc2 && (b(1) == 0x85 || b(1) == 0xa0)) return 2;                    // U+0085, U+00A0
  if (c == 0xe1 && b(1) == 0x9a && b(2) == 0x80) return 3;                      // U+1680
  if (c == 0xe2 && b(1) == 0x80 && (b(2) <= 0x8a || b(2) == 0xa8 || b(2) == 0xa9 || b(2) == 0xaf)) {
    return b(2) >= 0x80 ? 3 : 0;                                                // U+2000..200A, 2028, 2029, 202F
  }
  if (c == 0xe2 && b(1) == 0x81 && b(2) == 0x9f) return 3;                      // U+205F
  if (c == 0xe3 && b(1) == 0x80 && b(2) == 0x80) return 3;                      // U+3000
  return 0;
}

// Bytes of the whitespace character that ends at text[end - 1], or 0.
size_t space_before(std::string_view t, size_t end) {
  for (size_t n = 1; n <= 3 && n <= end; ++n) {
    if (space_at(t, end - n) == n) return n;
  }
  return 0;
}

// Lengths of the leading and trailing whitespace of `text`; nullopt when it
// is all whitespace.
std::optional<std::pair<size_t, size_t>> whitespace_edges(std::string_view text) {
  size_t lead = 0;
  for (size_t n; lead < text.size() && (n = space_at(text, lead)) > 0;) lead += n;
  if (lead == text.size()) return std::nullopt;
  size_t end = text.size();
  for (size_t n; end > lead && (n = space_before(text, end)) > 0;) end -= n;
  return std::make_pair(lead, text.size() - end);
}

// A piece of the rendering: template text, or (the kept part of) a content.
struct Piece {
  std::string_view text;
  bool is_content = false;
  const std::vector<int32_t>* ids = nullptr;  // splice these (content kept whole)
  std::string_view whole;                     // the content's full text, for the decode check
};

}  // namespace

std::string content_marker(size_t k) {
  static const uint64_t tag = [] {
    std::random_device rd;
    return (uint64_t(rd()) << 32) ^ rd();
  }();
  char buf[64];
  std::snprintf(buf, sizeof(buf), "@@larder-content-%zu-%016llx@@", k, static_cast<unsigned long long>(tag));
  return buf;
}

std::optional<std::string> marked_content(std::string_view text, size_t k) {
  auto edges = whitespace_edges(text);
  if (!edges) return std::nullopt;
  std::string out(text.substr(0, edges->first));
  out += content_marker(k);
  out.append(text.substr(text.size() - edges->second));
  return out;
}

std::optional<ChatPromptIds> tokenize_marked_chat(const Tokenizer& tok, std::string_view rendered,
                                                  std::string_view marked, std::span<const ChatContent> contents,
                                                  bool add_bos, bool parse_special, bool special_in_content) {
  // 1. Cut `marked` into template text and contents; check that the kept
  //    contents give back `rendered`.
  std::vector<Piece> pieces;
  std::string rebuilt;
  rebuilt.reserve(rendered.size());
  size_t pos = 0;
  for (size_t k = 0; k < contents.size(); ++k) {
    const std::string_view text = contents[k].text;
    auto edges = whitespace_edges(text);
    if (!edges) return std::nullopt;
    const auto [lead, trail] = *edges;
    const std::string marker = content_marker(k);
    const size_t hit = marked.find(marker, pos);
    if (hit == std::string_view::npos) return std::nullopt;
    if (marked.find(marker, hit + marker.size()) != std::string_view::npos) return std::nullopt;
    const size_t after = hit + marker.size();
    const bool lead_kept = hit - pos >= lead && marked.substr(hit - lead, lead) == text.substr(0, lead);
    const bool trail_kept = marked.substr(after, trail) == text.substr(text.size() - trail);
    const size_t begin = lead_kept ? hit - lead : hit;
    const size_t end = trail_kept ? after + trail : after;
    const std::string_view kept =
        text.substr(lead_kept ? 0 : lead, text.size() - (lead_kept ? 0 : lead) - (trail_kept ? 0 : trail));
    pieces.push_back(Piece{marked.substr(pos, begin - pos), false, nullptr, {}});
    Piece content{kept, true, nullptr, {}};
    if (contents[k].ids && lead_kept && trail_kept) {
      content.ids = &*contents[k].ids;
      content.whole = text;
    }
    pieces.push_back(content);
    rebuilt.append(pieces[pieces.size() - 2].text);
    rebuilt.append(kept);
    pos = end;
  }
  pieces.push_back(Piece{marked.substr(pos), false, nullptr, {}});
  rebuilt.append(pieces.back().text);
  if (rebuilt != rendered) return std::nullopt;

  // 2. Tokenize the text between spliced answers; splice the answers.
  ChatPromptIds out;
  std::string segment;
  std::vector<Tokenizer::ByteRange> plain;
  bool at_start = true;
  const auto encode_segment = [&]() {
    std::vector<int32_t> ids;
    if (!parse_special) {
      ids = at_start ? tok.encode(segment, false, false) : tok.encode_continuation(segment, false);
    } else {
      ids = tok.encode_chat(segment, at_start,
                            special_in_content ? std::span<const Tokenizer::ByteRange>() : plain);
    }
    return ids;
  };
  const auto append_segment = [&](std::vector<int32_t> ids) {
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    if (at_start && add_bos && tok.bos_id() >= 0 && (out.ids.empty() || out.ids.front() != tok.bos_id())) {
      out.ids.insert(out.ids.begin(), tok.bos_id());
    }
    at_start = false;
    segment.clear();
    plain.clear();
  };
  for (const Piece& p : pieces) {
    if (p.ids != nullptr) {
      // Splice if the ids give exactly this text after the ids before them.
      std::vector<int32_t> before = encode_segment();
      int32_t prev = before.empty() ? -1 : before.back();
      if (before.empty() && !out.ids.empty()) prev = out.ids.back();
      if (before.empty() && at_start && add_bos && tok.bos_id() >= 0) prev = tok.bos_id();
      if (tok.decode_text(*p.ids, prev) == p.whole) {
        append_segment(std::move(before));
        out.ids.insert(out.ids.end(), p.ids->begin(), p.ids->end());
        ++out.n_spliced;
        continue;
      }
    }
    if (p.is_content) plain.push_back({segment.size(), segment.size() + p.text.size()});
    segment.append(p.text);
  }
  append_segment(encode_segment());
  return out;
}

}  // namespace larder
