// Page store interface: where sealed KV pages live outside the engine's page
// pool, addressed by their 128-bit chained prefix hash (DESIGN.md "Page key
// and record"). Values are encoded page records (storage/page_record.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "storage/status.h"

namespace larder {

// XXH3-128 prefix hash of a page: h_i = H(h_{i-1} || token ids of page i).
struct PageKey {
  uint64_t hi = 0;
  uint64_t lo = 0;
  bool operator==(const PageKey&) const = default;
  std::string to_bytes() const;             // 16 bytes, big-endian hi then lo
  static PageKey from_bytes(std::string_view b);  // b.size() == 16
  std::string to_hex() const;
};

struct PageKeyHash {
  size_t operator()(const PageKey& k) const { return size_t(k.lo ^ (k.hi * 0x9E3779B97F4A7C15ull)); }
};

// Synchronous store; implementations are thread-safe.
class PageStore {
 public:
  virtual ~PageStore() = default;
  virtual Status put(const PageKey& key, std::string_view record) = 0;
  // nullopt when the key is absent.
  virtual Result<std::optional<std::string>> get(const PageKey& key) = 0;
  virtual Status erase(const PageKey& key) = 0;
  // Makes every completed put durable (WAL sync / memtable flush).
  virtual Status flush() = 0;
};

}  // namespace larder
