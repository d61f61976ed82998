// Unicode character classes for the byte-level BPE pre-tokenizers: the general
// category of a code point (tables generated from Python's unicodedata by
// scripts/tokenizer/gen_unicode_tables.py; the Unicode version is in
// kUnicodeVersion), the White_Space property (PropList.txt), and lenient
// UTF-8 decoding that never fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace larder::unicode {

// General categories in the order of the generated table (0 = Cn, unassigned).
enum Category : uint8_t {
  kCn, kLu, kLl, kLt, kLm, kLo, kMn, kMc, kMe, kNd, kNl, kNo, kPc, kPd, kPs, kPe, kPi, kPf, kPo,
  kSm, kSc, kSk, kSo, kZs, kZl, kZp, kCc, kCf, kCs, kCo, kNumCategories
};

struct CategoryRun {
  uint32_t start;  // first code point of the run
  uint8_t category;
};
extern const char kUnicodeVersion[];
extern const CategoryRun kCategoryRuns[];
extern const size_t kNumCategoryRuns;

// Character class bits (what the pre-tokenizer regexes test).
enum Flag : uint16_t {
  kLetter = 1 << 0,      // \p{L}
  kNumber = 1 << 1,      // \p{N}
  kMark = 1 << 2,        // \p{M}
  kPunct = 1 << 3,       // \p{P}
  kSymbol = 1 << 4,      // \p{S}
  kWhitespace = 1 << 5,  // \s: the White_Space property
  kUpperish = 1 << 6,    // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] (tekken)
  kLowerish = 1 << 7,    // [\p{Ll}\p{Lm}\p{Lo}\p{M}] (tekken)
};

// A code point that is not one: a byte of ill-formed UTF-8, kept as itself
// (kInvalidBase + byte) so that the byte-level encoding stays lossless. Its
// flags are kSymbol, the class of U+FFFD that llama.cpp substitutes there.
constexpr uint32_t kInvalidBase = 0x80000000u;

Category category(uint32_t cpt);
uint16_t flags(uint32_t cpt);  // 0 for kInvalidBase + byte

// One decoded character of a UTF-8 string.
struct Char {
  uint32_t cpt;     // code point, or kInvalidBase + byte
  uint32_t offset;  // byte offset in the string
  uint32_t n_bytes;
};

// Decodes `text` into characters. Well-formed sequences (Unicode ch. 3.9,
// Table 3-7) give their code point; every byte of an ill-formed sequence
// gives kInvalidBase + byte on its own.
void decode_utf8(std::string_view text, std::vector<Char>& out);

// Appends the UTF-8 encoding of `cpt` (< 0x110000) to `out`.
void append_utf8(uint32_t cpt, std::string& out);

}  // namespace larder::unicode
