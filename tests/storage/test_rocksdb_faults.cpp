// RocksDbPageStore under disk faults: a full disk (fault-injecting file
// system), a store opened on a full disk, corrupt files found at open and by
// a compaction, a LOCK held by another process; the log stays bounded.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <rocksdb/db.h>

#include "storage/page_record.h"
#include "storage/rocksdb_store.h"
#include "storage/rocksdb_support.h"
#include "tests/support/fault_fs.h"
#include "tests/support/log_capture.h"
#include "tests/storage/store_test_util.h"
#include "tests/support/temp_dir.h"

using namespace larder;
using larder::testing::FaultFs;
using larder::testing::LogCapture;
using larder::testing::TempDir;
using larder::testing::corrupt_copies;
using larder::testing::get_ok;
using larder::testing::open_store;
namespace fs = std::filesystem;

namespace {

PageKey key_n(uint64_t n) { return PageKey{0x5EED000000000000ull + n, n * 104729}; }

// n repeated: distinct, recognisable values of `bytes` bytes.
std::string value_n(uint64_t n, size_t bytes) {
  std::string v(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) v[i] = char((n * 31 + i * 7) & 0xFF);
  return v;
}


RocksDbStoreOptions fault_options(const std::string& dir, const std::shared_ptr<FaultFs>& ffs) {
  RocksDbStoreOptions o;
  o.dir = dir;
  o.hooks = larder::testing::hooks_for(ffs);
  o.retry_interval_ms = 0;   // retry on every call
  o.log_interval_ms = 600000;  // one line per kind for the whole test
  return o;
}

}  // namespace

TEST_CASE("full disk: writes fail and are counted, one log line, writes resume by themselves",
          "[storage][faults]") {
  TempDir tmp("full");
  auto ffs = std::make_shared<FaultFs>();
  RocksDbStoreOptions o = fault_options(tmp.sub("db"), ffs);
  {
    auto store = open_store(o);
    REQUIRE(store->put(key_n(1), value_n(1, 20000)).is_ok());
    CHECK(store->writable());
    LogCapture cap;
    ffs->full = true;
    for (uint64_t n = 2; n < 22; ++n) {
      Status st = store->put(key_n(n), value_n(n, 20000));
      CHECK(st.code() == StatusCode::kIOError);
    }
    CHECK(ffs->n_failed.load() > 0);
    CHECK(store->n_writes_failed() == 20);
    CHECK_FALSE(store->writable());
    CHECK(store->n_records() == 1);
    // Reads still work while writes are stopped.
    CHECK(get_ok(*store, key_n(1)) == value_n(1, 20000));
    // 20 failed puts, one warning about them (and at most one RocksDB error line).
    CHECK(cap.count("keeps serving from memory") == 1);
    CHECK(cap.count("rocksdb: ") <= 1);
    // A flush while the disk is full fails cleanly (no abort).
    CHECK(store->flush().code() == StatusCode::kIOError);

    ffs->full = false;  // space returns: the next put resumes writes first
    REQUIRE(store->put(key_n(30), value_n(30, 20000)).is_ok());
    CHECK(store->writable());
    CHECK(store->n_recoveries() == 1);
    CHECK(store->n_writes_failed() == 20);
    CHECK(get_ok(*store, key_n(30)) == value_n(30, 20000));
    CHECK(cap.count("page writes work again (20 failed meanwhile)") == 1);
    REQUIRE(store->flush().is_ok());
  }
  // Both records survive a reopen on the plain file system.
  RocksDbStoreOptions plain;
  plain.dir = o.dir;
  auto store = open_store(plain);
  CHECK(store->n_records() == 2);
  CHECK(get_ok(*store, key_n(1)) == value_n(1, 20000));
  CHECK(get_ok(*store, key_n(30)) == value_n(30, 20000));
  CHECK_FALSE(get_ok(*store, key_n(2)).has_value());
}

TEST_CASE("full disk: closing with unflushed failed writes does not abort", "[storage][faults]") {
  TempDir tmp("full-close");
  auto ffs = std::make_shared<FaultFs>();
  RocksDbStoreOptions o = fault_options(tmp.sub("db"), ffs);
  auto store = open_store(o);
  REQUIRE(store->put(key_n(1), value_n(1, 3000)).is_ok());  // in the WAL only
  ffs->full = true;
  CHECK_FALSE(store->put(key_n(2), value_n(2, 3000)).is_ok());
  CHECK_FALSE(store->erase(key_n(1)).is_ok());
  CHECK(store->n_writes_failed() == 2);
  CHECK_FALSE(store->flush().is_ok());
  store.reset();  // RocksDB's Close() with a stopped WAL: must return, not assert
  ffs->full = false;
  auto again = open_store(o);  // the WAL up to the failure replays
  CHECK(get_ok(*again, key_n(1)) == value_n(1, 3000));
  CHECK_FALSE(get_ok(*again, key_n(2)).has_value());
}

TEST_CASE("full disk at open: the store starts unavailable and opens itself when space returns",
          "[storage][faults]") {
  TempDir tmp("full-open");
  auto ffs = std::make_shared<FaultFs>();
  RocksDbStoreOptions o = fault_options(tmp.sub("db"), ffs);
  {
    auto store = open_store(o);
    REQUIRE(store->put(key_n(1), value_n(1, 3000)).is_ok());  // WAL only: the reopen must replay it
  }
  ffs->full = true;
  LogCapture cap;
  auto store = open_store(o);  // no error: the engine then serves from memory
  CHECK_FALSE(store->writable());
  CHECK(cap.count("serving from memory only") == 1);
  CHECK(store->get(key_n(1)).status().code() == StatusCode::kIOError);
  for (uint64_t n = 2; n < 6; ++n) CHECK(store->put(key_n(n), value_n(n, 3000)).code() == StatusCode::kIOError);
  CHECK(store->n_writes_failed() == 4);
  CHECK(cap.count("keeps serving from memory") <= 2);  // the failed put, the failed reopen
  CHECK(corrupt_copies(tmp.path(), "db").empty());      // a full disk is not damage
  ffs->full = false;
  REQUIRE(store->put(key_n(7), value_n(7, 3000)).is_ok());
  CHECK(store->writable());
  CHECK(store->n_recoveries() == 1);
  CHECK(get_ok(*store, key_n(1)) == value_n(1, 3000));
  CHECK(get_ok(*store, key_n(7)) == value_n(7, 3000));
  CHECK(store->n_records() == 2);
}

namespace {
// Polls `cond` every 10 ms for at most timeout_ms; whether it came true.
bool eventually(const std::function<bool()>& cond, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}
}  // namespace

// Found in hostile testing: a store that could not open (or whose writes a
// full disk stopped) recovered only at its next put or get, so an idle
// daemon kept its disk tier, and the pins stored there, down.
TEST_CASE("an idle store recovers by itself when space returns, at open and after a write fault",
          "[storage][faults]") {
  TempDir tmp("idle");
  auto ffs = std::make_shared<FaultFs>();
  RocksDbStoreOptions o = fault_options(tmp.sub("db"), ffs);
  {
    auto store = open_store(o);
    REQUIRE(store->put(key_n(1), value_n(1, 3000)).is_ok());
  }
  ffs->full = true;
  LogCapture cap;
  auto store = open_store(o);
  REQUIRE_FALSE(store->writable());
  // Still down while the disk is full: the background tries fail quietly.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  CHECK_FALSE(store->writable());
  CHECK(store->n_recoveries() == 0);
  ffs->full = false;  // no put, get or flush from here on
  // (the log line is the recovery's last step: the store is writable, and
  // counts the recovery, a moment before it)
  REQUIRE(eventually([&] { return cap.count("the store opened, page writes work again") == 1; }, 5000));
  CHECK(store->writable());
  CHECK(store->n_recoveries() == 1);
  CHECK(get_ok(*store, key_n(1)) == value_n(1, 3000));

  // A write fault while open: writes stop; space returns; no further call.
  ffs->full = true;
  CHECK(store->put(key_n(2), value_n(2, 20000)).code() == StatusCode::kIOError);
  REQUIRE_FALSE(store->writable());
  ffs->full = false;
  // (its log line is rate-limited, log_interval_ms: the count is the sign)
  REQUIRE(eventually([&] { return store->n_recoveries() == 2; }, 5000));
  CHECK(store->writable());
  REQUIRE(store->put(key_n(3), value_n(3, 3000)).is_ok());
  CHECK(get_ok(*store, key_n(3)) == value_n(3, 3000));
}

// Found in hostile testing: on a full disk, a fresh store's first put
// failed in its WAL append; once space was back DB::Resume() had nothing to
// flush, kept the WAL writer that saw the error, and the next put aborted
// the process (an assertion in Debian's librocksdb). Writes now resume by a
// reopen.
TEST_CASE("full disk: a fresh store's failed first put, then space back: writes resume without an abort",
          "[storage][faults]") {
  TempDir tmp("resume");
  auto ffs = std::make_shared<FaultFs>();
  RocksDbStoreOptions o = fault_options(tmp.sub("db"), ffs);
  auto store = open_store(o);
  ffs->full = true;
  for (uint64_t n = 1; n < 4; ++n) CHECK(store->put(key_n(n), value_n(n, 3000)).code() == StatusCode::kIOError);
  CHECK(store->flush().code() == StatusCode::kIOError);
  ffs->full = false;
  for (uint64_t n = 5; n < 9; ++n) REQUIRE(store->put(key_n(n), value_n(n, 3000)).is_ok());
  REQUIRE(store->flush().is_ok());
  CHECK(store->n_recoveries() == 1);
  CHECK(store->n_records() == 4);
  CHECK(get_ok(*store, key_n(8)) == value_n(8, 3000));
  CHECK_FALSE(get_ok(*store, key_n(1)).has_value());
}

TEST_CASE("a block checksum mismatch at open is damage, not a lock: moved aside, store starts empty",
          "[storage][faults]") {
  TempDir tmp("sst-crc");
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  {
    auto store = open_store(o);
    // Small values stay in the tables (no blob file): one table of records
    // ("pages") and one of their bookkeeping ("meta"), which the open reads.
    for (uint64_t n = 0; n < 5; ++n) REQUIRE(store->put(key_n(n), value_n(n, 100)).is_ok());
    REQUIRE(store->flush().is_ok());
  }
  int n_ssts = 0;
  for (const auto& e : fs::directory_iterator(o.dir)) {
    if (e.path().extension() != ".sst") continue;
    ++n_ssts;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);  // inside the first data block
    f.write("\xde\xad\xbe\xef\xde\xad\xbe\xef", 8);
  }
  REQUIRE(n_ssts == 2);
  LogCapture cap;
  auto r = RocksDbPageStore::open(o);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  auto store = std::move(r).value();
  CHECK(store->n_records() == 0);
  CHECK(cap.count("in use by another process") == 0);
  CHECK(cap.count("moved the damaged store") == 1);
  CHECK(cap.count("checksum mismatch") >= 1);
  CHECK(corrupt_copies(tmp.path(), "db").size() == 1);
  REQUIRE(store->put(key_n(9), value_n(9, 100)).is_ok());
  CHECK(get_ok(*store, key_n(9)) == value_n(9, 100));
}

TEST_CASE("a LOCK held by another process refuses the open and moves nothing", "[storage][faults]") {
  TempDir tmp("lock");
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  { auto store = open_store(o); REQUIRE(store->put(key_n(1), "one").is_ok()); }
  int to_child[2], to_parent[2];
  REQUIRE(pipe(to_child) == 0);
  REQUIRE(pipe(to_parent) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The child takes RocksDB's kind of lock (fcntl F_SETLK) and holds it
    // until the parent writes a byte.
    int fd = ::open((o.dir + "/LOCK").c_str(), O_RDWR | O_CREAT, 0644);
    struct flock fl{};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    const char ok = (fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0) ? 'y' : 'n';
    (void)!write(to_parent[1], &ok, 1);
    char c;
    (void)!read(to_child[0], &c, 1);
    _exit(0);
  }
  char ok = 0;
  REQUIRE(read(to_parent[0], &ok, 1) == 1);
  REQUIRE(ok == 'y');
  auto r = RocksDbPageStore::open(o);
  CHECK_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kIOError);
  CHECK_THAT(r.status().message(), Catch::Matchers::Contains("in use by another process"));
  CHECK(corrupt_copies(tmp.path(), "db").empty());
  (void)!write(to_child[1], "x", 1);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  // The lock is gone with the child: the store opens with its record.
  auto store = open_store(o);
  CHECK(get_ok(*store, key_n(1)) == "one");
}

// Found in hostile testing: a directory RocksDB cannot write at all (here
// /proc/self; a read-only mount was reported the same way) was called "in
// use by another process". The LOCK file cannot even be opened there, so it
// is no other holder's lock.
TEST_CASE("an unwritable directory is not reported as locked by another process", "[storage][faults]") {
  RocksDbStoreOptions o;
  o.dir = "/proc/self";
  auto r = RocksDbPageStore::open(o);
  if (!r.is_ok()) {
    CHECK(r.status().message().find("in use by another process") == std::string::npos);
    CHECK_THAT(r.status().message(), Catch::Matchers::Contains("/proc/self"));
  } else {
    // Opened memory-only (unwritable): gets miss, puts fail cleanly.
    CHECK(r.value()->put(key_n(1), "one").code() == StatusCode::kIOError);
  }
}

TEST_CASE("a corrupt block reached by a compaction: the store is replaced and keeps accepting writes",
          "[storage][faults]") {
  TempDir tmp("compaction");
  RocksDbStoreOptions o;
  o.dir = tmp.sub("db");
  o.retry_interval_ms = 0;
  o.log_interval_ms = 600000;
  // Three flushes, each a table file of 4 records of 3000 bytes in "pages"
  // (under the 4 KiB blob threshold: the values sit in the table's data
  // blocks, about one per 4 KiB block) and a small one of their
  // bookkeeping in "meta".
  {
    auto store = open_store(o);
    for (uint64_t batch = 0; batch < 3; ++batch) {
      // Keys interleaved across the flushes (0 3 6 9, 1 4 7 10, ...): the
      // tables overlap, so a compaction must read them (tables with
      // disjoint key ranges would be moved down a level unread).
      for (uint64_t i = 0; i < 4; ++i) REQUIRE(store->put(key_n(i * 3 + batch), value_n(i * 3 + batch, 3000)).is_ok());
      REQUIRE(store->flush().is_ok());
    }
  }
  std::vector<std::pair<uintmax_t, fs::path>> tables;
  for (const auto& e : fs::directory_iterator(o.dir)) {
    if (e.path().extension() == ".sst") tables.emplace_back(e.file_size(), e.path());
  }
  REQUIRE(tables.size() == 6);
  // The three largest (~12 KB, the "meta" ones are ~1 KB) hold the records.
  std::sort(tables.begin(), tables.end());
  REQUIRE(tables[2].first * 4 < tables[3].first);
  std::vector<fs::path> ssts{tables[3].second, tables[4].second, tables[5].second};
  std::sort(ssts.begin(), ssts.end());
  {
    std::fstream f(ssts[1], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);  // inside the first data block: a record, not an index entry
    f.write("\xde\xad\xbe\xef\xde\xad\xbe\xef", 8);
  }
  LogCapture cap;
  auto store = open_store(o);  // "meta" is intact: opens with 12 records
  REQUIRE(store->n_records() == 12);
  // RocksDB compacts the table files (at the latest once a fourth one makes
  // the level-0 trigger); the compaction reads the bad block and RocksDB
  // stops writes for good.
  // (The compaction may also start before: its error then fails these.)
  for (uint64_t i = 0; i < 4; ++i) (void)store->put(key_n(100 + i), value_n(100 + i, 3000));
  (void)store->flush();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  uint64_t n = 200;
  while (store->n_recoveries() == 0 && std::chrono::steady_clock::now() < deadline) {
    (void)store->put(key_n(n), value_n(n, 3000));
    ++n;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(store->n_recoveries() == 1);
  CHECK(store->n_records_moved_aside() >= 12);
  CHECK(corrupt_copies(tmp.path(), "db").size() == 1);
  CHECK(cap.count("RocksDB cannot resume writes") == 1);
  // The replacement store takes writes and serves them.
  REQUIRE(store->put(key_n(999), value_n(999, 3000)).is_ok());
  CHECK(get_ok(*store, key_n(999)) == value_n(999, 3000));
  CHECK(store->writable());
  // Bounded log: far fewer lines than failed writes.
  CHECK(cap.count("keeps serving from memory") <= 1);
}

TEST_CASE("moving a store aside keeps only the newest damaged copy", "[storage][faults]") {
  TempDir tmp("aside");
  const std::string dir = tmp.sub("db");
  fs::create_directories(dir);
  std::ofstream(dir + "/CURRENT") << "x";
  for (const char* old : {"db.corrupt-100", "db.corrupt-200", "db.corrupt-200-1"}) {
    fs::create_directories(tmp.sub(old));
  }
  std::ofstream(tmp.sub("db.corrupt-notes")) << "an admin's file, not a copy";
  auto r = move_store_aside(dir, 1);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  CHECK_FALSE(fs::exists(dir));
  CHECK(fs::exists(fs::path(*r) / "CURRENT"));
  const auto left = corrupt_copies(tmp.path(), "db");
  CHECK(left.size() == 2);  // the new copy and the admin's file
  CHECK_FALSE(fs::exists(tmp.sub("db.corrupt-100")));
  CHECK_FALSE(fs::exists(tmp.sub("db.corrupt-200")));
  CHECK_FALSE(fs::exists(tmp.sub("db.corrupt-200-1")));
  CHECK(fs::exists(tmp.sub("db.corrupt-notes")));
  // Twice in the same second: a "-1" name, still one copy kept.
  fs::create_directories(dir);
  auto r2 = move_store_aside(dir, 1);
  REQUIRE(r2.is_ok());
  CHECK(*r2 != *r);
  CHECK(corrupt_copies(tmp.path(), "db").size() == 2);
}

// Found in hostile testing: a damaged store on a mount point (rename:
// EBUSY), or in a directory whose parent the daemon may not write (EACCES),
// could not be moved aside and stayed memory-only at every start. Its
// entries now move into a "corrupt-<time>" directory inside it.
TEST_CASE("a store that cannot be renamed is moved aside into itself, and a store opens beside the copy",
          "[storage][faults]") {
  TempDir tmp("aside-inside");
  const std::string dir = tmp.sub("db");
  fs::create_directories(dir);
  std::ofstream(dir + "/CURRENT") << "MANIFEST-000042\n";
  std::ofstream(dir + "/000005.sst") << "not a table";
  for (const char* old : {"corrupt-100", "corrupt-200"}) fs::create_directories(fs::path(dir) / old);
  auto r = move_store_contents_aside(dir, 1);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  CHECK(fs::path(*r).parent_path() == fs::path(dir));
  CHECK(fs::exists(fs::path(*r) / "CURRENT"));
  CHECK(fs::exists(fs::path(*r) / "000005.sst"));
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename().string());
  REQUIRE(left.size() == 1);  // the new copy alone: the two older ones pruned
  CHECK(left[0] == fs::path(*r).filename().string());
  RocksDbStoreOptions o;
  o.dir = dir;
  auto store = open_store(o);
  REQUIRE(store->put(key_n(1), value_n(1, 3000)).is_ok());
  CHECK(get_ok(*store, key_n(1)) == value_n(1, 3000));
  CHECK(fs::exists(fs::path(*r) / "CURRENT"));  // RocksDB left the copy alone
}

// Found in hostile testing: a cache dir pointed at a folder of the user's
// was adopted; a damage moved the folder aside, and the next one deleted it.
TEST_CASE("a store does not open in a directory holding files it did not create", "[storage][faults]") {
  TempDir tmp("foreign");
  RocksDbStoreOptions o;
  o.dir = tmp.sub("mine");
  fs::create_directories(fs::path(o.dir) / "sub");
  std::ofstream(fs::path(o.dir) / "notes.txt") << "the user's";
  std::ofstream(fs::path(o.dir) / "sub" / "x") << "the user's too";
  auto r = RocksDbPageStore::open(o);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kUnsupported);  // on_error = "memory_only" serves without it
  CHECK(r.status().message().find("notes.txt") != std::string::npos);
  CHECK(r.status().message().find("[cache.disk] dir") != std::string::npos);
  CHECK(fs::exists(fs::path(o.dir) / "notes.txt"));
  CHECK(fs::exists(fs::path(o.dir) / "sub" / "x"));
  CHECK_FALSE(fs::exists(fs::path(o.dir) / "CURRENT"));  // nothing was created there
  // A store's own directory, with a damaged copy and a lost+found, opens.
  o.dir = tmp.sub("store");
  { auto s = open_store(o); }
  fs::create_directories(fs::path(o.dir) / "corrupt-1700000000");
  fs::create_directories(fs::path(o.dir) / "lost+found");
  std::ofstream(fs::path(o.dir) / "000099.dbtmp") << "a CURRENT being replaced when a crash came";
  auto again = open_store(o);
  CHECK(foreign_entries(o.dir).empty());
}

TEST_CASE("moving a store aside moves only its own files, and through a symbolic link", "[storage][faults]") {
  TempDir tmp("aside-own");
  const std::string dir = tmp.sub("db");
  fs::create_directories(fs::path(dir) / "sub");
  std::ofstream(dir + "/CURRENT") << "MANIFEST-000042\n";
  std::ofstream(dir + "/000005.sst") << "not a table";
  std::ofstream(dir + "/notes.txt") << "appeared while the store ran";
  std::ofstream(dir + "/sub/x") << "so did this";
  auto r = move_store_aside(dir, 1);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  CHECK(fs::path(*r).parent_path() == fs::path(dir));  // moved inside, the folder stays
  CHECK(fs::exists(fs::path(*r) / "CURRENT"));
  CHECK(fs::exists(fs::path(*r) / "000005.sst"));
  CHECK(fs::exists(dir + "/notes.txt"));
  CHECK(fs::exists(dir + "/sub/x"));
  CHECK_FALSE(fs::exists(fs::path(*r) / "notes.txt"));
  // A second damage prunes the first copy, and only it: not a folder of
  // the same name shape holding other files.
  fs::create_directories(dir + "/corrupt-1");
  std::ofstream(dir + "/corrupt-1/thesis.txt") << "the user's";
  std::ofstream(dir + "/CURRENT") << "MANIFEST-000043\n";
  auto r2 = move_store_aside(dir, 1);
  REQUIRE(r2.is_ok());
  CHECK_FALSE(fs::exists(*r));
  CHECK(fs::exists(dir + "/corrupt-1/thesis.txt"));
  CHECK(fs::exists(dir + "/notes.txt"));
  CHECK(fs::exists(dir + "/sub/x"));

  // Through a link: the link stays and points where it did.
  const std::string real = tmp.sub("real"), link = tmp.sub("link");
  fs::create_directories(real);
  std::ofstream(real + "/CURRENT") << "MANIFEST-000042\n";
  fs::create_directory_symlink(real, link);
  auto r3 = move_store_aside(link, 1);
  REQUIRE(r3.is_ok());
  CHECK(fs::is_symlink(link));
  CHECK(fs::read_symlink(link) == fs::path(real));
  CHECK_FALSE(fs::exists(real + "/CURRENT"));
  CHECK(fs::exists(fs::path(real) / fs::path(*r3).filename() / "CURRENT"));
}

// Found in hostile testing: another program's RocksDB database passed the
// file-name check, and the old layout's upgrade erased its keys in the
// range "s".."t" as malformed and added two column families.
TEST_CASE("a store does not open another program's RocksDB database, and leaves it as it was",
          "[storage][faults]") {
  TempDir tmp("other-db");
  const std::string dir = tmp.sub("app");
  {
    rocksdb::Options opts;
    opts.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    REQUIRE(rocksdb::DB::Open(opts, dir, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    for (const char* k : {"session-1", "settings", "user-1"}) REQUIRE(db->Put(rocksdb::WriteOptions(), k, "v").ok());
  }
  RocksDbStoreOptions o;
  o.dir = dir;
  auto r = RocksDbPageStore::open(o);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kUnsupported);
  CHECK_THAT(r.status().message(), Catch::Contains("larder did not make"));
  std::vector<std::string> families;
  REQUIRE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir, &families).ok());
  CHECK(families == std::vector<std::string>{"default"});
  {
    rocksdb::DB* raw = nullptr;
    REQUIRE(rocksdb::DB::OpenForReadOnly(rocksdb::Options(), dir, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::string v;
    for (const char* k : {"session-1", "settings", "user-1"}) CHECK(db->Get(rocksdb::ReadOptions(), k, &v).ok());
  }
  // Column families of its own: refused too, by name.
  const std::string dir2 = tmp.sub("app2");
  {
    rocksdb::Options opts;
    opts.create_if_missing = true;
    opts.create_missing_column_families = true;
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {{"default", {}}, {"events", {}}};
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    REQUIRE(rocksdb::DB::Open(opts, dir2, cfs, &handles, &raw).ok());
    for (auto* h : handles) raw->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    delete raw;
  }
  o.dir = dir2;
  auto r2 = RocksDbPageStore::open(o);
  REQUIRE_FALSE(r2.is_ok());
  CHECK_THAT(r2.status().message(), Catch::Contains("column families default, events"));
}
