// bench_disk_compression: how well real KV page records compress, to choose
// the disk tier's compression (docs/disk-tier.md). The records come from the
// real engine (bench/disk_pages.h: the test model decodes a few prompts, the
// pages it wrote to its disk tier are read back), in both KV dtypes. Each
// record is compressed on its own, as RocksDB compresses a blob, with the
// same library calls RocksDB makes: LZ4_compress_default (RocksDB's kLZ4,
// acceleration 1), ZSTD_compressCCtx at levels 1 and 3 (kZSTD); "none" is a
// memcpy. Every round trip is checked. Reported: ratio (input / output
// bytes), bytes saved, and MB/s (10^6 bytes of input per second) to compress
// and to decompress, best of --reps passes of at least 0.2 s each.
//
// usage: bench_disk_compression [--requests 12] [--tokens 240] [--threads 2]
//                               [--reps 3] [MODEL.gguf]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <lz4.h>
#include <spdlog/spdlog.h>
#include <zstd.h>

#include "bench/bench_cli.h"
#include "bench/disk_pages.h"
#include "tests/support/test_models.h"

namespace lb = larder::bench;

namespace {

struct Codec {
  std::string name;
  // Returns the compressed size written to dst (capacity dst_cap), 0 on failure.
  std::function<size_t(const std::string& src, char* dst, size_t dst_cap)> compress;
  // Decompresses n bytes of src into dst (original size), false on failure.
  std::function<bool(const char* src, size_t n, char* dst, size_t original)> decompress;
};

std::vector<Codec> codecs() {
  std::vector<Codec> v;
  v.push_back({"none",
               [](const std::string& s, char* d, size_t) {
                 std::memcpy(d, s.data(), s.size());
                 return s.size();
               },
               [](const char* s, size_t n, char* d, size_t) {
                 std::memcpy(d, s, n);
                 return true;
               }});
  v.push_back({"lz4",
               [](const std::string& s, char* d, size_t cap) {
                 const int n = LZ4_compress_default(s.data(), d, int(s.size()), int(cap));
                 return n > 0 ? size_t(n) : size_t(0);
               },
               [](const char* s, size_t n, char* d, size_t original) {
                 return LZ4_decompress_safe(s, d, int(n), int(original)) == int(original);
               }});
  for (int level : {1, 3}) {
    auto cctx = std::shared_ptr<ZSTD_CCtx>(ZSTD_createCCtx(), ZSTD_freeCCtx);
    auto dctx = std::shared_ptr<ZSTD_DCtx>(ZSTD_createDCtx(), ZSTD_freeDCtx);
    v.push_back({"zstd-" + std::to_string(level),
                 [cctx, level](const std::string& s, char* d, size_t cap) {
                   const size_t n = ZSTD_compressCCtx(cctx.get(), d, cap, s.data(), s.size(), level);
                   return ZSTD_isError(n) ? size_t(0) : n;
                 },
                 [dctx](const char* s, size_t n, char* d, size_t original) {
                   const size_t r = ZSTD_decompressDCtx(dctx.get(), d, original, s, n);
                   return !ZSTD_isError(r) && r == original;
                 }});
  }
  return v;
}

struct Result {
  std::string dtype, codec;
  int64_t n_records = 0, in_bytes = 0, out_bytes = 0;
  double compress_mbps = 0, decompress_mbps = 0;
};

// Seconds for one pass of fn, best of reps passes that each repeat fn for
// at least 0.2 s.
double best_seconds_per_pass(int reps, const std::function<void()>& fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    int n = 0;
    const auto t0 = lb::Clock::now();
    double s = 0;
    do {
      fn();
      ++n;
      s = lb::ms_since(t0) / 1000;
    } while (s < 0.2);
    best = std::min(best, s / n);
  }
  return best;
}

Result measure(const std::string& dtype, const lb::RealPages& pages, const Codec& c, int reps) {
  Result res;
  res.dtype = dtype;
  res.codec = c.name;
  res.n_records = int64_t(pages.records.size());
  res.in_bytes = pages.bytes;
  std::vector<std::string> packed(pages.records.size());
  for (size_t i = 0; i < pages.records.size(); ++i) {
    const std::string& r = pages.records[i];
    std::string out(std::max(size_t(LZ4_compressBound(int(r.size()))), ZSTD_compressBound(r.size())) + 64, '\0');
    const size_t n = c.compress(r, out.data(), out.size());
    if (n == 0) {
      std::fprintf(stderr, "%s: compress failed\n", c.name.c_str());
      std::exit(1);
    }
    out.resize(n);
    std::string back(r.size(), '\0');
    if (!c.decompress(out.data(), out.size(), back.data(), r.size()) || back != r) {
      std::fprintf(stderr, "%s: round trip failed\n", c.name.c_str());
      std::exit(1);
    }
    res.out_bytes += int64_t(n);
    packed[i] = std::move(out);
  }
  std::string scratch(size_t(64) << 20, '\0');
  const double tc = best_seconds_per_pass(reps, [&] {
    for (const std::string& r : pages.records) (void)c.compress(r, scratch.data(), scratch.size());
  });
  const double td = best_seconds_per_pass(reps, [&] {
    for (size_t i = 0; i < packed.size(); ++i) {
      (void)c.decompress(packed[i].data(), packed[i].size(), scratch.data(), pages.records[i].size());
    }
  });
  res.compress_mbps = double(res.in_bytes) / tc / 1e6;
  res.decompress_mbps = double(res.in_bytes) / td / 1e6;
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  int n_requests = 12, max_tokens = 240, threads = 2, reps = 3;
  std::string model;
  CLI::App app("bench_disk_compression: LZ4 and ZSTD on real KV page records");
  app.add_option("--requests", n_requests, "requests whose pages are collected")->check(larder::bench::kPositive);
  app.add_option("--tokens", max_tokens, "tokens generated per request")->check(larder::bench::kPositive);
  app.add_option("--threads", threads, "engine threads")->check(larder::bench::kPositive);
  app.add_option("--reps", reps, "timed repetitions per codec")->check(larder::bench::kPositive);
  app.add_option("model", model, "GGUF file (default: the test model stories260K)")->check(CLI::ExistingFile);
  lb::parse_or_exit(app, argc, argv);
  if (model.empty()) {
    auto p = larder::testing::test_model_path("stories260K.gguf");
    if (!p) {
      std::fprintf(stderr, "no test model: pass MODEL.gguf or set LARDER_TEST_MODELS\n");
      return 2;
    }
    model = *p;
  }
  std::vector<Result> results;
  for (const std::string dtype : {"f32", "f16"}) {
    const lb::RealPages pages = lb::real_page_records(model, dtype, n_requests, max_tokens, threads);
    std::fprintf(stderr, "%s: %zu page records, %lld bytes\n", dtype.c_str(), pages.records.size(),
                 (long long)pages.bytes);
    for (const Codec& c : codecs()) {
      results.push_back(measure(dtype, pages, c, reps));
      const Result& r = results.back();
      lb::print_json_line({{"bench", "disk_compression"}, {"model", lb::file_name(model)}, {"kv_dtype", r.dtype},
                           {"codec", r.codec}, {"records", r.n_records}, {"in_bytes", r.in_bytes},
                           {"out_bytes", r.out_bytes}, {"compress_mbps", r.compress_mbps},
                           {"decompress_mbps", r.decompress_mbps}});
    }
  }
  std::printf("\nReal KV page records of %s, each compressed on its own (MB/s of input)\n\n",
              lb::file_name(model).c_str());
  std::printf("| kv dtype | records (bytes each) | codec | ratio | saved | compress MB/s | decompress MB/s |\n");
  std::printf("| --- | ---: | --- | ---: | ---: | ---: | ---: |\n");
  for (const Result& r : results) {
    const double ratio = double(r.in_bytes) / double(r.out_bytes);
    std::printf("| %s | %lld (%lld) | %s | %.3f | %.1f%% | %.0f | %.0f |\n", r.dtype.c_str(), (long long)r.n_records,
                (long long)(r.in_bytes / std::max<int64_t>(r.n_records, 1)), r.codec.c_str(), ratio,
                100.0 * (1.0 - double(r.out_bytes) / double(r.in_bytes)), r.compress_mbps, r.decompress_mbps);
  }
  return 0;
}
