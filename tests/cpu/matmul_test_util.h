// One serial matmul for the CPU tests and microbenchmarks: what the forward
// pass does per matmul, without the thread pool.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "engine/cpu/matmul.h"

namespace larder::testing {

// IEEE binary16 -> double, written out here so that references do not use
// the code under test.
inline double half_to_double(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(double(man), -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(double(man | 0x400), exp - 25);
  return sign ? -v : v;
}

// matmul_rows with x ([n][w.ne[0]]) prepared for w on path.
inline void multiply(const WeightView& w, const float* x, int n, float* y, int y_stride, int64_t row_begin,
                     int64_t row_end, Q8Path path) {
  MatmulInput in;
  in.prepare(w.type, x, n, int(w.ne[0]), path);
  matmul_rows(w, in, y, y_stride, row_begin, row_end);
}

// Seconds of the fastest of `reps` runs of fn (a shared machine only ever
// makes a run slower).
template <class Fn>
double best_seconds(Fn&& fn, int reps = 5) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// GOP/s of `ops` operations in the best of 5 runs of fn.
template <class Fn>
double best_gops(double ops, Fn&& fn) {
  return ops / best_seconds(fn) / 1e9;
}

// The throughput benches' settings: an integer from the environment.
inline int bench_env(const char* name, int def) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : def;
}

// Reads `bytes` at p once (512-bit loads where the build has AVX-512, 256-bit
// on AVX2, as
// bench_walls' read probe) and folds them into a value to keep the reads:
// the plain read the benchmarks print beside a kernel streaming the same bytes.
inline uint64_t read_fold(const void* p, size_t bytes) {
  const auto* b = static_cast<const uint8_t*>(p);
#if defined(__AVX512F__)
  __m512i a0 = _mm512_setzero_si512(), a1 = a0;
  size_t i = 0;
  for (; i + 128 <= bytes; i += 128) {
    a0 = _mm512_xor_si512(a0, _mm512_loadu_si512(b + i));
    a1 = _mm512_xor_si512(a1, _mm512_loadu_si512(b + i + 64));
  }
  alignas(64) uint64_t lanes[8];  // (not _mm512_reduce_*: GCC 12 warns inside it)
  _mm512_store_si512(lanes, _mm512_xor_si512(a0, a1));
  uint64_t folded = 0;
  for (uint64_t v : lanes) folded ^= v;
  for (; i < bytes; ++i) folded ^= b[i];
  return folded;
#elif defined(__AVX2__)
  __m256i a[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
  size_t i = 0;
  for (; i + 128 <= bytes; i += 128)
    for (int j = 0; j < 4; ++j)
      a[j] = _mm256_xor_si256(a[j], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i + 32 * size_t(j))));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                     _mm256_xor_si256(_mm256_xor_si256(a[0], a[1]), _mm256_xor_si256(a[2], a[3])));
  uint64_t folded = 0;
  for (uint64_t v : lanes) folded ^= v;
  for (; i < bytes; ++i) folded ^= b[i];
  return folded;
#else
  uint64_t folded = 0;
  for (size_t i = 0; i < bytes; ++i) folded = folded * 31 + b[i];
  return folded;
#endif
}

}  // namespace larder::testing
