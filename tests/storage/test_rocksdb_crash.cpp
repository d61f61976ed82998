// RocksDbPageStore after kill -9: a child process (this test binary again,
// running the hidden "[.crash_writer]" case) spills page records through a
// store as fast as it can, with evictions and the background compaction
// running; the parent kills it at a random point, reopens the store and
// checks that it opens, that every record it lists is there and verifies
// (decode_page_record against its key, tokens and size; a record that
// fails is dropped and counted, the count logged), and that new puts work.
// Five kills per run, alternating sync_writes.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <spdlog/spdlog.h>

#include "storage/page_record.h"
#include "storage/rocksdb_store.h"
#include "tests/storage/store_test_util.h"
#include "tests/support/temp_dir.h"

extern char** environ;

using namespace larder;
using larder::testing::TempDir;
using larder::testing::open_store;

namespace {

constexpr uint64_t kKeyHi = 0xC4A5000000000000ull;
constexpr int64_t kBudget = int64_t(8) << 20;

PageKey key_n(uint64_t n) { return PageKey{kKeyHi, n}; }

// Everything about record n follows from n: 16 tokens n*16+i; 20 KiB of
// payload (the test model's page), every 10th 256 KiB.
std::vector<int32_t> tokens_n(uint64_t n) {
  std::vector<int32_t> t(16);
  for (size_t i = 0; i < 16; ++i) t[i] = int32_t((n * 16 + i) & 0x7FFFFFFF);
  return t;
}
size_t payload_bytes_n(uint64_t n) { return n % 10 == 0 ? size_t(256) << 10 : size_t(20) << 10; }
PageRecordMeta meta() {
  PageRecordMeta m;
  m.page_size = 16;
  m.n_layers = 5;
  m.kv_dim = 32;
  return m;
}
std::string record_n(uint64_t n) {
  std::vector<uint8_t> payload(payload_bytes_n(n));
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = uint8_t((n * 151 + i * 29) >> 2);
  return encode_page_record(key_n(n), meta(), tokens_n(n), payload);
}

// Whether `record` is record n, exactly as decode_page_record sees it.
Status verify(const PageKey& key, const std::string& record) {
  const uint64_t n = key.lo;
  std::vector<uint8_t> payload(payload_bytes_n(n));
  if (key.hi != kKeyHi) return Status::corruption("foreign key " + key.to_hex());
  return decode_page_record(record, key, meta(), tokens_n(n), payload);
}

RocksDbStoreOptions crash_options(const std::string& dir, bool sync) {
  RocksDbStoreOptions o;
  o.dir = dir;
  o.capacity_bytes = kBudget;  // ~250 records: evictions all the time
  o.sync_writes = sync;
  o.compaction_interval_ms = 0;
  return o;
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  REQUIRE(n > 0);
  return std::string(buf, size_t(n));
}

}  // namespace

// The child of the test below; does nothing unless LARDER_CRASH_DIR is set.
TEST_CASE("crash writer (run by the kill -9 test)", "[.crash_writer]") {
  const char* dir = std::getenv("LARDER_CRASH_DIR");
  if (dir == nullptr) return;
  const uint64_t first = std::strtoull(std::getenv("LARDER_CRASH_FIRST"), nullptr, 10);
  const int fd = std::atoi(std::getenv("LARDER_CRASH_FD"));
  const bool sync = std::getenv("LARDER_CRASH_SYNC")[0] == '1';
  const pid_t parent = ::getppid();
  spdlog::set_level(spdlog::level::warn);
  auto store = open_store(crash_options(dir, sync));
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0;; ++i) {
    const uint64_t n = first + i;
    (void)store->put(key_n(n), record_n(n));
    if (i % 7 == 3) (void)store->get(key_n(n - 5));
    if (i % 13 == 5) (void)store->erase(key_n(n - 3));
    if (i == 20) (void)!::write(fd, "r", 1);  // started: the parent may kill from now on
    // Never outlive the test: the parent is gone or something is wrong.
    if (i % 64 == 0 && (::getppid() != parent || std::chrono::steady_clock::now() - t0 > std::chrono::seconds(60))) {
      std::_Exit(3);
    }
  }
}

TEST_CASE("crash: kill -9 while spilling; the store opens, every record verifies, new puts work",
          "[storage][rocksdb][crash]") {
  TempDir tmp("crash");
  const std::string dir = tmp.sub("db");
  const std::string exe = self_exe();
  const unsigned seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> delay_ms(0, 400);
  int64_t n_seen = 0, n_bad_total = 0;
  for (int round = 0; round < 5; ++round) {
    const bool sync = round % 2 == 1;
    int pfd[2];
    REQUIRE(::pipe(pfd) == 0);
    std::vector<std::string> env_strings{"LARDER_CRASH_DIR=" + dir,
                                         "LARDER_CRASH_FIRST=" + std::to_string(uint64_t(round + 1) * 1'000'000),
                                         "LARDER_CRASH_FD=" + std::to_string(pfd[1]),
                                         std::string("LARDER_CRASH_SYNC=") + (sync ? "1" : "0")};
    std::vector<char*> envp;
    for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
    for (std::string& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string arg0 = exe, arg1 = "[.crash_writer]";
    char* argv[] = {arg0.data(), arg1.data(), nullptr};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addclose(&actions, pfd[0]);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(pfd[1]);
    REQUIRE(rc == 0);
    // Wait for the child to be spilling (generous: it opens a store first).
    struct pollfd p{pfd[0], POLLIN, 0};
    char c = 0;
    const bool started = ::poll(&p, 1, 60000) == 1 && ::read(pfd[0], &c, 1) == 1 && c == 'r';
    ::close(pfd[0]);
    const int delay = delay_ms(rng);
    if (started) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    ::kill(pid, SIGKILL);
    int wstatus = 0;
    REQUIRE(::waitpid(pid, &wstatus, 0) == pid);
    INFO("round " << round << ", killed " << delay << " ms after the start, sync " << sync);
    REQUIRE(started);
    CHECK((WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL));

    auto store = open_store(crash_options(dir, sync));
    // Opened as it was, not moved aside as damaged (hostile testing found
    // a kill during a flush taken for a stale MANIFEST).
    CHECK(larder::testing::corrupt_copies(tmp.path(), "db").empty());
    int64_t n_bad = 0;
    const std::vector<PageKey> keys = store->keys();
    for (const PageKey& k : keys) {
      auto r = store->get(k);
      Status st = !r.is_ok()       ? r.status()
                  : !r->has_value() ? Status::not_found("listed but absent: " + k.to_hex())
                                    : verify(k, **r);
      if (!st.is_ok()) {
        ++n_bad;
        UNSCOPED_INFO(st.to_string());
        (void)store->erase(k);
      }
    }
    spdlog::info("crash test round {}: killed {} ms into spilling (sync {}): {} records, {} failed "
                 "verification and were dropped",
                 round, delay, sync, keys.size(), n_bad);
    CHECK(n_bad == 0);
    CHECK(store->size_bytes() <= kBudget);
    n_seen += int64_t(keys.size());
    n_bad_total += n_bad;
    // New puts work and read back.
    for (uint64_t n = 1; n <= 5; ++n) {
      const uint64_t k = uint64_t(round + 1) * 10'000'000 + n;
      REQUIRE(store->put(key_n(k), record_n(k)).is_ok());
      auto r = store->get(key_n(k));
      REQUIRE(r.is_ok());
      REQUIRE(r->has_value());
      CHECK(verify(key_n(k), **r).is_ok());
    }
  }
  CHECK(n_seen > 0);  // the children did spill
  CHECK(n_bad_total == 0);
}
