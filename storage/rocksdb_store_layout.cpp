// RocksDbPageStore: the on-disk layout (rocksdb_store.h, "On-disk layout"):
// the RocksDB options of each column family, rebuilding the index from the
// "meta" CF at open, and moving the bookkeeping of the legacy layout (all in
// the default CF) into "meta".
#include <algorithm>
#include <vector>

#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>
#include <spdlog/spdlog.h>

#include "storage/rocksdb_store_impl.h"

namespace larder {

using namespace rocksdb_detail;

namespace rocksdb_detail {

rocksdb::DBOptions make_db_options(int64_t budget_bytes) {
  rocksdb::DBOptions o;
  o.create_if_missing = true;
  o.create_missing_column_families = true;
  // The WAL holds the writes of every CF; one is deleted only when all CFs
  // with data in it flushed. "meta" fills its memtable slowly: force its
  // flush once the WALs pass two "pages" memtables, so the WAL (and the
  // replay after a crash) stays small.
  o.max_total_wal_size = 2 * pages_write_buffer_bytes(budget_bytes) + meta_write_buffer_bytes(budget_bytes);
  // Every open replays the MANIFEST (a log of each flush and compaction):
  // start a fresh one past 16 MiB instead of RocksDB's 1 GiB, and reserve
  // 1 MiB for it, not 4, which a small store would notice.
  o.max_manifest_file_size = uint64_t(16) << 20;
  o.manifest_preallocation_size = size_t(1) << 20;
  return o;
}

std::vector<rocksdb::ColumnFamilyDescriptor> make_column_families(int64_t budget_bytes) {
  const uint64_t write_buffer = pages_write_buffer_bytes(budget_bytes);

  // "pages": the records. Values of kMinBlobBytes or more go to blob files:
  // compaction then rewrites only ~30-byte blob indexes, never the K/V, and
  // an erased record's space comes back when blob GC or a compaction drops
  // its blob file. 4 KiB is one table block: a smaller value shares a block
  // with its neighbours and costs the same one read inline, a larger one
  // needs its own read either way, so keeping it inline buys nothing and
  // costs a rewrite per compaction level. No compression: on real K/V pages
  // of the test model LZ4 saves 0.2 %, zstd 5-6 % at 220-700 MB/s, slower
  // than a restore (docs/disk-tier.md).
  rocksdb::ColumnFamilyOptions pages;
  pages.enable_blob_files = true;
  pages.min_blob_size = kMinBlobBytes;
  pages.blob_file_size = write_buffer;
  pages.blob_compression_type = rocksdb::kNoCompression;
  pages.compression = rocksdb::kNoCompression;
  pages.enable_blob_garbage_collection = true;
  // Relocate the live blobs of the oldest quarter of blob files during
  // compactions, and force a compaction of them once half their bytes are
  // garbage: in a cache the oldest files are mostly evicted records.
  pages.blob_garbage_collection_age_cutoff = 0.25;
  pages.blob_garbage_collection_force_threshold = 0.5;
  pages.write_buffer_size = write_buffer;
  {
    rocksdb::BlockBasedTableOptions t;
    t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));  // a miss reads no block
    pages.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  }

  // "meta": 25-byte bookkeeping values, the only CF an open iterates.
  rocksdb::ColumnFamilyOptions meta;
  meta.compression = rocksdb::kNoCompression;
  meta.write_buffer_size = meta_write_buffer_bytes(budget_bytes);

  // default: the legacy layout's records ("p" + key) until they are
  // replaced, evicted or expired; the settings it was written with.
  rocksdb::ColumnFamilyOptions legacy;
  legacy.enable_blob_files = true;
  legacy.min_blob_size = kMinBlobBytes;
  legacy.blob_file_size = uint64_t(256) << 20;
  legacy.blob_compression_type = rocksdb::kNoCompression;
  legacy.enable_blob_garbage_collection = true;
  legacy.compression = rocksdb::kNoCompression;
  legacy.write_buffer_size = meta_write_buffer_bytes(budget_bytes);

  return {rocksdb::ColumnFamilyDescriptor(rocksdb::kDefaultColumnFamilyName, legacy),
          rocksdb::ColumnFamilyDescriptor(kPagesCf, pages), rocksdb::ColumnFamilyDescriptor(kMetaCf, meta)};
}

}  // namespace rocksdb_detail

Status RocksDbPageStore::Impl::rebuild_index() {
  clear_index();
  std::vector<Loaded> loaded;
  std::vector<std::string> bad;  // malformed "meta" keys
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, cf_meta));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const rocksdb::Slice k = it->key(), v = it->value();
      if (k.size() != size_t(kKeyBytes) || v.size() != kMetaValueBytes || (uint8_t(v[24]) & ~kMetaFlagLegacy) != 0) {
        bad.push_back(k.ToString());
        continue;
      }
      loaded.push_back({PageKey::from_bytes(std::string_view(k.data(), k.size())),
                        IndexEntry{kKeyBytes + int64_t(read_u64_le(v.data())), read_u64_le(v.data() + 8),
                                   int64_t(read_u64_le(v.data() + 16)), (uint8_t(v[24]) & kMetaFlagLegacy) != 0}});
    }
    if (!it->status().ok()) {
      return translate_rocksdb_status(it->status(), "page store: reading the index of " + options.dir);
    }
  }
  if (!bad.empty()) {
    spdlog::warn("page store {}: erasing {} malformed index entries with their records", options.dir, bad.size());
    rocksdb::WriteBatch batch;
    for (const std::string& k : bad) {
      batch.Delete(cf_meta, k);
      batch.Delete(cf_pages, k);
      if (k.size() == size_t(kKeyBytes)) batch.Delete(cf_default, std::string(1, kLegacyRecordPrefix) + k);
    }
    rocksdb::Status s = db->Write(write_options, &batch);
    if (!s.ok()) spdlog::warn("page store {}: {}", options.dir, s.ToString());
  }
  const size_t n_meta = loaded.size();
  Status st = migrate_legacy(loaded, n_meta, options.now_unix_ms());
  if (!st.is_ok()) return st;

  std::sort(loaded.begin(), loaded.end(),
            [](const Loaded& a, const Loaded& b) { return a.entry.tick < b.entry.tick; });
  index.reserve(loaded.size());
  int64_t n_legacy_loaded = 0;
  for (const Loaded& l : loaded) {
    index[l.key] = l.entry;
    policy->insert(l.key, EvictionEntry{l.entry.bytes, 0, 1}, l.entry.tick);
    size_bytes += l.entry.bytes;
    next_tick = std::max(next_tick, l.entry.tick + 1);
    n_legacy_loaded += l.entry.legacy ? 1 : 0;
  }
  n_records = int64_t(index.size());
  n_legacy = n_legacy_loaded;
  // The keys the store's user pins (its stored pins), before any eviction;
  // at the first open only: later the policy keeps the user's pins, which
  // the stored record may lag (an unpin while the disk was down would come
  // back, found in review).
  if (options.pins_at_open && !pins_applied_at_open) {
    pins_applied_at_open = true;
    const RecordReader read = [this](const PageKey& key) -> std::optional<std::string> {
      std::string value;
      if (index.count(key) == 0 || !read_record(key, &value).ok()) return std::nullopt;
      return value;
    };
    for (const PageKey& key : options.pins_at_open(read)) policy->pin(key);
  }
  // More than the budget (lowered in the config, or a crash between a put
  // and its eviction): evict down to it now, in policy order.
  if (size_bytes.load() > budget.load()) {
    const int64_t before = n_records.load();
    evict_locked(nullptr);
    spdlog::info("page store {}: over its budget of {} bytes at open, evicted {} records", options.dir,
                 budget.load(), before - n_records.load());
  }
  spdlog::info("page store {}: opened, {} records, {} bytes{}", options.dir, n_records.load(), size_bytes.load(),
               n_legacy_loaded > 0 ? " (" + std::to_string(n_legacy_loaded) + " in the pre-column-family layout)"
                                   : std::string());
  return Status::ok();
}

Status RocksDbPageStore::Impl::migrate_legacy(std::vector<Loaded>& loaded, size_t n_meta, int64_t open_ms) {
  // The legacy bookkeeping: "s" + key in the default CF. Only that range is
  // read (its values are 16 or 24 bytes); the "p" records are not touched.
  struct Legacy {
    std::string db_key;  // "s" + key
    bool ok = false;
    Loaded l;
  };
  std::vector<Legacy> legacy;
  {
    const std::string lower(1, kLegacyBookPrefix), upper(1, char(kLegacyBookPrefix + 1));
    rocksdb::Slice upper_slice(upper);
    rocksdb::ReadOptions ro;
    ro.iterate_upper_bound = &upper_slice;
    ro.fill_cache = false;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, cf_default));
    for (it->Seek(lower); it->Valid(); it->Next()) {
      const rocksdb::Slice k = it->key(), v = it->value();
      Legacy e;
      e.db_key = k.ToString();
      e.ok = k.size() == 1 + size_t(kKeyBytes) &&
             (v.size() == kLegacyBookValueBytes || v.size() == kOldLegacyBookValueBytes);
      if (e.ok) {
        // A 16-byte value has no last use: last used now, so its ttl counts
        // from this open.
        const bool has_last_use = v.size() == kLegacyBookValueBytes;
        e.l = Loaded{PageKey::from_bytes(std::string_view(k.data() + 1, size_t(kKeyBytes))),
                     IndexEntry{kKeyBytes + int64_t(read_u64_le(v.data())), read_u64_le(v.data() + 8),
                                has_last_use ? int64_t(read_u64_le(v.data() + 16)) : open_ms, true}};
      }
      legacy.push_back(std::move(e));
    }
    if (!it->status().ok()) {
      return translate_rocksdb_status(it->status(), "page store: reading the old index of " + options.dir);
    }
  }
  if (legacy.empty()) return Status::ok();
  {
    std::lock_guard<std::mutex> lock(compact_mu);
    compact_legacy = true;  // the default CF holds records: compact it too
  }
  // A key "meta" knows already (an earlier migration was cut short after
  // this entry, or a stray entry): "meta" wins.
  std::unordered_map<PageKey, bool, PageKeyHash> known;  // key -> legacy record
  for (size_t i = 0; i < n_meta; ++i) known[loaded[i].key] = loaded[i].entry.legacy;
  size_t n_moved = 0, n_bad = 0;
  for (size_t start = 0; start < legacy.size(); start += kMigrateBatch) {
    const size_t end = std::min(legacy.size(), start + kMigrateBatch);
    rocksdb::WriteBatch batch;
    std::vector<Loaded> moved;
    for (size_t i = start; i < end; ++i) {
      const Legacy& e = legacy[i];
      batch.Delete(cf_default, e.db_key);
      if (!e.ok) {
        ++n_bad;
        if (e.db_key.size() == 1 + size_t(kKeyBytes)) {
          batch.Delete(cf_default, std::string(1, kLegacyRecordPrefix) + e.db_key.substr(1));
        }
        continue;
      }
      auto k = known.find(e.l.key);
      if (k != known.end()) {
        if (!k->second) batch.Delete(cf_default, legacy_key(kLegacyRecordPrefix, e.l.key));
        continue;
      }
      batch.Put(cf_meta, e.l.key.to_bytes(),
                meta_value(uint64_t(e.l.entry.bytes - kKeyBytes), e.l.entry.tick, e.l.entry.last_use_ms, true));
      moved.push_back(e.l);
    }
    // Each batch is atomic: an entry is either still in "s" or in "meta".
    rocksdb::Status s = db->Write(write_options, &batch);
    if (!s.ok()) {
      return translate_rocksdb_status(s, "page store: moving the old index of " + options.dir + " into \"meta\"");
    }
    n_moved += moved.size();
    loaded.insert(loaded.end(), moved.begin(), moved.end());
  }
  spdlog::info("page store {}: moved the bookkeeping of {} records of the pre-column-family layout into \"meta\""
               "{}; their records stay where they are until replaced or evicted",
               options.dir, n_moved,
               n_bad > 0 ? " (erased " + std::to_string(n_bad) + " malformed entries with their records)"
                         : std::string());
  return Status::ok();
}

}  // namespace larder
