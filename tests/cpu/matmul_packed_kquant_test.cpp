// The K-quant repacked kernels (Q2_K .. Q6_K; engine/cpu/matmul_packed.h)
// against their arithmetic written out as a scalar loop (packed_matrices.h,
// bit for bit), against a double dot product of the dequantized values, and
// for independence from rows, chunks and threads.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
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

// ---- Q4_K -------------------------------------------------------------------
namespace {

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
      // Decode with each number of groups in flight (the default picks one by
      // type and CPU vendor), also split mid-way.
      for (int groups : {1, 2, 3, 4}) {
        INFO("decode groups=" << groups);
        set_kquant_decode_groups(groups);
        for (int64_t split : {int64_t(-1), int64_t(16)}) {
          if (split >= c.rows) continue;  // no second range
          const std::vector<float> y = kquant_packed_product(p, x, 1, split, prepare);
          REQUIRE(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
        }
      }
      set_kquant_decode_groups(0);
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

// ---- Q3_K, Q2_K, Q5_K -------------------------------------------------------

namespace {

// A K-quant type M against the double dot product of its weights read by
// the test (weight(block, v), from ggml's layout), which must also equal
// dequantize_row's; the decode and prefill tiles on 3 threads give the same
// bits as one call.
template <class M, class Act>
void check_kquant_against_double(M (*random)(int, int, std::mt19937&, bool),
                                 void (*prepare)(const BlockQ8K*, int, int, Act*),
                                 double (*weight)(const typename decltype(M::blocks)::value_type&, int), uint32_t seed) {
  std::mt19937 rng(seed);
  const int K = 1024, rows = 40, n = 3, nb = K / 256;
  const M m = random(K, rows, rng, false);
  const std::vector<BlockQ8K> x = random_q8k(size_t(n) * nb, rng, false);
  const std::vector<float> y = kquant_packed_product(PackedMatrix::pack(m.view()), x, n, -1, prepare);
  ThreadPool three(3);
  const PackedMatrix p3 = PackedMatrix::pack(m.view(), &three);
  std::vector<Act> act(size_t(n) * nb);
  prepare(x.data(), n, K, act.data());
  for (int tokens : {1, n}) {
    std::vector<float> y3(size_t(tokens) * rows);
    matmul_packed_parallel(three, p3, act.data(), tokens, y3.data(), rows);
    REQUIRE(std::memcmp(y.data(), y3.data(), y3.size() * sizeof(float)) == 0);
  }
  std::vector<float> wf(size_t(K) * rows);
  dequantize_row(m.view().type, m.blocks.data(), wf.data(), int64_t(K) * rows);
  for (int t = 0; t < n; ++t)
    for (int r = 0; r < rows; ++r) {
      double ref = 0, mag = 0;
      for (int s = 0; s < nb; ++s) {
        const auto& w = m.blocks[size_t(r) * nb + s];
        const BlockQ8K& a = x[size_t(t) * nb + s];
        for (int v = 0; v < 256; ++v) {
          // dequantize_row rounds the exact products' difference once.
          const double wv = weight(w, v);
          REQUIRE(float(wv) == wf[size_t(r) * K + 256 * s + v]);
          const double p = wv * double(a.d) * a.qs[v];
          ref += p;
          mag += std::fabs(p);
        }
      }
      // Per super-block: the int32 sums rounded to f32, the scale products
      // and one or two fmas.
      REQUIRE(std::fabs(double(y[size_t(t) * rows + r]) - ref) <= 1e-6 * mag + 1e-30);
    }
}

double q3k_weight(const BlockQ3_K& w, int v) {
  int sc[16];
  q3k_sc(w, sc);
  return half_to_double(w.d) * sc[v / 16] * q3k_w(w, v);
}
double q2k_weight(const BlockQ2_K& w, int v) {
  const int sc = w.scales[v / 16] & 15, mn = w.scales[v / 16] >> 4;
  return half_to_double(w.d) * sc * q2k_q(w, v) - half_to_double(w.dmin) * mn;
}
double q5k_weight(const BlockQ5_K& w, int v) {
  int sc, mn;
  q4k_sc_m(w.scales, v / 32, &sc, &mn);
  return half_to_double(w.d) * sc * q5k_q(w, v) - half_to_double(w.dmin) * mn;
}

}  // namespace

TEST_CASE("packed Q3_K matmul equals its scalar definition bit for bit", "[cpu][matmul][q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  check_against_definition(GgmlType::kQ3_K, 4, 62, &random_q3k, &q3k_definition, &prepare_q3k_packed_act);
}

TEST_CASE("packed Q2_K matmul equals its scalar definition bit for bit", "[cpu][matmul][q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  check_against_definition(GgmlType::kQ2_K, 4, 63, &random_q2k, &q2k_definition, &prepare_q2k_packed_act);
}

TEST_CASE("packed Q5_K matmul equals its scalar definition bit for bit", "[cpu][matmul][q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  check_against_definition(GgmlType::kQ5_K, 6, 65, &random_q5k, &q5k_definition, &prepare_q4k_packed_act);
}

TEST_CASE("packed Q3_K, Q2_K, Q5_K matmuls are close to the double dot product of dequantized values",
          "[cpu][matmul][q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  SECTION("Q3_K") { check_kquant_against_double(&random_q3k, &prepare_q3k_packed_act, &q3k_weight, 9); }
  SECTION("Q2_K") { check_kquant_against_double(&random_q2k, &prepare_q2k_packed_act, &q2k_weight, 10); }
  SECTION("Q5_K") { check_kquant_against_double(&random_q5k, &prepare_q4k_packed_act, &q5k_weight, 11); }
}

}  // namespace larder
