// RocksDbPageStore: opening the DB, rebuilding the index, and recovering
// from faults (a failed open, a background error, a deleted directory).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include "storage/rocksdb_store_impl.h"

namespace larder {

using namespace rocksdb_detail;
namespace fs = std::filesystem;

bool RocksDbPageStore::Impl::lock_taken(std::string* why) {
  const std::string path = options.dir + "/LOCK";
  rocksdb::FileLock* lock = nullptr;
  rocksdb::Status s = env->LockFile(path, &lock);
  if (s.ok()) {
    env->UnlockFile(lock).PermitUncheckedError();
    return false;
  }
  // LockFile also fails where the LOCK file cannot be opened for writing at
  // all (a read-only file system, a directory we may not write): that is not
  // another holder. A held lock leaves the file itself writable.
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  *why = s.ToString();
  return true;
}

std::unique_lock<std::shared_mutex> RocksDbPageStore::Impl::lock_db_exclusive() {
  compaction_cancel = true;
  std::unique_lock<std::shared_mutex> lock(db_mu);
  compaction_cancel = false;
  return lock;
}

void RocksDbPageStore::Impl::close_db() {
  if (db) {
    for (rocksdb::ColumnFamilyHandle* h : {cf_pages, cf_meta}) {
      if (h != nullptr) db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    }
    cf_pages = cf_meta = cf_default = nullptr;
    rocksdb::Status s = db->Close();
    if (!s.ok()) spdlog::debug("page store {}: close: {}", options.dir, s.ToString());
    db.reset();
  }
  db_open = false;
}

RocksDbPageStore::Impl::OpenOutcome RocksDbPageStore::Impl::try_open() {
  close_db();
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) {
    Status st = Status::io_error("page store: cannot create directory " + options.dir + ": " + ec.message());
    const bool retry_later = ec == std::errc::no_space_on_device || ec == std::errc::read_only_file_system ||
                             ec == std::errc::permission_denied;
    return {retry_later ? OpenKind::kNoSpace : OpenKind::kOther, st};
  }
  // A directory we cannot write (a read-only file system): serve from
  // memory and try again later, as on a full disk.
  if (::access(options.dir.c_str(), W_OK) != 0 && (errno == EROFS || errno == EACCES)) {
    const int err = errno;
    return {OpenKind::kNoSpace, Status::io_error("page store: cannot write to " + options.dir + ": " +
                                                 std::strerror(err))};
  }
  if (Status listed = check_manifest_lists_data(); !listed.is_ok()) return {OpenKind::kDamaged, listed};
  rocksdb::DB* raw = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::Status s = rocksdb::DB::Open(db_options, options.dir, column_families, &handles, &raw);
  if (!s.ok()) {
    Status st = Status::io_error("page store: cannot open RocksDB in " + options.dir + ": " + s.ToString());
    std::string lock_why;
    if (!s.IsCorruption() && lock_taken(&lock_why)) {
      return {OpenKind::kLocked, Status::io_error("page store: " + options.dir +
                                                  " is in use by another process (another larderd?): " +
                                                  lock_why)};
    }
    if (s.IsNoSpace()) return {OpenKind::kNoSpace, st};
    if (s.IsCorruption() || s.IsPathNotFound()) return {OpenKind::kDamaged, st};
    return {OpenKind::kOther, st};
  }
  db.reset(raw);
  // In the order of column_families: default, pages, meta. RocksDB's
  // default handle is its own; the one Open gave is destroyed.
  db->DestroyColumnFamilyHandle(handles[0]).PermitUncheckedError();
  cf_default = db->DefaultColumnFamily();
  cf_pages = handles[1];
  cf_meta = handles[2];
  db_open = true;
  Status st = rebuild_index();
  if (!st.is_ok()) {
    close_db();
    return {st.code() == StatusCode::kCorruption ? OpenKind::kDamaged : OpenKind::kOther, st};
  }
  unavailable_why.clear();
  return {};
}

Status RocksDbPageStore::Impl::check_store_is_ours() {
  std::error_code ec;
  if (!fs::exists(fs::path(options.dir) / "CURRENT", ec)) return Status::ok();  // new (or damaged: try_open's)
  std::vector<std::string> families;
  if (!rocksdb::DB::ListColumnFamilies(db_options, options.dir, &families).ok()) return Status::ok();
  std::sort(families.begin(), families.end());
  auto foreign = [&](const std::string& why) {
    return Status::unsupported("page store: " + options.dir + " holds a RocksDB database that larder did not make (" +
                               why + "): point [cache.disk] dir at an empty or new directory");
  };
  if (families == std::vector<std::string>{rocksdb::kDefaultColumnFamilyName, kMetaCf, kPagesCf}) {
    return Status::ok();
  }
  if (families != std::vector<std::string>{rocksdb::kDefaultColumnFamilyName}) {
    return foreign("column families " + comma_list(families));
  }
  // The layout before the column families: "p" or "s" + a 16-byte key.
  // The "s" keys (small values) are read, and every range outside "p" and
  // "s" must be empty; the "p" keys hold records in blob files, which a
  // start does not read (only their first key's shape could be seen).
  rocksdb::DB* raw = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  if (!rocksdb::DB::OpenForReadOnly(db_options, options.dir, {column_families[0]}, &handles, &raw).ok()) {
    return Status::ok();  // try_open decides
  }
  std::unique_ptr<rocksdb::DB> ro(raw);
  std::string bad;
  {
    const std::string p(1, kLegacyRecordPrefix), q(1, char(kLegacyRecordPrefix + 1));
    const std::string b(1, kLegacyBookPrefix), t(1, char(kLegacyBookPrefix + 1));
    // The first key in [from, to) as hex, "" when none (to "": the end).
    auto first_in = [&](const std::string& from, const std::string& to) {
      rocksdb::ReadOptions read;
      rocksdb::Slice upper(to);
      if (!to.empty()) read.iterate_upper_bound = &upper;
      std::unique_ptr<rocksdb::Iterator> it(ro->NewIterator(read, handles[0]));
      it->Seek(from);
      return it->Valid() ? it->key().ToString(/*hex=*/true) : std::string();
    };
    for (const auto& [from, to] : {std::pair{std::string(), p}, std::pair{q, b}, std::pair{t, std::string()}}) {
      if (bad.empty()) bad = first_in(from, to);
    }
    rocksdb::ReadOptions read;
    rocksdb::Slice upper(t);
    read.iterate_upper_bound = &upper;
    std::unique_ptr<rocksdb::Iterator> it(ro->NewIterator(read, handles[0]));
    int n = 0;
    for (it->Seek(b); it->Valid() && n < 1000 && bad.empty(); it->Next(), ++n) {
      if (it->key().size() != 1 + size_t(kKeyBytes)) bad = it->key().ToString(/*hex=*/true);
    }
  }
  for (rocksdb::ColumnFamilyHandle* h : handles) ro->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  ro->Close().PermitUncheckedError();
  if (!bad.empty()) return foreign("a key 0x" + bad.substr(0, 48) + " that is no page's");
  return Status::ok();
}

Status RocksDbPageStore::Impl::check_manifest_lists_data() {
  std::error_code ec;
  if (!fs::exists(fs::path(options.dir) / "CURRENT", ec)) return Status::ok();
  // The data files on disk, by name.
  std::unordered_map<std::string, uint64_t> on_disk;  // name -> bytes
  uint64_t disk_bytes = 0, wal_bytes = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(options.dir, ec)) {
    const std::string ext = e.path().extension().string();
    if (ext != ".sst" && ext != ".blob" && ext != ".log") continue;
    const uint64_t size = e.file_size(ec);
    if (ec) continue;
    if (ext == ".log") {
      wal_bytes += size;
      continue;
    }
    on_disk[e.path().filename().string()] = size;
    disk_bytes += size;
  }
  if (ec || disk_bytes == 0) return Status::ok();
  // The files the MANIFEST lists: a read-only open deletes nothing. If it
  // fails, DB::Open will say why.
  std::vector<std::string> names;
  if (!rocksdb::DB::ListColumnFamilies(db_options, options.dir, &names).ok()) return Status::ok();
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const std::string& name : names) {
    auto it = std::find_if(column_families.begin(), column_families.end(),
                           [&](const rocksdb::ColumnFamilyDescriptor& d) { return d.name == name; });
    families.push_back(it != column_families.end() ? *it : rocksdb::ColumnFamilyDescriptor(name, {}));
  }
  rocksdb::DB* raw = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  if (!rocksdb::DB::OpenForReadOnly(db_options, options.dir, families, &handles, &raw).ok()) return Status::ok();
  std::unique_ptr<rocksdb::DB> ro(raw);
  std::vector<rocksdb::LiveFileStorageInfo> live;
  rocksdb::Status s = ro->GetLiveFilesStorageInfo(rocksdb::LiveFilesStorageInfoOptions(), &live);
  for (rocksdb::ColumnFamilyHandle* h : handles) ro->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  ro->Close().PermitUncheckedError();
  if (!s.ok()) return Status::ok();
  uint64_t listed_bytes = 0, max_listed_number = 0;
  std::unordered_set<std::string> listed;
  for (const rocksdb::LiveFileStorageInfo& f : live) {
    auto it = on_disk.find(f.relative_filename);
    if (it == on_disk.end()) continue;
    listed_bytes += it->second;
    max_listed_number = std::max(max_listed_number, f.file_number);
    listed.insert(f.relative_filename);
  }
  // An unlisted file numbered below a listed one is an input of a finished
  // compaction (or a blob file it left all garbage) that the MANIFEST has
  // deleted and the crash left on disk: RocksDB removes it at the open.
  // Only newer ones can be what a stale or cut MANIFEST lost. Found in
  // hostile testing: kill -9 just after the compaction that follows an
  // evict of everything left 121 KB of such files beside 10 KB listed.
  uint64_t unlisted_bytes = 0, n_unlisted = 0;
  for (const auto& [name, bytes] : on_disk) {
    if (listed.count(name) != 0) continue;
    uint64_t number = 0;
    const auto r = std::from_chars(name.data(), name.data() + name.size(), number);
    if (r.ec == std::errc() && number < max_listed_number) continue;  // obsolete
    unlisted_bytes += bytes;
    ++n_unlisted;
  }
  // A crash part-way through a compaction leaves unlisted outputs of at
  // most about its inputs' size, which stay listed; one part-way through a
  // flush, outputs of at most about the WAL bytes it came from, which stay
  // until the flush is in the MANIFEST (they replay at the open; a table
  // file adds a few KiB of index and properties). Found in hostile
  // testing: kill -9 during a new or just emptied store's flush, and the
  // next open moved the whole store aside.
  if (unlisted_bytes <= 2 * listed_bytes + wal_bytes + wal_bytes / 4 + n_unlisted * kTableFileOverheadBytes) {
    return Status::ok();
  }
  return Status::corruption("page store " + options.dir + ": its MANIFEST lists " + std::to_string(listed.size()) +
                            " of the " + std::to_string(listed.size() + n_unlisted) +
                            " data files in the directory (" + std::to_string(listed_bytes) + " of " +
                            std::to_string(listed_bytes + unlisted_bytes) +
                            " bytes; " + std::to_string(wal_bytes) + " bytes of WAL): truncated or stale");
}

RocksDbPageStore::Impl::OpenOutcome RocksDbPageStore::Impl::replace_damaged(const Status& why) {
  const int64_t n_lost = n_records.load();
  close_db();
  bg_errors->mark_handled(uint64_t(bg_errors->n_errors()));
  clear_index();
  generation.fetch_add(1);
  Result<std::string> aside = move_store_aside(options.dir, kKeepDamagedCopies);
  if (!aside.is_ok()) return {OpenKind::kOther, Status::io_error(why.message() + "; " + aside.status().message())};
  n_records_moved_aside += n_lost;
  log.log(spdlog::level::warn, "replace",
          why.to_string() + "; moved the damaged store (" +
              (n_lost > 0 ? std::to_string(n_lost) + " records" : std::string("records not counted: it did not open")) +
              ") to " + *aside + " and continuing with an empty one");
  return try_open();
}

void RocksDbPageStore::Impl::clear_index() {
  for (const auto& [key, entry] : index) policy->erase(key);
  index.clear();
  size_bytes = 0;
  n_records = 0;
}

void RocksDbPageStore::Impl::maybe_recover(bool force) {
  if (!faulted()) return;
  if (!force && now_ms() < next_retry_ms.load()) return;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_lock<std::shared_mutex> db_lock = lock_db_exclusive();
  if (!faulted() || (!force && now_ms() < next_retry_ms.load())) return;  // another thread did
  const bool costly_failure = !recover_faulted_locked();
  if (costly_failure) ++n_failed_tries;
  const int shift = std::min(n_failed_tries, 5);
  next_retry_ms = now_ms() + std::min(options.retry_interval_ms << shift, kMaxRetryDelayMs);
}

bool RocksDbPageStore::Impl::recover_faulted_locked() {
  const char* how = "the store opened";
  if (db) {
    std::optional<BackgroundErrors::Pending> p = bg_errors->pending();
    if (!p) return true;
    if (p->severity > rocksdb::Status::kHardError) {
      OpenOutcome o = replace_damaged(Status::io_error("page store: " + options.dir +
                                                       ": RocksDB cannot resume writes after: " + p->message));
      if (o.kind != OpenKind::kOk) {
        unavailable_why = o.status.message();
        log.log(spdlog::level::warn, "open", o.status.to_string() + "; the cache keeps serving from memory");
        return false;
      }
      ++n_recoveries;
      return true;
    }
    if (!room_to_resume()) return true;
    // A reopen, not DB::Resume(): after a WAL append that failed (disk
    // full), RocksDB 7.x resumes with the same WAL writer, which saw the
    // error, and its next append aborts the process on an assertion
    // (Debian's librocksdb keeps them). Found in hostile testing: a pin on
    // a full tmpfs, the space freed, then any page write killed larderd. A
    // reopen closes that writer and replays what the WAL holds; records
    // whose writes failed were never in the index. The open below is the
    // one of a store that could not be opened.
    close_db();
    bg_errors->mark_handled(uint64_t(bg_errors->n_errors()));
    generation.fetch_add(1);
    how = "reopened";
  }
  remove_stale_files();
  OpenOutcome o = try_open();
  if (o.kind == OpenKind::kDamaged) o = replace_damaged(o.status);
  if (o.kind != OpenKind::kOk) {
    unavailable_why = o.status.message();
    log.log(spdlog::level::warn, "open",
            o.status.to_string() + "; the cache keeps serving from memory and tries again later");
    return false;
  }
  writes_resumed(how);
  return true;
}

void RocksDbPageStore::Impl::writes_resumed(const std::string& how) {
  ++n_recoveries;
  log.log(spdlog::level::info, "resume",
          "page store " + options.dir + ": " + how + ", page writes work again (" +
              std::to_string(n_writes_failed.load() - n_writes_failed_at_fault) + " failed meanwhile)");
  n_writes_failed_at_fault = n_writes_failed.load();
}

bool RocksDbPageStore::Impl::room_to_resume() {
  uint64_t free_bytes = 0, memtable_bytes = 0;
  if (!env->GetFreeSpace(options.dir, &free_bytes).ok()) return true;
  db->GetIntProperty("rocksdb.cur-size-all-mem-tables", &memtable_bytes);
  if (free_bytes >= memtable_bytes + kResumeMarginBytes) return true;
  spdlog::debug("page store {}: {} bytes free, {} needed to resume writes", options.dir, free_bytes,
                memtable_bytes + kResumeMarginBytes);
  return false;
}

void RocksDbPageStore::Impl::recover(uint64_t seen_generation) {
  std::lock_guard<std::mutex> lock(mu);
  std::unique_lock<std::shared_mutex> db_lock = lock_db_exclusive();
  if (generation.load() != seen_generation) return;
  if (!db || dir_intact()) return;  // a closed DB is maybe_recover()'s
  spdlog::warn("page store: directory {} or its CURRENT file vanished; its records are "
               "lost, reopening an empty store",
               options.dir);
  close_db();
  bg_errors->mark_handled(uint64_t(bg_errors->n_errors()));
  clear_index();
  generation.fetch_add(1);
  remove_stale_files();
  OpenOutcome o = try_open();
  if (o.kind != OpenKind::kOk) {
    unavailable_why = o.status.message();
    log.log(spdlog::level::err, "open", o.status.to_string());
  }
}

void RocksDbPageStore::Impl::remove_stale_files() {
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
    log.log(spdlog::level::warn, "stale",
            "page store " + options.dir + ": removed " + std::to_string(n_removed) +
                " stale RocksDB files left without CURRENT");
  }
}

void RocksDbPageStore::Impl::maybe_check_dir() {
  const int64_t now = now_ms();
  int64_t last = last_check_ms.load();
  if (now - last < options.dir_check_interval_ms) return;
  if (!last_check_ms.compare_exchange_strong(last, now)) return;
  const uint64_t gen = generation.load();
  if (db_open.load() && !dir_intact()) recover(gen);
}

bool RocksDbPageStore::Impl::recovered_after_io_error(const Status& st, uint64_t gen) {
  if (st.code() != StatusCode::kIOError || dir_intact()) return false;
  recover(gen);
  return true;
}

}  // namespace larder
