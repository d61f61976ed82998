// bench_disk_spill: spill (put) and restore (get) throughput of the disk
// tier against plain sequential file I/O of the same bytes on the same disk,
// measured in the same run (docs/disk-tier.md).
//
// Record sizes (16-token pages, f32 K/V; record = 76 + 4 * 16 + payload):
//   20 KiB  the test model stories260K: 5 layers * 2 (K, V) * 16 tokens *
//           32 kv_dim * 4 bytes = 20 480 payload, 20 620 record bytes
//   1 MiB   Llama-3.2-1B: 16 layers * 2 * 16 tokens * 512 kv_dim (8 KV
//           heads * 64) * 4 bytes = 1 048 576 payload, 1 048 716 bytes
//   2 MiB   the same with page_size 32 (or a model twice as deep/wide)
// The payload is pseudo-random bytes: the store does not compress, so the
// content does not matter.
//
// For each size, --total-mb of records (N = total / size):
//   store put     N puts into a fresh store, then flush() (the memtable is
//                 written and synced to blob files); MB/s over both. RocksDB
//                 writes each byte twice: the WAL, then the blob file.
//   store put sync  the first min(N, 256) puts with sync_writes (fsync of the
//                 WAL per put)
//   file write    write(2) of the same records to one file, then fdatasync
//   store get     N gets in put order (the restore order of a prefix), hot:
//                 the bytes were just written and are in the OS page cache
//   file read     read(2) of the file in record-sized chunks, hot
//   cold get/read the same after posix_fadvise(DONTNEED) on every file of the
//                 store / on the file: the OS drops their cached pages (no root
//                 needed; mincore(2) checks how much stayed resident), so the
//                 bytes come from the disk
// MB/s are 10^6 bytes of record per second; ratios are store / file.
//
// usage: bench_disk_spill [--sizes 20620,1048716,2097292] [--total-mb 256]
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "bench/bench_cli.h"
#include "bench/bench_util.h"
#include "storage/rocksdb_store.h"

namespace lb = larder::bench;
namespace fs = std::filesystem;
using larder::PageKey;
using larder::RocksDbPageStore;
using larder::RocksDbStoreOptions;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  std::exit(1);
}

std::unique_ptr<RocksDbPageStore> open_or_die(const RocksDbStoreOptions& o) {
  auto r = RocksDbPageStore::open(o);
  if (!r.is_ok()) die("open " + o.dir + ": " + r.status().to_string());
  return std::move(r).value();
}

PageKey key_n(uint64_t n) { return PageKey{0x5B11000000000000ull ^ (n * 0x9E3779B97F4A7C15ull), n}; }

// Pseudo-random bytes (xorshift64), different per record.
void fill(std::string& v, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i + 8 <= v.size(); i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(v.data() + i, &x, 8);
  }
}

// Drops the OS page cache of every file under path (clean pages only: call
// after a sync). Returns the fraction of their pages still resident.
double drop_cache(const fs::path& path) {
  std::vector<fs::path> files;
  if (fs::is_directory(path)) {
    for (const auto& e : fs::recursive_directory_iterator(path)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
  } else {
    files.push_back(path);
  }
  int64_t pages = 0, resident = 0;
  const long page = ::sysconf(_SC_PAGESIZE);
  for (const fs::path& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY);
    if (fd < 0) continue;
    (void)::fdatasync(fd);
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
      void* m = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
      if (m != MAP_FAILED) {
        const size_t n = (size_t(st.st_size) + size_t(page) - 1) / size_t(page);
        std::vector<unsigned char> v(n);
        if (::mincore(m, size_t(st.st_size), v.data()) == 0) {
          for (unsigned char c : v) resident += c & 1;
          pages += int64_t(n);
        }
        ::munmap(m, size_t(st.st_size));
      }
    }
    ::close(fd);
  }
  return pages > 0 ? double(resident) / double(pages) : 0;
}

struct Row {
  int64_t size = 0, n = 0;
  double store_put = 0, store_put_sync = 0, file_write = 0;
  double store_get = 0, file_read = 0, store_get_cold = 0, file_read_cold = 0;
  double resident_store = 0, resident_file = 0;  // after dropping
};

double mbps(int64_t bytes, double ms) { return ms > 0 ? double(bytes) / (ms / 1000) / 1e6 : 0; }

Row run(int64_t size, int64_t total_bytes, const std::string& base) {
  Row row;
  row.size = size;
  row.n = std::max<int64_t>(1, total_bytes / size);
  const int64_t bytes = row.n * size;
  std::string value(size_t(size), '\0');
  RocksDbStoreOptions o;
  o.dir = base + "/store-" + std::to_string(size);
  o.capacity_bytes = int64_t(1) << 40;
  {
    // Sync puts first, in a store of their own.
    RocksDbStoreOptions so = o;
    so.dir += "-sync";
    so.sync_writes = true;
    auto store = open_or_die(so);
    const int64_t n = std::min<int64_t>(row.n, 256);
    const auto t0 = lb::Clock::now();
    for (int64_t i = 0; i < n; ++i) {
      fill(value, uint64_t(i));
      if (!store->put(key_n(uint64_t(i)), value).is_ok()) die("put failed");
    }
    row.store_put_sync = mbps(n * size, lb::ms_since(t0));
  }
  fs::remove_all(o.dir + "-sync");
  auto store = open_or_die(o);
  {
    const auto t0 = lb::Clock::now();
    for (int64_t i = 0; i < row.n; ++i) {
      fill(value, uint64_t(i));
      if (!store->put(key_n(uint64_t(i)), value).is_ok()) die("put failed");
    }
    if (!store->flush().is_ok()) die("flush failed");
    row.store_put = mbps(bytes, lb::ms_since(t0));
  }
  const std::string file = base + "/plain-" + std::to_string(size);
  {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die("create " + file);
    const auto t0 = lb::Clock::now();
    for (int64_t i = 0; i < row.n; ++i) {
      fill(value, uint64_t(i));
      if (::write(fd, value.data(), value.size()) != ssize_t(value.size())) die("write " + file);
    }
    if (::fdatasync(fd) != 0) die("fdatasync " + file);
    row.file_write = mbps(bytes, lb::ms_since(t0));
    ::close(fd);
  }
  (void)store->wait_for_compactions(600000);
  auto store_gets = [&] {
    const auto t0 = lb::Clock::now();
    for (int64_t i = 0; i < row.n; ++i) {
      auto r = store->get(key_n(uint64_t(i)));
      if (!r.is_ok() || !r->has_value() || int64_t((*r)->size()) != size) die("get failed");
    }
    return mbps(bytes, lb::ms_since(t0));
  };
  auto file_reads = [&] {
    const int fd = ::open(file.c_str(), O_RDONLY);
    if (fd < 0) die("open " + file);
    const auto t0 = lb::Clock::now();
    for (int64_t i = 0; i < row.n; ++i) {
      if (::read(fd, value.data(), value.size()) != ssize_t(value.size())) die("read " + file);
    }
    const double r = mbps(bytes, lb::ms_since(t0));
    ::close(fd);
    return r;
  };
  row.store_get = store_gets();
  row.file_read = file_reads();
  row.resident_store = drop_cache(o.dir);
  row.store_get_cold = store_gets();
  row.resident_file = drop_cache(file);
  row.file_read_cold = file_reads();
  store.reset();
  fs::remove_all(o.dir);
  fs::remove(file);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  std::vector<int64_t> sizes{20620, 1048716, 2097292};
  int64_t total_mb = 256;
  CLI::App app("bench_disk_spill: spill throughput of the disk tier by record size");
  app.add_option("--sizes", sizes, "record sizes in bytes, comma-separated")->delimiter(',')->check(larder::bench::kPositive);
  app.add_option("--total-mb", total_mb, "MB written per size")->check(larder::bench::kPositive);
  lb::parse_or_exit(app, argc, argv);
  lb::TempDir dir("larder-bench-spill");
  struct statvfs vfs {};
  if (::statvfs(dir.str().c_str(), &vfs) == 0 &&
      double(vfs.f_bavail) * double(vfs.f_frsize) < 4.0 * double(total_mb) * 1e6) {
    die("not enough free disk for --total-mb " + std::to_string(total_mb) + " (needs about 4x)");
  }
  std::vector<Row> rows;
  for (int64_t size : sizes) {
    rows.push_back(run(size, total_mb * 1000000, dir.str()));
    const Row& r = rows.back();
    lb::print_json_line({{"bench", "disk_spill"}, {"record_bytes", r.size}, {"records", r.n},
                         {"store_put_mbps", r.store_put}, {"store_put_sync_mbps", r.store_put_sync},
                         {"file_write_mbps", r.file_write}, {"store_get_mbps", r.store_get},
                         {"file_read_mbps", r.file_read}, {"store_get_cold_mbps", r.store_get_cold},
                         {"file_read_cold_mbps", r.file_read_cold}, {"resident_store_after_drop", r.resident_store},
                         {"resident_file_after_drop", r.resident_file}});
  }
  std::printf("\nDisk tier vs plain file I/O of the same bytes, MB/s (ratio store / file); hot = page cache, "
              "cold = after posix_fadvise(DONTNEED)\n\n");
  std::printf("| record bytes | N | put+flush | file write+fdatasync | put sync (first <=256) | get hot | "
              "read hot | get cold | read cold | resident after drop (store/file) |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const Row& r : rows) {
    std::printf("| %lld | %lld | %.0f (%.2fx) | %.0f | %.0f | %.0f (%.2fx) | %.0f | %.0f (%.2fx) | %.0f | %.0f%% / %.0f%% |\n",
                (long long)r.size, (long long)r.n, r.store_put, r.store_put / r.file_write, r.file_write,
                r.store_put_sync, r.store_get, r.store_get / r.file_read, r.file_read, r.store_get_cold,
                r.store_get_cold / r.file_read_cold, r.file_read_cold, 100 * r.resident_store, 100 * r.resident_file);
  }
  return 0;
}
