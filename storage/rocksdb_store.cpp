#include "storage/rocksdb_store.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <ctime>
#include <filesystem>
#include <list>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

namespace larder {
namespace {

namespace fs = std::filesystem;

constexpr char kRecordPrefix = 'p';
constexpr char kBookPrefix = 's';
constexpr int64_t kKeyBytes = 16;     // counted per record in size_bytes()
constexpr size_t kBookValueBytes = 16;  // record bytes u64 LE, tick u64 LE

std::string db_key(char prefix, const PageKey& key) { return std::string(1, prefix) + key.to_bytes(); }

std::string book_value(uint64_t record_bytes, uint64_t tick) {
  std::string v(kBookValueBytes, '\0');
  for (int i = 0; i < 8; ++i) {
    v[size_t(i)] = char((record_bytes >> (8 * i)) & 0xFF);
    v[size_t(8 + i)] = char((tick >> (8 * i)) & 0xFF);
  }
  return v;
}

uint64_t read_u64_le(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(uint8_t(p[i])) << (8 * i);
  return v;
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// RocksDB status -> ours, at the adapter boundary.
Status translate(const rocksdb::Status& s, const std::string& what) {
  const std::string msg = what + ": " + s.ToString();
  if (s.IsNotFound()) return Status::not_found(msg);
  if (s.IsCorruption()) return Status::corruption(msg);
  if (s.IsInvalidArgument()) return Status::invalid_argument(msg);
  if (s.IsNotSupported()) return Status::unsupported(msg);
  return Status::io_error(msg);
}

rocksdb::Options make_db_options() {
  rocksdb::Options o;
  o.create_if_missing = true;
  // Values are 1-4 MB page records: keep them out of the LSM (see header).
  o.enable_blob_files = true;
  o.min_blob_size = 4096;
  o.blob_file_size = uint64_t(256) << 20;
  o.blob_compression_type = rocksdb::kNoCompression;
  o.enable_blob_garbage_collection = true;
  o.compression = rocksdb::kNoCompression;
  o.write_buffer_size = size_t(64) << 20;
  o.keep_log_file_num = 4;
  o.max_log_file_size = size_t(8) << 20;
  return o;
}

// True for names RocksDB creates in a DB directory: 000012.log, 000013.sst,
// 000014.blob, *.dbtmp, MANIFEST-000005, OPTIONS-000007, CURRENT, IDENTITY,
// LOCK, LOG, LOG.old.<n>.
bool is_rocksdb_file_name(const std::string& name) {
  auto digits = [](std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  std::string_view n(name);
  if (n.ends_with(".dbtmp")) n.remove_suffix(6);
  if (n == "CURRENT" || n == "IDENTITY" || n == "LOCK" || n == "LOG") return true;
  for (std::string_view prefix : {"MANIFEST-", "OPTIONS-", "LOG.old."}) {
    if (n.starts_with(prefix)) return digits(n.substr(prefix.size()));
  }
  const size_t dot = n.rfind('.');
  if (dot == std::string_view::npos) return false;
  const std::string_view ext = n.substr(dot);
  return (ext == ".log" || ext == ".sst" || ext == ".blob") && digits(n.substr(0, dot));
}

struct IndexEntry {
  int64_t bytes = 0;  // kKeyBytes + record size
  uint64_t tick = 0;
  std::list<PageKey>::iterator lru_pos;
};

}  // namespace

struct RocksDbPageStore::Impl {
  RocksDbStoreOptions options;
  rocksdb::Options db_options = make_db_options();
  rocksdb::WriteOptions write_options;

  std::shared_mutex db_mu;           // exclusive only to close/reopen db
  std::unique_ptr<rocksdb::DB> db;   // null after a failed reopen

  std::mutex mu;                     // serializes writes; guards the index
  std::list<PageKey> lru;            // front: least recently accessed
  std::unordered_map<PageKey, IndexEntry, PageKeyHash> index;
  uint64_t next_tick = 1;
  std::atomic<int64_t> size_bytes{0};
  std::atomic<int64_t> n_records{0};

  std::atomic<int64_t> last_check_ms{INT64_MIN / 2};
  std::atomic<uint64_t> generation{0};  // bumped by every reopen

  bool dir_intact() const {
    std::error_code ec;
    return fs::exists(fs::path(options.dir) / "CURRENT", ec);
  }

  // Requires mu and db_mu exclusively held (or no other thread yet).
  Status open_db() {
    std::error_code ec;
    fs::create_directories(options.dir, ec);
    if (ec) {
      return Status::io_error("page store: cannot create directory " + options.dir + ": " +
                              ec.message());
    }
    rocksdb::DB* raw = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(db_options, options.dir, &raw);
    if (!s.ok()) {
      return Status::io_error("page store: cannot open RocksDB in " + options.dir + ": " +
                              s.ToString());
    }
    db.reset(raw);
    return rebuild_index();
  }

  // Reads the bookkeeping range "s".."t" and rebuilds index and LRU order.
  // Malformed bookkeeping entries are erased with their records.
  Status rebuild_index() {
    index.clear();
    lru.clear();
    size_bytes = 0;
    n_records = 0;
    struct Loaded { PageKey key; int64_t bytes; uint64_t tick; };
    std::vector<Loaded> loaded;
    std::vector<std::string> bad;
    const std::string lower(1, kBookPrefix), upper(1, char(kBookPrefix + 1));
    rocksdb::Slice upper_slice(upper);
    rocksdb::ReadOptions ro;
    ro.iterate_upper_bound = &upper_slice;
    ro.fill_cache = false;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro));
    for (it->Seek(lower); it->Valid(); it->Next()) {
      const rocksdb::Slice k = it->key(), v = it->value();
      if (k.size() != 1 + size_t(kKeyBytes) || v.size() != kBookValueBytes) {
        bad.push_back(k.ToString());
        continue;
      }
      const PageKey key = PageKey::from_bytes(std::string_view(k.data() + 1, size_t(kKeyBytes)));
      loaded.push_back({key, kKeyBytes + int64_t(read_u64_le(v.data())), read_u64_le(v.data() + 8)});
    }
    if (!it->status().ok()) {
      return translate(it->status(), "page store: reading the index of " + options.dir);
    }
    it.reset();
    if (!bad.empty()) {
      spdlog::warn("page store {}: erasing {} malformed index entries", options.dir, bad.size());
      rocksdb::WriteBatch batch;
      for (const std::string& k : bad) {
        batch.Delete(k);
        if (k.size() == 1 + size_t(kKeyBytes)) batch.Delete(std::string(1, kRecordPrefix) + k.substr(1));
      }
      rocksdb::Status s = db->Write(write_options, &batch);
      if (!s.ok()) spdlog::warn("page store {}: {}", options.dir, s.ToString());
    }
    std::sort(loaded.begin(), loaded.end(),
              [](const Loaded& a, const Loaded& b) { return a.tick < b.tick; });
    for (const Loaded& l : loaded) {
      lru.push_back(l.key);
      index[l.key] = IndexEntry{l.bytes, l.tick, std::prev(lru.end())};
      size_bytes += l.bytes;
      next_tick = std::max(next_tick, l.tick + 1);
    }
    n_records = int64_t(index.size());
    spdlog::info("page store {}: opened, {} records, {} bytes", options.dir, n_records.load(),
                 size_bytes.load());
    return Status::ok();
  }

  // Closes the DB and opens a fresh one if the directory vanished (or the DB
  // is down), unless another thread already did since `seen_generation`.
  void recover(uint64_t seen_generation) {
    std::lock_guard<std::mutex> lock(mu);
    std::unique_lock<std::shared_mutex> db_lock(db_mu);
    if (generation.load() != seen_generation) return;
    if (db && dir_intact()) return;
    if (db) {
      spdlog::warn("page store: directory {} or its CURRENT file vanished; its records are "
                   "lost, reopening an empty store",
                   options.dir);
      rocksdb::Status s = db->Close();
      if (!s.ok()) spdlog::debug("page store {}: close: {}", options.dir, s.ToString());
      db.reset();
    }
    index.clear();
    lru.clear();
    size_bytes = 0;
    n_records = 0;
    generation.fetch_add(1);
    remove_stale_files();
    Status st = open_db();
    if (!st.is_ok()) {
      db.reset();
      spdlog::error("{}", st.to_string());
    }
  }

  // After a partial rm -rf (CURRENT gone, other DB files left, or files a
  // closing DB wrote back) RocksDB refuses to create a DB there: remove the
  // files RocksDB names, and nothing else, when CURRENT is missing.
  void remove_stale_files() {
    if (dir_intact()) return;
    std::error_code ec;
    int n_removed = 0;
    for (fs::directory_iterator it(options.dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      std::error_code rm_ec;
      if (it->is_regular_file(rm_ec) && is_rocksdb_file_name(name) && fs::remove(it->path(), rm_ec)) {
        ++n_removed;
      }
    }
    if (n_removed > 0) {
      spdlog::warn("page store {}: removed {} stale RocksDB files left without CURRENT",
                   options.dir, n_removed);
    }
  }

  // At most once per dir_check_interval_ms: recover if the directory is gone.
  void maybe_check_dir() {
    const int64_t now = now_ms();
    int64_t last = last_check_ms.load();
    if (now - last < options.dir_check_interval_ms) return;
    if (!last_check_ms.compare_exchange_strong(last, now)) return;
    const uint64_t gen = generation.load();
    bool healthy;
    {
      std::shared_lock<std::shared_mutex> db_lock(db_mu);
      healthy = db != nullptr;
    }
    if (!healthy || !dir_intact()) recover(gen);
  }

  // After an IO error: true when the directory was gone and a reopen ran.
  bool recovered_after_io_error(const Status& st, uint64_t gen) {
    if (st.code() != StatusCode::kIOError || dir_intact()) return false;
    recover(gen);
    return true;
  }

  // Requires mu held. Moves key to the most recently used end.
  void touch_locked(IndexEntry& e, const PageKey& key) {
    e.tick = next_tick++;
    lru.splice(lru.end(), lru, e.lru_pos);
  }

  // Requires mu held. Drops key from the index if present.
  void forget_locked(const PageKey& key) {
    auto it = index.find(key);
    if (it == index.end()) return;
    size_bytes -= it->second.bytes;
    lru.erase(it->second.lru_pos);
    index.erase(it);
    n_records = int64_t(index.size());
  }

  Status put_once(const PageKey& key, std::string_view record) {
    std::lock_guard<std::mutex> lock(mu);
    std::shared_lock<std::shared_mutex> db_lock(db_mu);
    if (!db) return Status::io_error("page store: " + options.dir + " is unavailable");
    const uint64_t tick = next_tick++;
    rocksdb::WriteBatch batch;
    batch.Put(db_key(kRecordPrefix, key), rocksdb::Slice(record.data(), record.size()));
    batch.Put(db_key(kBookPrefix, key), book_value(record.size(), tick));
    rocksdb::Status s = db->Write(write_options, &batch);
    if (!s.ok()) return translate(s, "page store: put " + key.to_hex() + " in " + options.dir);
    forget_locked(key);
    lru.push_back(key);
    index[key] = IndexEntry{kKeyBytes + int64_t(record.size()), tick, std::prev(lru.end())};
    size_bytes += kKeyBytes + int64_t(record.size());
    n_records = int64_t(index.size());
    evict_locked(key);
    return Status::ok();
  }

  // Requires mu and db_mu (shared) held. Erases LRU records other than
  // `keep` while over capacity. Failures are logged: the put succeeded.
  void evict_locked(const PageKey& keep) {
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
      spdlog::warn("page store {}: eviction of {} records failed: {}", options.dir,
                   victims.size(), s.ToString());
      return;
    }
    for (const PageKey& k : victims) forget_locked(k);
    spdlog::debug("page store {}: evicted {} records, {} bytes left", options.dir,
                  victims.size(), size_bytes.load());
  }
};

RocksDbPageStore::RocksDbPageStore(PrivateTag, std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RocksDbPageStore::~RocksDbPageStore() {
  if (!impl_) return;
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
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->write_options.sync = options.sync_writes;
  Status st = impl->open_db();
  if (!st.is_ok() && st.message().find("lock") != std::string::npos) {
    // RocksDB's LOCK file: another process has this store open.
    return Status::io_error("page store: " + options.dir +
                            " is in use by another process (another larderd?): " + st.message());
  }
  std::error_code dir_ec;
  const bool was_a_store = fs::is_directory(options.dir, dir_ec) &&
                           fs::exists(fs::path(options.dir) / "CURRENT", dir_ec);
  if (!st.is_ok() && was_a_store) {
    // The store is only a cache: a store that cannot be opened (corrupt
    // CURRENT/MANIFEST/SST, a torn write) is moved aside, kept for
    // inspection, and replaced by an empty one, so the daemon still starts.
    impl->db.reset();
    std::string aside = options.dir;
    while (!aside.empty() && aside.back() == '/') aside.pop_back();
    aside += ".corrupt-" + std::to_string(std::time(nullptr));
    std::error_code ec;
    fs::rename(options.dir, aside, ec);
    if (ec) {
      spdlog::error("{}", st.to_string());
      return Status::io_error(st.message() + "; moving it aside to " + aside + " failed: " + ec.message());
    }
    spdlog::warn("{}; moved the damaged store to {} and starting with an empty one", st.to_string(), aside);
    st = impl->open_db();
  }
  if (!st.is_ok()) {
    spdlog::error("{}", st.to_string());
    return st;
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
  const uint64_t gen = m.generation.load();
  Status st = m.put_once(key, record);
  if (!st.is_ok() && m.recovered_after_io_error(st, gen)) st = m.put_once(key, record);
  if (!st.is_ok()) spdlog::warn("{}", st.to_string());
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
    if (!m.db) return Status::io_error("page store: " + m.options.dir + " is unavailable");
    s = m.db->Get(rocksdb::ReadOptions(), db_key(kRecordPrefix, key), &value);
  }
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) {
    Status st = translate(s, "page store: get " + key.to_hex() + " from " + m.options.dir);
    if (m.recovered_after_io_error(st, gen)) return std::optional<std::string>();
    spdlog::warn("{}", st.to_string());
    return st;
  }
  // Bookkeeping: most recently used, persisted (never synced, even with
  // sync_writes) so the LRU order survives restarts.
  {
    std::lock_guard<std::mutex> lock(m.mu);
    std::shared_lock<std::shared_mutex> db_lock(m.db_mu);
    auto it = m.index.find(key);
    if (it != m.index.end() && m.db && m.generation.load() == gen) {
      m.touch_locked(it->second, key);
      rocksdb::Status ws = m.db->Put(rocksdb::WriteOptions(), db_key(kBookPrefix, key),
                                     book_value(uint64_t(it->second.bytes - kKeyBytes),
                                                it->second.tick));
      if (!ws.ok()) spdlog::debug("page store {}: touch: {}", m.options.dir, ws.ToString());
    }
  }
  return std::optional<std::string>(std::move(value));
}

Status RocksDbPageStore::erase(const PageKey& key) {
  Impl& m = *impl_;
  m.maybe_check_dir();
  std::lock_guard<std::mutex> lock(m.mu);
  std::shared_lock<std::shared_mutex> db_lock(m.db_mu);
  if (!m.db) return Status::io_error("page store: " + m.options.dir + " is unavailable");
  rocksdb::WriteBatch batch;
  batch.Delete(db_key(kRecordPrefix, key));
  batch.Delete(db_key(kBookPrefix, key));
  rocksdb::Status s = m.db->Write(m.write_options, &batch);
  if (!s.ok()) {
    Status st = translate(s, "page store: erase " + key.to_hex() + " in " + m.options.dir);
    spdlog::warn("{}", st.to_string());
    return st;
  }
  m.forget_locked(key);
  return Status::ok();
}

Status RocksDbPageStore::flush() {
  Impl& m = *impl_;
  std::shared_lock<std::shared_mutex> db_lock(m.db_mu);
  if (!m.db) return Status::io_error("page store: " + m.options.dir + " is unavailable");
  rocksdb::Status s = m.db->FlushWAL(/*sync=*/true);
  if (s.ok()) s = m.db->Flush(rocksdb::FlushOptions());
  if (!s.ok()) {
    Status st = translate(s, "page store: flush " + m.options.dir);
    spdlog::warn("{}", st.to_string());
    return st;
  }
  return Status::ok();
}

int64_t RocksDbPageStore::size_bytes() const { return impl_->size_bytes.load(); }
int64_t RocksDbPageStore::n_records() const { return impl_->n_records.load(); }
const std::string& RocksDbPageStore::dir() const { return impl_->options.dir; }

}  // namespace larder
