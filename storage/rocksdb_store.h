// RocksDbPageStore: the disk tier. Sealed page records live in a RocksDB
// database in one directory and survive restarts; the store bounds its size
// by evicting the least recently accessed records (LRU).
//
// On-disk keys: "p" + PageKey::to_bytes() holds the record; "s" +
// PageKey::to_bytes() holds 16 bytes of bookkeeping (record bytes u64 LE,
// access tick u64 LE) written in the same atomic batch as the record and
// rewritten on every get. At open the store rebuilds its in-memory index
// (size and access order of every record) by iterating only the "s" range:
// ~40 bytes per record read, about 1 MB for 20 000 pages; the record values
// themselves are not read. After a restart the LRU order is that of the last
// put or get of each record before shutdown.
//
// RocksDB settings, for values of ~1-4 MB written once and read rarely:
// values >= 4 KiB go to blob files (BlobDB, enable_blob_files) so compaction
// never rewrites them and the LSM holds only small blob indexes; blob garbage
// collection reclaims the space of erased/evicted records during compaction,
// so the bytes on disk can lag size_bytes() until then. No compression:
// measured on fp16/fp32 K/V-like data (Gaussian values), LZ4 made 2 MB
// *larger* (ratio 1.004) and zstd level 1 saved only ~7% at a CPU cost on the
// restore path.
//
// Capacity: size_bytes() counts 16 + record.size() per record. When a put
// takes it over capacity_bytes, the least recently accessed records other
// than the one just written are erased until it is at most capacity_bytes.
//
// Deleted directory: if the directory or its CURRENT file disappears while
// the store is open (an admin ran rm -rf), the store notices, checking at
// most once per dir_check_interval_ms on the put/get path and after any
// RocksDB IO error, logs one warning, closes the DB and opens a fresh empty
// one in a re-created directory. The deleted records are gone (gets miss);
// later puts and gets work. When CURRENT is missing but other RocksDB files
// are left (a partial delete), the files named like RocksDB's (CURRENT,
// IDENTITY, LOCK, LOG*, MANIFEST-n, OPTIONS-n, n.log, n.sst, n.blob,
// *.dbtmp) are removed first, never any other file. If the fresh open
// fails, operations return kIOError until a later check succeeds.
//
// Thread-safe. Gets run in parallel; puts, erases and the bookkeeping of
// gets are serialized.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "storage/page_store.h"
#include "storage/status.h"

namespace larder {

struct RocksDbStoreOptions {
  std::string dir;                                // database directory
  int64_t capacity_bytes = int64_t(20) << 30;     // bound on size_bytes()
  bool sync_writes = false;                       // fsync the WAL on every put
  // How often, at most, the put/get path checks that dir/CURRENT still
  // exists (0: on every call).
  int64_t dir_check_interval_ms = 1000;
};

class RocksDbPageStore : public PageStore {
 public:
  // Opens or creates the DB in options.dir (creating the directory and its
  // parents) and rebuilds the index. Errors: kInvalidArgument for an empty
  // dir or capacity_bytes <= 0; kIOError with RocksDB's message and the dir
  // when the directory cannot be created or the DB cannot be opened.
  static Result<std::unique_ptr<RocksDbPageStore>> open(const RocksDbStoreOptions& options);

  ~RocksDbPageStore() override;
  RocksDbPageStore(const RocksDbPageStore&) = delete;
  RocksDbPageStore& operator=(const RocksDbPageStore&) = delete;

  // Stores (or replaces) the record under key, marks it most recently used,
  // then evicts LRU records while size_bytes() > capacity_bytes. Errors:
  // kResourceExhausted (nothing written) when 16 + record.size() alone
  // exceeds capacity_bytes; kIOError from RocksDB.
  Status put(const PageKey& key, std::string_view record) override;
  // The stored bytes exactly as put (no validation: decode_page_record does
  // that), or nullopt when absent. Marks the record most recently used.
  // Errors: kCorruption / kIOError when RocksDB fails to read (e.g. a
  // corrupted block); a vanished directory is a miss, not an error.
  Result<std::optional<std::string>> get(const PageKey& key) override;
  // Removes the record; erasing an absent key is OK.
  Status erase(const PageKey& key) override;
  // Syncs the WAL and flushes the memtable. Errors: kIOError.
  Status flush() override;

  int64_t size_bytes() const;  // bytes of live records: sum of 16 + record size
  int64_t n_records() const;
  const std::string& dir() const;

  struct Impl;
  // Use open(); the tag keeps construction private.
  class PrivateTag {
    friend class RocksDbPageStore;
    PrivateTag() = default;
  };
  RocksDbPageStore(PrivateTag, std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace larder
