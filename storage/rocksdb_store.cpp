#include "storage/rocksdb_store.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <vector>

#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include "storage/rocksdb_store_impl.h"

namespace larder {

using namespace rocksdb_detail;
namespace fs = std::filesystem;

void RocksDbPageStore::Impl::touch_locked(IndexEntry& e, const PageKey& key) {
  e.tick = next_tick++;
  lru.splice(lru.end(), lru, e.lru_pos);
}

void RocksDbPageStore::Impl::forget_locked(const PageKey& key) {
  auto it = index.find(key);
  if (it == index.end()) return;
  size_bytes -= it->second.bytes;
  lru.erase(it->second.lru_pos);
  index.erase(it);
  n_records = int64_t(index.size());
}

Status RocksDbPageStore::Impl::put_once(const PageKey& key, std::string_view record) {
  std::lock_guard<std::mutex> lock(mu);
  std::shared_lock<std::shared_mutex> db_lock(db_mu);
  if (!db) return unavailable();
  const uint64_t tick = next_tick++;
  rocksdb::WriteBatch batch;
  batch.Put(db_key(kRecordPrefix, key), rocksdb::Slice(record.data(), record.size()));
  batch.Put(db_key(kBookPrefix, key), book_value(record.size(), tick));
  rocksdb::Status s = db->Write(write_options, &batch);
  if (!s.ok()) return translate_rocksdb_status(s, "page store: put " + key.to_hex() + " in " + options.dir);
  forget_locked(key);
  lru.push_back(key);
  index[key] = IndexEntry{kKeyBytes + int64_t(record.size()), tick, std::prev(lru.end())};
  size_bytes += kKeyBytes + int64_t(record.size());
  n_records = int64_t(index.size());
  evict_locked(key);
  return Status::ok();
}

void RocksDbPageStore::Impl::evict_locked(const PageKey& keep) {
  if (size_bytes.load() <= options.capacity_bytes) return;
  std::vector<PageKey> victims;
  int64_t projected = size_bytes.load();
  for (const PageKey& k : lru) {
    if (projected <= options.capacity_bytes) break;
    if (k == keep) continue;
    victims.push_back(k);
    projected -= index.at(k).bytes;
  }
  rocksdb::WriteBatch batch;
  for (const PageKey& k : victims) {
    batch.Delete(db_key(kRecordPrefix, k));
    batch.Delete(db_key(kBookPrefix, k));
  }
  rocksdb::Status s = db->Write(write_options, &batch);
  if (!s.ok()) {
    log.log(spdlog::level::warn, "evict",
            "page store " + options.dir + ": eviction of " + std::to_string(victims.size()) +
                " records failed: " + s.ToString());
    return;
  }
  for (const PageKey& k : victims) forget_locked(k);
  spdlog::debug("page store {}: evicted {} records, {} bytes left", options.dir,
                victims.size(), size_bytes.load());
}

RocksDbPageStore::RocksDbPageStore(PrivateTag, std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RocksDbPageStore::~RocksDbPageStore() {
  if (!impl_) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::unique_lock<std::shared_mutex> db_lock(impl_->db_mu);
  if (impl_->db) {
    rocksdb::Status s = impl_->db->Close();
    if (!s.ok()) spdlog::warn("page store {}: close: {}", impl_->options.dir, s.ToString());
    impl_->db.reset();
  }
}

Result<std::unique_ptr<RocksDbPageStore>> RocksDbPageStore::open(const RocksDbStoreOptions& options) {
  if (options.dir.empty()) return Status::invalid_argument("page store: empty directory");
  if (options.capacity_bytes <= 0) {
    return Status::invalid_argument("page store: capacity_bytes must be > 0");
  }
  auto impl = std::make_unique<Impl>(options);
  using OpenKind = Impl::OpenKind;
  Impl::OpenOutcome o = impl->try_open();
  // The store is only a cache: a store RocksDB finds damaged (corrupt
  // CURRENT/MANIFEST/SST, a missing file, a torn write) is moved aside, kept
  // for inspection, and replaced by an empty one, so the daemon still starts.
  if (o.kind == OpenKind::kDamaged) o = impl->replace_damaged(o.status);
  if (o.kind == OpenKind::kNoSpace) {
    impl->unavailable_why = o.status.message();
    impl->next_retry_ms = now_ms() + options.retry_interval_ms;
    spdlog::warn("{}; serving from memory only, opening the disk tier is retried every {} ms or more",
                 o.status.to_string(), options.retry_interval_ms);
  } else if (o.kind != OpenKind::kOk) {
    spdlog::error("{}", o.status.to_string());
    return o.status;
  } else {
    uint64_t free_bytes = 0;
    if (impl->env->GetFreeSpace(options.dir, &free_bytes).ok() &&
        uint64_t(options.capacity_bytes) > uint64_t(impl->size_bytes.load()) + free_bytes) {
      spdlog::warn("page store {}: capacity {} bytes, but only {} bytes are stored and {} free on its "
                   "file system: page writes will fail when it fills up (lower [cache] disk_capacity)",
                   options.dir, options.capacity_bytes, impl->size_bytes.load(), free_bytes);
    }
  }
  impl->last_check_ms = now_ms();
  return std::make_unique<RocksDbPageStore>(PrivateTag(), std::move(impl));
}

Status RocksDbPageStore::put(const PageKey& key, std::string_view record) {
  Impl& m = *impl_;
  const int64_t bytes = kKeyBytes + int64_t(record.size());
  if (bytes > m.options.capacity_bytes) {
    return Status::resource_exhausted("page store: record of " + std::to_string(bytes) +
                                      " bytes exceeds the capacity of " +
                                      std::to_string(m.options.capacity_bytes));
  }
  m.maybe_check_dir();
  m.maybe_recover(/*force=*/false);
  const uint64_t gen = m.generation.load();
  Status st = m.put_once(key, record);
  if (!st.is_ok() && m.recovered_after_io_error(st, gen)) st = m.put_once(key, record);
  if (!st.is_ok()) m.write_failed(st);
  return st;
}

Result<std::optional<std::string>> RocksDbPageStore::get(const PageKey& key) {
  Impl& m = *impl_;
  m.maybe_check_dir();
  const uint64_t gen = m.generation.load();
  std::string value;
  rocksdb::Status s;
  {
    std::shared_lock<std::shared_mutex> db_lock(m.db_mu);
    if (!m.db) return m.unavailable();
    s = m.db->Get(rocksdb::ReadOptions(), db_key(kRecordPrefix, key), &value);
  }
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) {
    Status st = translate_rocksdb_status(s, "page store: get " + key.to_hex() + " from " + m.options.dir);
    if (m.recovered_after_io_error(st, gen)) return std::optional<std::string>();
    m.log.log(spdlog::level::warn, "read", st.to_string());
    return st;
  }
  // Bookkeeping: most recently used, persisted (never synced, even with
  // sync_writes) so the LRU order survives restarts. Not while a fault
  // stops writes: the write would only fail.
  {
    std::lock_guard<std::mutex> lock(m.mu);
    std::shared_lock<std::shared_mutex> db_lock(m.db_mu);
    auto it = m.index.find(key);
    if (it != m.index.end() && m.db && m.generation.load() == gen) {
      m.touch_locked(it->second, key);
      if (!m.bg_errors->any()) {
        rocksdb::Status ws = m.db->Put(rocksdb::WriteOptions(), db_key(kBookPrefix, key),
                                       book_value(uint64_t(it->second.bytes - kKeyBytes),
                                                  it->second.tick));
        if (!ws.ok()) spdlog::debug("page store {}: touch: {}", m.options.dir, ws.ToString());
      }
    }
  }
  return std::optional<std::string>(std::move(value));
}

Status RocksDbPageStore::erase(const PageKey& key) {
  Impl& m = *impl_;
  m.maybe_check_dir();
  m.maybe_recover(/*force=*/false);
  Status st;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    std::shared_lock<std::shared_mutex> db_lock(m.db_mu);
    if (!m.db) {
      st = m.unavailable();
    } else {
      rocksdb::WriteBatch batch;
      batch.Delete(db_key(kRecordPrefix, key));
      batch.Delete(db_key(kBookPrefix, key));
      rocksdb::Status s = m.db->Write(m.write_options, &batch);
      if (s.ok()) {
        m.forget_locked(key);
        return Status::ok();
      }
      st = translate_rocksdb_status(s, "page store: erase " + key.to_hex() + " in " + m.options.dir);
    }
  }
  m.write_failed(st);
  return st;
}

Status RocksDbPageStore::flush() {
  Impl& m = *impl_;
  m.maybe_recover(/*force=*/true);  // the last chance before a shutdown
  std::shared_lock<std::shared_mutex> db_lock(m.db_mu);
  if (!m.db) return m.unavailable();
  // Never FlushWAL(sync=true)/SyncWAL: after a failed WAL append RocksDB
  // 7.8 asserts in its WAL writer (`sync_without_flush_called_`). A
  // memtable flush writes and syncs table and blob files, after which the
  // WAL is not needed; while a background error stops writes, do nothing.
  if (std::optional<BackgroundErrors::Pending> p = m.bg_errors->pending()) {
    return Status::io_error("page store: " + m.options.dir + " not flushed, writes are stopped: " + p->message);
  }
  rocksdb::Status s = m.db->Flush(rocksdb::FlushOptions());
  if (!s.ok()) return translate_rocksdb_status(s, "page store: flush " + m.options.dir);
  return Status::ok();
}

int64_t RocksDbPageStore::size_bytes() const { return impl_->size_bytes.load(); }
int64_t RocksDbPageStore::n_records() const { return impl_->n_records.load(); }
const std::string& RocksDbPageStore::dir() const { return impl_->options.dir; }
int64_t RocksDbPageStore::n_writes_failed() const { return impl_->n_writes_failed.load(); }
int64_t RocksDbPageStore::n_recoveries() const { return impl_->n_recoveries.load(); }
int64_t RocksDbPageStore::n_records_moved_aside() const { return impl_->n_records_moved_aside.load(); }
bool RocksDbPageStore::writable() const { return !impl_->faulted(); }

}  // namespace larder
