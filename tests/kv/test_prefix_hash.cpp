// Chained prefix hash: byte layout checked against xxhsum.
#include <catch2/catch.hpp>

#include "engine/kv/prefix_hash.h"

using namespace larder;

namespace {
std::array<uint8_t, 16> fingerprint_0_to_15() {
  std::array<uint8_t, 16> fp{};
  for (int i = 0; i < 16; ++i) fp[size_t(i)] = uint8_t(i);
  return fp;
}
}  // namespace

// Expected values: the bytes documented in prefix_hash.h were built in
// Python (struct.pack) and hashed with the xxhsum 0.8.1 CLI (`xxhsum -H2`,
// XXH3-128, printed high 64 bits first):
//   root = b"larder-kv-root-v2" + bytes(range(16)) + pack('<IIII',5,32,16,0)
//          + pack('<Q',1) + b"n" + pack('<Q',1) + b"s"
//                                                -> 67652e3fcc0b3e02 499098144ecac54b
//   next = pack('<QQ', root.hi, root.lo) + pack('<16i', *range(1,17))
//                                                -> 1616439c6bc347e1 d218a804512a85ea
//   root with empty numerics and salt            -> 73336ffbdfa872ee 9352e3fed6134c19
TEST_CASE("prefix hash root and chain match xxhsum", "[kv]") {
  KvLayout layout{5, 32, 16, KvDtype::kF32};
  PageKey root = prefix_root(fingerprint_0_to_15(), layout, "n", "s");
  CHECK(root.hi == 0x67652e3fcc0b3e02ull);
  CHECK(root.lo == 0x499098144ecac54bull);

  std::vector<int32_t> tokens(16);
  for (int i = 0; i < 16; ++i) tokens[size_t(i)] = i + 1;
  PageKey next = prefix_next(root, tokens);
  CHECK(next.hi == 0x1616439c6bc347e1ull);
  CHECK(next.lo == 0xd218a804512a85eaull);

  PageKey bare = prefix_root(fingerprint_0_to_15(), layout, "", "");
  CHECK(bare.hi == 0x73336ffbdfa872eeull);
  CHECK(bare.lo == 0x9352e3fed6134c19ull);
}

TEST_CASE("prefix chain keys name the whole prefix", "[kv]") {
  KvLayout layout{5, 32, 4, KvDtype::kF32};
  PageKey root = prefix_root(fingerprint_0_to_15(), layout, "", "");
  std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<int32_t> b = {1, 2, 3, 4, 5, 6, 7, 0, 9};  // differs in page 1
  auto ka = prefix_chain(root, a, 4, 2);
  auto kb = prefix_chain(root, b, 4, 2);
  REQUIRE(ka.size() == 2);
  CHECK(ka[0] == kb[0]);
  CHECK(!(ka[1] == kb[1]));
  CHECK(ka[1] == prefix_next(ka[0], std::span<const int32_t>(a).subspan(4, 4)));
  // The same tokens under another layout (page size, dtype), arithmetic or
  // salt get other keys; the two strings do not run into each other.
  CHECK(!(prefix_root(fingerprint_0_to_15(), KvLayout{5, 32, 4, KvDtype::kF16}, "", "") == root));
  CHECK(!(prefix_root(fingerprint_0_to_15(), layout, "", "tenant-b") == root));
  CHECK(!(prefix_root(fingerprint_0_to_15(), layout, "cpu-2-avx512", "") == root));
  CHECK(!(prefix_root(fingerprint_0_to_15(), layout, "ab", "c") == prefix_root(fingerprint_0_to_15(), layout, "a", "bc")));
}

// Expected: b"larder-kv-salt-v1" + pack('<QQ', root.hi, root.lo) + pack('<Q', 6)
// + b"user-B" hashed with `xxhsum -H2` (root: the first case's) ->
// e2ea46d7ffe4cb2a 4ec95f0210acaf8e.
TEST_CASE("a request's cache_salt gives another root; no salt keeps the root", "[kv]") {
  KvLayout layout{5, 32, 16, KvDtype::kF32};
  PageKey root = prefix_root(fingerprint_0_to_15(), layout, "n", "s");
  PageKey salted = salted_root(root, "user-B");
  CHECK(salted.hi == 0xe2ea46d7ffe4cb2aull);
  CHECK(salted.lo == 0x4ec95f0210acaf8eull);
  CHECK(salted_root(root, "") == root);
  CHECK(!(salted_root(root, "user-A") == salted));
}
