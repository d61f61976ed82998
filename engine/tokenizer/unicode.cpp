// Category lookup (a flat table for the BMP, binary search above it) and
// lenient UTF-8 decoding.
#include "engine/tokenizer/unicode.h"

#include <algorithm>
#include <array>
#include <memory>

namespace larder::unicode {
namespace {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;
constexpr uint32_t kBmpSize = 0x10000;

// White_Space in PropList.txt (unchanged since Unicode 6.1).
bool is_white_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

uint16_t category_flags(uint8_t cat) {
  switch (cat) {
    case kLu: case kLt: return kLetter | kUpperish;
    case kLl: return kLetter | kLowerish;
    case kLm: case kLo: return kLetter | kUpperish | kLowerish;
    case kMn: case kMc: case kMe: return kMark | kUpperish | kLowerish;
    case kNd: case kNl: case kNo: return kNumber;
    case kPc: case kPd: case kPs: case kPe: case kPi: case kPf: case kPo: return kPunct;
    case kSm: case kSc: case kSk: case kSo: return kSymbol;
    default: return 0;
  }
}

Category lookup_runs(uint32_t cpt) {
  const CategoryRun* end = kCategoryRuns + kNumCategoryRuns;
  const CategoryRun* it =
      std::upper_bound(kCategoryRuns, end, cpt, [](uint32_t c, const CategoryRun& r) { return c < r.start; });
  return static_cast<Category>((it - 1)->category);
}

struct BmpTable {
  std::array<uint8_t, kBmpSize> category{};
  std::array<uint16_t, kBmpSize> flags{};
  BmpTable() {
    for (size_t i = 0; i < kNumCategoryRuns; ++i) {
      const uint32_t lo = kCategoryRuns[i].start;
      const uint32_t hi = i + 1 < kNumCategoryRuns ? kCategoryRuns[i + 1].start : kMaxCodepoint + 1;
      for (uint32_t c = lo; c < std::min(hi, kBmpSize); ++c) category[c] = kCategoryRuns[i].category;
    }
    for (uint32_t c = 0; c < kBmpSize; ++c) {
      flags[c] = category_flags(category[c]) | (is_white_space(c) ? kWhitespace : 0);
    }
  }
};

const BmpTable& bmp() {
  static const auto table = std::make_unique<BmpTable>();
  return *table;
}

}  // namespace

Category category(uint32_t cpt) {
  if (cpt < kBmpSize) return static_cast<Category>(bmp().category[cpt]);
  if (cpt > kMaxCodepoint) return kCn;
  return lookup_runs(cpt);
}

uint16_t flags(uint32_t cpt) {
  if (cpt < kBmpSize) return bmp().flags[cpt];
  if (cpt >= kInvalidBase) return kSymbol;  // like U+FFFD, which llama.cpp puts there
  if (cpt > kMaxCodepoint) return 0;
  return category_flags(lookup_runs(cpt));
}

void decode_utf8(std::string_view text, std::vector<Char>& out) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char b = s[i];
    if (b < 0x80) {
      out.push_back({b, static_cast<uint32_t>(i), 1});
      ++i;
      continue;
    }
    // Table 3-7: the lead byte fixes the length and the range of the second byte.
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    uint32_t cpt = 0;
    if (b >= 0xC2 && b <= 0xDF) { len = 2; cpt = b & 0x1F; }
    else if (b == 0xE0) { len = 3; lo = 0xA0; cpt = b & 0x0F; }
    else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) { len = 3; cpt = b & 0x0F; }
    else if (b == 0xED) { len = 3; hi = 0x9F; cpt = b & 0x0F; }
    else if (b == 0xF0) { len = 4; lo = 0x90; cpt = b & 0x07; }
    else if (b >= 0xF1 && b <= 0xF3) { len = 4; cpt = b & 0x07; }
    else if (b == 0xF4) { len = 4; hi = 0x8F; cpt = b & 0x07; }
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      const unsigned char c = s[i + k];
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) ok = false;
      cpt = (cpt << 6) | (c & 0x3F);
    }
    if (ok) {
      out.push_back({cpt, static_cast<uint32_t>(i), static_cast<uint32_t>(len)});
      i += len;
    } else {
      out.push_back({kInvalidBase + b, static_cast<uint32_t>(i), 1});
      ++i;
    }
  }
}

void append_utf8(uint32_t cpt, std::string& out) {
  if (cpt < 0x80) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

}  // namespace larder::unicode
