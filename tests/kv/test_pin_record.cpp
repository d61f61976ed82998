// The pin record (engine/kv/pin_record.h): its byte layout written out by
// hand, a round trip, and every way a damaged record is refused.
#include <string>

#include <catch2/catch.hpp>
#include <xxhash.h>

#include "engine/kv/pin_record.h"

using namespace larder;

namespace {

std::string le(uint64_t v, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out.push_back(char((v >> (8 * i)) & 0xFF));
  return out;
}

std::string with_sum(std::string body) { return body + le(XXH3_64bits(body.data(), body.size()), 8); }

}  // namespace

TEST_CASE("pin record: the documented byte layout, and back", "[kv][pins]") {
  const PinnedPrefix p{PageKey{0x0102030405060708ull, 0x1112131415161718ull},
                       {PageKey{1, 2}, PageKey{0xAAAAAAAAAAAAAAAAull, 3}}};
  const PinnedPrefix q{PageKey{9, 10}, {PageKey{11, 12}}};
  // "LRDPINS1", 2 pins; p: root, 2 keys; q: root, 1 key; the checksum.
  const std::string body = std::string("LRDPINS1") + le(2, 4) + le(p.root.hi, 8) + le(p.root.lo, 8) + le(2, 4) +
                           le(1, 8) + le(2, 8) + le(0xAAAAAAAAAAAAAAAAull, 8) + le(3, 8) + le(9, 8) + le(10, 8) +
                           le(1, 4) + le(11, 8) + le(12, 8);
  const std::string expected = with_sum(body);
  CHECK(expected.size() == 8 + 4 + (16 + 4 + 32) + (16 + 4 + 16) + 8);
  CHECK(encode_pin_record({p, q}) == expected);
  Result<std::vector<PinnedPrefix>> back = decode_pin_record(expected);
  REQUIRE(back.is_ok());
  CHECK(*back == std::vector<PinnedPrefix>{p, q});
  // No pins at all: header, count 0, checksum.
  CHECK(encode_pin_record({}) == with_sum(std::string("LRDPINS1") + le(0, 4)));
  CHECK(decode_pin_record(encode_pin_record({}))->empty());
}

TEST_CASE("pin record: damaged records are refused", "[kv][pins]") {
  const PinnedPrefix p{PageKey{1, 1}, {PageKey{2, 2}, PageKey{3, 3}}};
  const std::string good = encode_pin_record({p});
  std::string flipped = good;
  flipped[30] ^= 1;
  CHECK(decode_pin_record(flipped).status().code() == StatusCode::kCorruption);
  CHECK(decode_pin_record(good.substr(0, good.size() - 1)).status().code() == StatusCode::kCorruption);
  CHECK(decode_pin_record("").status().code() == StatusCode::kCorruption);
  CHECK(decode_pin_record("LRDPINS2" + good.substr(8)).status().code() == StatusCode::kCorruption);
  // A key count larger than the record, with a valid checksum.
  const std::string huge = with_sum(std::string("LRDPINS1") + le(1, 4) + le(1, 8) + le(1, 8) + le(0xFFFFFFFF, 4));
  CHECK_THAT(decode_pin_record(huge).status().message(), Catch::Contains("more than the record holds"));
  // A pin without keys, and bytes after the last pin.
  CHECK(decode_pin_record(with_sum(std::string("LRDPINS1") + le(1, 4) + le(1, 8) + le(1, 8) + le(0, 4)))
            .status().code() == StatusCode::kCorruption);
  const std::string body = good.substr(0, good.size() - 8) + "x";
  CHECK_THAT(decode_pin_record(with_sum(body)).status().message(), Catch::Contains("1 bytes too many"));
}

TEST_CASE("pin record: its key is XXH3-128 of the tag and the engine root", "[kv][pins]") {
  const PageKey root{0x0123456789abcdefull, 0xfedcba9876543210ull};
  const std::string buf = std::string("larder-pins-v1") + le(root.hi, 8) + le(root.lo, 8);
  const XXH128_hash_t h = XXH3_128bits(buf.data(), buf.size());
  CHECK(pin_record_key(root) == PageKey{h.high64, h.low64});
  CHECK(pin_record_key(root) != pin_record_key(PageKey{root.hi, root.lo + 1}));
}
