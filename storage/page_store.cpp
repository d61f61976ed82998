#include "storage/page_store.h"

#include <cassert>

namespace larder {

std::string PageKey::to_bytes() const {
  std::string out(16, '\0');
  for (int i = 0; i < 8; ++i) {
    out[size_t(i)] = char((hi >> (56 - 8 * i)) & 0xFF);
    out[size_t(8 + i)] = char((lo >> (56 - 8 * i)) & 0xFF);
  }
  return out;
}

PageKey PageKey::from_bytes(std::string_view b) {
  assert(b.size() == 16);
  PageKey key;
  if (b.size() != 16) return key;
  for (int i = 0; i < 8; ++i) {
    key.hi = (key.hi << 8) | uint8_t(b[size_t(i)]);
    key.lo = (key.lo << 8) | uint8_t(b[size_t(8 + i)]);
  }
  return key;
}

std::string PageKey::to_hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  const std::string bytes = to_bytes();
  std::string out;
  out.reserve(32);
  for (char c : bytes) {
    out.push_back(kDigits[uint8_t(c) >> 4]);
    out.push_back(kDigits[uint8_t(c) & 0xF]);
  }
  return out;
}

}  // namespace larder
