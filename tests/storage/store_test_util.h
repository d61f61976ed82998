// Helpers shared by the RocksDbPageStore tests: open a store or fail the
// test, and a get that must succeed.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <catch2/catch.hpp>

#include "storage/rocksdb_store.h"

namespace larder::testing {

inline std::unique_ptr<RocksDbPageStore> open_store(const RocksDbStoreOptions& o) {
  auto r = RocksDbPageStore::open(o);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

inline std::optional<std::string> get_ok(RocksDbPageStore& s, const PageKey& k) {
  auto r = s.get(k);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return *r;
}

}  // namespace larder::testing
