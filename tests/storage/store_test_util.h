// Helpers shared by the RocksDbPageStore tests: open a store or fail the
// test, a get that must succeed, and numbered keys and records.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "storage/page_record.h"
#include "storage/rocksdb_store.h"

namespace larder::testing {

inline std::unique_ptr<RocksDbPageStore> open_store(const RocksDbStoreOptions& o) {
  auto r = RocksDbPageStore::open(o);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

// The "<name>.corrupt-*" copies of a store moved aside, in `parent`.
inline std::vector<std::filesystem::path> corrupt_copies(const std::filesystem::path& parent,
                                                         const std::string& name) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(parent)) {
    if (e.path().filename().string().rfind(name + ".corrupt-", 0) == 0) out.push_back(e.path());
  }
  return out;
}

// Key n, distinct for every n.
inline PageKey key_n(uint64_t n) { return PageKey{0xABCD000000000000ull + n, n * 7919}; }

// A valid record for key n with n_tokens tokens and payload_bytes bytes.
inline std::string record_n(uint64_t n, size_t n_tokens, size_t payload_bytes) {
  PageRecordMeta meta;
  meta.page_size = uint32_t(n_tokens);
  std::vector<int32_t> tokens(n_tokens);
  for (size_t i = 0; i < n_tokens; ++i) tokens[i] = int32_t(n * 100 + i);
  std::vector<uint8_t> payload(payload_bytes);
  for (size_t i = 0; i < payload_bytes; ++i) payload[i] = uint8_t(n + i * 13);
  return encode_page_record(key_n(n), meta, tokens, payload);
}

inline std::optional<std::string> get_ok(RocksDbPageStore& s, const PageKey& k) {
  auto r = s.get(k);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return *r;
}

}  // namespace larder::testing
