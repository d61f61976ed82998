#include "engine/tokenizer/chat_prompt.h"

#include <cstdio>
#include <random>
#include <utility>

#include "engine/template/value.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"

namespace larder {

namespace {

// Lengths in bytes of the leading and trailing whitespace of `text` (Python's
// str.isspace(), as Jinja's trim); nullopt when it is all whitespace.
std::optional<std::pair<size_t, size_t>> whitespace_edges(std::string_view text) {
  std::vector<unicode::Char> chars;
  unicode::decode_utf8(text, chars);
  size_t first = 0, last = chars.size();
  while (first < last && tmpl::is_py_space(chars[first].cpt)) ++first;
  if (first == last) return std::nullopt;
  while (tmpl::is_py_space(chars[last - 1].cpt)) --last;
  const unicode::Char& end = chars[last - 1];
  return std::make_pair(size_t(chars[first].offset), text.size() - (end.offset + end.n_bytes));
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
