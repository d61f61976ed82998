// Page record codec: the bytes a sealed KV page is stored as in a PageStore
// (DESIGN.md "Page key and record"). A record carries everything a restore
// must check before it may feed K/V into a model: its own key, the model
// fingerprint and KV layout, the token ids of the page, and a checksum, so a
// hash collision, a stale model or a torn write is rejected, never used.
//
// Byte layout (all integers little-endian, no padding), version 1:
//
//   offset      size   field
//   0           4      magic "LKVP" (0x4C 0x4B 0x56 0x50)
//   4           4      format version, u32 (kPageRecordVersion)
//   8           8      key.hi, u64
//   16          8      key.lo, u64
//   24          16     model fingerprint (raw bytes)
//   40          4      kv_dtype, u32
//   44          4      n_layers, u32
//   48          4      page_size, u32 (tokens per page)
//   52          4      kv_dim, u32
//   56          4      n_tokens, u32 (token ids that follow)
//   60          8      payload_bytes, u64
//   68          4*n    token ids, int32 each
//   68+4n       P      payload (the page's K/V, opaque to this codec)
//   68+4n+P     8      checksum: XXH3-64 (seed 0) of bytes [0, 68+4n+P)
//
// Total size: kPageRecordOverheadBytes + 4 * n_tokens + payload_bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "storage/page_store.h"
#include "storage/status.h"

namespace larder {

inline constexpr uint32_t kPageRecordVersion = 1;
inline constexpr char kPageRecordMagic[4] = {'L', 'K', 'V', 'P'};
// Fixed header before the token ids.
inline constexpr size_t kPageRecordHeaderBytes = 68;
// Header plus the trailing checksum: the size of a record with no tokens and
// no payload.
inline constexpr size_t kPageRecordOverheadBytes = kPageRecordHeaderBytes + 8;

// What must match for a record to be usable by the running model.
struct PageRecordMeta {
  std::array<uint8_t, 16> fingerprint{};  // model fingerprint
  uint32_t kv_dtype = 0;
  uint32_t n_layers = 0;
  uint32_t page_size = 0;  // tokens per page
  uint32_t kv_dim = 0;
  bool operator==(const PageRecordMeta&) const = default;
};

// Size in bytes of the record encode_page_record() makes for these lengths.
constexpr size_t page_record_size(size_t n_tokens, size_t payload_bytes) {
  return kPageRecordOverheadBytes + 4 * n_tokens + payload_bytes;
}

// Encodes one page record in the layout above. tokens.size() must fit in a
// u32 (asserted). Never fails.
std::string encode_page_record(const PageKey& key, const PageRecordMeta& meta,
                               std::span<const int32_t> tokens,
                               std::span<const uint8_t> payload);

// Validates `record` against what the caller expects and, only when every
// check passes, copies its payload into payload_out. Checks, in this order
// (the error names the first that failed, all are Status::corruption and
// start with "page record: "):
//   "truncated"            shorter than the fixed header, or than the lengths
//                          the header declares
//   "bad magic"
//   "unsupported format version"
//   "trailing bytes"       longer than the lengths the header declares
//   "key mismatch"
//   "fingerprint mismatch", "kv_dtype mismatch", "n_layers mismatch",
//   "page_size mismatch", "kv_dim mismatch"
//   "n_tokens mismatch"    n_tokens != expected_tokens.size()
//   "token ids mismatch"
//   "payload size mismatch" payload_bytes != payload_out.size()
//   "checksum mismatch"
// The length checks use the declared lengths only after magic and version
// are known good, except that a record shorter than the fixed header is
// "truncated" before anything else is read. On error payload_out is left
// untouched.
Status decode_page_record(std::string_view record, const PageKey& key,
                          const PageRecordMeta& meta,
                          std::span<const int32_t> expected_tokens,
                          std::span<uint8_t> payload_out);

}  // namespace larder
