// Storage-internal: the state of RocksDbPageStore (storage/rocksdb_store.h)
// shared by rocksdb_store.cpp (reads, writes, eviction) and
// rocksdb_store_recovery.cpp (open, faults, a deleted directory). Includes
// RocksDB: only storage/ includes this file.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "storage/eviction_policy.h"
#include "storage/log_limiter.h"
#include "storage/rocksdb_hooks.h"
#include "storage/rocksdb_store.h"
#include "storage/rocksdb_support.h"

namespace larder {
namespace rocksdb_detail {

// Column families (rocksdb_store.h, "On-disk layout"). Keys in "pages"
// and "meta" are PageKey::to_bytes(), 16 bytes.
inline const std::string kPagesCf = "pages";
inline const std::string kMetaCf = "meta";
inline constexpr int64_t kKeyBytes = 16;     // counted per record in size_bytes()
// "meta" values: record bytes u64 LE, tick u64 LE, last use (Unix ms) i64
// LE, flags u8.
inline constexpr size_t kMetaValueBytes = 25;
inline constexpr uint8_t kMetaFlagLegacy = 1;  // the record is in the default CF as "p" + key
// The layout before the column families, all in the default CF: "p" + key
// holds the record, "s" + key its bookkeeping (24 bytes: the meta value
// without flags; 16 bytes in stores written before the last-use field).
inline constexpr char kLegacyRecordPrefix = 'p';
inline constexpr char kLegacyBookPrefix = 's';
inline constexpr size_t kLegacyBookValueBytes = 24;
inline constexpr size_t kOldLegacyBookValueBytes = 16;
// Values of at least this many bytes go to blob files (rocksdb_store.h).
inline constexpr uint64_t kMinBlobBytes = 4096;
inline constexpr int kKeepDamagedCopies = 1;   // "<dir>.corrupt-*" directories kept
inline constexpr uint64_t kTableFileOverheadBytes = 8 << 10;  // an unlisted flush output beyond its WAL bytes
inline constexpr int64_t kMaxRetryDelayMs = 60000;
inline constexpr uint64_t kResumeMarginBytes = uint64_t(1) << 20;  // free beyond the memtable
inline constexpr size_t kMigrateBatch = 4096;  // legacy entries moved per atomic batch

inline std::string legacy_key(char prefix, const PageKey& key) {
  // Appended, not `std::string(1, prefix) + ...`: GCC 12 warns (-Wrestrict,
  // a false positive) on that temporary concatenation once inlined.
  std::string k(1, prefix);
  k += key.to_bytes();
  return k;
}

inline void put_u64_le(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = char((v >> (8 * i)) & 0xFF);
}

inline uint64_t read_u64_le(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(uint8_t(p[i])) << (8 * i);
  return v;
}

inline std::string meta_value(uint64_t record_bytes, uint64_t tick, int64_t last_use_ms, bool legacy) {
  std::string v(kMetaValueBytes, '\0');
  put_u64_le(v.data(), record_bytes);
  put_u64_le(v.data() + 8, tick);
  put_u64_le(v.data() + 16, uint64_t(last_use_ms));
  v[24] = char(legacy ? kMetaFlagLegacy : 0);
  return v;
}

inline int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The write buffer (memtable) of the "pages" CF, also its blob file size:
// budget / 16, clamped to [1 MiB, 64 MiB], so a small budget is not
// dwarfed by a 64 MiB memtable and its WAL.
inline uint64_t pages_write_buffer_bytes(int64_t budget_bytes) {
  return std::clamp<uint64_t>(uint64_t(std::max<int64_t>(budget_bytes, 0)) / 16, uint64_t(1) << 20,
                              uint64_t(64) << 20);
}
// The write buffer of "meta" and of the default CF: 4 MiB, no more than
// the "pages" one.
inline uint64_t meta_write_buffer_bytes(int64_t budget_bytes) {
  return std::min<uint64_t>(uint64_t(4) << 20, pages_write_buffer_bytes(budget_bytes));
}

// The erased bytes that start a background compaction when
// options.compaction_trigger_bytes is 0: budget / 4, clamped to
// [1 MiB, 1 GiB].
inline int64_t default_compaction_trigger_bytes(int64_t budget_bytes) {
  return std::clamp<int64_t>(budget_bytes / 4, int64_t(1) << 20, int64_t(1) << 30);
}

// DB-wide options (rocksdb_store_layout.cpp); the env, info log and
// listeners are the store's.
rocksdb::DBOptions make_db_options(int64_t budget_bytes);
// The three column families, in this order: default (the legacy layout),
// "pages", "meta".
std::vector<rocksdb::ColumnFamilyDescriptor> make_column_families(int64_t budget_bytes);

struct IndexEntry {
  int64_t bytes = 0;        // kKeyBytes + record size
  uint64_t tick = 0;        // the last use, on the store's logical clock
  int64_t last_use_ms = 0;  // the last use, Unix ms
  bool legacy = false;      // the record is in the default CF (the layout before the CFs)
};

inline int64_t elapsed_ns(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace rocksdb_detail

struct RocksDbPageStore::Impl {
  Impl(const RocksDbStoreOptions& o, std::unique_ptr<EvictionPolicy> p)
      : options(o),
        log(o.log_interval_ms),
        db_options(rocksdb_detail::make_db_options(o.capacity_bytes)),
        column_families(rocksdb_detail::make_column_families(o.capacity_bytes)),
        policy(std::move(p)),
        budget(o.capacity_bytes),
        ttl_seconds(o.ttl_seconds) {
    if (!options.now_unix_ms) options.now_unix_ms = system_unix_ms;
    if (options.hooks && options.hooks->file_system) {
      env_owner = rocksdb::NewCompositeEnv(options.hooks->file_system);
      env = env_owner.get();
    }
    db_options.env = env;
    db_options.info_log = std::make_shared<RocksDbInfoLog>(options.dir, log);
    db_options.listeners.push_back(bg_errors);
    write_options.sync = options.sync_writes;
  }

  RocksDbStoreOptions options;
  LogLimiter log;
  std::unique_ptr<rocksdb::Env> env_owner;  // over hooks->file_system
  rocksdb::Env* env = rocksdb::Env::Default();
  std::shared_ptr<BackgroundErrors> bg_errors = std::make_shared<BackgroundErrors>();
  rocksdb::DBOptions db_options;
  std::vector<rocksdb::ColumnFamilyDescriptor> column_families;  // default, pages, meta
  rocksdb::WriteOptions write_options;

  std::shared_mutex db_mu;           // exclusive only to close/reopen db
  std::unique_ptr<rocksdb::DB> db;   // null while unavailable
  // The column families of db (null while db is): cf_default holds the
  // records of the legacy layout (rocksdb_store.h, "On-disk layout").
  // cf_pages and cf_meta are owned (destroyed by close_db).
  rocksdb::ColumnFamilyHandle* cf_default = nullptr;
  rocksdb::ColumnFamilyHandle* cf_pages = nullptr;
  rocksdb::ColumnFamilyHandle* cf_meta = nullptr;
  std::atomic<bool> db_open{false};  // db != nullptr, readable without db_mu
  std::string unavailable_why;       // guarded by db_mu: why db is null

  std::mutex mu;                     // serializes writes; guards the index
  std::unordered_map<PageKey, rocksdb_detail::IndexEntry, PageKeyHash> index;
  std::unique_ptr<EvictionPolicy> policy;  // guarded by mu: the index's entries, by use
  uint64_t next_tick = 1;                  // guarded by mu
  std::atomic<int64_t> budget;             // bound on size_bytes
  // The free-space reserve (rocksdb_store.h, "Disk space"): a further bound
  // on size_bytes while the file system has less than min_free_bytes free
  // (INT64_MAX: none), and the free bytes and bytes_written at the last
  // look that set or kept it.
  std::atomic<int64_t> space_cap{std::numeric_limits<int64_t>::max()};
  int64_t free_at_cap = 0;                 // guarded by mu
  int64_t written_at_cap = 0;              // guarded by mu
  std::atomic<int64_t> next_free_check_ms{INT64_MIN / 2};
  // Held through a look, so a put that comes while another put looks waits
  // for its cap instead of writing on the stale one. Taken before mu.
  std::mutex free_check_mu;
  std::atomic<int64_t> size_bytes{0};
  std::atomic<int64_t> n_records{0};
  // Index entries whose record is in the legacy layout; while > 0 a get
  // that misses in "pages" also looks there.
  std::atomic<int64_t> n_legacy{0};

  // TierStats counters (times in nanoseconds).
  std::atomic<int64_t> n_hits{0}, n_misses{0}, bytes_read{0}, bytes_written{0};
  std::atomic<int64_t> read_ns{0}, write_ns{0}, n_puts_skipped{0};
  std::array<std::atomic<int64_t>, size_t(EvictReason::kCount)> n_evictions{};

  // The ttl (options.ttl_seconds at open; set_ttl() changes it) and the
  // sweep thread (rocksdb_store_tier.cpp), started once a ttl > 0 is set.
  std::atomic<int64_t> ttl_seconds{0};
  std::mutex sweep_mu;
  std::condition_variable sweep_cv;
  bool sweep_stop = false;  // guarded by sweep_mu
  std::thread sweeper;      // guarded by sweep_mu (started at most once)

  // The background compaction of erased records (rocksdb_store_compaction.cpp).
  std::mutex compact_mu;
  std::condition_variable compact_cv;
  bool compact_stop = false;          // guarded by compact_mu
  bool compact_requested = false;     // guarded by compact_mu
  bool compact_running = false;       // guarded by compact_mu
  bool compact_legacy = false;        // guarded by compact_mu: the default CF too
  int64_t next_compact_ms = 0;        // guarded by compact_mu: steady clock
  std::atomic<int64_t> erased_bytes_since_compaction{0};
  std::atomic<int64_t> n_compactions{0};
  std::atomic<bool> compaction_cancel{false};  // set to abort a running one (close, reopen)
  std::thread compactor;

  std::atomic<int64_t> last_check_ms{INT64_MIN / 2};
  std::atomic<uint64_t> generation{0};  // bumped by every reopen
  bool pins_applied_at_open = false;    // options.pins_at_open ran (the first successful open)

  // Recovery from faults (a failed open, a background error).
  std::atomic<int64_t> next_retry_ms{INT64_MIN / 2};
  int n_failed_tries = 0;                 // guarded by mu
  int64_t n_writes_failed_at_fault = 0;   // guarded by mu
  std::atomic<int64_t> n_writes_failed{0}, n_recoveries{0}, n_records_moved_aside{0};

  // kNoSpace: the disk cannot take writes now (full, read-only): the store
  // serves nothing and retries opening later.
  enum class OpenKind { kOk, kLocked, kNoSpace, kDamaged, kOther };
  struct OpenOutcome {
    OpenKind kind = OpenKind::kOk;
    Status status;
  };

  bool dir_intact() const {
    std::error_code ec;
    return std::filesystem::exists(std::filesystem::path(options.dir) / "CURRENT", ec);
  }

  bool faulted() const { return !db_open.load() || bg_errors->any(); }

  // Whether another holder has the directory's LOCK, found out by trying to
  // take it (RocksDB's own LockFile: it knows the locks this process holds
  // and never closes a descriptor of a file locked here).
  bool lock_taken(std::string* why);

  // Takes db_mu exclusively, first cancelling a running background
  // compaction (it holds db_mu shared).
  std::unique_lock<std::shared_mutex> lock_db_exclusive();

  // Requires mu and db_mu exclusively held (or no other thread yet).
  void close_db();
  // The record under `key` as stored, from "pages" or else the legacy
  // layout. Requires db (under db_mu, or at open). No RocksDB checksums:
  // every record carries its own XXH3-64, checked by its reader.
  rocksdb::Status read_record(const PageKey& key, std::string* value) const;

  // Requires mu and db_mu exclusively held (or no other thread yet). Opens
  // the DB and rebuilds the index; says what kind of failure stopped it.
  OpenOutcome try_open();
  // Before DB::Open, which deletes the data files its MANIFEST does not list
  // as obsolete: an error when the store's MANIFEST (opened read-only) lists
  // no data, or under a third of the bytes, of the SST and blob files in
  // the directory (a truncated or stale MANIFEST would otherwise empty the
  // store without a word). ok when there is no store yet or nothing to say.
  Status check_manifest_lists_data();
  // At the start: kUnsupported when options.dir holds a RocksDB database
  // that no page store made (other column families than default, pages and
  // meta; or, default alone, a key that is not the old layout's "p"/"s" +
  // 16 bytes). Found in hostile testing: another program's database was
  // taken over, its keys in the old layout's range erased as malformed.
  Status check_store_is_ours();

  // Requires mu and db_mu exclusively held. Moves the store aside
  // (rocksdb_store.h, "Disk faults") and opens an empty one; `why` says what was wrong with it.
  OpenOutcome replace_damaged(const Status& why);

  // Forgets every entry (the policy keeps its pins).
  void clear_index();

  // Reads the "meta" CF (and the legacy bookkeeping "s".."t" of the default
  // CF, moved into "meta") and rebuilds the index and the policy's order (by
  // stored tick); never reads a record (rocksdb_store_layout.cpp).
  // Malformed entries are erased with their records; a store over the
  // budget is evicted down to it.
  Status rebuild_index();
  // Part of rebuild_index(): moves the legacy bookkeeping into "meta" (in
  // atomic batches of kMigrateBatch), adding the entries to `loaded`.
  struct Loaded {
    PageKey key;
    rocksdb_detail::IndexEntry entry;
  };
  Status migrate_legacy(std::vector<Loaded>& loaded, size_t n_meta, int64_t open_ms);

  // ---- faults ---------------------------------------------------------------

  // At most once per retry delay (or now, with force): tries to end a fault.
  void maybe_recover(bool force);

  // Requires mu and db_mu exclusively held. Returns false when a costly try
  // (a reopen, DB::Resume()) failed; true when the fault ended or nothing
  // worth trying could be tried yet (no room on the disk).
  bool recover_faulted_locked();

  void writes_resumed(const std::string& how);

  // Whether the file system has room for the memtable DB::Resume() flushes.
  // An unknown free space counts as room.
  bool room_to_resume();

  // Counts and logs (rate-limited) a failed put or erase.
  void write_failed(const Status& st) {
    ++n_writes_failed;
    log.log(spdlog::level::warn, "write",
            st.to_string() + "; the cache keeps serving from memory" +
                (st.code() == StatusCode::kIOError ? " and retries the disk later" : ""));
  }

  Status unavailable() const {
    return Status::io_error("page store: " + options.dir + " is unavailable" +
                            (unavailable_why.empty() ? "" : ": " + unavailable_why));
  }

  // ---- a deleted directory ---------------------------------------------------

  // Closes the DB and opens a fresh one if the directory vanished, unless
  // another thread already did since `seen_generation`.
  void recover(uint64_t seen_generation);
  // After a partial rm -rf (CURRENT gone, other DB files left, or files a
  // closing DB wrote back) RocksDB refuses to create a DB there: remove the
  // files RocksDB names, and nothing else, when CURRENT is missing.
  void remove_stale_files();

  // At most once per dir_check_interval_ms: recover if the directory is gone.
  void maybe_check_dir();
  // Looks at the free space when due and sets or lifts space_cap, evicting
  // down to a lowered one (see "Disk space"). Takes mu and db_mu.
  void maybe_check_free_space();
  // What size_bytes is kept under: the budget, or the space cap if lower.
  int64_t size_limit() const { return std::min(budget.load(), space_cap.load()); }

  // After an IO error: true when the directory was gone and a reopen ran.
  bool recovered_after_io_error(const Status& st, uint64_t gen);

  // Requires mu held. Records a use of key now.
  void touch_locked(rocksdb_detail::IndexEntry& e, const PageKey& key);

  // Requires mu held. Drops key from the index and the policy if present,
  // counting its bytes as erased (for the background compaction).
  void forget_locked(const PageKey& key);

  // Requires db_mu (shared) held, db open. Adds the deletes of key's record
  // and metadata to batch (the legacy record too when `legacy`).
  void add_erase(rocksdb::WriteBatch& batch, const PageKey& key, bool legacy);

  // Flushes the memtables of every column family (waits for them).
  rocksdb::Status flush_all();

  Status put_once(const PageKey& key, std::string_view record);

  // Requires mu and db_mu (shared) held, db open. Erases the policy's
  // victims while over budget, `keep` (if given) only when nothing else
  // can go (rocksdb_store.h, "Capacity"). Failures are logged: the put
  // succeeded.
  void evict_locked(const PageKey* keep);

  // Requires mu and db_mu (shared) held, db open. Erases the records of
  // keys in one batch and forgets them, counted under `reason`. Returns
  // false (logged) when RocksDB failed the write; nothing is forgotten then.
  bool erase_records_locked(const std::vector<PageKey>& keys, EvictReason reason);

  // ---- background compaction (rocksdb_store_compaction.cpp) ----------------

  // Counts erased bytes; requests a compaction once they reach the trigger.
  void note_erased(int64_t bytes, bool legacy);
  // Wakes the compactor (it runs at most once per compaction_interval_ms).
  void request_compaction();
  // Whether a compaction is asked for or running: its scratch files take
  // disk space until it ends.
  bool compaction_in_flight();
  void compact_loop();
  // Requires db_mu (shared) held. Compacts "pages" and "meta" (and the
  // default CF when asked): erased records and their blob files go.
  void compact_now(bool legacy);
  void stop_compactor();
  // Waits until no compaction is requested or running here or in RocksDB.
  bool wait_for_compactions(int64_t timeout_ms);

  // The ttl sweep thread's loop (rocksdb_store_tier.cpp).
  void sweep_loop(RocksDbPageStore& store);
  // Starts the sweep thread unless it runs or the store is closing.
  void start_sweeper(RocksDbPageStore& store);
  void stop_sweeper();
};

}  // namespace larder
