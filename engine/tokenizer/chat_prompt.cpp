#include "engine/tokenizer/chat_prompt.h"

#include <algorithm>

#include "engine/tokenizer/tokenizer.h"

namespace larder {

ChatPromptIds tokenize_chat(const Tokenizer& tok, std::string_view rendered, std::span<const tmpl::TextSpan> untrusted,
                            std::span<const ChatSplice> splices, bool add_bos, bool parse_special,
                            bool special_in_content) {
  ChatPromptIds out;
  const bool bos = add_bos && tok.bos_id() >= 0;
  bool at_start = true;
  size_t next_span = 0;  // first untrusted span not yet passed
  std::vector<Tokenizer::ByteRange> plain;
  // Ids of rendered[begin, end) as one piece.
  const auto encode = [&](size_t begin, size_t end) {
    const std::string_view text = rendered.substr(begin, end - begin);
    if (!parse_special) return at_start ? tok.encode(text, false, false) : tok.encode_continuation(text, false);
    plain.clear();
    if (!special_in_content) {
      for (size_t k = next_span; k < untrusted.size() && untrusted[k].begin < end; ++k) {
        const size_t b = std::max(untrusted[k].begin, begin), e = std::min(untrusted[k].end, end);
        if (b < e) plain.push_back({b - begin, e - begin});
      }
    }
    return tok.encode_chat(text, at_start, plain);
  };
  const auto append = [&](const std::vector<int32_t>& ids, size_t end) {
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    if (at_start && bos && (out.ids.empty() || out.ids.front() != tok.bos_id())) {
      out.ids.insert(out.ids.begin(), tok.bos_id());
    }
    at_start = false;
    while (next_span < untrusted.size() && untrusted[next_span].end <= end) ++next_span;
  };
  size_t pos = 0;  // start of the text not yet tokenized
  for (const ChatSplice& sp : splices) {
    if (sp.ids == nullptr || sp.begin < pos || sp.end > rendered.size() || sp.begin >= sp.end) continue;
    const std::string_view whole = rendered.substr(sp.begin, sp.end - sp.begin);
    // decode_text depends on the token before only when it is BOS; a splice
    // that matches in neither case is skipped without tokenizing anything
    // (so a long chat of answers that do not match stays linear).
    if (tok.decode_text(*sp.ids, -1) != whole && (tok.bos_id() < 0 || tok.decode_text(*sp.ids, tok.bos_id()) != whole)) {
      continue;
    }
    std::vector<int32_t> before = encode(pos, sp.begin);
    int32_t prev = before.empty() ? -1 : before.back();
    if (before.empty() && !out.ids.empty()) prev = out.ids.back();
    if (before.empty() && at_start && bos) prev = tok.bos_id();
    if (tok.decode_text(*sp.ids, prev) != whole) continue;
    append(before, sp.begin);
    out.ids.insert(out.ids.end(), sp.ids->begin(), sp.ids->end());
    ++out.n_spliced;
    pos = sp.end;
    while (next_span < untrusted.size() && untrusted[next_span].end <= pos) ++next_span;
  }
  append(encode(pos, rendered.size()), rendered.size());
  return out;
}

}  // namespace larder
