// Jinja lexing (see lexer.h).
#include "engine/template/lexer.h"

#include <cctype>
#include <cstdlib>

namespace larder::tmpl {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

int count_lines(std::string_view s, size_t begin, size_t end) {
  int n = 0;
  for (size_t i = begin; i < end && i < s.size(); ++i) n += s[i] == '\n';
  return n;
}

// Index of the closing delimiter `close` ("}}" or "%}") of a tag whose inside
// starts at `pos`, skipping string literals. npos if absent.
size_t find_tag_end(std::string_view src, size_t pos, std::string_view close) {
  char quote = 0;
  for (size_t i = pos; i < src.size(); ++i) {
    const char c = src[i];
    if (quote) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      continue;
    }
    if (src.compare(i, close.size(), close) == 0) return i;
  }
  return std::string_view::npos;
}

void rstrip_all(std::string* s) {
  while (!s->empty() && is_space(s->back())) s->pop_back();
}

// lstrip_blocks: drop spaces/tabs between the last line start and the tag.
void lstrip_line(std::string* s, bool line_starting) {
  const size_t nl = s->rfind('\n');
  const size_t from = nl == std::string::npos ? 0 : nl + 1;
  if (nl == std::string::npos && !line_starting) return;
  for (size_t i = from; i < s->size(); ++i) {
    if (!is_space((*s)[i])) return;
  }
  s->resize(from);
}

}  // namespace

std::vector<Chunk> lex_template(std::string_view src) {
  std::vector<Chunk> out;
  std::string text;
  int text_line = 1;
  int line = 1;
  size_t pos = 0;
  bool line_starting = true;
  bool strip_next = false;  // previous tag ended with "-"
  auto flush_text = [&]() {
    if (!text.empty()) out.push_back({ChunkKind::kText, text, text_line});
    text.clear();
  };
  while (pos <= src.size()) {
    const size_t open = src.find('{', pos);
    size_t tag = std::string_view::npos;
    for (size_t p = open; p != std::string_view::npos && p + 1 < src.size(); p = src.find('{', p + 1)) {
      const char n = src[p + 1];
      if (n == '{' || n == '%' || n == '#') {
        tag = p;
        break;
      }
    }
    std::string_view piece = src.substr(pos, tag == std::string_view::npos ? std::string_view::npos : tag - pos);
    size_t skip = 0;
    if (strip_next) {
      while (skip < piece.size() && is_space(piece[skip])) ++skip;
    }
    if (text.empty()) text_line = line + count_lines(piece, 0, skip);
    text.append(piece.substr(skip));
    line += count_lines(piece, 0, piece.size());
    strip_next = false;
    if (tag == std::string_view::npos) break;

    const char kind = src[tag + 1];
    const int tag_line = line;
    size_t inner = tag + 2;
    char open_ctl = 0;
    if (inner < src.size() && (src[inner] == '-' || src[inner] == '+')) open_ctl = src[inner++];
    if (open_ctl == '-') {
      rstrip_all(&text);
    } else if (open_ctl != '+' && kind != '{') {
      lstrip_line(&text, line_starting);
    }
    const std::string_view close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    const size_t end = kind == '#' ? src.find(close, inner) : find_tag_end(src, inner, close);
    if (end == std::string_view::npos) {
      throw TemplateError(kind == '#' ? "unterminated comment" : kind == '{' ? "unterminated '{{'" : "unterminated '{%'",
                          tag_line);
    }
    size_t inner_end = end;
    char close_ctl = 0;
    if (inner_end > inner && (src[inner_end - 1] == '-' || src[inner_end - 1] == '+')) close_ctl = src[--inner_end];
    std::string body(src.substr(inner, inner_end - inner));
    size_t after = end + 2;
    line += count_lines(src, tag, after);

    // {% raw %}: everything up to {% endraw %} is text.
    if (kind == '%') {
      size_t b = 0;
      while (b < body.size() && is_space(body[b])) ++b;
      size_t e = body.size();
      while (e > b && is_space(body[e - 1])) --e;
      if (body.substr(b, e - b) == "raw") {
        size_t search = after;
        size_t raw_end = std::string_view::npos;
        size_t raw_after = 0;
        bool raw_strip_before = false;
        while (true) {
          const size_t t = src.find("{%", search);
          if (t == std::string_view::npos) throw TemplateError("unterminated {% raw %} block", tag_line);
          size_t q = t + 2;
          bool strip = false;
          if (q < src.size() && (src[q] == '-' || src[q] == '+')) strip = src[q++] == '-';
          while (q < src.size() && is_space(src[q])) ++q;
          if (src.compare(q, 6, "endraw") == 0) {
            q += 6;
            while (q < src.size() && is_space(src[q])) ++q;
            char ctl = 0;
            if (q < src.size() && (src[q] == '-' || src[q] == '+')) ctl = src[q++];
            if (src.compare(q, 2, "%}") == 0) {
              raw_end = t;
              raw_after = q + 2;
              raw_strip_before = strip;
              close_ctl = ctl;
              break;
            }
          }
          search = t + 2;
        }
        std::string raw(src.substr(after, raw_end - after));
        if (raw_strip_before) rstrip_all(&raw);  // {%- endraw %}
        flush_text();
        text_line = line;
        text = std::move(raw);
        line += count_lines(src, after, raw_after);
        after = raw_after;
        if (close_ctl != '-' && close_ctl != '+' && after < src.size() && src[after] == '\n') {
          ++after;
          ++line;
        }
        strip_next = close_ctl == '-';
        line_starting = after > 0 && src[after - 1] == '\n';
        pos = after;
        continue;
      }
    }

    if (kind != '#') {
      flush_text();
      out.push_back({kind == '{' ? ChunkKind::kExpr : ChunkKind::kStmt, std::move(body), tag_line});
    }
    if (close_ctl == '-') {
      strip_next = true;
    } else if (close_ctl != '+' && kind != '{' && after < src.size() && src[after] == '\n') {
      ++after;  // trim_blocks
      ++line;
    }
    line_starting = src[after - 1] == '\n';
    if (strip_next) {
      // The stripped whitespace counts as consumed by the tag.
      size_t q = after;
      while (q < src.size() && is_space(src[q])) ++q;
      line_starting = q > after ? src[q - 1] == '\n' : line_starting;
    }
    pos = after;
  }
  flush_text();
  return out;
}

namespace {

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xc0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xe0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    *out += static_cast<char>(0xf0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// Python string-literal escapes (Jinja2 decodes with "unicode-escape");
// unknown escapes stay as written.
std::string unescape(std::string_view s, int line) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    auto hex = [&](int n) -> uint32_t {
      const std::string digits(s.substr(i + 1, n));
      if (digits.size() != static_cast<size_t>(n)) throw TemplateError("truncated escape in string", line);
      i += n;
      return static_cast<uint32_t>(std::strtoul(digits.c_str(), nullptr, 16));
    };
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case 'a': out += '\a'; break;
      case '0': out += '\0'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case '\n': break;
      case 'x': append_utf8(hex(2), &out); break;
      case 'u': append_utf8(hex(4), &out); break;
      case 'U': append_utf8(hex(8), &out); break;
      default: out += '\\'; out += c;
    }
  }
  return out;
}

}  // namespace

std::vector<Token> lex_expression(std::string_view s, int line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (is_space(c)) {
      line += c == '\n';
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({TokKind::kName, std::string(s.substr(i, j - i))});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool is_float = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
        is_float = true;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          is_float = true;
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        }
      }
      std::string num;
      for (size_t k = i; k < j; ++k) {
        if (s[k] != '_') num += s[k];
      }
      Token t{is_float ? TokKind::kFloat : TokKind::kInt, num};
      if (is_float) t.float_value = std::strtod(num.c_str(), nullptr);
      else t.int_value = std::strtoll(num.c_str(), nullptr, 10);
      out.push_back(std::move(t));
      i = j;
      continue;
    }
    if (c == '\'' || c == '"') {
      size_t j = i + 1;
      while (j < s.size() && s[j] != c) {
        if (s[j] == '\\') ++j;
        ++j;
      }
      if (j >= s.size()) throw TemplateError("unterminated string literal", line);
      out.push_back({TokKind::kString, unescape(s.substr(i + 1, j - i - 1), line)});
      for (size_t k = i; k < j; ++k) line += s[k] == '\n';
      i = j + 1;
      continue;
    }
    static constexpr std::string_view kOps2[] = {"//", "**", "==", "!=", "<=", ">="};
    bool matched = false;
    for (std::string_view op : kOps2) {
      if (s.compare(i, 2, op) == 0) {
        out.push_back({TokKind::kOp, std::string(op)});
        i += 2;
        matched = true;
        break;
      }
    }
    if (matched) continue;
    if (std::string_view("()[]{}.,:|~+-*/%<>=").find(c) != std::string_view::npos) {
      out.push_back({TokKind::kOp, std::string(1, c)});
      ++i;
      continue;
    }
    throw TemplateError(std::string("unexpected character '") + c + "' in expression", line);
  }
  out.push_back({TokKind::kEnd, ""});
  return out;
}

}  // namespace larder::tmpl
