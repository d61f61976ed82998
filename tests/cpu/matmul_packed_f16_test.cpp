// The repacked F16 kernels (engine/cpu/matmul_packed_f16.cpp, AVX-512 and AVX2 builds)
// against their arithmetic written out as a scalar loop (one std::fma chain
// per output in k order, bit for bit), against a double dot product, and for
// independence from tokens, rows, tiles and threads.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "engine/cpu/matmul.h"
#include "engine/cpu/matmul_packed.h"
#include "engine/cpu/thread_pool.h"
#include "tests/cpu/matmul_test_util.h"
#include "tests/support/skip.h"

namespace larder {

using testing::half_to_double;

namespace {

struct F16Matrix {
  int K = 0, rows = 0;
  std::vector<uint16_t> w;  // [rows][K]
  WeightView view() const {
    WeightView v;
    v.type = GgmlType::kF16;
    v.ne[0] = K;
    v.ne[1] = rows;
    v.data = reinterpret_cast<const uint8_t*>(w.data());
    v.row_bytes = size_t(K) * sizeof(uint16_t);
    return v;
  }
};

// Weights N(0, 1) rounded to f16 (both signs), about 1 % exact zeros.
F16Matrix random_matrix(int K, int rows, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  F16Matrix m{K, rows, std::vector<uint16_t>(size_t(K) * rows)};
  for (uint16_t& v : m.w) v = fp32_to_fp16(rng() % 97 == 0 ? 0.0f : nd(rng));
  return m;
}

std::vector<float> random_x(int n, int K, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(n) * K);
  for (float& v : x) v = nd(rng);
  return x;
}

// The contract of matmul_packed.h for F16, as plain scalar code.
std::vector<float> scalar_definition(const F16Matrix& m, const std::vector<float>& x, int n) {
  std::vector<float> y(size_t(n) * m.rows);
  for (int t = 0; t < n; ++t)
    for (int r = 0; r < m.rows; ++r) {
      float acc = 0.0f;
      for (int k = 0; k < m.K; ++k)
        acc = std::fma(fp16_to_fp32(m.w[size_t(r) * m.K + k]), x[size_t(t) * m.K + k], acc);
      y[size_t(t) * m.rows + r] = acc;
    }
  return y;
}

bool f16_packed() { return packed_type_supported(GgmlType::kF16); }

}  // namespace

TEST_CASE("packed F16 matmul equals its scalar definition bit for bit", "[cpu][matmul][f16packed]") {
  if (!f16_packed()) LARDER_SKIP("packed F16 needs an AVX-512 or AVX2 build");
  std::mt19937 rng(3);
  // Row counts: one group, a part group, many groups with a tail; K odd and
  // not a multiple of 16; token counts across the 6-token tile and the block.
  struct Shape { int K, rows; };
  // 29 rows: a group and a partly filled second half of the next (AVX2 tiles
  // take 8 rows a vector).
  for (const Shape s : {Shape{64, 16}, Shape{37, 5}, Shape{96, 29}, Shape{172, 200}, Shape{2048, 130}}) {
    INFO("K " << s.K << " rows " << s.rows);
    const F16Matrix m = random_matrix(s.K, s.rows, rng);
    const PackedMatrix p = PackedMatrix::pack(m.view());
    for (int n : {1, 2, 5, 6, 7, 13, 100}) {
      INFO(n << " tokens");
      const std::vector<float> x = random_x(n, s.K, rng);
      const std::vector<float> want = scalar_definition(m, x, n);
      std::vector<float> y(size_t(n) * s.rows, NAN);
      matmul_packed_rows(p, x.data(), n, y.data(), s.rows, 0, s.rows);
      REQUIRE(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
      // A row range of whole groups gives the same rows.
      if (s.rows > 32) {
        std::vector<float> part(size_t(n) * s.rows, NAN);
        matmul_packed_rows(p, x.data(), n, part.data(), s.rows, 16, 48);
        for (int t = 0; t < n; ++t) {
          REQUIRE(std::memcmp(part.data() + size_t(t) * s.rows + 16, want.data() + size_t(t) * s.rows + 16,
                              32 * sizeof(float)) == 0);
          for (int r = 0; r < s.rows; ++r)  // nothing outside the range is written
            if (r < 16 || r >= 48) REQUIRE(std::isnan(part[size_t(t) * s.rows + r]));
        }
      }
    }
  }
}

TEST_CASE("packed F16 matmul is close to the double dot product", "[cpu][matmul][f16packed]") {
  if (!f16_packed()) LARDER_SKIP("packed F16 needs an AVX-512 or AVX2 build");
  std::mt19937 rng(5);
  const int K = 1000, rows = 48, n = 7;
  const F16Matrix m = random_matrix(K, rows, rng);
  const std::vector<float> x = random_x(n, K, rng);
  const PackedMatrix p = PackedMatrix::pack(m.view());
  std::vector<float> y(size_t(n) * rows);
  matmul_packed_rows(p, x.data(), n, y.data(), rows, 0, rows);
  for (int t = 0; t < n; ++t)
    for (int r = 0; r < rows; ++r) {
      double d = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const double prod = half_to_double(m.w[size_t(r) * K + k]) * double(x[size_t(t) * K + k]);
        d += prod;
        mag += std::fabs(prod);
      }
      // K sequential f32 roundings: |error| <= K * 2^-24 * sum|products|.
      REQUIRE(std::fabs(double(y[size_t(t) * rows + r]) - d) <= K * 0x1p-24 * mag);
    }
}

TEST_CASE("packed F16 parallel matmul: same bits for any thread count", "[cpu][matmul][f16packed]") {
  if (!f16_packed()) LARDER_SKIP("packed F16 needs an AVX-512 or AVX2 build");
  std::mt19937 rng(11);
  const int K = 512, rows = 1000, n = 9;  // 1000 = 62 groups + 8 rows
  const F16Matrix m = random_matrix(K, rows, rng);
  const std::vector<float> x = random_x(n, K, rng);
  ThreadPool one(1), three(3);
  const PackedMatrix p = PackedMatrix::pack(m.view()), p3 = PackedMatrix::pack(m.view(), &three);
  REQUIRE(p.bytes() == p3.bytes());
  REQUIRE(std::memcmp(p.group(0), p3.group(0), p.bytes()) == 0);
  const std::vector<float> want = scalar_definition(m, x, n);
  for (ThreadPool* pool : {&one, &three}) {
    for (int tokens : {1, n}) {
      std::vector<float> y(size_t(tokens) * rows);
      matmul_packed_parallel(*pool, p, x.data(), tokens, y.data(), rows);
      REQUIRE(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
    }
  }
}

// Throughput against the row-major F16 tiles of matmul.cpp on the same
// matrix (printed, not asserted).
TEST_CASE("packed F16 matmul throughput", "[.bench-q8packed]") {
  if (!f16_packed()) LARDER_SKIP("packed F16 needs an AVX-512 or AVX2 build");
  const int K = 2048, rows = 8192;
  std::mt19937 rng(1);
  const F16Matrix m = random_matrix(K, rows, rng);
  const PackedMatrix p = PackedMatrix::pack(m.view());
  for (int n : {1, 64, 512}) {
    const std::vector<float> x = random_x(n, K, rng);
    std::vector<float> y(size_t(n) * rows);
    auto best = [&](auto&& fn) { return 2.0 * n * double(rows) * K / testing::best_seconds(fn, 3) / 1e9; };
    const double packed = best([&] { matmul_packed_rows(p, x.data(), n, y.data(), rows, 0, rows); });
    MatmulInput in;
    in.prepare(GgmlType::kF16, x.data(), n, K, default_q8_path());
    const double rowmajor = best([&] { matmul_rows(m.view(), in, y.data(), rows, 0, rows); });
    std::printf("F16 %4d tokens: packed %6.1f GFLOP/s, row-major %6.1f GFLOP/s (one thread)\n", n, packed, rowmajor);
  }
}

}  // namespace larder
