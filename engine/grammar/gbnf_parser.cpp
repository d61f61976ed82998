// GBNF parser (grammar.h). Follows llama.cpp's src/llama-grammar.cpp
// parse_sequence / parse_alternates / handle_repetitions in what it accepts
// and how it desugars: a group becomes a generated rule, X* becomes
// R ::= X R | (empty), X{m,n} becomes m copies of X and a chain of n - m
// nested optionals.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <unordered_map>

#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_analysis.h"
#include "storage/cancel.h"

namespace larder {

bool chars_match(const GrammarElement& e, uint32_t cp) {
  bool in = false;
  for (const CharRange& r : e.ranges) in = in || (r.lo <= cp && cp <= r.hi);
  return e.negated ? !in : in;
}

bool chars_match_any(const GrammarElement& e, uint32_t lo, uint32_t hi) {
  if (!e.negated) {
    for (const CharRange& r : e.ranges) {
      if (r.lo <= hi && lo <= r.hi) return true;
    }
    return false;
  }
  // Negated: is some code point of [lo, hi] outside every range?
  uint32_t cp = lo;
  while (true) {
    const CharRange* cover = nullptr;
    for (const CharRange& r : e.ranges) {
      if (r.lo <= cp && cp <= r.hi) cover = &r;
    }
    if (cover == nullptr) return true;
    if (cover->hi >= hi) return false;
    cp = cover->hi + 1;
  }
}

namespace {

constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();
constexpr uint32_t kMaxRepetition = 10000;
constexpr size_t kMaxElements = 1 << 20;  // after desugaring, all rules
constexpr int kMaxGroupDepth = 64;         // ( ( ... ) ) nesting: the parser recurses on it
// Rules a top-down expansion may go through before matching a code point
// (the matcher recurses that deep).
constexpr int kMaxExpansionDepth = 1000;

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Result<Grammar> run(std::string_view root_name) {
    skip_space(true);
    while (ok() && pos_ < s_.size()) {
      parse_rule();
      skip_space(true);
    }
    if (!ok()) return error_;
    for (uint32_t id = 0; id < rules_.size(); ++id) {
      if (!defined_[id]) {
        pos_ = first_use_[id];
        fail("undefined rule \"" + rules_[id].name + "\"");
        return error_;
      }
    }
    auto root = ids_.find(std::string(root_name));
    if (root == ids_.end()) {
      return Status::invalid_argument("grammar: no rule named \"" + std::string(root_name) + "\" (the start rule)");
    }
    LARDER_RETURN_IF_ERROR(check_left_recursion(rules_, kMaxExpansionDepth));
    LARDER_RETURN_IF_ERROR(prune_rules_that_cannot_end(rules_, root->second));
    Grammar g;
    g.rules = std::move(rules_);
    g.root = root->second;
    return g;
  }

 private:
  bool ok() const { return error_.is_ok(); }

  // Records the first error only (with where it happened).
  void fail(const std::string& what) {
    if (!ok()) return;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    error_ = Status::invalid_argument("grammar: line " + std::to_string(line) + ", column " + std::to_string(col) +
                                      ": " + what);
  }

  char peek(size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }
  bool at_end() const { return pos_ >= s_.size(); }

  // Spaces, tabs and # comments; newlines too when newline_ok.
  void skip_space(bool newline_ok) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n' && peek() != '\r') ++pos_;
      } else if ((c == '\n' || c == '\r') && newline_ok) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  // The id of rule `name`, made on first sight; `at`: where the name starts
  // (what an "undefined rule" error points at).
  uint32_t rule_id(const std::string& name, size_t at) {
    auto [it, added] = ids_.try_emplace(name, uint32_t(rules_.size()));
    if (added) {
      rules_.push_back(GrammarRule{name, {}});
      defined_.push_back(false);
      first_use_.push_back(at);
    }
    return it->second;
  }

  uint32_t new_rule(const std::string& base) {
    std::string name;
    do {
      name = base + "-" + std::to_string(++generated_);
    } while (ids_.count(name) != 0);
    const uint32_t id = rule_id(name, pos_);
    defined_[id] = true;
    return id;
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_word_char(peek())) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(s_.substr(start, pos_ - start));
  }

  void parse_rule() {
    const size_t name_pos = pos_;
    const std::string name = parse_name();
    if (!ok()) return;
    skip_space(false);
    if (s_.substr(pos_, 3) != "::=") {
      fail("expected ::= after \"" + name + "\"");
      return;
    }
    pos_ += 3;
    skip_space(true);
    const uint32_t id = rule_id(name, name_pos);
    if (defined_[id]) {
      pos_ = name_pos;
      fail("rule \"" + name + "\" is defined twice");
      return;
    }
    defined_[id] = true;
    std::vector<GrammarAlternative> alts = parse_alternates(name, /*nested=*/false);
    if (!ok()) return;
    rules_[id].alternatives = std::move(alts);
    if (!at_end() && peek() != '\n' && peek() != '\r') fail("expected the end of the line");
  }

  std::vector<GrammarAlternative> parse_alternates(const std::string& rule_name, bool nested) {
    std::vector<GrammarAlternative> alts;
    alts.push_back(parse_sequence(rule_name, nested));
    while (ok()) {
      if (cancel_requested()) {
        error_ = Status::cancelled("grammar: cancelled");
        break;
      }
      // An alternative may go on after a newline when it starts with `|`.
      const size_t save = pos_;
      skip_space(true);
      if (peek() != '|') {
        pos_ = save;
        break;
      }
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(rule_name, nested));
    }
    return alts;
  }

  uint32_t parse_hex(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      const char c = peek();
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) {
        fail("expected " + std::to_string(n) + " hex digits");
        return 0;
      }
      v = v * 16 + uint32_t(d);
      ++pos_;
    }
    return v;
  }

  // One code point of a literal or a class: an escape or UTF-8.
  uint32_t parse_char() {
    if (at_end()) {
      fail("unexpected end of the grammar");
      return 0;
    }
    const unsigned char c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': {
          const uint32_t cp = parse_hex(8);
          // Found in hostile testing: \U00110000 compiled, then failed mid-generation.
          if (cp > 0x10FFFF) fail("a code point past U+10FFFF: no UTF-8 text holds one");
          return cp;
        }
        case 't': return '\t';
        case 'n': return '\n';
        case 'r': return '\r';
        case '\\': case '"': case '[': case ']': case '-': case '^': return uint32_t(uint8_t(e));
        default:
          --pos_;
          fail(std::string("unknown escape \\") + (e == '\0' ? std::string("(end)") : std::string(1, e)));
          return 0;
      }
    }
    int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || pos_ + size_t(n) > s_.size()) {
      fail("invalid UTF-8");
      return 0;
    }
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < n; ++i) {
      const unsigned char b = static_cast<unsigned char>(s_[pos_ + size_t(i)]);
      if ((b >> 6) != 0x2) {
        fail("invalid UTF-8");
        return 0;
      }
      cp = (cp << 6) | (b & 0x3F);
    }
    pos_ += size_t(n);
    return cp;
  }

  static GrammarElement single(uint32_t cp) {
    GrammarElement e;
    e.ranges.push_back({cp, cp});
    return e;
  }
  static GrammarElement ref(uint32_t rule) {
    GrammarElement e;
    e.kind = GrammarElement::Kind::kRule;
    e.rule = rule;
    return e;
  }

  bool count_elements(size_t more) {
    n_elements_ += more;
    if (n_elements_ > kMaxElements) {
      fail("the grammar is too large after expanding its repetitions (over " + std::to_string(kMaxElements) +
           " elements)");
      return false;
    }
    return true;
  }

  // Applies {min, max} to seq[last_start, end).
  void repeat(GrammarAlternative& seq, size_t last_start, uint32_t min, uint32_t max, const std::string& rule_name) {
    if (last_start >= seq.size()) {
      fail("a repetition operator with nothing before it");
      return;
    }
    if (min > kMaxRepetition || (max != kUnbounded && max > kMaxRepetition)) {
      fail("a repetition count above " + std::to_string(kMaxRepetition));
      return;
    }
    if (max != kUnbounded && max < min) {
      fail("a repetition {m,n} with n < m");
      return;
    }
    const GrammarAlternative item(seq.begin() + long(last_start), seq.end());
    seq.resize(last_start);
    const uint64_t copies = uint64_t(min) + (max == kUnbounded ? 1 : uint64_t(max - min));
    if (!count_elements(size_t(copies * (item.size() + 1)))) return;
    for (uint32_t i = 0; i < min; ++i) seq.insert(seq.end(), item.begin(), item.end());
    if (max == kUnbounded) {
      // R ::= item R | (empty)
      const uint32_t r = new_rule(rule_name);
      GrammarAlternative more = item;
      more.push_back(ref(r));
      rules_[r].alternatives = {std::move(more), {}};
      seq.push_back(ref(r));
      return;
    }
    // Optional_k ::= item Optional_{k+1} | (empty), innermost first.
    int64_t inner = -1;
    for (uint32_t i = min; i < max; ++i) {
      const uint32_t r = new_rule(rule_name);
      GrammarAlternative alt = item;
      if (inner >= 0) alt.push_back(ref(uint32_t(inner)));
      rules_[r].alternatives = {std::move(alt), {}};
      inner = r;
    }
    if (inner >= 0) seq.push_back(ref(uint32_t(inner)));
  }

  uint32_t parse_int() {
    uint64_t v = 0;
    const size_t start = pos_;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = std::min<uint64_t>(v * 10 + uint64_t(peek() - '0'), uint64_t(kMaxRepetition) + 1);
      ++pos_;
    }
    if (pos_ == start) fail("expected a number");
    return uint32_t(v);
  }

  GrammarAlternative parse_sequence(const std::string& rule_name, bool nested) {
    GrammarAlternative seq;
    size_t last_start = seq.size();
    while (ok() && !at_end()) {
      const char c = peek();
      if (c == '"') {
        ++pos_;
        last_start = seq.size();
        while (ok() && peek() != '"') {
          if (at_end()) {
            fail("an unterminated string literal");
            break;
          }
          const size_t at = pos_;
          const uint32_t cp = parse_char();
          if (ok() && cp >= 0xD800 && cp <= 0xDFFF) {
            pos_ = at;
            fail("a surrogate code point in a string literal: no UTF-8 text holds one");
            break;
          }
          seq.push_back(single(cp));
        }
        if (!ok()) break;
        ++pos_;
        if (!count_elements(seq.size() - last_start)) break;
      } else if (c == '[') {
        ++pos_;
        last_start = seq.size();
        GrammarElement e;
        if (peek() == '^') {
          e.negated = true;
          ++pos_;
        }
        while (ok() && peek() != ']') {
          if (at_end()) {
            fail("an unterminated character class");
            break;
          }
          const uint32_t lo = parse_char();
          uint32_t hi = lo;
          if (peek() == '-' && peek(1) != ']' && pos_ + 1 < s_.size()) {
            ++pos_;
            hi = parse_char();
          }
          if (hi < lo) fail("a character range whose end is below its start");
          e.ranges.push_back({lo, hi});
        }
        if (!ok()) break;
        ++pos_;
        seq.push_back(std::move(e));
        if (!count_elements(1)) break;
      } else if (c == '.') {
        ++pos_;
        last_start = seq.size();
        GrammarElement any;
        any.negated = true;
        seq.push_back(any);
        if (!count_elements(1)) break;
      } else if (is_word_char(c)) {
        last_start = seq.size();
        const size_t at = pos_;
        const std::string name = parse_name();
        seq.push_back(ref(rule_id(name, at)));
        if (!count_elements(1)) break;
      } else if (c == '(') {
        if (++group_depth_ > kMaxGroupDepth) {
          fail("groups nested more than " + std::to_string(kMaxGroupDepth) + " deep");
          break;
        }
        ++pos_;
        skip_space(true);
        last_start = seq.size();
        const uint32_t sub = new_rule(rule_name);
        std::vector<GrammarAlternative> alts = parse_alternates(rule_name, /*nested=*/true);
        if (!ok()) break;
        skip_space(true);
        if (peek() != ')') {
          fail("expected ) to close a group");
          break;
        }
        ++pos_;
        --group_depth_;
        rules_[sub].alternatives = std::move(alts);
        seq.push_back(ref(sub));
      } else if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        repeat(seq, last_start, c == '+' ? 1 : 0, c == '?' ? 1 : kUnbounded, rule_name);
      } else if (c == '{') {
        ++pos_;
        skip_space(nested);
        const uint32_t min = parse_int();
        uint32_t max = min;
        skip_space(nested);
        if (peek() == ',') {
          ++pos_;
          skip_space(nested);
          max = (peek() >= '0' && peek() <= '9') ? parse_int() : kUnbounded;
          skip_space(nested);
        }
        if (ok() && peek() != '}') fail("expected } to close a repetition count");
        if (!ok()) break;
        ++pos_;
        repeat(seq, last_start, min, max, rule_name);
      } else if (c == '<') {
        fail("token references (<...>) are not supported");
      } else {
        break;
      }
      skip_space(nested);
    }
    return seq;
  }

  std::string_view s_;
  size_t pos_ = 0;
  Status error_;
  std::vector<GrammarRule> rules_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;
  int generated_ = 0;
  size_t n_elements_ = 0;
  int group_depth_ = 0;
};

void append_char(std::string& out, uint32_t cp) {
  if (cp == '\\' || cp == ']' || cp == '[' || cp == '"' || cp == '-' || cp == '^') {
    out += '\\';
    out += char(cp);
  } else if (cp >= 0x20 && cp < 0x7F) {
    out += char(cp);
  } else {
    char buf[16];
    std::snprintf(buf, sizeof buf, cp <= 0xFF ? "\\x%02X" : cp <= 0xFFFF ? "\\u%04X" : "\\U%08X", cp);
    out += buf;
  }
}

}  // namespace

Result<Grammar> parse_gbnf(std::string_view text, std::string_view root_name) {
  return Parser(text).run(root_name);
}

std::string to_gbnf(const Grammar& g) {
  std::string out;
  for (const GrammarRule& r : g.rules) {
    out += r.name + " ::=";
    for (size_t a = 0; a < r.alternatives.size(); ++a) {
      if (a > 0) out += " |";
      if (r.alternatives[a].empty()) out += " \"\"";
      for (const GrammarElement& e : r.alternatives[a]) {
        out += ' ';
        if (e.kind == GrammarElement::Kind::kRule) {
          out += g.rules[e.rule].name;
          continue;
        }
        out += e.negated ? "[^" : "[";
        for (const CharRange& cr : e.ranges) {
          append_char(out, cr.lo);
          if (cr.hi != cr.lo) {
            out += '-';
            append_char(out, cr.hi);
          }
        }
        out += ']';
      }
    }
    out += '\n';
  }
  return out;
}

}  // namespace larder
