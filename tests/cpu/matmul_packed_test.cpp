// The repacked kernels of Q8_0, Q4_0 .. Q5_1, IQ4_NL and IQ4_XS
// (engine/cpu/matmul_packed.h; the K-quants: matmul_packed_kquant_test.cpp)
// against their arithmetic written out as a scalar loop (packed_matrices.h,
// bit for bit), against a double dot product, and for independence from
// tokens, rows, chunks and threads.
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
#include "engine/gguf/quant_blocks.h"
#include "tests/cpu/matmul_test_util.h"
#include "tests/cpu/packed_matrices.h"
#include "tests/support/skip.h"

namespace larder {

using namespace testing;  // half_to_double, the random matrices and their definitions

namespace {

// Q8_0, Q4_0 .. Q5_1, IQ4_NL or IQ4_XS weights times Q8_0 activations.
std::vector<float> packed_product(const PackedMatrix& p, const std::vector<BlockQ8_0>& x, int n_tokens,
                                  int64_t split = -1) {
  std::vector<Q8PackedAct> act(size_t(n_tokens) * (p.k() / 32));
  prepare_q8_packed_act(x.data(), n_tokens, p.k(), act.data(), p.type());
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
    const std::vector<float> want = q8_0_definition(m, x, kMaxTokens);
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
  prepare_q8_packed_act(x.data(), n, K, act.data(), GgmlType::kQ8_0);
  const std::vector<float> want = q8_0_definition(m, x, n);
  for (ThreadPool* pool : {&one, &three}) {
    for (int tokens : {1, n}) {
      std::vector<float> y(size_t(tokens) * rows);
      matmul_packed_parallel(*pool, p, act.data(), tokens, y.data(), rows);
      REQUIRE(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
    }
  }
}

namespace {

// Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL or IQ4_XS (M) against the scalar definition, bit for bit.
template <class M>
void check_q32_against_definition(M (*random)(int, int, std::mt19937&, bool), uint32_t seed) {
  std::mt19937 rng(seed);
  struct Case { int K, rows; bool extremes; };
  for (const Case c : {Case{32, 16, false}, Case{64, 37, false}, Case{96, 5, false}, Case{256, 48, false},
                       Case{2048, 33, false}, Case{128, 40, true}, Case{512, 21, true}, Case{8192, 17, false}}) {
    if (c.K % M::kBlockValues != 0) continue;  // IQ4_XS: 256-value blocks
    INFO("K=" << c.K << " rows=" << c.rows << (c.extremes ? " extremes" : ""));
    const M m = random(c.K, c.rows, rng, c.extremes);
    const PackedMatrix p = PackedMatrix::pack(m.view());
    REQUIRE(p.type() == m.view().type);
    REQUIRE(p.n_groups() == (c.rows + 15) / 16);
    // 8192-wide rows: a token block's activations (512 KiB) hold 48 tokens
    // (AVX-512) or 51 (AVX2), so 56 tokens run one block that unpacks its
    // groups and a tail of 8 or 5 tokens that does not.
    const int kMaxTokens = c.K == 8192 ? 56 : 40;
    // Activations at both ends of the int8 range too: -offset * sum(x) and
    // the int16 pairs of the AVX2 tile at their largest.
    const std::vector<BlockQ8_0> x = random_blocks(size_t(kMaxTokens) * (c.K / 32), rng, c.extremes, kActLo);
    const std::vector<float> want = q32_definition(m, x, kMaxTokens);
    for (int n : {1, 2, 3, 5, 6, 7, 14, 16, 17, 33, 40, kMaxTokens}) {
      if (n > kMaxTokens) continue;
      INFO("tokens=" << n);
      const std::vector<float> y = packed_product(p, x, n);
      REQUIRE(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
    }
    if (c.rows > 16) {  // two row ranges, split at a group boundary
      for (int n : {1, kMaxTokens}) {
        const std::vector<float> y = packed_product(p, x, n, 16);
        REQUIRE(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
      }
    }
  }
}

// Against the double dot product of the weights as dequantize_row gives
// them (d * w, exact in f32) and the activations.
template <class M>
void check_q32_against_double(M (*random)(int, int, std::mt19937&, bool), uint32_t seed) {
  std::mt19937 rng(seed);
  const int K = 512, rows = 24, n = 3, nb = K / 32;
  const M m = random(K, rows, rng, false);
  const std::vector<BlockQ8_0> x = random_blocks(size_t(n) * nb, rng, false, kActLo);
  const std::vector<float> y = packed_product(PackedMatrix::pack(m.view()), x, n);
  std::vector<float> w(size_t(K) * rows);
  dequantize_row(m.view().type, m.blocks.data(), w.data(), int64_t(K) * rows);
  for (int t = 0; t < n; ++t)
    for (int r = 0; r < rows; ++r) {
      double ref = 0, mag = 0;
      for (int b = 0; b < nb; ++b) {
        const BlockQ8_0& a = x[size_t(t) * nb + b];
        for (int i = 0; i < 32; ++i) {
          const double p = double(w[size_t(r) * K + 32 * b + i]) * half_to_double(a.d) * a.qs[i];
          ref += p;
          mag += std::fabs(p);
        }
      }
      REQUIRE(std::fabs(double(y[size_t(t) * rows + r]) - ref) <= nb * 6e-8 * mag + 1e-30);
    }
}

// matmul_packed_parallel on 1 and 3 threads, packed on 1 and 3.
template <class M>
void check_q32_parallel(M (*random)(int, int, std::mt19937&, bool), uint32_t seed) {
  std::mt19937 rng(seed);
  const int K = 1024, rows = 1000, n = 9, nb = K / 32;  // 62 groups + 8 rows
  const M m = random(K, rows, rng, false);
  const std::vector<BlockQ8_0> x = random_blocks(size_t(n) * nb, rng, false, kActLo);
  ThreadPool one(1), three(3);
  const PackedMatrix p = PackedMatrix::pack(m.view()), p3 = PackedMatrix::pack(m.view(), &three);
  REQUIRE(p.bytes() == p3.bytes());
  REQUIRE(std::memcmp(p.group(0), p3.group(0), p.bytes()) == 0);
  std::vector<Q8PackedAct> act(size_t(n) * nb);
  prepare_q8_packed_act(x.data(), n, K, act.data(), p.type());
  const std::vector<float> want = q32_definition(m, x, n);
  for (ThreadPool* pool : {&one, &three}) {
    for (int tokens : {1, n}) {
      std::vector<float> y(size_t(tokens) * rows);
      matmul_packed_parallel(*pool, p, act.data(), tokens, y.data(), rows);
      REQUIRE(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
    }
  }
}

}  // namespace

TEST_CASE("packed Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, IQ4_XS matmuls equal their scalar definitions bit for bit",
          "[cpu][matmul][q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  SECTION("Q4_0") { check_q32_against_definition(&random_q4_0, 78); }
  SECTION("Q5_0") { check_q32_against_definition(&random_q5_0, 79); }
  SECTION("Q4_1") { check_q32_against_definition(&random_q4_1, 80); }
  SECTION("Q5_1") { check_q32_against_definition(&random_q5_1, 81); }
  SECTION("IQ4_NL") { check_q32_against_definition(&random_iq4_nl, 82); }
  SECTION("IQ4_XS") { check_q32_against_definition(&random_iq4_xs, 83); }
}

TEST_CASE("packed Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, IQ4_XS matmuls are close to the double dot product",
          "[cpu][matmul][q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  SECTION("Q4_0") { check_q32_against_double(&random_q4_0, 6); }
  SECTION("Q5_0") { check_q32_against_double(&random_q5_0, 7); }
  SECTION("Q4_1") { check_q32_against_double(&random_q4_1, 8); }
  SECTION("Q5_1") { check_q32_against_double(&random_q5_1, 9); }
  SECTION("IQ4_NL") { check_q32_against_double(&random_iq4_nl, 14); }
  SECTION("IQ4_XS") { check_q32_against_double(&random_iq4_xs, 15); }
}

TEST_CASE("packed Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, IQ4_XS parallel matmuls: same bits for any thread count",
          "[cpu][matmul][q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  SECTION("Q4_0") { check_q32_parallel(&random_q4_0, 10); }
  SECTION("Q5_0") { check_q32_parallel(&random_q5_0, 11); }
  SECTION("Q4_1") { check_q32_parallel(&random_q4_1, 12); }
  SECTION("Q5_1") { check_q32_parallel(&random_q5_1, 13); }
  SECTION("IQ4_NL") { check_q32_parallel(&random_iq4_nl, 16); }
  SECTION("IQ4_XS") { check_q32_parallel(&random_iq4_xs, 17); }
}

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
      prepare_q8_packed_act(in.q8_0(), n, K, act.data(), GgmlType::kQ8_0);
      matmul_packed_rows(p, act.data(), n, y.data(), rows, 0, rows);
    });
    const double unpacked = time([&] { matmul_rows(m.view(), in, y.data(), rows, 0, rows); });
    set_packed_amx(true);
    const bool amx = packed_amx_active();
    const double with_amx = time([&] {
      prepare_q8_packed_act(in.q8_0(), n, K, act.data(), GgmlType::kQ8_0);
      matmul_packed_rows(p, act.data(), n, y.data(), rows, 0, rows);
    });
    set_packed_amx(false);
    std::printf("%4d tokens: packed %6.1f GOP/s, packed with AMX %s, unpacked %6.1f GOP/s (one thread)\n", n, packed,
                amx ? std::to_string(with_amx).substr(0, 5).c_str() : "(none here)", unpacked);
  }
}

}  // namespace larder
