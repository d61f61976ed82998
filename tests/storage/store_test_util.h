// Helpers shared by the RocksDbPageStore tests: open a store or fail the
// test, and a get that must succeed.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

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

inline std::optional<std::string> get_ok(RocksDbPageStore& s, const PageKey& k) {
  auto r = s.get(k);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return *r;
}

}  // namespace larder::testing
