// bench_walls: the two walls of CPU inference on this machine, measured with
// plain AVX-512 loops, for the CPU benchmarks to print beside their tok/s:
//   read  : GB/s (10^9 bytes/s) of streaming a buffer larger than the L3
//           (default 1 GiB) with 512-bit loads, on 1..N threads (each thread
//           reads its own contiguous share; time = the slowest thread),
//           plain and with software prefetch 2 KiB ahead, on 4 KiB pages and
//           on transparent huge pages where the kernel grants them (larder's
//           packed weights ask for them) ("method"); the fastest is the wall.
//           Decode reads every weight byte once per token, so
//           tok/s <= read GB/s / weight GB.
//   int8  : TOP/s (10^12 ops/s, a multiply and an add counted as 2 ops) of
//           `vpdpbusd` zmm (64 u8 x s8 products summed into 16 int32 lanes:
//           128 ops per instruction) in 16 independent chains, on 1..N
//           threads. Prefill of a Q8_0 / K-quant model is bounded by it:
//           about 2 x (weights) ops per prompt token.
// Each figure is the best of --reps runs (the wall is what the machine can
// do; a shared machine only ever makes a run slower). Prints one JSON line
// per (probe, threads) and a markdown table.
//
// usage: bench_walls [--threads 1,2] [--mib 1024] [--reps 5] [--json-only]
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>

#include <nlohmann/json.hpp>

#include "bench/bench_cli.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::vector<int> threads{1, 2};
  int mib = 1024;
  int reps = 5;
  bool json_only = false;
};

// Runs fn(t) on n threads started together; returns the wall seconds from the
// common start to the last thread's end.
template <typename Fn>
double run_threads(int n, Fn fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> end_s(size_t(n), 0);
  Clock::time_point t0;
  std::vector<std::thread> pool;
  for (int t = 0; t < n; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      fn(t);
      end_s[size_t(t)] = std::chrono::duration<double>(Clock::now() - t0).count();
    });
  }
  while (ready.load() < n) {
  }
  t0 = Clock::now();
  go.store(true, std::memory_order_release);
  for (auto& th : pool) th.join();
  return *std::max_element(end_s.begin(), end_s.end());
}

#if defined(__AVX512F__)
// XORs every 64-byte line of [p, p + bytes) into 8 accumulators; returns a
// value that depends on all of them so the loads cannot be dropped. With
// Prefetch, each 512-byte step also prefetches the lines 2 KiB ahead (as
// larder's decode tiles do): the hardware prefetcher alone may not keep
// enough lines in flight, and a decode that prefetches would otherwise
// "beat" the wall.
template <bool Prefetch>
uint64_t read_lines(const uint8_t* p, size_t bytes) {
  __m512i a[8];
  for (auto& v : a) v = _mm512_setzero_si512();
  for (size_t i = 0; i + 512 <= bytes; i += 512) {
    if constexpr (Prefetch) {
      for (int j = 0; j < 8; ++j) _mm_prefetch(reinterpret_cast<const char*>(p + i + 2048 + 64 * size_t(j)), _MM_HINT_T0);
    }
    for (int j = 0; j < 8; ++j) {
      a[j] = _mm512_xor_si512(a[j], _mm512_load_si512(reinterpret_cast<const void*>(p + i + 64 * size_t(j))));
    }
  }
  __m512i x = a[0];
  for (int j = 1; j < 8; ++j) x = _mm512_xor_si512(x, a[j]);
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(reinterpret_cast<void*>(lanes), x);
  uint64_t sum = 0;
  for (uint64_t v : lanes) sum += v;
  return sum;
}
#endif

#if defined(__AVX512VNNI__)
// `iters` rounds of 16 vpdpbusd on 16 independent accumulators, in inline
// assembly so that the accumulators stay in registers zmm0-zmm15 (an
// intrinsics version kept them in a stack array: a load and a store per
// instruction, 8x below the peak). The operands are in two other zmm
// registers the compiler picks; the values are never read.
void dot_chains(int64_t iters) {
  const __m512i u = _mm512_set1_epi8(3);
  const __m512i s = _mm512_set1_epi8(-2);
  __asm__ volatile(
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
      "vmovdqa64 %%zmm0, %%zmm1\n\t"
      "vmovdqa64 %%zmm0, %%zmm2\n\t"
      "vmovdqa64 %%zmm0, %%zmm3\n\t"
      "vmovdqa64 %%zmm0, %%zmm4\n\t"
      "vmovdqa64 %%zmm0, %%zmm5\n\t"
      "vmovdqa64 %%zmm0, %%zmm6\n\t"
      "vmovdqa64 %%zmm0, %%zmm7\n\t"
      "vmovdqa64 %%zmm0, %%zmm8\n\t"
      "vmovdqa64 %%zmm0, %%zmm9\n\t"
      "vmovdqa64 %%zmm0, %%zmm10\n\t"
      "vmovdqa64 %%zmm0, %%zmm11\n\t"
      "vmovdqa64 %%zmm0, %%zmm12\n\t"
      "vmovdqa64 %%zmm0, %%zmm13\n\t"
      "vmovdqa64 %%zmm0, %%zmm14\n\t"
      "vmovdqa64 %%zmm0, %%zmm15\n\t"
      "1:\n\t"
      "vpdpbusd %[s], %[u], %%zmm0\n\t"
      "vpdpbusd %[s], %[u], %%zmm1\n\t"
      "vpdpbusd %[s], %[u], %%zmm2\n\t"
      "vpdpbusd %[s], %[u], %%zmm3\n\t"
      "vpdpbusd %[s], %[u], %%zmm4\n\t"
      "vpdpbusd %[s], %[u], %%zmm5\n\t"
      "vpdpbusd %[s], %[u], %%zmm6\n\t"
      "vpdpbusd %[s], %[u], %%zmm7\n\t"
      "vpdpbusd %[s], %[u], %%zmm8\n\t"
      "vpdpbusd %[s], %[u], %%zmm9\n\t"
      "vpdpbusd %[s], %[u], %%zmm10\n\t"
      "vpdpbusd %[s], %[u], %%zmm11\n\t"
      "vpdpbusd %[s], %[u], %%zmm12\n\t"
      "vpdpbusd %[s], %[u], %%zmm13\n\t"
      "vpdpbusd %[s], %[u], %%zmm14\n\t"
      "vpdpbusd %[s], %[u], %%zmm15\n\t"
      "dec %[n]\n\t"
      "jnz 1b\n\t"
      : [n] "+r"(iters)
      : [u] "v"(u), [s] "v"(s)
      : "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", "zmm10", "zmm11",
        "zmm12", "zmm13", "zmm14", "zmm15", "cc");
}
#endif

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app("bench_walls: the machine's read bandwidth and int8 (vpdpbusd) peak");
  app.add_option("--threads", a.threads, "thread counts, comma-separated")
      ->delimiter(',')
      ->check(larder::bench::kPositive);
  app.add_option("--mib", a.mib, "read buffer in MiB (size it past the L3)")->check(CLI::Range(1, 16384));
  app.add_option("--reps", a.reps, "runs per figure (the best is printed)")->check(larder::bench::kPositive);
  app.add_flag("--json-only", a.json_only, "print only the JSON lines");
  larder::bench::parse_or_exit(app, argc, argv);

  std::vector<nlohmann::json> rows;
  volatile uint64_t sink = 0;
#if defined(__AVX512F__)
  const size_t bytes = size_t(a.mib) << 20;
  for (bool huge : {false, true}) {  // 4 KiB pages, then transparent huge pages as larder's packed weights
    void* mem = nullptr;
    if (posix_memalign(&mem, huge ? size_t(2) << 20 : 4096, bytes) != 0) {
      std::fprintf(stderr, "bench_walls: cannot allocate %d MiB\n", a.mib);
      return 1;
    }
    auto* buf = static_cast<uint8_t*>(mem);
    if (huge && ::madvise(buf, bytes, MADV_HUGEPAGE) != 0) {
      std::free(buf);
      continue;  // no THP here: the 4 KiB rows are the wall
    }
    for (size_t i = 0; i < bytes; ++i) buf[i] = uint8_t(i * 131u >> 7);  // touched: no page faults in the timing
    for (int n : a.threads) {
      const size_t share = (bytes / size_t(n)) & ~size_t(511);
      for (bool prefetch : {false, true}) {
        double best = 1e30;
        for (int r = 0; r < a.reps; ++r) {
          best = std::min(best, run_threads(n, [&](int t) {
            const uint8_t* mine = buf + size_t(t) * share;
            sink = sink + (prefetch ? read_lines<true>(mine, share) : read_lines<false>(mine, share));
          }));
        }
        const std::string method = std::string(prefetch ? "prefetch" : "plain") + (huge ? ", huge pages" : "");
        rows.push_back({{"bench", "wall_read"}, {"threads", n}, {"bytes", share * size_t(n)}, {"method", method},
                        {"gb_per_s", double(share * size_t(n)) / best / 1e9}});
      }
    }
    std::free(buf);
  }
#else
  std::fprintf(stderr, "bench_walls: built without AVX-512: no read probe\n");
#endif
#if defined(__AVX512VNNI__)
  const int64_t iters = 20'000'000;  // 16 x 128 x 2e7 = 41 G ops per thread: ~30 ms at 1.4 TOP/s
  for (int n : a.threads) {
    double best = 1e30;
    for (int r = 0; r < a.reps; ++r) {
      best = std::min(best, run_threads(n, [&](int) { dot_chains(iters); }));
    }
    const double ops = double(iters) * 16 * 128 * n;
    rows.push_back({{"bench", "wall_int8"}, {"threads", n}, {"ops", ops}, {"top_per_s", ops / best / 1e12}});
  }
#else
  std::fprintf(stderr, "bench_walls: built without AVX-512 VNNI: no int8 probe\n");
#endif
  (void)sink;
  for (const auto& r : rows) std::printf("%s\n", r.dump().c_str());
  if (!a.json_only) {
    std::printf("\n| probe | threads | value |\n| --- | ---: | ---: |\n");
    for (const auto& r : rows) {
      if (r["bench"] == "wall_read") {
        std::printf("| read %lld MiB, %s | %d | %.1f GB/s |\n", (long long)(r["bytes"].get<uint64_t>() >> 20),
                    r["method"].get<std::string>().c_str(), r["threads"].get<int>(), r["gb_per_s"].get<double>());
      } else {
        std::printf("| vpdpbusd int8 | %d | %.2f TOP/s |\n", r["threads"].get<int>(), r["top_per_s"].get<double>());
      }
    }
  }
  return 0;
}
