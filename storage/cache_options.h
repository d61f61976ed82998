// CacheOptions: every knob of the KV cache and its tiers, as the [cache]
// section of config/larder.toml sets them (daemon/config.cpp). The engine
// reads the device tier's and the page's settings; the daemon builds the
// tiers below the device from host and disk (storage/tier_chain.h).
//
// Tiers, fastest first (DESIGN.md "Tiers and eviction"):
//   device  the page pool the forward pass reads: GPU memory, or on the CPU
//           the host RAM pool of the CPU backend.
//   host    page records in RAM beyond the device (on a GPU: host memory;
//           on the CPU it adds a copy per hit and nothing the device pool
//           could not hold, so its default budget is 0 = off).
//   disk    page records in RocksDB under `dir`; survives restarts.
// Pages move down when a tier is full (device -> host -> disk -> deleted)
// and up on a hit.
#pragma once

#include <cstdint>
#include <string>

namespace larder {

struct TierOptions {
  int64_t budget_bytes = 0;   // everything the tier holds, metadata included
  std::string policy = "lru"; // storage/eviction_policy.h: lru | lfu | priority_lru | priority_lfu
};

// What the daemon does when the disk tier's directory cannot be opened
// (corrupt beyond repair, locked by another daemon, no permission).
enum class DiskOnError { kMemoryOnly, kFail };

struct DiskTierOptions {
  std::string dir;                            // "" = no disk tier
  int64_t budget_bytes = int64_t(20) << 30;
  // Disk space the store leaves free on its file system, evicting as over
  // budget when there is less (0: none; rocksdb_store.h, "Disk space").
  int64_t min_free_bytes = int64_t(1) << 30;
  std::string policy = "lru";
  int64_t ttl_seconds = 0;                    // 0 = pages never expire
  bool sync = false;                          // fsync the WAL on every write
  DiskOnError on_error = DiskOnError::kMemoryOnly;
};

struct CacheOptions {
  int page_size = 16;                 // tokens per page, a power of two in [1, 1024]
  bool write_through = true;          // false: write_back (a page reaches disk when demoted)
  std::string kv_dtype = "f16";       // "f16" | "f32" | "q8_0"
  std::string salt;                   // mixed into the root prefix hash
  int n_storage_threads = 2;          // threads doing tier I/O
  TierOptions device{int64_t(1) << 30, "lru"};
  TierOptions host{0, "lru"};
  DiskTierOptions disk;
  // Page-access trace for the what-if simulator (storage/cache_sim.h);
  // "" = off.
  std::string trace_file;
};

}  // namespace larder
