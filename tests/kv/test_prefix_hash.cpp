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

// Expected values: the bytes documented in prefix_hash.cpp were built in
// Python (struct.pack) and hashed with the xxhsum 0.8.1 CLI (`xxhsum -H2`,
// XXH3-128, printed high 64 bits first):
//   root = b"larder-kv-root-v1" + bytes(range(16)) + pack('<IIII',5,32,16,0)
//          + pack('<Q',1) + b"s"                 -> 81fc068d7d87e395 b9fb0c479474d429
//   next = pack('<QQ', root.hi, root.lo) + pack('<16i', *range(1,17))
//                                                -> 1748242e046b8bdc 0de28a2c06b494c8
//   root with empty salt                         -> 83ee03e168bbee2a 5e2ea748f5d06d95
TEST_CASE("prefix hash root and chain match xxhsum", "[kv]") {
  KvLayout layout{5, 32, 16, KvDtype::kF32};
  PageKey root = prefix_root(fingerprint_0_to_15(), layout, "s");
  CHECK(root.hi == 0x81fc068d7d87e395ull);
  CHECK(root.lo == 0xb9fb0c479474d429ull);

  std::vector<int32_t> tokens(16);
  for (int i = 0; i < 16; ++i) tokens[size_t(i)] = i + 1;
  PageKey next = prefix_next(root, tokens);
  CHECK(next.hi == 0x1748242e046b8bdcull);
  CHECK(next.lo == 0x0de28a2c06b494c8ull);

  PageKey unsalted = prefix_root(fingerprint_0_to_15(), layout, "");
  CHECK(unsalted.hi == 0x83ee03e168bbee2aull);
  CHECK(unsalted.lo == 0x5e2ea748f5d06d95ull);
}

TEST_CASE("prefix chain keys name the whole prefix", "[kv]") {
  KvLayout layout{5, 32, 4, KvDtype::kF32};
  PageKey root = prefix_root(fingerprint_0_to_15(), layout, "");
  std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<int32_t> b = {1, 2, 3, 4, 5, 6, 7, 0, 9};  // differs in page 1
  auto ka = prefix_chain(root, a, 4, 2);
  auto kb = prefix_chain(root, b, 4, 2);
  REQUIRE(ka.size() == 2);
  CHECK(ka[0] == kb[0]);
  CHECK(!(ka[1] == kb[1]));
  CHECK(ka[1] == prefix_next(ka[0], std::span<const int32_t>(a).subspan(4, 4)));
  // The same tokens under another layout (page size, dtype) or salt get other keys.
  CHECK(!(prefix_root(fingerprint_0_to_15(), KvLayout{5, 32, 4, KvDtype::kF16}, "") == root));
  CHECK(!(prefix_root(fingerprint_0_to_15(), layout, "tenant-b") == root));
}
