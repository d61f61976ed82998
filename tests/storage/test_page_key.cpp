// PageKey byte and hex encodings against hand-written values.
#include <string>

#include <catch2/catch.hpp>

#include "storage/page_store.h"

using namespace larder;

TEST_CASE("PageKey to_bytes / from_bytes / to_hex", "[storage][key]") {
  const PageKey key{0x0123456789ABCDEFull, 0xFEDCBA9876543210ull};
  // Big-endian hi then lo, written out by hand.
  const std::string bytes("\x01\x23\x45\x67\x89\xAB\xCD\xEF\xFE\xDC\xBA\x98\x76\x54\x32\x10", 16);
  CHECK(key.to_bytes() == bytes);
  CHECK(PageKey::from_bytes(bytes) == key);
  CHECK(key.to_hex() == "0123456789abcdeffedcba9876543210");

  const PageKey zero{};
  CHECK(zero.to_bytes() == std::string(16, '\0'));
  CHECK(zero.to_hex() == std::string(32, '0'));
  const PageKey ones{~0ull, 1};
  CHECK(ones.to_hex() == "ffffffffffffffff0000000000000001");
  CHECK(PageKey::from_bytes(ones.to_bytes()) == ones);
}

TEST_CASE("PageKey byte order sorts like (hi, lo)", "[storage][key]") {
  // Big-endian bytes compare lexicographically in numeric (hi, lo) order.
  const PageKey a{1, 0xFFFFFFFFFFFFFFFFull}, b{2, 0};
  CHECK(a.to_bytes() < b.to_bytes());
}
