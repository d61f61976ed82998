// The repacked Q8_0 and Q4_K kernels (engine/cpu/matmul_packed.h) against their
// arithmetic written out as a scalar loop (bit for bit), against a double
// dot product, and for independence from tokens, rows, chunks and threads.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/matmul_kquant.h"
#include "engine/cpu/matmul_packed.h"
#include "engine/cpu/thread_pool.h"
#include "tests/cpu/matmul_test_util.h"
#include "engine/gguf/quant_blocks.h"
#include "tests/support/skip.h"

namespace larder {

using testing::half_to_double;

namespace {

struct Q8Matrix {
  int K = 0, rows = 0;
  std::vector<BlockQ8_0> blocks;  // [rows][K / 32]
  WeightView view() const {
    WeightView w;
    w.type = GgmlType::kQ8_0;
    w.ne[0] = K;
    w.ne[1] = rows;
    w.data = reinterpret_cast<const uint8_t*>(blocks.data());
    w.row_bytes = size_t(K / 32) * sizeof(BlockQ8_0);
    return w;
  }
};

// Random blocks: quants in [lo, 127] (or only the extremes), positive or
// negative f16 scales of moderate size. Weights take every int8 (a GGUF file
// may hold -128); activations lo = -127, as quantize_rows_q8_0 makes them
// (d = max|x| / 127), which the AVX2 tiles rely on (matmul_packed_avx2.cpp).
constexpr int kWeightLo = -128, kActLo = -127;
std::vector<BlockQ8_0> random_blocks(size_t n, std::mt19937& rng, bool extremes, int lo = kWeightLo) {
  std::vector<BlockQ8_0> v(n);
  for (BlockQ8_0& b : v) {
    b.d = uint16_t((rng() & 0x83ff) | (uint16_t(8 + rng() % 10) << 10));
    for (int8_t& q : b.qs) {
      q = extremes ? int8_t((rng() & 1) ? 127 : lo) : int8_t(lo + int(rng() % unsigned(128 - lo)));
    }
  }
  return v;
}

// The packed kernel's contract, as plain scalar code: per block an exact
// integer dot product, then one fma with d_w * d_x, in block order.
std::vector<float> scalar_definition(const Q8Matrix& m, const std::vector<BlockQ8_0>& x, int n_tokens) {
  const int nb = m.K / 32;
  std::vector<float> y(size_t(n_tokens) * m.rows);
  for (int t = 0; t < n_tokens; ++t)
    for (int r = 0; r < m.rows; ++r) {
      float acc = 0.0f;
      for (int b = 0; b < nb; ++b) {
        const BlockQ8_0& w = m.blocks[size_t(r) * nb + b];
        const BlockQ8_0& a = x[size_t(t) * nb + b];
        int32_t isum = 0;
        for (int i = 0; i < 32; ++i) isum += int32_t(w.qs[i]) * int32_t(a.qs[i]);
        const float scale = float(half_to_double(w.d)) * float(half_to_double(a.d));
        acc = std::fma(float(isum), scale, acc);
      }
      y[size_t(t) * m.rows + r] = acc;
    }
  return y;
}

std::vector<float> packed_product(const PackedMatrix& p, const std::vector<BlockQ8_0>& x, int n_tokens,
                                  int64_t split = -1) {
  std::vector<Q8PackedAct> act(size_t(n_tokens) * (p.k() / 32));
  prepare_q8_packed_act(x.data(), n_tokens, p.k(), act.data());
  std::vector<float> y(size_t(n_tokens) * p.rows(), -1.0f);
  if (split < 0) {
    matmul_packed_rows(p, act.data(), n_tokens, y.data(), int(p.rows()), 0, p.rows());
  } else {
    matmul_packed_rows(p, act.data(), n_tokens, y.data(), int(p.rows()), 0, split);
    matmul_packed_rows(p, act.data(), n_tokens, y.data(), int(p.rows()), split, p.rows());
  }
  return y;
}

}  // namespace

TEST_CASE("packed Q8_0 matmul equals its scalar definition bit for bit", "[cpu][matmul][q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  std::mt19937 rng(77);
  struct Case { int K, rows; bool extremes; };
  for (const Case c : {Case{32, 16, false}, Case{64, 37, false}, Case{96, 5, false}, Case{256, 48, false},
                       Case{2048, 33, false}, Case{128, 40, true}}) {
    INFO("K=" << c.K << " rows=" << c.rows << (c.extremes ? " extremes" : ""));
    Q8Matrix m{c.K, c.rows, random_blocks(size_t(c.rows) * (c.K / 32), rng, c.extremes)};
    const PackedMatrix p = PackedMatrix::pack(m.view());
    REQUIRE(p.rows() == c.rows);
    REQUIRE(p.n_groups() == (c.rows + 15) / 16);
    constexpr int kMaxTokens = 40;  // 6-token VNNI tiles, 16-token AMX tiles and their remainders
    const std::vector<BlockQ8_0> x = random_blocks(size_t(kMaxTokens) * (c.K / 32), rng, c.extremes, kActLo);
    const std::vector<float> want = scalar_definition(m, x, kMaxTokens);
    // With AMX where this machine has it, and without.
    for (bool amx : {true, false}) {
      set_packed_amx(amx);
      INFO((packed_amx_active() ? "AMX" : "AVX-512 VNNI or AVX2") << " tiles");
      for (int n : {1, 2, 5, 6, 7, 14, 16, 17, 33, kMaxTokens}) {
        INFO("tokens=" << n);
        const std::vector<float> y = packed_product(p, x, n);
        REQUIRE(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
      }
      if (c.rows > 16) {  // two row ranges, split at a group boundary
        const std::vector<float> y = packed_product(p, x, kMaxTokens, 16);
        REQUIRE(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
      }
    }
    set_packed_amx(false);
  }
}

TEST_CASE("packed Q8_0 matmul is close to the double dot product", "[cpu][matmul][q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  std::mt19937 rng(5);
  const int K = 512, rows = 24, n = 3, nb = K / 32;
  Q8Matrix m{K, rows, random_blocks(size_t(rows) * nb, rng, false)};
  const std::vector<BlockQ8_0> x = random_blocks(size_t(n) * nb, rng, false, kActLo);
  const std::vector<float> y = packed_product(PackedMatrix::pack(m.view()), x, n);
  for (int t = 0; t < n; ++t)
    for (int r = 0; r < rows; ++r) {
      double ref = 0, mag = 0;
      for (int b = 0; b < nb; ++b) {
        const BlockQ8_0& w = m.blocks[size_t(r) * nb + b];
        const BlockQ8_0& a = x[size_t(t) * nb + b];
        for (int i = 0; i < 32; ++i) {
          const double p = half_to_double(w.d) * w.qs[i] * half_to_double(a.d) * a.qs[i];
          ref += p;
          mag += std::fabs(p);
        }
      }
      // nb fmas, each rounding to 2^-24 of a partial sum <= mag.
      REQUIRE(std::fabs(double(y[size_t(t) * rows + r]) - ref) <= nb * 6e-8 * mag + 1e-30);
    }
}

TEST_CASE("packed Q8_0 parallel matmul: same bits for any thread count", "[cpu][matmul][q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  std::mt19937 rng(9);
  const int K = 1024, rows = 1000, n = 9, nb = K / 32;  // 1000 = 62 groups + 8 rows
  Q8Matrix m{K, rows, random_blocks(size_t(rows) * nb, rng, false)};
  const std::vector<BlockQ8_0> x = random_blocks(size_t(n) * nb, rng, false, kActLo);
  ThreadPool one(1), three(3);
  const PackedMatrix p = PackedMatrix::pack(m.view()), p3 = PackedMatrix::pack(m.view(), &three);
  REQUIRE(p.bytes() == p3.bytes());
  REQUIRE(std::memcmp(p.group(0), p3.group(0), p.bytes()) == 0);
  std::vector<Q8PackedAct> act(size_t(n) * nb);
  prepare_q8_packed_act(x.data(), n, K, act.data());
  const std::vector<float> want = scalar_definition(m, x, n);
  for (ThreadPool* pool : {&one, &three}) {
    for (int tokens : {1, n}) {
      std::vector<float> y(size_t(tokens) * rows);
      matmul_packed_parallel(*pool, p, act.data(), tokens, y.data(), rows);
      REQUIRE(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
    }
  }
}

namespace {

// The throughput benches' settings: an integer from the environment.
int bench_env(const char* name, int def) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : def;
}

// GOP/s of `ops` operations in the best of 5 runs of fn.
template <class Fn>
double best_gops(double ops, Fn&& fn) {
  return ops / testing::best_seconds(fn) / 1e9;
}

}  // namespace

// Throughput of the packed kernel against the unpacked VNNI tiles on the
// same matrix (printed, not asserted): LARDER_BENCH_K / _ROWS / _TOKENS.
TEST_CASE("packed Q8_0 matmul throughput", "[.bench-q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  const int K = bench_env("LARDER_BENCH_K", 2048), rows = bench_env("LARDER_BENCH_ROWS", 8192);
  std::mt19937 rng(1);
  Q8Matrix m{K, rows, random_blocks(size_t(rows) * (K / 32), rng, false)};
  const auto t_pack = std::chrono::steady_clock::now();
  const PackedMatrix p = PackedMatrix::pack(m.view());
  std::printf("pack %d x %d: %.1f ms\n", rows, K,
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_pack).count());
  for (int n : {1, 4, 64, bench_env("LARDER_BENCH_TOKENS", 512)}) {
    std::vector<float> x(size_t(n) * K);
    std::uniform_real_distribution<float> u(-1, 1);
    for (float& v : x) v = u(rng);
    std::vector<float> y(size_t(n) * rows);
    auto time = [&](auto&& fn) { return best_gops(2.0 * n * double(rows) * K, fn); };
    MatmulInput in;
    in.prepare(GgmlType::kQ8_0, x.data(), n, K, Q8Path::kInt8);
    std::vector<Q8PackedAct> act(size_t(n) * (K / 32));
    const double packed = time([&] {
      prepare_q8_packed_act(in.q8_0(), n, K, act.data());
      matmul_packed_rows(p, act.data(), n, y.data(), rows, 0, rows);
    });
    const double unpacked = time([&] { matmul_rows(m.view(), in, y.data(), rows, 0, rows); });
    set_packed_amx(true);
    const bool amx = packed_amx_active();
    const double with_amx = time([&] {
      prepare_q8_packed_act(in.q8_0(), n, K, act.data());
      matmul_packed_rows(p, act.data(), n, y.data(), rows, 0, rows);
    });
    set_packed_amx(false);
    std::printf("%4d tokens: packed %6.1f GOP/s, packed with AMX %s, unpacked %6.1f GOP/s (one thread)\n", n, packed,
                amx ? std::to_string(with_amx).substr(0, 5).c_str() : "(none here)", unpacked);
  }
}

// ---- Q4_K -------------------------------------------------------------------
namespace {

// The 6-bit scale and min of sub-block i, written out from ggml's
// get_scale_min_k4 (the GGUF k-quants layout) for the reference.
void q4k_sc_m(const uint8_t* s, int i, int* sc, int* m) {
  if (i < 4) {
    *sc = s[i] & 63;
    *m = s[i + 4] & 63;
  } else {
    *sc = (s[i + 4] & 0xF) | ((s[i - 4] >> 6) << 4);
    *m = (s[i + 4] >> 4) | ((s[i] >> 6) << 4);
  }
}
// Value v of a super-block: 64-value chunks, low nibbles then high nibbles.
int q4k_q(const BlockQ4_K& b, int v) {
  const int j = v / 64, l = v % 64;
  return l < 32 ? (b.qs[32 * j + l] & 0xF) : (b.qs[32 * j + l - 32] >> 4);
}

// A K-quant matrix of `rows` rows of K values in blocks of 256.
template <class Block, GgmlType kType>
struct KQuantMatrix {
  int K = 0, rows = 0;
  std::vector<Block> blocks;
  WeightView view() const {
    WeightView w;
    w.type = kType;
    w.ne[0] = K;
    w.ne[1] = rows;
    w.data = reinterpret_cast<const uint8_t*>(blocks.data());
    w.row_bytes = size_t(K / 256) * sizeof(Block);
    return w;
  }
};
using Q4KMatrix = KQuantMatrix<BlockQ4_K, GgmlType::kQ4_K>;

Q4KMatrix random_q4k(int K, int rows, std::mt19937& rng, bool extremes) {
  Q4KMatrix m{K, rows, std::vector<BlockQ4_K>(size_t(rows) * (K / 256))};
  for (BlockQ4_K& b : m.blocks) {
    b.d = uint16_t((rng() & 0x3ff) | (uint16_t(6 + rng() % 8) << 10));
    b.dmin = uint16_t((rng() & 0x3ff) | (uint16_t(6 + rng() % 8) << 10));
    for (uint8_t& x : b.scales) x = extremes ? 0xFF : uint8_t(rng());
    for (uint8_t& x : b.qs) x = extremes ? 0xFF : uint8_t(rng());
  }
  return m;
}

std::vector<BlockQ8K> random_q8k(size_t n, std::mt19937& rng, bool extremes) {
  std::vector<BlockQ8K> v(n);
  for (BlockQ8K& b : v) {
    b.d = std::ldexp(float(1 + rng() % 1000), -int(12 + rng() % 6));
    for (int8_t& q : b.qs) q = extremes ? int8_t(-128) : int8_t(int(rng() % 256) - 128);
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += b.qs[16 * j + i];
      b.bsums[j] = int16_t(sum);
    }
  }
  return v;
}

// The Q4_K contract of matmul_packed.h as scalar code.
std::vector<float> q4k_definition(const Q4KMatrix& m, const std::vector<BlockQ8K>& x, int n_tokens) {
  const int nb = m.K / 256;
  std::vector<float> y(size_t(n_tokens) * m.rows);
  for (int t = 0; t < n_tokens; ++t)
    for (int r = 0; r < m.rows; ++r) {
      float acc = 0.0f;
      for (int s = 0; s < nb; ++s) {
        const BlockQ4_K& w = m.blocks[size_t(r) * nb + s];
        const BlockQ8K& a = x[size_t(t) * nb + s];
        int32_t S = 0, Mn = 0;
        for (int i = 0; i < 8; ++i) {
          int sc, mn;
          q4k_sc_m(w.scales, i, &sc, &mn);
          int32_t isum = 0, xs = 0;
          for (int j = 0; j < 32; ++j) {
            isum += q4k_q(w, 32 * i + j) * a.qs[32 * i + j];
            xs += a.qs[32 * i + j];
          }
          S += sc * isum;
          Mn += mn * xs;
        }
        acc = std::fma(float(S), float(half_to_double(w.d)) * a.d, acc);
        acc = std::fma(-float(Mn), float(half_to_double(w.dmin)) * a.d, acc);
      }
      y[size_t(t) * m.rows + r] = acc;
    }
  return y;
}

// The packed product of a K-quant matrix with n_tokens Q8_K rows, in two
// row ranges split at `split` (none when negative).
template <class Act>
std::vector<float> kquant_packed_product(const PackedMatrix& p, const std::vector<BlockQ8K>& x, int n_tokens,
                                         int64_t split, void (*prepare)(const BlockQ8K*, int, int, Act*)) {
  std::vector<Act> act(size_t(n_tokens) * (p.k() / 256));
  prepare(x.data(), n_tokens, p.k(), act.data());
  std::vector<float> y(size_t(n_tokens) * p.rows(), -1.0f);
  const int64_t cut = split < 0 ? p.rows() : split;
  matmul_packed_rows(p, act.data(), n_tokens, y.data(), int(p.rows()), 0, cut);
  matmul_packed_rows(p, act.data(), n_tokens, y.data(), int(p.rows()), cut, p.rows());
  return y;
}

std::vector<float> q4k_packed_product(const PackedMatrix& p, const std::vector<BlockQ8K>& x, int n_tokens,
                                      int64_t split = -1) {
  return kquant_packed_product(p, x, n_tokens, split, &prepare_q4k_packed_act);
}

// Bit for bit against `definition` for several shapes, token counts (past
// two tiles of kT) and a split row range; `random` makes the matrices.
template <class Matrix, class Act>
void check_against_definition(GgmlType type, int kT, uint32_t seed,
                              Matrix (*random)(int, int, std::mt19937&, bool),
                              std::vector<float> (*definition)(const Matrix&, const std::vector<BlockQ8K>&, int),
                              void (*prepare)(const BlockQ8K*, int, int, Act*)) {
  std::mt19937 rng(seed);
  struct Case { int K, rows; bool extremes; };
  // Rows: one group, groups with a part-filled last one (odd and even group
  // counts), a lone part group, whole groups; decode takes up to 4 groups at
  // once: 7 groups (4 + 3, part-filled) and 9 (4 + 4 + 1).
  for (const Case c : {Case{256, 16, false}, Case{512, 37, false}, Case{512, 30, false}, Case{2048, 5, false},
                       Case{768, 48, true}, Case{256, 100, false}, Case{512, 144, false}}) {
    INFO("K=" << c.K << " rows=" << c.rows << (c.extremes ? " extremes" : ""));
    const Matrix m = random(c.K, c.rows, rng, c.extremes);
    const PackedMatrix p = PackedMatrix::pack(m.view());
    REQUIRE(p.type() == type);
    // Past two vector tiles of kT, and 16-token AMX tiles with remainders;
    // K = 2048 also past the AMX path's token block (1 MiB of activations:
    // 448 tokens) and the vector tiles' (512 KiB).
    const int max_tokens = c.K == 2048 ? 470 : 40;
    const std::vector<BlockQ8K> x = random_q8k(size_t(max_tokens) * (c.K / 256), rng, c.extremes);
    const std::vector<float> want = definition(m, x, max_tokens);
    for (bool amx : {true, false}) {
      set_kquant_amx(amx);
      INFO((kquant_amx_active() ? "AMX" : "vector") << " prefill tiles");
      for (int n : {1, 2, kT - 1, kT, kT + 1, 2 * kT + 1, 16, 17, 32 + kT + 1, max_tokens}) {
        INFO("tokens=" << n);
        const std::vector<float> y = kquant_packed_product(p, x, n, -1, prepare);
        REQUIRE(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
      }
      if (c.rows > 16) {
        const std::vector<float> y = kquant_packed_product(p, x, max_tokens, 16, prepare);
        REQUIRE(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
      }
    }
    set_kquant_amx(true);
  }
}

}  // namespace

TEST_CASE("packed Q4_K matmul equals its scalar definition bit for bit", "[cpu][matmul][q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  check_against_definition(GgmlType::kQ4_K, 6, 41, &random_q4k, &q4k_definition, &prepare_q4k_packed_act);
}

TEST_CASE("packed Q4_K matmul is close to the double dot product of dequantized values",
          "[cpu][matmul][q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  std::mt19937 rng(3);
  const int K = 1024, rows = 20, n = 3, nb = K / 256;
  const Q4KMatrix m = random_q4k(K, rows, rng, false);
  const std::vector<BlockQ8K> x = random_q8k(size_t(n) * nb, rng, false);
  const std::vector<float> y = q4k_packed_product(PackedMatrix::pack(m.view()), x, n);
  for (int t = 0; t < n; ++t)
    for (int r = 0; r < rows; ++r) {
      double ref = 0, mag = 0;
      for (int s = 0; s < nb; ++s) {
        const BlockQ4_K& w = m.blocks[size_t(r) * nb + s];
        const BlockQ8K& a = x[size_t(t) * nb + s];
        for (int v = 0; v < 256; ++v) {
          int sc, mn;
          q4k_sc_m(w.scales, v / 32, &sc, &mn);
          const double wv = half_to_double(w.d) * sc * q4k_q(w, v) - half_to_double(w.dmin) * mn;
          const double p = wv * double(a.d) * a.qs[v];
          ref += p;
          mag += std::fabs(p);
        }
      }
      // Per super-block: S and Mn rounded to f32 (|S| < 2^25), the scale
      // products and two fmas, each a few 2^-24 of the partial magnitudes.
      REQUIRE(std::fabs(double(y[size_t(t) * rows + r]) - ref) <= 1e-6 * mag + 1e-30);
    }
}

TEST_CASE("packed Q4_K parallel matmul: same bits for any thread count", "[cpu][matmul][q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  std::mt19937 rng(13);
  const int K = 512, rows = 600, n = 39;  // 2 AMX tiles + 7 (where AMX runs)
  const Q4KMatrix m = random_q4k(K, rows, rng, false);
  const std::vector<BlockQ8K> x = random_q8k(size_t(n) * (K / 256), rng, false);
  ThreadPool one(1), three(3);
  const PackedMatrix p = PackedMatrix::pack(m.view()), p3 = PackedMatrix::pack(m.view(), &three);
  REQUIRE(std::memcmp(p.group(0), p3.group(0), p.bytes()) == 0);
  std::vector<Q4KPackedAct> act(size_t(n) * (K / 256));
  prepare_q4k_packed_act(x.data(), n, K, act.data());
  const std::vector<float> want = q4k_definition(m, x, n);
  for (ThreadPool* pool : {&one, &three}) {
    for (int tokens : {1, n}) {
      std::vector<float> y(size_t(tokens) * rows);
      matmul_packed_parallel(*pool, p, act.data(), tokens, y.data(), rows);
      REQUIRE(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("packed Q4_K matmul throughput", "[.bench-q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  const int K = bench_env("LARDER_BENCH_K", 2048), rows = bench_env("LARDER_BENCH_ROWS", 8192);
  std::mt19937 rng(1);
  const Q4KMatrix m = random_q4k(K, rows, rng, false);
  const PackedMatrix p = PackedMatrix::pack(m.view());
  for (int n : {1, 4, 64, bench_env("LARDER_BENCH_TOKENS", 512)}) {
    std::vector<float> x(size_t(n) * K);
    std::uniform_real_distribution<float> u(-1, 1);
    for (float& v : x) v = u(rng);
    std::vector<float> y(size_t(n) * rows);
    auto time = [&](auto&& fn) { return best_gops(2.0 * n * double(rows) * K, fn); };
    MatmulInput in;
    auto packed = [&] {
      return time([&] {
        in.prepare(GgmlType::kQ4_K, x.data(), n, K, Q8Path::kInt8, /*packed=*/true);
        matmul_packed_rows(p, in.packed(), n, y.data(), rows, 0, rows);
      });
    };
    set_kquant_amx(true);
    const bool amx = kquant_amx_active();
    const double with_amx = packed();
    set_kquant_amx(false);
    const double vector = packed();
    set_kquant_amx(true);
    const double unpacked = time([&] {
      in.prepare(GgmlType::kQ4_K, x.data(), n, K, Q8Path::kInt8);
      matmul_rows(m.view(), in, y.data(), rows, 0, rows);
    });
    std::printf("Q4_K %4d tokens: packed %6.1f GOP/s (AMX: %s), unpacked %6.1f GOP/s (one thread)\n", n, vector,
                amx ? std::to_string(with_amx).substr(0, 6).c_str() : "(none here)", unpacked);
  }
}

// ---- Q6_K -------------------------------------------------------------------
namespace {

// Value v of a Q6_K super-block as ggml's dequantize_row_q6_K reads it,
// written out for the reference: q in 0..63 (the stored value is q - 32).
int q6k_q(const BlockQ6_K& b, int v) {
  const int n = v / 128, g = (v % 128) / 32, l = v % 32;
  const int low = (g == 0)   ? (b.ql[64 * n + l] & 0xF)
                  : (g == 1) ? (b.ql[64 * n + l + 32] & 0xF)
                  : (g == 2) ? (b.ql[64 * n + l] >> 4)
                             : (b.ql[64 * n + l + 32] >> 4);
  return low | (((b.qh[32 * n + l] >> (2 * g)) & 3) << 4);
}

using Q6KMatrix = KQuantMatrix<BlockQ6_K, GgmlType::kQ6_K>;

Q6KMatrix random_q6k(int K, int rows, std::mt19937& rng, bool extremes) {
  Q6KMatrix m{K, rows, std::vector<BlockQ6_K>(size_t(rows) * (K / 256))};
  for (BlockQ6_K& b : m.blocks) {
    b.d = uint16_t((rng() & 0x3ff) | (uint16_t(6 + rng() % 8) << 10));
    for (uint8_t& x : b.ql) x = extremes ? 0 : uint8_t(rng());
    for (uint8_t& x : b.qh) x = extremes ? 0 : uint8_t(rng());
    for (int8_t& x : b.scales) x = extremes ? int8_t(-128) : int8_t(int(rng() % 256) - 128);
  }
  return m;
}

// The Q6_K contract of matmul_packed.h as scalar code.
std::vector<float> q6k_definition(const Q6KMatrix& m, const std::vector<BlockQ8K>& x, int n_tokens) {
  const int nb = m.K / 256;
  std::vector<float> y(size_t(n_tokens) * m.rows);
  for (int t = 0; t < n_tokens; ++t)
    for (int r = 0; r < m.rows; ++r) {
      float acc = 0.0f;
      for (int s = 0; s < nb; ++s) {
        const BlockQ6_K& w = m.blocks[size_t(r) * nb + s];
        const BlockQ8K& a = x[size_t(t) * nb + s];
        int32_t S = 0;
        for (int i = 0; i < 16; ++i) {
          int32_t isum = 0;
          for (int j = 0; j < 16; ++j) isum += (q6k_q(w, 16 * i + j) - 32) * a.qs[16 * i + j];
          S += int32_t(w.scales[i]) * isum;
        }
        acc = std::fma(float(S), float(half_to_double(w.d)) * a.d, acc);
      }
      y[size_t(t) * m.rows + r] = acc;
    }
  return y;
}

std::vector<float> q6k_packed_product(const PackedMatrix& p, const std::vector<BlockQ8K>& x, int n_tokens) {
  return kquant_packed_product(p, x, n_tokens, -1, &prepare_q6k_packed_act);
}

}  // namespace

TEST_CASE("packed Q6_K matmul equals its scalar definition bit for bit", "[cpu][matmul][q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  check_against_definition(GgmlType::kQ6_K, 4, 61, &random_q6k, &q6k_definition, &prepare_q6k_packed_act);
}

TEST_CASE("packed Q6_K matmul is close to the double dot product of dequantized values",
          "[cpu][matmul][q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  std::mt19937 rng(8);
  const int K = 1024, rows = 20, n = 3, nb = K / 256;
  const Q6KMatrix m = random_q6k(K, rows, rng, false);
  const std::vector<BlockQ8K> x = random_q8k(size_t(n) * nb, rng, false);
  const std::vector<float> y = q6k_packed_product(PackedMatrix::pack(m.view()), x, n);
  ThreadPool three(3);
  const PackedMatrix p3 = PackedMatrix::pack(m.view(), &three);
  std::vector<Q6KPackedAct> act(size_t(n) * nb);
  prepare_q6k_packed_act(x.data(), n, K, act.data());
  std::vector<float> y3(size_t(n) * rows);
  matmul_packed_parallel(three, p3, act.data(), n, y3.data(), rows);
  REQUIRE(std::memcmp(y.data(), y3.data(), y.size() * sizeof(float)) == 0);
  for (int t = 0; t < n; ++t)
    for (int r = 0; r < rows; ++r) {
      double ref = 0, mag = 0;
      for (int s = 0; s < nb; ++s) {
        const BlockQ6_K& w = m.blocks[size_t(r) * nb + s];
        const BlockQ8K& a = x[size_t(t) * nb + s];
        for (int v = 0; v < 256; ++v) {
          const double wv = half_to_double(w.d) * w.scales[v / 16] * (q6k_q(w, v) - 32);
          const double p = wv * double(a.d) * a.qs[v];
          ref += p;
          mag += std::fabs(p);
        }
      }
      REQUIRE(std::fabs(double(y[size_t(t) * rows + r]) - ref) <= 1e-6 * mag + 1e-30);
    }
}

TEST_CASE("fused packed products: each equals its scalar definition, for any thread count",
          "[cpu][matmul][q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  std::mt19937 rng(21);
  const int K = 512, n = 9;
  // Part-filled last groups (1000, 37, 20 rows), Q8_0 beside Q4_K and Q6_K
  // (as a Q4_K_M layer's q, k, v), so that chunks span two matrices.
  const Q8Matrix q8a{K, 1000, random_blocks(size_t(1000) * (K / 32), rng, false)};
  const Q8Matrix q8b{K, 37, random_blocks(size_t(37) * (K / 32), rng, false)};
  const Q4KMatrix q4 = random_q4k(K, 200, rng, false);
  const Q6KMatrix q6 = random_q6k(K, 20, rng, false);
  const std::vector<BlockQ8_0> x8 = random_blocks(size_t(n) * (K / 32), rng, false, kActLo);
  const std::vector<BlockQ8K> xk = random_q8k(size_t(n) * (K / 256), rng, false);
  std::vector<Q8PackedAct> a8(x8.size());
  std::vector<Q4KPackedAct> a4(xk.size());
  std::vector<Q6KPackedAct> a6(xk.size());
  prepare_q8_packed_act(x8.data(), n, K, a8.data());
  prepare_q4k_packed_act(xk.data(), n, K, a4.data());
  prepare_q6k_packed_act(xk.data(), n, K, a6.data());
  struct Part {
    PackedMatrix p;
    const void* act;
    std::vector<float> want;
  };
  std::vector<Part> parts;
  parts.push_back({PackedMatrix::pack(q8a.view()), a8.data(), scalar_definition(q8a, x8, n)});
  parts.push_back({PackedMatrix::pack(q4.view()), a4.data(), q4k_definition(q4, xk, n)});
  parts.push_back({PackedMatrix::pack(q8b.view()), a8.data(), scalar_definition(q8b, x8, n)});
  parts.push_back({PackedMatrix::pack(q6.view()), a6.data(), q6k_definition(q6, xk, n)});
  ThreadPool one(1), two(2), three(3);
  // 4 products, and 10 (more than one job takes: the rest go in a second).
  for (const size_t n_products : {size_t(4), size_t(10)}) {
    for (ThreadPool* pool : {&one, &two, &three}) {
      for (int tokens : {1, n}) {
        INFO(n_products << " products, " << pool->n_threads() << " threads, " << tokens << " tokens");
        std::vector<std::vector<float>> ys(n_products);
        std::vector<PackedProduct> products;
        for (size_t i = 0; i < n_products; ++i) {
          const Part& part = parts[i % parts.size()];
          ys[i].assign(size_t(tokens) * part.p.rows(), -1.0f);
          products.push_back({&part.p, part.act, ys[i].data(), int(part.p.rows())});
        }
        matmul_packed_parallel(*pool, products, tokens);
        for (size_t i = 0; i < n_products; ++i) {
          INFO("product " << i);
          REQUIRE(std::memcmp(ys[i].data(), parts[i % parts.size()].want.data(), ys[i].size() * sizeof(float)) == 0);
        }
      }
    }
  }
}

}  // namespace larder
