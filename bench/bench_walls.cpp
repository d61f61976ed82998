// bench_walls: the two walls of CPU inference on this machine, measured with
// plain vector loops (AVX-512 where the build has it, else AVX2), for the CPU
// benchmarks to print beside their tok/s:
//   read  : GB/s (10^9 bytes/s) of streaming a buffer larger than the L3
//           (default 1 GiB) with full-width vector loads (512-bit, or 256-bit
//           on AVX2), on 1..N threads (each thread
//           reads its own contiguous share; time = the slowest thread),
//           plain and with software prefetch 2 KiB ahead, on 4 KiB pages and
//           on transparent huge pages where the kernel grants them (larder's
//           packed weights ask for them) ("method"); the fastest is the wall.
//           Decode reads every weight byte once per token, so
//           tok/s <= read GB/s / weight GB.
//   int8  : TOP/s (10^12 ops/s, a multiply and an add counted as 2 ops) of
//           the build's widest int8 multiply-add ("instruction"), in
//           independent chains, on 1..N threads:
//           `vpdpbusd` zmm (AVX-512 VNNI: 64 u8 x s8 products summed into 16
//           int32 lanes, 128 ops per instruction), or, on AVX2 without VNNI,
//           `vpmaddubsw` ymm (32 u8 x s8 products summed in pairs into 16
//           int16 lanes, 64 ops) each followed by a `vpaddw` into an int16
//           accumulator, the cheapest way AVX2 accumulates int8 products
//           (larder's K-quant tiles do it; Q8_0 also needs a `vpmaddwd` to
//           widen, so its tiles sit below this peak). Prefill of a Q8_0 /
//           K-quant model is bounded by it: about 2 x (weights) ops per
//           prompt token.
// Each figure is the best of --reps runs (the wall is what the machine can
// do; a shared machine only ever makes a run slower). Prints one JSON line
// per (probe, threads) and a markdown table.
//
// --read-only measures only the read, on huge pages (4 KiB pages where THP
// is refused): a quick probe that bench/cpu.mjs runs beside each decode run,
// since a shared machine's bandwidth moves by tens of percent within minutes.
//
// usage: bench_walls [--threads 1,2] [--mib 1024] [--reps 5] [--json-only] [--read-only]
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
  bool read_only = false;
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
#define LARDER_WALLS_READ 1
using Vec = __m512i;
inline Vec vload(const uint8_t* p) { return _mm512_load_si512(reinterpret_cast<const void*>(p)); }
inline Vec vxor(Vec a, Vec b) { return _mm512_xor_si512(a, b); }
inline Vec vzero() { return _mm512_setzero_si512(); }
#elif defined(__AVX2__)
#define LARDER_WALLS_READ 1
using Vec = __m256i;
inline Vec vload(const uint8_t* p) { return _mm256_load_si256(reinterpret_cast<const Vec*>(p)); }
inline Vec vxor(Vec a, Vec b) { return _mm256_xor_si256(a, b); }
inline Vec vzero() { return _mm256_setzero_si256(); }
#endif

#ifdef LARDER_WALLS_READ
// XORs every vector of [p, p + bytes) into 8 accumulators (one 64-byte line
// per accumulator and 512-byte step, in 1 or 2 loads); returns a value that
// depends on all of them so the loads cannot be dropped. With
// Prefetch, each 512-byte step also prefetches the lines 2 KiB ahead (as
// larder's decode tiles do): the hardware prefetcher alone may not keep
// enough lines in flight, and a decode that prefetches would otherwise
// "beat" the wall.
template <bool Prefetch>
uint64_t read_lines(const uint8_t* p, size_t bytes) {
  constexpr size_t kVec = sizeof(Vec);
  Vec a[8];
  for (auto& v : a) v = vzero();
  for (size_t i = 0; i + 512 <= bytes; i += 512) {
    if constexpr (Prefetch) {
      for (int j = 0; j < 8; ++j) _mm_prefetch(reinterpret_cast<const char*>(p + i + 2048 + 64 * size_t(j)), _MM_HINT_T0);
    }
    for (int j = 0; j < 8; ++j) {
      for (size_t v = 0; v < 64; v += kVec) a[j] = vxor(a[j], vload(p + i + 64 * size_t(j) + v));
    }
  }
  Vec x = a[0];
  for (int j = 1; j < 8; ++j) x = vxor(x, a[j]);
  alignas(64) uint64_t lanes[kVec / 8];
  std::memcpy(lanes, &x, kVec);
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
constexpr double kOpsPerInstruction = 128;  // 64 u8 x s8 multiply-adds
constexpr int kChains = 16;
constexpr const char* kInstruction = "vpdpbusd zmm";
#define LARDER_WALLS_INT8 1
#elif defined(__AVX2__)
// `iters` rounds of 7 (vpmaddubsw into a temporary, vpaddw into an int16
// accumulator) pairs, in inline assembly (see above): temporaries ymm0-6,
// accumulators ymm7-13, the operands in the two registers left (the
// clobbers leave the compiler ymm14 and ymm15). 7 chains cover vpmaddubsw's
// latency (3-5 cycles) at 2 per cycle.
void dot_chains(int64_t iters) {
  const __m256i u = _mm256_set1_epi8(3);
  const __m256i s = _mm256_set1_epi8(-2);
  __asm__ volatile(
      "vpxor %%ymm7, %%ymm7, %%ymm7\n\t"
      "vmovdqa %%ymm7, %%ymm8\n\t"
      "vmovdqa %%ymm7, %%ymm9\n\t"
      "vmovdqa %%ymm7, %%ymm10\n\t"
      "vmovdqa %%ymm7, %%ymm11\n\t"
      "vmovdqa %%ymm7, %%ymm12\n\t"
      "vmovdqa %%ymm7, %%ymm13\n\t"
      "1:\n\t"
      "vpmaddubsw %[s], %[u], %%ymm0\n\t"
      "vpmaddubsw %[s], %[u], %%ymm1\n\t"
      "vpmaddubsw %[s], %[u], %%ymm2\n\t"
      "vpmaddubsw %[s], %[u], %%ymm3\n\t"
      "vpmaddubsw %[s], %[u], %%ymm4\n\t"
      "vpmaddubsw %[s], %[u], %%ymm5\n\t"
      "vpmaddubsw %[s], %[u], %%ymm6\n\t"
      "vpaddw %%ymm0, %%ymm7, %%ymm7\n\t"
      "vpaddw %%ymm1, %%ymm8, %%ymm8\n\t"
      "vpaddw %%ymm2, %%ymm9, %%ymm9\n\t"
      "vpaddw %%ymm3, %%ymm10, %%ymm10\n\t"
      "vpaddw %%ymm4, %%ymm11, %%ymm11\n\t"
      "vpaddw %%ymm5, %%ymm12, %%ymm12\n\t"
      "vpaddw %%ymm6, %%ymm13, %%ymm13\n\t"
      "dec %[n]\n\t"
      "jnz 1b\n\t"
      : [n] "+r"(iters)
      : [u] "x"(u), [s] "x"(s)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
        "xmm12", "xmm13", "cc");
}
constexpr double kOpsPerInstruction = 64;  // 32 u8 x s8 multiply-adds
constexpr int kChains = 7;
constexpr const char* kInstruction = "vpmaddubsw ymm + vpaddw";
#define LARDER_WALLS_INT8 1
#endif

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app("bench_walls: the machine's read bandwidth and int8 multiply-add peak");
  app.add_option("--threads", a.threads, "thread counts, comma-separated")
      ->delimiter(',')
      ->check(larder::bench::kPositive);
  app.add_option("--mib", a.mib, "read buffer in MiB (size it past the L3)")->check(CLI::Range(1, 16384));
  app.add_option("--reps", a.reps, "runs per figure (the best is printed)")->check(larder::bench::kPositive);
  app.add_flag("--json-only", a.json_only, "print only the JSON lines");
  app.add_flag("--read-only", a.read_only, "only the read probe, on huge pages where the kernel grants them");
  larder::bench::parse_or_exit(app, argc, argv);

  std::vector<nlohmann::json> rows;
  volatile uint64_t sink = 0;
#ifdef LARDER_WALLS_READ
  const size_t bytes = size_t(a.mib) << 20;
  for (bool huge : {false, true}) {  // 4 KiB pages, then transparent huge pages as larder's packed weights
    if (a.read_only && !huge) continue;
    void* mem = nullptr;
    if (posix_memalign(&mem, huge ? size_t(2) << 20 : 4096, bytes) != 0) {
      std::fprintf(stderr, "bench_walls: cannot allocate %d MiB\n", a.mib);
      return 1;
    }
    auto* buf = static_cast<uint8_t*>(mem);
    // No THP here: the 4 KiB rows are the wall (with --read-only, this
    // buffer is measured on 4 KiB pages instead).
    const bool thp = huge && ::madvise(buf, bytes, MADV_HUGEPAGE) == 0;
    if (huge && !thp && !a.read_only) {
      std::free(buf);
      continue;
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
        const std::string method = std::string(prefetch ? "prefetch" : "plain") + (thp ? ", huge pages" : "");
        rows.push_back({{"bench", "wall_read"}, {"threads", n}, {"bytes", share * size_t(n)}, {"method", method},
                        {"load_bits", sizeof(Vec) * 8}, {"gb_per_s", double(share * size_t(n)) / best / 1e9}});
      }
    }
    std::free(buf);
  }
#else
  std::fprintf(stderr, "bench_walls: built without AVX-512 or AVX2: no read probe\n");
#endif
#ifdef LARDER_WALLS_INT8
  const int64_t iters = 20'000'000;  // VNNI: 16 x 128 x 2e7 = 41 G ops per thread, ~30 ms at 1.4 TOP/s
  for (int n : a.threads) {
    if (a.read_only) break;
    double best = 1e30;
    for (int r = 0; r < a.reps; ++r) {
      best = std::min(best, run_threads(n, [&](int) { dot_chains(iters); }));
    }
    const double ops = double(iters) * kChains * kOpsPerInstruction * n;
    rows.push_back({{"bench", "wall_int8"}, {"threads", n}, {"ops", ops}, {"instruction", kInstruction},
                    {"top_per_s", ops / best / 1e12}});
  }
#else
  std::fprintf(stderr, "bench_walls: built without AVX-512 VNNI or AVX2: no int8 probe\n");
#endif
  (void)sink;
  for (const auto& r : rows) std::printf("%s\n", r.dump().c_str());
  if (!a.json_only) {
    std::printf("\n| probe | threads | value |\n| --- | ---: | ---: |\n");
    for (const auto& r : rows) {
      if (r["bench"] == "wall_read") {
        std::printf("| read %lld MiB, %d-bit loads, %s | %d | %.1f GB/s |\n", (long long)(r["bytes"].get<uint64_t>() >> 20),
                    r["load_bits"].get<int>(), r["method"].get<std::string>().c_str(), r["threads"].get<int>(), r["gb_per_s"].get<double>());
      } else {
        std::printf("| int8, %s | %d | %.2f TOP/s |\n", r["instruction"].get<std::string>().c_str(),
                    r["threads"].get<int>(), r["top_per_s"].get<double>());
      }
    }
  }
  return 0;
}
