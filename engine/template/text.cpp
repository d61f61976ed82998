// UTF-8 helpers and TextBuilder: strings with marked (untrusted) byte
// ranges (see value.h).
#include <algorithm>

#include "engine/template/value.h"

namespace larder::tmpl {

bool is_py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

std::vector<uint32_t> utf8_decode(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > s.size()) {
      out.push_back(0xfffd);
      ++i;
      continue;
    }
    uint32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out.push_back(cp);
    i += n;
  }
  return out;
}

std::string utf8_encode(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) {
    const uint32_t cp = cps[i];
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  return out;
}

std::vector<size_t> utf8_offsets(std::string_view s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  size_t i = 0;
  while (i < s.size()) {
    out.push_back(i);
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    i += (n == 0 || i + n > s.size()) ? 1 : n;
  }
  out.push_back(s.size());
  return out;
}

void TextBuilder::mark(size_t begin, size_t end, int32_t origin) {
  if (begin >= end) return;
  if (!spans_.empty() && spans_.back().end == begin && spans_.back().origin == origin) {
    spans_.back().end = end;
    return;
  }
  spans_.push_back({begin, end, origin});
}

void TextBuilder::append(const Value& v) {
  if (!v.is_string()) {
    append(v.str_value());
    return;
  }
  append_sub(v, 0, v.str().size());
}

void TextBuilder::append_sub(const Value& v, size_t begin, size_t end) {
  const std::string& s = v.str();
  end = std::min(end, s.size());
  if (begin >= end) return;
  const size_t base = text_.size();
  text_.append(s, begin, end - begin);
  const std::vector<TextSpan>& spans = v.spans();
  // First span that ends after `begin`.
  auto it = std::upper_bound(spans.begin(), spans.end(), begin,
                             [](size_t b, const TextSpan& sp) { return b < sp.end; });
  for (; it != spans.end() && it->begin < end; ++it) {
    mark(base + std::max(it->begin, begin) - begin, base + std::min(it->end, end) - begin, it->origin);
  }
}

void TextBuilder::append_trusted(std::string_view text) { text_.append(text); }

void TextBuilder::append_text(std::string_view text, bool untrusted, int32_t origin) {
  const size_t base = text_.size();
  text_.append(text);
  if (untrusted) mark(base, text_.size(), origin);
}

Value TextBuilder::take() {
  Value v = Value::text(std::move(text_), std::move(spans_));
  text_.clear();
  spans_.clear();
  return v;
}

std::string TextBuilder::take_text(std::vector<TextSpan>* spans) {
  *spans = std::move(spans_);
  spans_.clear();
  std::string out = std::move(text_);
  text_.clear();
  return out;
}

}  // namespace larder::tmpl
