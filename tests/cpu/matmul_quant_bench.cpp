// Throughput of the quantized-weight matmul paths on a 4096 x 4096 matrix,
// one thread, next to Q8_0 (hidden: run with `test_cpu "[.bench-quant]"`).
// GB/s counts the weight bytes read once per call.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "engine/cpu/matmul.h"
#include "engine/gguf/quant_blocks.h"
#include "tests/cpu/matmul_test_util.h"

namespace larder {

using testing::multiply;

TEST_CASE("quantized matmul throughput, 4096 x 4096", "[.bench-quant]") {
  constexpr int K = 4096, kRows = 4096;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const GgmlType types[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
                            GgmlType::kQ5_1, GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K,
                            GgmlType::kQ5_K, GgmlType::kQ6_K};
  for (GgmlType type : types) {
    const size_t row_bytes = ggml_row_size(type, K);
    std::vector<uint8_t> data(row_bytes * kRows);
    for (auto& b : data) b = uint8_t(rng());
    // Small finite f16 scales everywhere a block could have one: overwrite
    // every 16-bit field with 2^-8 where the type's scale sits.
    const size_t bb = ggml_type_size(type);
    const uint16_t small = fp32_to_fp16(1.0f / 256);
    for (size_t off = 0; off < data.size(); off += bb) {
      for (size_t f : {size_t(0), size_t(2), bb - 4, bb - 2}) std::memcpy(&data[off + f], &small, 2);
    }
    WeightView w{type, {K, kRows}, data.data(), row_bytes};
    for (Q8Path path : {Q8Path::kDequantFma, Q8Path::kInt8}) {
      // kInt8: int8 activations for Q8_0 and Q4_K / Q5_K / Q6_K.
      const bool k_int = type == GgmlType::kQ4_K || type == GgmlType::kQ5_K || type == GgmlType::kQ6_K;
      if (type != GgmlType::kQ8_0 && !k_int && path == Q8Path::kInt8) continue;
      for (int n : {1, 4, 64}) {
        std::vector<float> x(size_t(n) * K), y(size_t(n) * kRows);
        for (float& v : x) v = u(rng);
        double best = 1e9;
        for (int rep = 0; rep < 5; ++rep) {
          const auto t0 = std::chrono::steady_clock::now();
          multiply(w, x.data(), n, y.data(), kRows, 0, kRows, path);
          best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        std::printf("%-5s %-11s tokens %2d: %7.1f GFLOP/s %6.1f GB/s %7.2f ms\n", ggml_type_name(type),
                    type == GgmlType::kQ8_0 || k_int ? (path == Q8Path::kInt8 ? "int8" : "dequant-fma") : "",
                    n, 2.0 * n * K * kRows / best / 1e9, double(data.size()) / best / 1e9, best * 1e3);
      }
    }
  }
}

}  // namespace larder
