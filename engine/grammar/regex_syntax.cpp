// Recursive descent over ECMA-262's Pattern grammar (section 22.2.1):
// Disjunction := Alternative ('|' Alternative)*, Alternative := Term*,
// Term := Assertion | Atom Quantifier?, with Annex B.1.2's leniencies.
#include "engine/grammar/regex_syntax.h"

#include <string>
#include <vector>

#include "engine/tokenizer/unicode.h"

namespace larder::regex {

bool in_other(uint32_t cp) {
  if (cp < 0x80 || cp >= 0x10000) return false;
  return !(cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF);
}

namespace {

constexpr int kMaxGroupDepth = 64;

// A character class while it is parsed: its printable ASCII members, and
// how much of kOther it covers (a partial cover counts as none in a
// positive class and as some in a negated one, so the symbol set stays
// inside the class's meaning).
struct CharSet {
  enum Other : uint8_t { kNone, kPartial, kAll };
  std::bitset<95> ascii;
  Other other = kNone;

  void add(uint32_t cp) { add_range(cp, cp); }
  void add_range(uint32_t lo, uint32_t hi) {
    for (uint32_t c = std::max<uint32_t>(lo, 0x20); c <= std::min<uint32_t>(hi, 0x7E); ++c) ascii.set(c - 0x20);
    if (hi >= 0x80) {
      const Other o = lo <= 0x80 && hi >= 0x10FFFF ? kAll : (lo == hi && !in_other(lo)) ? kNone : kPartial;
      if (o > other) other = o;
    }
  }
  void add(const CharSet& s) {
    ascii |= s.ascii;
    if (s.other > other) other = s.other;
  }
  // The symbols of the class: surely in it (a partial cover of kOther
  // left out) or, with `upper`, maybe in it (a partial cover let in).
  Symbols symbols(bool negated, bool upper = false) const {
    Symbols out;
    for (int c = 0; c < 95; ++c) out[c] = negated ? !ascii[c] : ascii[c];
    if (upper) {
      out[95] = negated ? other != kAll : other != kNone;
    } else {
      out[95] = negated ? other == kNone : other == kAll;
    }
    return out;
  }
};

// \d \w \s and their complements.
CharSet class_of(char32_t letter) {
  CharSet s;
  const char32_t lower = letter | 0x20;
  if (lower == 'd') s.add_range('0', '9');
  if (lower == 'w') {
    s.add_range('a', 'z');
    s.add_range('A', 'Z');
    s.add_range('0', '9');
    s.add('_');
  }
  if (lower == 's') s.add(' ');
  if (letter != lower) {  // \D \W \S: everything else, all of kOther included
    s.ascii.flip();
    s.other = CharSet::kAll;
  }
  return s;
}

int hex_value(char32_t c) {
  if (c >= '0' && c <= '9') return int(c - '0');
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return int((c | 0x20) - 'a' + 10);
  return -1;
}

class Parser {
 public:
  explicit Parser(std::u32string p) : p_(std::move(p)) {}

  Result<Tree> run() {
    while (error_.empty()) {
      top_alternative();
      if (at_end() || !error_.empty()) break;
      ++i_;  // '|'
    }
    if (!error_.empty()) return Status::invalid_argument(error_);
    return std::move(t_);
  }

 private:
  bool at_end() const { return i_ >= p_.size(); }
  char32_t peek(size_t ahead = 0) const { return i_ + ahead < p_.size() ? p_[i_ + ahead] : 0; }
  bool starts(std::u32string_view s) const { return std::u32string_view(p_).substr(i_, s.size()) == s; }

  int fail(const std::string& what) {
    if (error_.empty()) error_ = "pattern: " + what + " (at character " + std::to_string(i_) + ")";
    return -1;
  }
  int node(Node n) {
    t_.nodes.push_back(std::move(n));
    return int(t_.nodes.size()) - 1;
  }
  int set_node(const CharSet& s, bool negated) {
    Node n;
    n.kind = Node::kSet;
    n.set = s.symbols(negated);
    n.upper = s.symbols(negated, /*upper=*/true);
    return node(std::move(n));
  }

  void top_alternative() {
    TopAlternative alt;
    if (peek() == '^') {
      ++i_;
      alt.anchored_start = true;
    }
    while (!at_end() && peek() != '|' && error_.empty()) {
      if (peek() == '$') {
        ++i_;
        if (!at_end() && peek() != '|') fail("$ is supported only at the end of the pattern or of a top-level alternative");
        alt.anchored_end = true;
        break;
      }
      if (peek() == ')') {
        fail("unmatched )");
        break;
      }
      if (starts(U"(?=") || starts(U"(?!")) {
        Node look;
        look.kind = Node::kLook;
        look.negative = peek(2) == '!';
        i_ += 3;
        const int body = disjunction(1, /*lookahead_body=*/true);
        if (body < 0) break;
        if (peek() == '$') {
          // (?=X$): X is the whole rest. Only for one alternative: in
          // (?!a|b$) the $ would bind to b alone.
          if (t_.nodes[body].kind == Node::kAlt) {
            fail("$ at the end of a lookahead with several alternatives is not supported");
            break;
          }
          ++i_;
          look.anchored = true;
        }
        if (peek() != ')') {
          fail("missing ) after a lookahead");
          break;
        }
        ++i_;
        look.kids = {body};
        if (int mn = 0, mx = 0; quantifier(&mn, &mx)) {
          fail("a quantified lookahead is not supported");
          break;
        }
        alt.items.push_back(node(std::move(look)));
        continue;
      }
      const int item = term(1);
      if (item >= 0) alt.items.push_back(item);
    }
    t_.top.push_back(std::move(alt));
  }

  // lookahead_body: stop before a $ that ends the body ("$)").
  int disjunction(int depth, bool lookahead_body = false) {
    if (depth > kMaxGroupDepth) return fail("groups nested over " + std::to_string(kMaxGroupDepth) + " deep");
    Node alt;
    alt.kind = Node::kAlt;
    while (true) {
      Node seq;
      seq.kind = Node::kSeq;
      while (!at_end() && peek() != '|' && peek() != ')' && !(lookahead_body && peek() == '$' && peek(1) == ')')) {
        const int t = term(depth);
        if (t < 0) return -1;
        seq.kids.push_back(t);
      }
      alt.kids.push_back(node(std::move(seq)));
      if (peek() != '|') break;
      ++i_;
    }
    return alt.kids.size() == 1 ? alt.kids[0] : node(std::move(alt));
  }

  // A count {n}, {n,} or {n,m} at i_ (consumed), or *, + or ?; false (i_
  // unchanged) when there is none. A lazy '?' after it is consumed too.
  bool quantifier(int* min, int* max) {
    const char32_t c = peek();
    size_t j = i_ + 1;
    if (c == '*' || c == '+' || c == '?') {
      *min = c == '+' ? 1 : 0;
      *max = c == '?' ? 1 : -1;
    } else if (c == '{') {
      auto number = [&](int* out) {
        const size_t from = j;
        long v = 0;
        while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') v = std::min<long>(v * 10 + long(p_[j++] - '0'), 1L << 30);
        *out = int(v);
        return j > from;
      };
      if (!number(min)) return false;
      *max = *min;
      if (j < p_.size() && p_[j] == ',') {
        ++j;
        if (!number(max)) *max = -1;
      }
      if (j >= p_.size() || p_[j] != '}') return false;  // Annex B: a literal '{'
      ++j;
    } else {
      return false;
    }
    i_ = j;
    if (peek() == '?') ++i_;
    return true;
  }

  int term(int depth) {
    const int a = atom(depth);
    if (a < 0) return -1;
    int mn = 0, mx = 0;
    if (!quantifier(&mn, &mx)) return a;
    if (mx >= 0 && mx < mn) return fail("numbers out of order in a {n,m} count");
    if (mn > kMaxCount || mx > kMaxCount) return fail("counts above " + std::to_string(kMaxCount) + " are not supported");
    if (int m2 = 0, x2 = 0; quantifier(&m2, &x2)) return fail("nothing to repeat");
    Node r;
    r.kind = Node::kRepeat;
    r.kids = {a};
    r.min = mn;
    r.max = mx;
    return node(std::move(r));
  }

  int atom(int depth) {
    const char32_t c = peek();
    if (c == '(') {
      if (starts(U"(?=") || starts(U"(?!")) return fail("a lookahead is supported only as an item of a top-level alternative");
      if (starts(U"(?<=") || starts(U"(?<!")) return fail("lookbehind is not supported");
      if (starts(U"(?:")) {
        i_ += 3;
      } else if (starts(U"(?<")) {
        i_ += 3;
        while (!at_end() && peek() != '>') ++i_;
        if (at_end()) return fail("unterminated group name");
        ++i_;
      } else if (peek(1) == '?') {
        return fail("unknown group syntax after (?");
      } else {
        ++i_;
      }
      const int body = disjunction(depth + 1);
      if (body < 0) return -1;
      if (peek() != ')') return fail("missing )");
      ++i_;
      return body;
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      CharSet all;
      all.ascii.set();
      all.other = CharSet::kAll;
      return set_node(all, false);
    }
    if (c == '^' || c == '$') return fail("^ and $ are supported only at the start and end of a top-level alternative");
    if (c == '*' || c == '+' || c == '?') return fail("nothing to repeat");
    if (c == '{') {
      if (int mn = 0, mx = 0; quantifier(&mn, &mx)) return fail("nothing to repeat");
    }
    CharSet s;
    if (c == '\\') {
      ++i_;
      const int64_t cp = escape(&s, false);
      if (cp == kFailed) return -1;
      if (cp >= 0) s.add(uint32_t(cp));
    } else {
      s.add(c);
      ++i_;
    }
    return set_node(s, false);
  }

  // After a '\\': the code point the escape stands for, or kSetEscape when
  // it is a class (\d ...) added to *s, or kFailed (error_ set).
  static constexpr int64_t kSetEscape = -1, kFailed = -2;
  int64_t escape(CharSet* s, bool in_class) {
    if (at_end()) return fail("\\ at the end of the pattern"), kFailed;
    const char32_t c = p_[i_++];
    switch (c) {
      case 'd': case 'D': case 'w': case 'W': case 's': case 'S':
        s->add(class_of(c));
        return kSetEscape;
      case 'b':
        if (in_class) return 8;  // backspace
        return fail("\\b (a word boundary) is not supported"), kFailed;
      case 'B':
        return fail("\\B (not a word boundary) is not supported"), kFailed;
      case 't': return 9;
      case 'n': return 10;
      case 'v': return 11;
      case 'f': return 12;
      case 'r': return 13;
      case 'c':
        if ((peek() | 0x20) >= 'a' && (peek() | 0x20) <= 'z') return int64_t(p_[i_++] % 32);
        // Annex B's ClassControlLetter: in a class, \c0 .. \c9 and \c_ are controls too.
        if (in_class && ((peek() >= '0' && peek() <= '9') || peek() == '_')) return int64_t(p_[i_++] % 32);
        --i_;  // Annex B: \c not followed by a letter is a backslash, then the c
        return '\\';
      case 'k':
        return fail("backreferences are not supported"), kFailed;
      case 'p': case 'P':
        return fail("Unicode property escapes (\\p{...}) are not supported"), kFailed;
      case 'x':
        if (hex_value(peek()) >= 0 && hex_value(peek(1)) >= 0) {
          i_ += 2;
          return int64_t(hex_value(p_[i_ - 2]) * 16 + hex_value(p_[i_ - 1]));
        }
        return 'x';
      case 'u': {
        if (peek() == '{') return fail("\\u{...} is not supported"), kFailed;
        int64_t v = 0;
        for (int k = 0; k < 4; ++k) {
          if (hex_value(peek(k)) < 0) return 'u';
          v = v * 16 + hex_value(peek(k));
        }
        i_ += 4;
        return v;
      }
      default:
        if (c >= '1' && c <= '9') return fail("backreferences are not supported"), kFailed;
        if (c == '0') return 0;  // NUL
        return int64_t(c);       // an identity escape: \. \/ \- \\ ...
    }
  }

  int char_class() {
    ++i_;  // '['
    const bool negated = peek() == '^';
    if (negated) ++i_;
    CharSet s;
    // One class atom: a code point (returned) or, for \d and the like, a set
    // added to *set and -1 returned.
    auto class_atom = [&](CharSet* set, bool* failed) -> int64_t {
      if (peek() != '\\') return int64_t(p_[i_++]);
      ++i_;
      const int64_t cp = escape(set, true);
      *failed = cp == kFailed;
      return cp;
    };
    while (true) {
      if (at_end()) return fail("missing ] at the end of a character class");
      if (peek() == ']') {
        ++i_;
        break;
      }
      bool failed = false;
      const int64_t lo = class_atom(&s, &failed);
      if (failed) return -1;
      if (peek() == '-' && peek(1) != ']' && peek(1) != 0) {
        ++i_;
        const int64_t hi = class_atom(&s, &failed);
        if (failed) return -1;
        if (lo < 0 || hi < 0) {  // Annex B: [\d-z] is \d, '-' and 'z'
          if (lo >= 0) s.add(uint32_t(lo));
          if (hi >= 0) s.add(uint32_t(hi));
          s.add('-');
          continue;
        }
        if (hi < lo) return fail("range out of order in a character class");
        s.add_range(uint32_t(lo), uint32_t(hi));
        continue;
      }
      if (lo >= 0) s.add(uint32_t(lo));
    }
    return set_node(s, negated);
  }

  std::u32string p_;
  size_t i_ = 0;
  Tree t_;
  std::string error_;
};

}  // namespace

Result<Tree> parse(std::string_view pattern) {
  std::vector<unicode::Char> chars;
  unicode::decode_utf8(pattern, chars);
  std::u32string cps;
  for (const unicode::Char& c : chars) {
    if (c.cpt >= unicode::kInvalidBase) return Status::invalid_argument("pattern: not valid UTF-8");
    cps.push_back(char32_t(c.cpt));
    if (cps.size() > kMaxPatternChars) {
      return Status::invalid_argument("pattern: longer than " + std::to_string(kMaxPatternChars) + " characters");
    }
  }
  return Parser(std::move(cps)).run();
}

}  // namespace larder::regex
