// Storage-internal pieces of RocksDbPageStore (storage/rocksdb_store.h): the
// RocksDB status translation, RocksDB's info log sent to spdlog, the
// background-error listener, and moving a damaged store aside. Includes
// RocksDB headers: only storage/ includes this file.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <rocksdb/env.h>
#include <rocksdb/listener.h>
#include <rocksdb/status.h>

#include "storage/log_limiter.h"
#include "storage/status.h"

namespace larder {

// RocksDB status -> ours ("<what>: <RocksDB's message>"): NotFound,
// Corruption, InvalidArgument, NotSupported keep their meaning; everything
// else (NoSpace, Busy, IOError...) is kIOError.
Status translate_rocksdb_status(const rocksdb::Status& s, const std::string& what);

// True for names RocksDB creates in a DB directory: 000012.log, 000013.sst,
// 000014.blob, *.dbtmp, MANIFEST-000005, OPTIONS-000007, CURRENT, IDENTITY,
// LOCK, LOG, LOG.old.<n>.
bool is_rocksdb_file_name(const std::string& name);
// The entries of `dir` (names, at most `max`) that a page store did not
// create: neither RocksDB files nor damaged copies ("corrupt-<n>"), nor a
// file system's lost+found. Empty for a missing directory. A store never
// opens in a directory holding such entries, since it moves damaged stores
// aside and deletes old copies (found in hostile testing: a cache dir
// pointed at a folder of the user's moved it aside, then deleted it).
std::vector<std::string> foreign_entries(const std::string& dir, size_t max = 3);
// "a, b, c": names for a message.
std::string comma_list(const std::vector<std::string>& names);

// RocksDB's info log, sent to spdlog instead of a LOG file in the DB
// directory. (A LOG file on the same disk is what aborted the daemon when the
// disk filled up: Debian's librocksdb 7.8 keeps its assertions, and the log
// line RocksDB writes about the failed WAL append went to a LOG writer that
// had already failed: `Assertion 'sync_without_flush_called_' failed`.)
// RocksDB's ERROR/FATAL lines become rate-limited spdlog warnings, WARN lines
// debug, the rest trace.
class RocksDbInfoLog : public rocksdb::Logger {
 public:
  RocksDbInfoLog(std::string dir, LogLimiter& limiter);
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override;
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override;

 private:
  std::string dir_;
  LogLimiter& limiter_;
};

// Records RocksDB's background errors (a failed WAL append, flush or
// compaction; the DB then refuses writes) and turns RocksDB's own automatic
// recovery off: the store decides when to call DB::Resume() or to replace a
// store RocksDB cannot recover (RocksDbPageStore::Impl::recover_faulted).
// Callbacks run on RocksDB's threads, maybe with its DB mutex held: they only
// take this object's own mutex.
class BackgroundErrors : public rocksdb::EventListener {
 public:
  struct Pending {
    uint64_t seq = 0;                 // pass to mark_handled()
    rocksdb::Status::Severity severity = rocksdb::Status::kNoError;  // worst since handled
    std::string message;              // the latest error
  };

  void OnBackgroundError(rocksdb::BackgroundErrorReason reason, rocksdb::Status* error) override;
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason reason, rocksdb::Status error,
                            bool* auto_recovery) override;

  bool any() const { return n_errors_.load() > n_handled_.load(); }
  std::optional<Pending> pending() const;
  // The errors up to seq were dealt with (DB::Resume() succeeded or the DB
  // was replaced); later ones stay pending.
  void mark_handled(uint64_t seq);
  int64_t n_errors() const { return int64_t(n_errors_.load()); }

 private:
  mutable std::mutex mu_;
  std::atomic<uint64_t> n_errors_{0};
  std::atomic<uint64_t> n_handled_{0};
  rocksdb::Status::Severity worst_ = rocksdb::Status::kNoError;  // guarded by mu_
  std::string message_;                                          // guarded by mu_
};

// Renames dir to "<dir>.corrupt-<unix seconds>" (adding "-<n>" if that
// exists) and then removes older "<dir>.corrupt-*" directories, oldest
// first, so that at most `keep` (>= 1) remain. Returns the new name, or
// kIOError when the rename failed (dir is then unchanged).
// Where dir cannot be renamed (a mount point, a parent not writable), is a
// symbolic link (renaming it would move the store off the link's target),
// or holds entries a store did not create (foreign_entries), its RocksDB
// files move into "<dir>/corrupt-<unix seconds>" instead, keeping at most
// `keep` such copies there (move_store_contents_aside); kIOError when that
// fails too.
Result<std::string> move_store_aside(const std::string& dir, int keep);
// Moves dir's RocksDB files (is_rocksdb_file_name; nothing else) into a new
// "<dir>/corrupt-<unix seconds>[-<n>]" and removes the oldest such copies
// beyond `keep` (>= 1). Returns the copy's path; kIOError naming the entry
// that could not be moved (some may have moved).
Result<std::string> move_store_contents_aside(const std::string& dir, int keep);
inline constexpr const char* kDamagedInsidePrefix = "corrupt-";

}  // namespace larder
