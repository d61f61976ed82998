// Matmul throughput on a large matrix (hidden: run with `test_cpu "[.bench]"`).
// Prints GFLOP/s of the tile kernels per weight type, for decode (1 token)
// and prefill (64 tokens), on one thread; this is how the Q8_0 path of
// default_q8_path() was chosen.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "engine/cpu/matmul.h"
#include "tests/cpu/matmul_test_util.h"

namespace larder {

using testing::multiply;

TEST_CASE("matmul throughput, 4096 x 4096", "[.bench]") {
  constexpr int K = 4096, kRows = 4096;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  struct Bytes { GgmlType type; size_t row_bytes; };
  for (const auto& [type, row_bytes] :
       {Bytes{GgmlType::kF32, K * 4}, Bytes{GgmlType::kF16, K * 2}, Bytes{GgmlType::kBF16, K * 2},
        Bytes{GgmlType::kQ8_0, K / 32 * 34}}) {
    std::vector<uint8_t> data(row_bytes * kRows);
    for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(rng() & 0x3b);  // small finite values
    WeightView w{type, {K, kRows}, data.data(), row_bytes};
    for (Q8Path path : {Q8Path::kDequantFma, Q8Path::kInt8}) {
      if (type != GgmlType::kQ8_0 && path == Q8Path::kInt8) continue;
      for (int n : {1, 4, 64}) {
        std::vector<float> x(size_t(n) * K), y(size_t(n) * kRows);
        for (float& v : x) v = u(rng);
        double best = 1e9;
        for (int rep = 0; rep < 5; ++rep) {
          const auto t0 = std::chrono::steady_clock::now();
          multiply(w, x.data(), n, y.data(), kRows, 0, kRows, path);
          best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        std::printf("%-5s %-11s tokens %2d: %7.1f GFLOP/s  %6.2f ms\n", ggml_type_name(type),
                    type == GgmlType::kQ8_0 ? (path == Q8Path::kInt8 ? "vnni" : "dequant-fma") : "",
                    n, 2.0 * n * K * kRows / best / 1e9, best * 1e3);
      }
    }
  }
}

}  // namespace larder
