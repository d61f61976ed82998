// Test helpers for RocksDbPageStore's on-disk layout (storage/rocksdb_store.h,
// "On-disk layout"): write a store in the legacy layout (everything in the
// default column family, "p" + key -> record, "s" + key -> bookkeeping) the
// way builds before the column families did, and open any store's DB
// directly with its three column families to look inside.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "storage/page_store.h"

namespace larder::testing {

inline std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((v >> (8 * i)) & 0xFF);
  return s;
}

struct LegacyEntry {
  PageKey key;
  std::string record;
  uint64_t tick = 0;
  std::optional<int64_t> last_use_ms;  // nullopt: the 16-byte bookkeeping of the oldest builds
};

// Writes `entries` into dir in the legacy layout, with the RocksDB settings
// those builds used (blob files for values >= 4 KiB), flushed.
inline void write_legacy_store(const std::string& dir, const std::vector<LegacyEntry>& entries) {
  rocksdb::Options o;
  o.create_if_missing = true;
  o.enable_blob_files = true;
  o.min_blob_size = 4096;
  o.blob_file_size = uint64_t(256) << 20;
  o.blob_compression_type = rocksdb::kNoCompression;
  o.enable_blob_garbage_collection = true;
  o.compression = rocksdb::kNoCompression;
  rocksdb::DB* raw = nullptr;
  REQUIRE(rocksdb::DB::Open(o, dir, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::WriteBatch batch;
  for (const LegacyEntry& e : entries) {
    std::string book = le64(e.record.size()) + le64(e.tick);
    if (e.last_use_ms) book += le64(uint64_t(*e.last_use_ms));
    // Appended, not "p" + ...: GCC 12 warns (a false -Wrestrict) on that.
    std::string pk(1, 'p'), sk(1, 's');
    pk += e.key.to_bytes();
    sk += e.key.to_bytes();
    REQUIRE(batch.Put(pk, e.record).ok());
    REQUIRE(batch.Put(sk, book).ok());
  }
  REQUIRE(db->Write(rocksdb::WriteOptions(), &batch).ok());
  REQUIRE(db->Flush(rocksdb::FlushOptions()).ok());
  REQUIRE(db->Close().ok());
}

// A store's DB opened directly (the store must be closed) with the column
// families default, "pages", "meta" (created if missing).
class RawStore {
 public:
  explicit RawStore(const std::string& dir) {
    rocksdb::DBOptions o;
    o.create_if_missing = true;
    o.create_missing_column_families = true;
    rocksdb::ColumnFamilyOptions blobs;
    blobs.enable_blob_files = true;
    blobs.min_blob_size = 4096;
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs{{rocksdb::kDefaultColumnFamilyName, blobs},
                                                     {"pages", blobs},
                                                     {"meta", rocksdb::ColumnFamilyOptions()}};
    rocksdb::DB* raw = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(o, dir, cfs, &handles_, &raw);
    INFO(s.ToString());
    REQUIRE(s.ok());
    db_.reset(raw);
  }
  ~RawStore() {
    for (rocksdb::ColumnFamilyHandle* h : handles_) db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    db_->Close().PermitUncheckedError();
  }
  RawStore(const RawStore&) = delete;
  RawStore& operator=(const RawStore&) = delete;

  enum Cf { kDefault = 0, kPages = 1, kMeta = 2 };

  std::optional<std::string> get(Cf cf, const std::string& key) {
    std::string v;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), handles_[cf], key, &v);
    if (s.IsNotFound()) return std::nullopt;
    INFO(s.ToString());
    REQUIRE(s.ok());
    return v;
  }
  void put(Cf cf, const std::string& key, const std::string& value) {
    REQUIRE(db_->Put(rocksdb::WriteOptions(), handles_[cf], key, value).ok());
  }
  void del(Cf cf, const std::string& key) { REQUIRE(db_->Delete(rocksdb::WriteOptions(), handles_[cf], key).ok()); }
  // Keys in cf starting with prefix.
  std::vector<std::string> keys(Cf cf, const std::string& prefix = "") {
    std::vector<std::string> out;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), handles_[cf]));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) out.push_back(it->key().ToString());
    REQUIRE(it->status().ok());
    return out;
  }

 private:
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  std::unique_ptr<rocksdb::DB> db_;
};

}  // namespace larder::testing
