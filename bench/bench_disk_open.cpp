// bench_disk_open: start-up time of the disk tier (RocksDbPageStore::open)
// against the number of records it holds (docs/disk-tier.md). For each
// count N: a fresh store gets N records of --record-bytes bytes (default
// 4 KiB: small, so 100 000 fit on the disk quickly; at the blob threshold,
// so they sit in blob files like real pages), is closed without a flush and
// opened again ("after close": RocksDB replays the WAL and flushes it, as
// after a crash), then closed and opened --reps more times ("clean": the
// normal start-up, median). open() returns once the index is rebuilt, so
// the time covers everything before the store serves. Ratios are to the
// first count.
//
// usage: bench_disk_open [--counts 1000,10000,100000] [--record-bytes 4096] [--reps 3]
#include <sys/statvfs.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "bench/bench_cli.h"
#include "bench/bench_util.h"
#include "storage/rocksdb_store.h"

namespace lb = larder::bench;
using larder::PageKey;
using larder::RocksDbPageStore;
using larder::RocksDbStoreOptions;

namespace {

std::unique_ptr<RocksDbPageStore> open_or_die(const RocksDbStoreOptions& o) {
  auto r = RocksDbPageStore::open(o);
  if (!r.is_ok()) {
    std::fprintf(stderr, "open %s: %s\n", o.dir.c_str(), r.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

PageKey key_n(uint64_t n) { return PageKey{0x0BE7000000000000ull ^ (n * 0x9E3779B97F4A7C15ull), n}; }

struct Row {
  int64_t n = 0, store_bytes = 0;
  double put_s = 0, first_open_ms = 0, open_ms = 0;
};

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  std::vector<int64_t> counts{1000, 10000, 100000};
  int64_t record_bytes = 4096;
  int reps = 3;
  CLI::App app("bench_disk_open: opening a disk tier of N page records");
  app.add_option("--counts", counts, "record counts, comma-separated")->delimiter(',')->check(larder::bench::kPositive);
  app.add_option("--record-bytes", record_bytes, "bytes per record")->check(larder::bench::kPositive);
  app.add_option("--reps", reps, "timed opens per count")->check(larder::bench::kPositive);
  lb::parse_or_exit(app, argc, argv);
  std::vector<Row> rows;
  for (int64_t n : counts) {
    lb::TempDir dir("larder-bench-open");
    struct statvfs vfs {};
    if (::statvfs(dir.str().c_str(), &vfs) == 0 &&
        double(vfs.f_bavail) * double(vfs.f_frsize) < 2.5 * double(n) * double(record_bytes)) {
      std::fprintf(stderr, "not enough free disk for %lld records of %lld bytes: skipped\n", (long long)n,
                   (long long)record_bytes);
      continue;
    }
    RocksDbStoreOptions o;
    o.dir = dir.str() + "/db";
    o.capacity_bytes = int64_t(1) << 40;
    Row row;
    row.n = n;
    {
      auto store = open_or_die(o);
      std::string value(size_t(record_bytes), '\0');
      const auto t0 = lb::Clock::now();
      for (int64_t i = 0; i < n; ++i) {
        for (size_t b = 0; b < value.size(); b += 64) value[b] = char(i + int64_t(b));
        if (!store->put(key_n(uint64_t(i)), value).is_ok()) {
          std::fprintf(stderr, "put failed\n");
          return 1;
        }
      }
      row.put_s = lb::ms_since(t0) / 1000;
      row.store_bytes = store->size_bytes();
    }  // closed without a flush: the last memtable is in the WAL only
    {
      const auto t0 = lb::Clock::now();
      auto store = open_or_die(o);
      row.first_open_ms = lb::ms_since(t0);
      if (store->n_records() != n) {
        std::fprintf(stderr, "reopened with %lld records, expected %lld\n", (long long)store->n_records(), (long long)n);
        return 1;
      }
      (void)store->flush();
      (void)store->wait_for_compactions(600000);
    }
    std::vector<double> opens;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = lb::Clock::now();
      auto store = open_or_die(o);
      opens.push_back(lb::ms_since(t0));
      if (store->n_records() != n) return 1;
    }
    row.open_ms = lb::median(opens);
    rows.push_back(row);
    lb::print_json_line({{"bench", "disk_open"}, {"records", n}, {"record_bytes", record_bytes},
                         {"put_s", row.put_s}, {"first_open_ms", row.first_open_ms}, {"open_ms", row.open_ms},
                         {"runs_open_ms", opens}});
  }
  if (rows.empty()) return 1;
  std::printf("\nRocksDbPageStore::open() with N records of %lld bytes; clean = median of %d opens after a "
              "flushed close; after close = the first open after a close without flush (WAL replay)\n\n",
              (long long)record_bytes, reps);
  std::printf("| records | stored MB | put s | open after close ms | clean open ms | clean vs %lld |\n",
              (long long)rows[0].n);
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const Row& r : rows) {
    std::printf("| %lld | %.0f | %.1f | %.1f | %.1f | %.1fx |\n", (long long)r.n, double(r.store_bytes) / 1e6,
                r.put_s, r.first_open_ms, r.open_ms, rows[0].open_ms > 0 ? r.open_ms / rows[0].open_ms : 0);
  }
  return 0;
}
