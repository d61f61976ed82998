// Page record codec: exact byte layout, round trip, and rejection of every
// single-field tampering with the check that must name it.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <xxhash.h>

#include "storage/page_record.h"

using namespace larder;

namespace {

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(char(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

uint64_t read_le64(const std::string& s, size_t off) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(uint8_t(s[off + size_t(i)])) << (8 * i);
  return v;
}

struct Sample {
  PageKey key{0x0102030405060708ull, 0x1112131415161718ull};
  PageRecordMeta meta;
  std::vector<int32_t> tokens{7, -1};
  std::vector<uint8_t> payload;
  Sample() {
    payload = {0xDE, 0xAD, 0xBE};
    for (int i = 0; i < 16; ++i) meta.fingerprint[size_t(i)] = uint8_t(0xA0 + i);
    meta.kv_dtype = 1;
    meta.n_layers = 5;
    meta.page_size = 2;
    meta.kv_dim = 64;
  }
  std::string encode() const { return encode_page_record(key, meta, tokens, payload); }
};

// Decodes with the sample's expectations; returns the status message ("" if OK).
std::string decode_msg(const Sample& s, const std::string& record) {
  std::vector<uint8_t> out(s.payload.size(), 0x55);
  Status st = decode_page_record(record, s.key, s.meta, s.tokens, out);
  if (st.is_ok()) return "";
  CHECK(st.code() == StatusCode::kCorruption);
  // A rejected record never writes the output buffer.
  CHECK(out == std::vector<uint8_t>(s.payload.size(), 0x55));
  return st.message();
}

}  // namespace

TEST_CASE("XXH3-64 library sanity vector", "[storage][record]") {
  // XXH3_64bits of empty input, seed 0: 0x2D06800538D394C2, the value in
  // xxHash's published sanity tests. Guards the checksum we build on.
  CHECK(XXH3_64bits("", 0) == 0x2D06800538D394C2ull);
}

TEST_CASE("page record has the documented byte layout", "[storage][record]") {
  Sample s;
  const std::string rec = s.encode();
  // Expected header+tokens+payload from python3:
  //   b'LKVP' + struct.pack('<I',1) + struct.pack('<QQ',0x0102030405060708,0x1112131415161718)
  //   + bytes(range(0xA0,0xB0)) + struct.pack('<IIIII',1,5,2,64,2) + struct.pack('<Q',3)
  //   + struct.pack('<ii',7,-1) + bytes([0xDE,0xAD,0xBE])      -> 79 bytes
  const std::string body = from_hex(
      "4c4b56500100000008070605040302011817161514131211a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
      "0100000005000000020000004000000002000000030000000000000007000000ffffffffdeadbe");
  REQUIRE(body.size() == 79);
  // 76 fixed bytes + 4 * 2 tokens + 3 payload bytes.
  REQUIRE(rec.size() == 87);
  CHECK(page_record_size(2, 3) == 87);
  CHECK(rec.substr(0, 79) == body);
  // Checksum: XXH3-64 (seed 0) of the 79 bytes, computed by libxxhash over
  // the hand-built body (not over the encoder's output).
  CHECK(read_le64(rec, 79) == XXH3_64bits(body.data(), body.size()));
}

TEST_CASE("page record round trip", "[storage][record]") {
  Sample s;
  std::vector<uint8_t> out(3, 0);
  REQUIRE(decode_page_record(s.encode(), s.key, s.meta, s.tokens, out).is_ok());
  CHECK(out == s.payload);

  // Larger page: 16 tokens, 64 KiB payload with a byte pattern.
  Sample big;
  big.tokens.clear();
  for (int i = 0; i < 16; ++i) big.tokens.push_back(1000 * i - 3);
  big.payload.resize(65536);
  for (size_t i = 0; i < big.payload.size(); ++i) big.payload[i] = uint8_t(i * 31 + 7);
  const std::string rec = big.encode();
  CHECK(rec.size() == 76 + 64 + 65536);
  std::vector<uint8_t> big_out(65536, 0);
  REQUIRE(decode_page_record(rec, big.key, big.meta, big.tokens, big_out).is_ok());
  CHECK(big_out == big.payload);

  // Empty page (no tokens, no payload) is valid too.
  Sample empty;
  empty.tokens.clear();
  empty.payload.clear();
  const std::string erec = empty.encode();
  CHECK(erec.size() == 76);
  CHECK(decode_page_record(erec, empty.key, empty.meta, {}, {}).is_ok());
}

TEST_CASE("page record: single-byte tampering is rejected by the right check", "[storage][record]") {
  Sample s;
  const std::string good = s.encode();
  // Offsets from the layout table in page_record.h; each flips bits of one
  // byte. n_tokens = 2 -> 3 (xor 1) declares 91 bytes > 87: "truncated";
  // n_tokens 2 -> 1 (xor 3) declares 83 < 87: "trailing bytes".
  struct Case { size_t offset; uint8_t mask; const char* expect; };
  const Case cases[] = {
      {0, 0x01, "page record: bad magic"},
      {3, 0x20, "page record: bad magic"},
      {4, 0x01, "page record: unsupported format version"},
      {7, 0x80, "page record: unsupported format version"},
      {8, 0x01, "page record: key mismatch"},    // key.hi low byte
      {15, 0x01, "page record: key mismatch"},   // key.hi high byte
      {16, 0x01, "page record: key mismatch"},   // key.lo
      {24, 0x01, "page record: fingerprint mismatch"},
      {39, 0x01, "page record: fingerprint mismatch"},
      {40, 0x01, "page record: kv_dtype mismatch"},
      {44, 0x01, "page record: n_layers mismatch"},
      {48, 0x01, "page record: page_size mismatch"},
      {52, 0x01, "page record: kv_dim mismatch"},
      {56, 0x01, "page record: truncated"},
      {56, 0x03, "page record: trailing bytes"},
      {60, 0x01, "page record: trailing bytes"},   // payload 3 -> 2
      {60, 0x04, "page record: truncated"},        // payload 3 -> 7
      {67, 0x80, "page record: truncated"},        // payload bytes ~2^63
      {68, 0x01, "page record: token ids mismatch"},  // token 0: 7 -> 6
      {75, 0x80, "page record: token ids mismatch"},  // token 1 sign byte
      {76, 0x01, "page record: checksum mismatch"},   // payload byte 0
      {78, 0x01, "page record: checksum mismatch"},   // payload byte 2
      {79, 0x01, "page record: checksum mismatch"},   // checksum low byte
      {86, 0x80, "page record: checksum mismatch"},   // checksum high byte
  };
  for (const Case& c : cases) {
    std::string bad = good;
    bad[c.offset] = char(uint8_t(bad[c.offset]) ^ c.mask);
    INFO("offset " << c.offset << " mask " << int(c.mask));
    CHECK_THAT(decode_msg(s, bad), Catch::Matchers::StartsWith(c.expect));
  }
  CHECK(decode_msg(s, good).empty());
}

TEST_CASE("page record: truncation and extra length", "[storage][record]") {
  Sample s;
  const std::string good = s.encode();  // 87 bytes
  // Cut lengths: empty, inside the magic, one short of the 68-byte header,
  // header only, one token short, one byte short of the checksum.
  for (size_t len : {size_t(0), size_t(1), size_t(67), size_t(68), size_t(72), size_t(86)}) {
    INFO("length " << len);
    CHECK_THAT(decode_msg(s, good.substr(0, len)), Catch::Matchers::StartsWith("page record: truncated"));
  }
  CHECK_THAT(decode_msg(s, good + '\0'), Catch::Matchers::StartsWith("page record: trailing bytes"));
  CHECK_THAT(decode_msg(s, good + good), Catch::Matchers::StartsWith("page record: trailing bytes"));
  CHECK_THAT(decode_msg(s, std::string(200, 'x')), Catch::Matchers::StartsWith("page record: bad magic"));
}

TEST_CASE("page record: caller expectations that differ are rejected", "[storage][record]") {
  Sample s;
  const std::string rec = s.encode();
  std::vector<uint8_t> out(3, 0x55);
  auto msg = [&](const PageKey& k, const PageRecordMeta& m, const std::vector<int32_t>& t,
                 std::span<uint8_t> o) {
    Status st = decode_page_record(rec, k, m, t, o);
    return st.is_ok() ? std::string() : st.message();
  };
  PageKey other_key = s.key;
  other_key.lo ^= 1;
  CHECK_THAT(msg(other_key, s.meta, s.tokens, out), Catch::Matchers::StartsWith("page record: key mismatch"));
  PageRecordMeta m = s.meta;
  m.fingerprint[15] ^= 0xFF;
  CHECK_THAT(msg(s.key, m, s.tokens, out), Catch::Matchers::StartsWith("page record: fingerprint mismatch"));
  m = s.meta;
  m.kv_dim = 128;
  CHECK_THAT(msg(s.key, m, s.tokens, out), Catch::Matchers::StartsWith("page record: kv_dim mismatch"));
  CHECK_THAT(msg(s.key, s.meta, {7}, out), Catch::Matchers::StartsWith("page record: n_tokens mismatch"));
  CHECK_THAT(msg(s.key, s.meta, {7, -1, 0}, out), Catch::Matchers::StartsWith("page record: n_tokens mismatch"));
  CHECK_THAT(msg(s.key, s.meta, {7, 1}, out), Catch::Matchers::StartsWith("page record: token ids mismatch"));
  std::vector<uint8_t> small(2, 0x55), large(4, 0x55);
  CHECK_THAT(msg(s.key, s.meta, s.tokens, small), Catch::Matchers::StartsWith("page record: payload size mismatch"));
  CHECK_THAT(msg(s.key, s.meta, s.tokens, large), Catch::Matchers::StartsWith("page record: payload size mismatch"));
  CHECK(out == std::vector<uint8_t>(3, 0x55));
  CHECK(small == std::vector<uint8_t>(2, 0x55));
}
