#include "storage/page_record.h"

#include <cassert>
#include <cstring>
#include <limits>

#include <spdlog/spdlog.h>
#include <xxhash.h>

namespace larder {
namespace {

// Field offsets of the fixed header (see the table in page_record.h).
constexpr size_t kOffMagic = 0;
constexpr size_t kOffVersion = 4;
constexpr size_t kOffKeyHi = 8;
constexpr size_t kOffKeyLo = 16;
constexpr size_t kOffFingerprint = 24;
constexpr size_t kOffKvDtype = 40;
constexpr size_t kOffNLayers = 44;
constexpr size_t kOffPageSize = 48;
constexpr size_t kOffKvDim = 52;
constexpr size_t kOffNTokens = 56;
constexpr size_t kOffPayloadBytes = 60;
static_assert(kOffPayloadBytes + 8 == kPageRecordHeaderBytes);

void put_u32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = char((v >> (8 * i)) & 0xFF);
}
void put_u64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = char((v >> (8 * i)) & 0xFF);
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(uint8_t(p[i])) << (8 * i);
  return v;
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(uint8_t(p[i])) << (8 * i);
  return v;
}

Status reject(const std::string& what) {
  spdlog::debug("page record rejected: {}", what);
  return Status::corruption("page record: " + what);
}

}  // namespace

std::string encode_page_record(const PageKey& key, const PageRecordMeta& meta,
                               std::span<const int32_t> tokens,
                               std::span<const uint8_t> payload) {
  assert(tokens.size() <= std::numeric_limits<uint32_t>::max());
  const size_t body = kPageRecordHeaderBytes + 4 * tokens.size() + payload.size();
  std::string out(body + 8, '\0');
  char* p = out.data();
  std::memcpy(p + kOffMagic, kPageRecordMagic, 4);
  put_u32(p + kOffVersion, kPageRecordVersion);
  put_u64(p + kOffKeyHi, key.hi);
  put_u64(p + kOffKeyLo, key.lo);
  std::memcpy(p + kOffFingerprint, meta.fingerprint.data(), meta.fingerprint.size());
  put_u32(p + kOffKvDtype, meta.kv_dtype);
  put_u32(p + kOffNLayers, meta.n_layers);
  put_u32(p + kOffPageSize, meta.page_size);
  put_u32(p + kOffKvDim, meta.kv_dim);
  put_u32(p + kOffNTokens, uint32_t(tokens.size()));
  put_u64(p + kOffPayloadBytes, uint64_t(payload.size()));
  char* t = p + kPageRecordHeaderBytes;
  for (size_t i = 0; i < tokens.size(); ++i) put_u32(t + 4 * i, uint32_t(tokens[i]));
  if (!payload.empty()) std::memcpy(t + 4 * tokens.size(), payload.data(), payload.size());
  put_u64(p + body, XXH3_64bits(p, body));
  return out;
}

Status decode_page_record(std::string_view record, const PageKey& key,
                          const PageRecordMeta& meta,
                          std::span<const int32_t> expected_tokens,
                          std::span<uint8_t> payload_out) {
  const char* p = record.data();
  const size_t size = record.size();
  if (size < kPageRecordHeaderBytes) {
    return reject("truncated (" + std::to_string(size) + " bytes, header needs " +
                  std::to_string(kPageRecordHeaderBytes) + ")");
  }
  if (std::memcmp(p + kOffMagic, kPageRecordMagic, 4) != 0) return reject("bad magic");
  const uint32_t version = get_u32(p + kOffVersion);
  if (version != kPageRecordVersion) {
    return reject("unsupported format version " + std::to_string(version) + " (expected " +
                  std::to_string(kPageRecordVersion) + ")");
  }
  const uint64_t n_tokens = get_u32(p + kOffNTokens);
  const uint64_t payload_bytes = get_u64(p + kOffPayloadBytes);
  // payload_bytes comes from disk: compare before adding so a huge value
  // cannot wrap the sum.
  const uint64_t fixed = kPageRecordOverheadBytes + 4 * n_tokens;
  if (fixed > size || payload_bytes > size - fixed) {
    return reject("truncated (" + std::to_string(size) + " bytes, header declares " +
                  std::to_string(n_tokens) + " tokens and " + std::to_string(payload_bytes) +
                  " payload bytes)");
  }
  const uint64_t declared = fixed + payload_bytes;
  if (size > declared) {
    return reject("trailing bytes (" + std::to_string(size) + " bytes, header declares " +
                  std::to_string(declared) + ")");
  }
  if (get_u64(p + kOffKeyHi) != key.hi || get_u64(p + kOffKeyLo) != key.lo) {
    return reject("key mismatch");
  }
  if (std::memcmp(p + kOffFingerprint, meta.fingerprint.data(), meta.fingerprint.size()) != 0) {
    return reject("fingerprint mismatch");
  }
  if (get_u32(p + kOffKvDtype) != meta.kv_dtype) return reject("kv_dtype mismatch");
  if (get_u32(p + kOffNLayers) != meta.n_layers) return reject("n_layers mismatch");
  if (get_u32(p + kOffPageSize) != meta.page_size) return reject("page_size mismatch");
  if (get_u32(p + kOffKvDim) != meta.kv_dim) return reject("kv_dim mismatch");
  if (n_tokens != expected_tokens.size()) {
    return reject("n_tokens mismatch (record has " + std::to_string(n_tokens) + ", expected " +
                  std::to_string(expected_tokens.size()) + ")");
  }
  const char* t = p + kPageRecordHeaderBytes;
  for (size_t i = 0; i < expected_tokens.size(); ++i) {
    if (int32_t(get_u32(t + 4 * i)) != expected_tokens[i]) {
      return reject("token ids mismatch (at index " + std::to_string(i) + ")");
    }
  }
  if (payload_bytes != payload_out.size()) {
    return reject("payload size mismatch (record has " + std::to_string(payload_bytes) +
                  ", expected " + std::to_string(payload_out.size()) + ")");
  }
  const size_t body = size - 8;
  if (get_u64(p + body) != XXH3_64bits(p, body)) return reject("checksum mismatch");
  if (payload_bytes > 0) std::memcpy(payload_out.data(), t + 4 * n_tokens, payload_bytes);
  return Status::ok();
}

}  // namespace larder
