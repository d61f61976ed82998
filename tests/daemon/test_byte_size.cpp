// parse_byte_size / format_byte_size. Expected values are computed by hand
// from the unit definitions (KiB = 2^10, MB = 10^6, ...), not by the code.
#include <catch2/catch.hpp>

#include "daemon/byte_size.h"

using larder::format_byte_size;
using larder::parse_byte_size;

TEST_CASE("byte sizes with units", "[daemon][config]") {
  struct Row {
    const char* text;
    int64_t bytes;
  };
  const Row rows[] = {
      {"0", 0},
      {"4096", 4096},
      {"4096B", 4096},
      {"1KiB", 1024},
      {"512MiB", 536870912},           // 512 * 1024^2 = 512 * 1048576
      {"2GiB", 2147483648},            // 2 * 1024^3
      {"20GiB", 21474836480},          // 20 * 1073741824
      {"1.5GB", 1500000000},           // 1.5 * 10^9
      {"1.5GiB", 1610612736},          // 1.5 * 1073741824 = 1073741824 + 536870912
      {"500MB", 500000000},
      {"1TB", 1000000000000},
      {"1TiB", 1099511627776},         // 2^40
      {"8M", 8388608},                 // shorthand for MiB: 8 * 2^20
      {"3k", 3072},
      {"2 gib", 2147483648},           // space and lower case
      {"0.5KiB", 512},
      {"1.0000000001KB", 1000},        // 1000.0000001 rounds down
      {".5KiB", 512},
  };
  for (const Row& row : rows) {
    INFO(row.text);
    auto r = parse_byte_size(row.text);
    REQUIRE(r.is_ok());
    CHECK(*r == row.bytes);
  }
}

TEST_CASE("bad byte sizes are errors with a reason", "[daemon][config]") {
  struct Row {
    const char* text;
    const char* reason;
  };
  const Row rows[] = {
      {"", "empty"},
      {"-1GiB", "negative"},
      {"12XB", "unknown unit \"XB\""},
      {"GiB", "expected a number"},
      {"1.GiB", "digits after the decimal point"},
      {"9999999PiB", "too large"},      // 9999999 * 2^50 > 2^62
      {"99999999999999999999", "too large"},
      {"1 2 MiB", "unknown unit"},
  };
  for (const Row& row : rows) {
    INFO(row.text);
    auto r = parse_byte_size(row.text);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == larder::StatusCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains(row.reason));
  }
}

TEST_CASE("format_byte_size picks the largest exact IEC unit", "[daemon][config]") {
  CHECK(format_byte_size(1073741824) == "1GiB");
  CHECK(format_byte_size(8388608) == "8MiB");
  CHECK(format_byte_size(1536 * 1024) == "1536KiB");  // 1.5 MiB is not a whole MiB
  CHECK(format_byte_size(1500000000) == "1500000000B");  // 1.5e9 mod 1024 = 768: no exact KiB
  CHECK(format_byte_size(1000) == "1000B");
  CHECK(format_byte_size(0) == "0B");
  // And it parses back.
  for (int64_t v : {int64_t(1) << 40, int64_t(1500000000), int64_t(3072), int64_t(7)}) {
    CHECK(*parse_byte_size(format_byte_size(v)) == v);
  }
}
