// RocksDbPageStore: the disk tier ("disk", a PageTier: storage/page_tier.h).
// Sealed page records live in a RocksDB database in one directory and
// survive restarts; the store bounds its size by evicting the records its
// EvictionPolicy (storage/eviction_policy.h; options.policy, default "lru")
// names, and optionally erases records unused for longer than a ttl.
//
// On-disk layout: three column families (CFs).
//   "pages"  key PageKey::to_bytes() (16 bytes), value the record as put.
//   "meta"   the same key, value the record's bookkeeping (25 bytes),
//            written in the same atomic batch as the record and rewritten
//            on every get:
//              bytes 0-7    record bytes, u64 LE
//              bytes 8-15   access tick, u64 LE (the store's logical clock:
//                           the order of the last put or get of each record)
//              bytes 16-23  last use, i64 LE, Unix time in milliseconds
//              byte 24      flags: bit 0 set = the record is in the legacy
//                           layout (below); other bits must be 0
//   default  the legacy layout's records, nothing else once migrated.
// At open the store rebuilds its in-memory index (size, access tick, last
// use of every record) by iterating "meta" only: ~45 bytes per record in
// table files of their own, ~4.5 MB for 100 000 records; no record value
// is read, and compactions of "pages" never mix values into "meta". The
// entries enter the policy in the order of their stored access ticks, so
// after a restart the lru order is that of the last put or get of each
// record before shutdown. Use counts (lfu) and pins are not persisted:
// after a restart every record counts one use and nothing is pinned.
// Malformed "meta" entries are erased with their records.
//
// Legacy layout (stores written before the CFs): everything in the default
// CF, "p" + key -> record, "s" + key -> bookkeeping (the first 24 bytes of
// the "meta" value, or 16 bytes, without the last use, in even older
// stores: those count as last used at the open, so their ttl counts from
// then). The first open moves the bookkeeping only: it reads the "s" range
// (what every open read before) and writes each entry into "meta" with the
// legacy flag, deleting the "s" key in the same batch (batches of 4096
// entries, each atomic, so an open cut short resumes at the next one). The
// records stay where they are and are read there (a get that misses in
// "pages" looks in the default CF while legacy records are left); a put of
// the same key writes it to "pages" and deletes the old one, and eviction,
// ttl and erase delete it where it is. So the upgrade costs one pass over
// the bookkeeping, never a copy of the pages. Going back to a build that
// knows no CFs does not open the store (RocksDB: "column families not
// opened"; the daemon then runs without a disk tier, cache.disk.on_error)
// and leaves it untouched.
//
// RocksDB settings (rocksdb_store_layout.cpp), for records of 20 KiB to a
// few MB written once and read rarely: values >= 4 KiB (one table block)
// go to blob files (integrated BlobDB), so compaction never rewrites them
// and the table files hold only small blob indexes; smaller values stay
// inline, where they cost the same one block read. Compression: none,
// chosen by measurement on real K/V pages (docs/disk-tier.md: LZ4 saves
// 0.2 %, zstd 5-6 % at 220-700 MB/s, slower than a restore). The "pages"
// memtable (and blob file size) is budget / 16, clamped to [1 MiB, 64 MiB];
// the WALs are bounded to about two of them.
//
// Reads: a get asks RocksDB not to verify checksums (ReadOptions::
// verify_checksums = false). Every record written here carries its own
// XXH3-64 over all its bytes (page records: storage/page_record.h; answer
// records: engine/tokenizer/answer_memo.h), which its reader checks and
// drops a record that fails; RocksDB's CRC32c adds nothing to that and, in
// Debian's librocksdb 7.8 (built portable: software CRC32c, ~1 GB/s), cost
// three quarters of a restore (docs/disk-tier.md). So a damaged byte inside
// a record comes back as bytes that fail their reader's check; a blob file
// that is truncated, missing or has a damaged header still fails the get
// (kCorruption / kIOError). The open's iteration of "meta" is verified.
//
// Sync: with sync_writes every put, erase and eviction batch is written
// with WriteOptions::sync (the WAL is fsynced before the call returns: a
// completed put survives a power loss). Without it a completed put
// survives a crash of the process (the WAL is in the OS page cache) but
// not of the machine. The bookkeeping rewrite of a get is never synced.
//
// Space: erasing a record (budget, ttl, admin, replace) writes tombstones;
// its bytes on disk come back when a compaction drops its blob index and
// RocksDB deletes blob files left all garbage, or relocates the live blobs
// of the oldest quarter of blob files (blob GC, forced once half of theirs
// is garbage). Once compaction_trigger_bytes (default budget / 4, clamped
// to [1 MiB, 1 GiB]) have been erased, a background thread compacts the
// whole key range of "pages" and "meta" (and the default CF while legacy
// records are or were left there): at most once per compaction_interval_ms,
// one thread, never exclusive (flushes and puts go on), never on a
// caller's path; a close or reopen cancels it. Cheap by design: the tables
// hold only blob indexes. The directory's size then stays under about
// budget * 1.5 + 4 "pages" memtables + 2 MiB (MANIFEST, OPTIONS, tables);
// tests/storage checks it with budgets of 4 MiB and 1 MiB.
//
// Capacity: size_bytes() counts 16 + record.size() per record. When a put
// takes it over the budget (capacity_bytes, or set_budget()), the policy's
// victims other than the record just written are erased (kBudget) until it
// is at most the budget. Pinned records are never erased for budget or
// ttl; when only pinned ones are left to erase, the record just written is
// erased itself unless it is pinned too (the put still returns OK). A
// store found over the budget at open (a lower capacity_bytes than it was
// filled with, or a crash between a put and its eviction) is evicted down
// to it there. The disk tier is the last one: evicted records are dropped, an evict sink is
// never called.
//
// Disk space: with min_free_bytes > 0, each put looks at the file system's
// free space (at most once per free_check_interval_ms; on every put while
// the cap below holds). Memtables reach the disk only at a flush (up to a
// write buffer, at most 64 MiB, at once): the reserve should exceed that. When it is below
// min_free_bytes, the store caps size_bytes() at what it holds less the
// shortfall and evicts down to the cap as for the budget (counted as kBudget
// evictions), and asks for a compaction so the erased bytes come back;
// while the cap holds, a put that would take the store past it writes
// nothing (kResourceExhausted, counted in puts_skipped), since a page
// written and then evicted would take disk space until a compaction. Later
// looks lower the cap only by what something else took: the fall in free
// space since the last look less the bytes this store wrote meanwhile; they
// skip a look while a compaction is asked for or runs (its scratch files
// come and go), and the bytes just erased come back on disk only after
// that compaction, so the cap does not chase them. Once the free space is
// at least min_free_bytes again the cap is lifted. So a cache whose budget exceeds the disk fills the disk
// only down to the reserve, not to the last byte other programs need.
//
// TTL: with ttl_seconds > 0, a background thread erases (kTtl), at most
// once per ttl_sweep_interval_ms, every record not read or written for
// longer than ttl_seconds, pinned ones excepted; the first sweep runs one
// interval after the open. Ages come from options.now_unix_ms (tests pass a
// fake clock); the interval is measured on the steady clock.
//
// Deleted directory: if the directory or its CURRENT file disappears while
// the store is open (an admin ran rm -rf), the store notices, checking at
// most once per dir_check_interval_ms on the put/get path and after any
// RocksDB IO error, logs one warning, closes the DB and opens a fresh empty
// one in a re-created directory. The deleted records are gone (gets miss);
// later puts and gets work. When CURRENT is missing but other RocksDB files
// are left (a partial delete), the files named like RocksDB's (CURRENT,
// IDENTITY, LOCK, LOG*, MANIFEST-n, OPTIONS-n, n.log, n.sst, n.blob,
// *.dbtmp) are removed first, never any other file.
//
// Disk faults. The store is a cache: a fault costs cached pages, never the
// daemon. RocksDB's info log goes to spdlog, not to a LOG file on the same
// disk.
// - Disk full (or another write error): the failed write makes RocksDB stop
//   writes (a background error). Puts and erases then fail (kIOError),
//   counted in n_writes_failed(); the failures are logged at most once per
//   log_interval_ms with a count of the suppressed ones; gets still work.
//   RocksDB's own recovery is off; instead, at most once per
//   retry_interval_ms (doubling after each failed try, up to 60 s) a put,
//   erase or flush closes and reopens the DB (not DB::Resume(), which can
//   keep a WAL writer that saw the error and abort on its next append) once
//   the file system has room for the memtable plus 1 MiB, so writes resume
//   by themselves when space returns. Each success counts in n_recoveries(). An idle store retries
//   too: its background thread looks for a fault every retry_interval_ms
//   (clamped to 100 ms .. 2 s) and makes the same tries when they are due.
// - A background error RocksDB cannot resume from (a corrupt block reached
//   by a compaction, a fatal error): the DB is closed, moved
//   aside like a store damaged at open (below), an empty one is opened, its
//   records count in n_records_moved_aside(), and n_recoveries() grows.
// - At open: a directory whose LOCK another process (or another store in
//   this process) holds is refused with kIOError "in use by another
//   process"; this is decided by trying to take the LOCK, not by RocksDB's
//   message. A store that RocksDB reports as corrupt (kCorruption, or a
//   file named by the MANIFEST missing) is renamed to
//   "<dir>.corrupt-<unix time>", kept for inspection, and replaced by an
//   empty one; only the newest such copy is kept, older ones are removed,
//   oldest first. No space to open it (even the WAL replay needs some):
//   open() still succeeds, the store is unavailable (puts and gets fail with
//   kIOError, so the engine serves from memory) and tries to open again
//   at most once per retry_interval_ms (at a put or get, or idle, as above). If a reopen of a vanished
//   directory fails, operations likewise return kIOError until a later try
//   succeeds.
//
// Thread-safe. Gets run in parallel; puts, erases, evictions, the ttl
// sweep and the bookkeeping of gets are serialized; a recovery excludes
// everything else.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "storage/page_tier.h"
#include "storage/status.h"

namespace larder {

struct RocksDbHooks;  // storage/rocksdb_hooks.h

// The system clock: milliseconds since the Unix epoch.
int64_t system_unix_ms();

struct RocksDbStoreOptions {
  std::string dir;                                // database directory
  int64_t capacity_bytes = int64_t(20) << 30;     // bound on size_bytes(): the initial budget
  bool sync_writes = false;                       // fsync the WAL on every put (see "Sync")
  // How often, at most, the put/get path checks that dir/CURRENT still
  // exists (0: on every call).
  int64_t dir_check_interval_ms = 1000;
  // Least time between two tries to resume writes after a disk fault, or
  // to open a store that could not be opened (doubles after each failed
  // try, up to 60 s; 0: on every call).
  int64_t retry_interval_ms = 2000;
  // Least time between two log lines about the same kind of fault.
  int64_t log_interval_ms = 10000;
  std::string policy = "lru";                     // make_eviction_policy() name
  // Records unused for longer are erased by the ttl sweep (0: never).
  int64_t ttl_seconds = 0;
  // Least time between two ttl sweeps (> 0 when ttl_seconds > 0).
  int64_t ttl_sweep_interval_ms = 60000;
  // Least time between two background compactions of erased records (see
  // "Space"; 0: no wait).
  int64_t compaction_interval_ms = 60000;
  // Erased bytes that request one (0: budget / 4, clamped to [1 MiB, 1 GiB]).
  int64_t compaction_trigger_bytes = 0;
  // Disk space to leave free on dir's file system (0: no reserve; see
  // "Disk space"), and the least time between two looks at it (0: on every
  // put).
  int64_t min_free_bytes = 0;
  int64_t free_check_interval_ms = 1000;
  // The file system's free bytes (< 0: unknown). Empty: RocksDB's
  // Env::GetFreeSpace on dir. Tests pass a fake one.
  std::function<int64_t()> free_space_bytes{};
  // The wall clock for last-use times and ttl ages, Unix milliseconds
  // (empty: system_unix_ms). Tests pass a fake one.
  std::function<int64_t()> now_unix_ms = system_unix_ms;
  // Keys pinned before the budget eviction at the first open (page_tier.h).
  PinsAtOpen pins_at_open{};
  // Tests only (storage/rocksdb_hooks.h): e.g. a fault-injecting file system.
  std::shared_ptr<const RocksDbHooks> hooks{};
};

class RocksDbPageStore : public PageTier {
 public:
  // Opens or creates the DB in options.dir (creating the directory and its
  // parents) and rebuilds the index. A corrupt store is moved aside and an
  // empty one opened; no space to open one gives an unavailable store that
  // retries later (see "Disk faults" above). Errors: kInvalidArgument for an
  // empty dir, capacity_bytes <= 0, an unknown policy, ttl_seconds < 0, or
  // ttl_sweep_interval_ms <= 0 with a ttl; kIOError naming the dir when another
  // process holds its LOCK ("in use by another process"), when the directory
  // cannot be created, or when the DB cannot be opened (RocksDB's message).
  static Result<std::unique_ptr<RocksDbPageStore>> open(const RocksDbStoreOptions& options);

  ~RocksDbPageStore() override;
  RocksDbPageStore(const RocksDbPageStore&) = delete;
  RocksDbPageStore& operator=(const RocksDbPageStore&) = delete;

  // Stores (or replaces) the record under key, counts a use of it, then
  // evicts (see "Capacity") while size_bytes() exceeds the budget. Errors:
  // kResourceExhausted (nothing written, counted in puts_skipped) when
  // 16 + record.size() alone exceeds the budget, or when the disk reserve's
  // cap holds and the record does not fit under it (see "Disk space");
  // kIOError from RocksDB.
  Status put(const PageKey& key, std::string_view record) override;
  // The stored bytes exactly as put (no validation: decode_page_record does
  // that; a byte damaged on disk inside the record is returned as it is
  // now, see "Reads"), or nullopt when absent. Counts a use of the record.
  // Errors: kCorruption / kIOError when RocksDB fails to read (e.g. a
  // truncated or missing blob file); a vanished directory is a miss, not an
  // error.
  Result<std::optional<std::string>> get(const PageKey& key) override;
  // Removes the record; erasing an absent key is OK.
  Status erase(const PageKey& key) override;
  // Flushes the memtable to table and blob files (synced), which makes every
  // completed put durable; after a disk fault it first tries to resume
  // writes. Errors: kIOError (also while writes are stopped by a fault).
  Status flush() override;

  int64_t size_bytes() const;  // bytes of live records: sum of 16 + record size
  int64_t n_records() const;
  const std::string& dir() const;
  // Fault counters since open() (see "Disk faults"):
  int64_t n_writes_failed() const;        // puts and erases that returned an error
  int64_t n_recoveries() const;           // writes resumed or the store replaced
  int64_t n_records_moved_aside() const;  // records in stores moved aside while open
  // True when the DB is open and no background error stops its writes.
  bool writable() const;

  // ---- PageTier ---------------------------------------------------------
  std::string_view name() const override { return "disk"; }
  bool available() const override { return writable(); }
  // get() key by key; a read error is a miss (get() logs it). timeout_ms
  // (0: none) is checked between keys: keys not started by then miss.
  std::vector<std::optional<std::string>> get_batch(std::span<const PageKey> keys,
                                                    int64_t timeout_ms) override;
  // From the in-memory index; no RocksDB read.
  std::vector<bool> contains_batch(std::span<const PageKey> keys) const override;
  int64_t entry_bytes(size_t record_bytes) const override;  // the key's bytes + the record's (size_bytes)
  // Errors: kInvalidArgument for a negative budget. 0 holds nothing.
  Status set_budget(int64_t bytes) override;
  // The policy and its entries move over (PageTier::set_policy).
  Status set_policy(std::string_view policy) override;
  // Changes ttl_seconds (see "TTL"); a sweep thread starts when the first
  // ttl > 0 is set. Errors: kInvalidArgument for a negative value.
  Status set_ttl(int64_t seconds) override;
  // In memory only: pins are not persisted (after a restart, pin again).
  void pin(const PageKey& key) override;
  void unpin(const PageKey& key) override;
  // Erases the given records (all when keys is empty), pinned ones too;
  // counted kAdmin. Returns the number erased (0 while unavailable or when
  // RocksDB fails the write; that is logged).
  int64_t evict(std::span<const PageKey> keys) override;
  // Ignored: the disk tier is the last one (see "Capacity").
  void set_evict_sink(EvictSink sink) override;
  // writes_failed is n_writes_failed().
  TierStats stats() const override;

  // The keys of every record, from the in-memory index (no RocksDB read),
  // in no particular order.
  std::vector<PageKey> keys() const;

  // Tests and benchmarks: blocks until no background compaction (see
  // "Space") is requested or running and RocksDB runs or owes no flush or
  // compaction. Returns false after timeout_ms (a requested compaction
  // waits for compaction_interval_ms).
  bool wait_for_compactions(int64_t timeout_ms);
  // Background compactions of erased records completed since open().
  int64_t n_compactions() const;

  // Runs a ttl sweep now (see "TTL"): returns the number of records erased
  // (0 without a ttl, while unavailable, or when the write failed).
  int64_t sweep_ttl();

  struct Impl;
  // Use open(); the tag keeps construction private.
  class PrivateTag {
    friend class RocksDbPageStore;
    PrivateTag() = default;
  };
  RocksDbPageStore(PrivateTag, std::unique_ptr<Impl> impl);

 private:
  // get() without the hit/miss counting (get and get_batch count).
  Result<std::optional<std::string>> get_uncounted(const PageKey& key);

  std::unique_ptr<Impl> impl_;
};

}  // namespace larder
