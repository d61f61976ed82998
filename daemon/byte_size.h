// Byte sizes as admins write them in config/larder.toml: "512MiB", "2GiB",
// "1.5GB", "4096" (bytes). No TOML or CLI types here, so both the config
// loader and the command line can use it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "storage/status.h"

namespace larder {

// Parses a byte size: a non-negative decimal number (integer or with a
// fraction, e.g. "1.5") followed, optionally after spaces, by a unit:
//   (none) or B         bytes
//   KB MB GB TB PB      powers of 1000 (SI)
//   KiB MiB GiB TiB PiB powers of 1024 (IEC)
//   K M G T P           shorthand for the IEC units (as in `ls -h`, llama.cpp)
// Units are case-insensitive ("gib" == "GiB"). A fractional result is
// rounded down to a whole byte ("1.5B" = 1). Exact: "1.5GB" = 1500000000,
// computed in integer arithmetic, no float rounding.
// Errors: kInvalidArgument with a reason that does not repeat the input
// (the caller names the key), e.g. "unknown unit \"XB\"", or "too large"
// past 2^62 bytes.
Result<int64_t> parse_byte_size(std::string_view text);
// The largest size parse_byte_size takes (2^62 bytes); config integers are
// held to it too.
inline constexpr int64_t kMaxByteSize = int64_t(1) << 62;

// Formats bytes for humans and for config dumps: the largest IEC unit that
// divides the value exactly ("1GiB", "1536KiB", "1000B"), so the output
// parses back to the same value.
std::string format_byte_size(int64_t bytes);

}  // namespace larder
