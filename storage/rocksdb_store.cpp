#include "storage/rocksdb_store.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <vector>

#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include "storage/rocksdb_store_impl.h"

namespace larder {

using namespace rocksdb_detail;
namespace fs = std::filesystem;

int64_t system_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void RocksDbPageStore::Impl::touch_locked(IndexEntry& e, const PageKey& key) {
  e.tick = next_tick++;
  e.last_use_ms = options.now_unix_ms();
  policy->touch(key, e.tick);
  policy->add_user(key);  // a read serves another request than the one that wrote it
}

void RocksDbPageStore::Impl::forget_locked(const PageKey& key) {
  auto it = index.find(key);
  if (it == index.end()) return;
  size_bytes -= it->second.bytes;
  note_erased(it->second.bytes, it->second.legacy);
  if (it->second.legacy) --n_legacy;
  index.erase(it);
  policy->erase(key);
  n_records = int64_t(index.size());
}

void RocksDbPageStore::Impl::add_erase(rocksdb::WriteBatch& batch, const PageKey& key, bool legacy) {
  const std::string k = key.to_bytes();
  batch.Delete(cf_pages, k);
  batch.Delete(cf_meta, k);
  if (legacy) batch.Delete(cf_default, legacy_key(kLegacyRecordPrefix, key));
}

rocksdb::Status RocksDbPageStore::Impl::flush_all() {
  return db->Flush(rocksdb::FlushOptions(), {cf_pages, cf_meta, cf_default});
}

Status RocksDbPageStore::Impl::put_once(const PageKey& key, std::string_view record) {
  std::lock_guard<std::mutex> lock(mu);
  std::shared_lock<std::shared_mutex> db_lock(db_mu);
  if (!db) return unavailable();
  const uint64_t tick = next_tick++;
  const int64_t now = options.now_unix_ms();
  auto it = index.find(key);
  const bool replaces_legacy = it != index.end() && it->second.legacy;
  rocksdb::WriteBatch batch;
  const std::string k = key.to_bytes();
  batch.Put(cf_pages, k, rocksdb::Slice(record.data(), record.size()));
  batch.Put(cf_meta, k, meta_value(record.size(), tick, now, /*legacy=*/false));
  if (replaces_legacy) batch.Delete(cf_default, legacy_key(kLegacyRecordPrefix, key));
  rocksdb::Status s = db->Write(write_options, &batch);
  if (!s.ok()) return translate_rocksdb_status(s, "page store: put " + key.to_hex() + " in " + options.dir);
  const int64_t bytes = kKeyBytes + int64_t(record.size());
  if (it != index.end()) {
    size_bytes -= it->second.bytes;
    note_erased(it->second.bytes, replaces_legacy);  // the old value is garbage now
    if (replaces_legacy) --n_legacy;
  }
  index[key] = IndexEntry{bytes, tick, now, false};
  policy->insert(key, EvictionEntry{bytes, 0, 1}, tick);  // a replaced record: one more use
  size_bytes += bytes;
  n_records = int64_t(index.size());
  bytes_written += int64_t(record.size());
  evict_locked(&key);
  return Status::ok();
}

bool RocksDbPageStore::Impl::erase_records_locked(const std::vector<PageKey>& keys, EvictReason reason) {
  if (keys.empty()) return true;
  rocksdb::WriteBatch batch;
  for (const PageKey& k : keys) {
    auto it = index.find(k);
    add_erase(batch, k, it != index.end() && it->second.legacy);
  }
  rocksdb::Status s = db->Write(write_options, &batch);
  if (!s.ok()) {
    log.log(spdlog::level::warn, "evict",
            "page store " + options.dir + ": erasing " + std::to_string(keys.size()) + " records (" +
                evict_reason_name(reason) + ") failed: " + s.ToString());
    return false;
  }
  for (const PageKey& k : keys) forget_locked(k);
  n_evictions[size_t(reason)] += int64_t(keys.size());
  spdlog::debug("page store {}: erased {} records ({}), {} bytes left", options.dir, keys.size(),
                evict_reason_name(reason), size_bytes.load());
  return true;
}

void RocksDbPageStore::Impl::evict_locked(const PageKey* keep) {
  const int64_t limit = size_limit();
  if (size_bytes.load() <= limit) return;
  // Victims are held while chosen, so the next victim() is the next one.
  if (keep) policy->hold(*keep);
  std::vector<PageKey> victims;
  int64_t projected = size_bytes.load();
  while (projected > limit) {
    std::optional<PageKey> v = policy->victim();
    if (!v) break;
    policy->hold(*v);
    victims.push_back(*v);
    projected -= index.at(*v).bytes;
  }
  for (const PageKey& k : victims) policy->release(k);
  if (keep) {
    policy->release(*keep);
    // Only pinned records were left to erase: the new one goes instead.
    if (projected > limit && !policy->is_pinned(*keep)) victims.push_back(*keep);
  }
  erase_records_locked(victims, EvictReason::kBudget);
}

void RocksDbPageStore::Impl::maybe_check_free_space() {
  if (options.min_free_bytes <= 0) return;
  constexpr int64_t kNoCap = std::numeric_limits<int64_t>::max();
  // While a cap holds, every put looks (a statvfs): a put right after space
  // came back must not be evicted by a cap a second old (found by the
  // disk-full recovery test).
  if (space_cap.load() == kNoCap && now_ms() < next_free_check_ms.load()) return;
  // One put looks; one that comes meanwhile waits here and then, unless a
  // cap holds, goes by the look just made. The next look's time is set when
  // this one is done, so the test above never passes a put on a look still
  // in progress (found by a flaky engine test: a second storage worker wrote
  // onto a full disk past a look that had not set its cap yet).
  std::lock_guard<std::mutex> look_lock(free_check_mu);
  const int64_t now = now_ms();
  if (space_cap.load() == kNoCap && now < next_free_check_ms.load()) return;
  struct SetNextLook {
    std::atomic<int64_t>& next;
    int64_t at;
    ~SetNextLook() { next = at; }
  } set_next_look{next_free_check_ms, now + options.free_check_interval_ms};
  std::lock_guard<std::mutex> lock(mu);
  std::shared_lock<std::shared_mutex> db_lock(db_mu);
  // The memtables are not counted: they reach the disk at a flush (up to a
  // write buffer, 64 MiB, at once), so the reserve should be larger than
  // that. Counting them kept a store whose memtable never filled from ever
  // writing again (found in hostile testing on a 64 MiB tmpfs).
  int64_t free_bytes = -1;
  if (options.free_space_bytes) {
    free_bytes = options.free_space_bytes();
  } else if (uint64_t f = 0; env->GetFreeSpace(options.dir, &f).ok()) {
    free_bytes = int64_t(std::min<uint64_t>(f, uint64_t(std::numeric_limits<int64_t>::max())));
  }
  if (free_bytes < 0) return;
  const int64_t reserve = options.min_free_bytes;
  if (free_bytes >= reserve) {
    if (space_cap.load() != kNoCap) {
      spdlog::info("page store {}: {} bytes free again (reserve {}): the budget bounds it alone", options.dir,
                   free_bytes, reserve);
    }
    space_cap = kNoCap;
    return;
  }
  int64_t cap = space_cap.load();
  const int64_t written = bytes_written.load();
  if (cap == kNoCap) {
    cap = size_bytes.load() - (reserve - free_bytes);
    log.log(spdlog::level::warn, "space",
            "page store " + options.dir + ": " + std::to_string(free_bytes) + " bytes free on its file system, below " +
                "the reserve of " + std::to_string(reserve) + " ([cache.disk] min_free): keeping it under " +
                std::to_string(std::max<int64_t>(cap, 0)) + " bytes until there is room again");
  } else if (compaction_in_flight()) {
    return;  // its scratch files come and go: look again after it
  } else {
    // Lower the cap only by what something else took: the fall in free
    // space beyond this store's own writes under the cap since the last
    // look (found in review: each page written under the cap lowered it
    // again, so the cap ratcheted down while the disk stayed as full). A
    // rise (erased bytes back after a compaction) is already counted.
    const int64_t taken = (free_at_cap - free_bytes) - (written - written_at_cap);
    if (taken > 0) cap -= taken;
  }
  free_at_cap = free_bytes;
  written_at_cap = written;
  if (cap == space_cap.load()) return;
  space_cap = std::max<int64_t>(cap, 0);
  if (!db) return;
  const int64_t before = size_bytes.load();
  evict_locked(nullptr);
  if (size_bytes.load() < before) request_compaction();
}

RocksDbPageStore::RocksDbPageStore(PrivateTag, std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RocksDbPageStore::~RocksDbPageStore() {
  if (!impl_) return;
  impl_->stop_sweeper();
  impl_->stop_compactor();
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::unique_lock<std::shared_mutex> db_lock = impl_->lock_db_exclusive();
  impl_->close_db();
}

Result<std::unique_ptr<RocksDbPageStore>> RocksDbPageStore::open(const RocksDbStoreOptions& options) {
  if (options.dir.empty()) return Status::invalid_argument("page store: empty directory");
  if (options.capacity_bytes <= 0) {
    return Status::invalid_argument("page store: capacity_bytes must be > 0");
  }
  if (options.ttl_seconds < 0) {
    return Status::invalid_argument("page store: ttl_seconds must be >= 0 (0: no ttl)");
  }
  if (options.ttl_seconds > 0 && options.ttl_sweep_interval_ms <= 0) {
    return Status::invalid_argument("page store: ttl_sweep_interval_ms must be > 0");
  }
  Result<std::unique_ptr<EvictionPolicy>> policy = make_eviction_policy(options.policy);
  if (!policy.is_ok()) return Status::invalid_argument("page store: " + policy.status().message());
  // Only at the start, where the directory is chosen: a file that shows up
  // later is left alone by the store (move_store_aside moves only its own).
  if (std::vector<std::string> foreign = foreign_entries(options.dir); !foreign.empty()) {
    Status st = Status::unsupported(
        "page store: " + options.dir + " holds files it did not create (" + comma_list(foreign) +
        "): point [cache.disk] dir at an empty or new directory (the store moves a damaged store aside and "
        "deletes old copies, so it must have the directory to itself)");
    spdlog::error("{}", st.to_string());
    return st;
  }
  auto impl = std::make_unique<Impl>(options, std::move(policy).value());
  if (Status ours = impl->check_store_is_ours(); !ours.is_ok()) {
    spdlog::error("{}", ours.to_string());
    return ours;
  }
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
                   "file system: {} (lower [cache.disk] budget)",
                   options.dir, options.capacity_bytes, impl->size_bytes.load(), free_bytes,
                   options.min_free_bytes > 0
                       ? "pages will be evicted to leave " + std::to_string(options.min_free_bytes) +
                             " bytes free ([cache.disk] min_free)"
                       : std::string("page writes will fail when it fills up"));
    }
  }
  impl->last_check_ms = now_ms();
  auto store = std::make_unique<RocksDbPageStore>(PrivateTag(), std::move(impl));
  {
    Impl* m = store->impl_.get();
    m->compactor = std::thread([m] { m->compact_loop(); });
  }
  if (options.ttl_seconds > 0) store->impl_->start_sweeper(*store);
  return store;
}

Status RocksDbPageStore::put(const PageKey& key, std::string_view record) {
  Impl& m = *impl_;
  const int64_t bytes = kKeyBytes + int64_t(record.size());
  const int64_t budget = m.budget.load();
  if (bytes > budget) {
    ++m.n_puts_skipped;
    return Status::resource_exhausted("page store: record of " + std::to_string(bytes) +
                                      " bytes exceeds the capacity of " + std::to_string(budget));
  }
  const auto t0 = std::chrono::steady_clock::now();
  m.maybe_check_dir();
  m.maybe_recover(/*force=*/false);
  m.maybe_check_free_space();
  // Below the disk reserve the store takes no new pages: a page written
  // and evicted takes disk space until a compaction, which is what the
  // reserve is short of (found in hostile testing: a capped store went on
  // filling its disk with pages it evicted at once).
  if (const int64_t cap = m.space_cap.load(); m.size_bytes.load() + bytes > cap) {
    ++m.n_puts_skipped;
    return Status::resource_exhausted("page store " + m.options.dir +
                                      ": below its disk reserve ([cache.disk] min_free): page not written");
  }
  const uint64_t gen = m.generation.load();
  Status st = m.put_once(key, record);
  if (!st.is_ok() && m.recovered_after_io_error(st, gen)) st = m.put_once(key, record);
  if (!st.is_ok()) m.write_failed(st);
  m.write_ns += elapsed_ns(t0);
  return st;
}

Result<std::optional<std::string>> RocksDbPageStore::get(const PageKey& key) {
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::optional<std::string>> r = get_uncounted(key);
  Impl& m = *impl_;
  if (r.is_ok() && r->has_value()) {
    ++m.n_hits;
    m.bytes_read += int64_t((*r)->size());
  } else {
    ++m.n_misses;
  }
  m.read_ns += elapsed_ns(t0);
  return r;
}

rocksdb::Status RocksDbPageStore::Impl::read_record(const PageKey& key, std::string* value) const {
  // No RocksDB checksums on the record path (rocksdb_store.h, "Reads").
  rocksdb::ReadOptions ro;
  ro.verify_checksums = false;
  rocksdb::Status s = db->Get(ro, cf_pages, key.to_bytes(), value);
  // Not in "pages": maybe a record of the legacy layout.
  if (s.IsNotFound() && n_legacy.load() > 0) s = db->Get(ro, cf_default, legacy_key(kLegacyRecordPrefix, key), value);
  return s;
}

Result<std::optional<std::string>> RocksDbPageStore::get_uncounted(const PageKey& key) {
  Impl& m = *impl_;
  m.maybe_check_dir();
  const uint64_t gen = m.generation.load();
  std::string value;
  rocksdb::Status s;
  {
    std::shared_lock<std::shared_mutex> db_lock(m.db_mu);
    if (!m.db) return m.unavailable();
    s = m.read_record(key, &value);
  }
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) {
    Status st = translate_rocksdb_status(s, "page store: get " + key.to_hex() + " from " + m.options.dir);
    if (m.recovered_after_io_error(st, gen)) return std::optional<std::string>();
    m.log.log(spdlog::level::warn, "read", st.to_string());
    return st;
  }
  // Bookkeeping: a use, persisted (never synced, even with sync_writes) so
  // the access order and last-use time survive restarts. Not while a fault
  // stops writes: the write would only fail.
  {
    std::lock_guard<std::mutex> lock(m.mu);
    std::shared_lock<std::shared_mutex> db_lock(m.db_mu);
    auto it = m.index.find(key);
    if (it != m.index.end() && m.db && m.generation.load() == gen) {
      m.touch_locked(it->second, key);
      if (!m.bg_errors->any()) {
        rocksdb::Status ws = m.db->Put(rocksdb::WriteOptions(), m.cf_meta, key.to_bytes(),
                                       meta_value(uint64_t(it->second.bytes - kKeyBytes), it->second.tick,
                                                  it->second.last_use_ms, it->second.legacy));
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
      auto it = m.index.find(key);
      // A key the index does not know may still have a legacy record only
      // while some are left.
      m.add_erase(batch, key, it != m.index.end() ? it->second.legacy : m.n_legacy.load() > 0);
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
  rocksdb::Status s = m.flush_all();
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
