// matmul_rows with quantized weights (Q4_0 .. Q5_1, Q2_K .. Q6_K) against a
// double-precision reference built from dequantize_row (itself checked against
// the Python reference decoder in tests/gguf), plus the determinism property:
// every output element is bit-identical whatever the batch size, row range or
// tile (memcmp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "engine/cpu/matmul.h"
#include "engine/cpu/matmul_kquant.h"
#include "engine/gguf/ggml_types.h"
#include "engine/cpu/thread_pool.h"
#include "engine/gguf/quant_blocks.h"
#include "tests/cpu/matmul_test_util.h"

namespace larder {

using testing::multiply;

namespace {

// Byte offsets of the f16 scale fields of each block type.
std::vector<size_t> f16_fields(GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_0: return {offsetof(BlockQ4_0, d)};
    case GgmlType::kQ4_1: return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
    case GgmlType::kQ5_0: return {offsetof(BlockQ5_0, d)};
    case GgmlType::kQ5_1: return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
    case GgmlType::kQ2_K: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case GgmlType::kQ3_K: return {offsetof(BlockQ3_K, d)};
    case GgmlType::kQ4_K: return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case GgmlType::kQ5_K: return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case GgmlType::kQ6_K: return {offsetof(BlockQ6_K, d)};
    case GgmlType::kQ8_0: return {offsetof(BlockQ8_0, d)};
    default: return {};
  }
}

// A rows x K matrix of random blocks: random quant bytes, f16 scales with
// random sign and magnitude in [2^-10, 2^-3).
std::vector<uint8_t> random_matrix(GgmlType t, int rows, int K, std::mt19937& rng) {
  const size_t bb = ggml_type_size(t);
  std::vector<uint8_t> m(ggml_row_size(t, K) * rows);
  for (auto& b : m) b = uint8_t(rng());
  const std::vector<size_t> fields = f16_fields(t);
  for (size_t off = 0; off < m.size(); off += bb) {
    for (size_t f : fields) {
      const float v = std::ldexp(1.0f + float(rng() % 1024) / 1024.0f, -10 + int(rng() % 7)) *
                      ((rng() & 1) ? -1.0f : 1.0f);
      const uint16_t h = fp32_to_fp16(v);
      std::memcpy(&m[off + f], &h, 2);
    }
  }
  return m;
}

// The K-quants that take int8 activations on kInt8 (unpacked: where the
// build has the integer kernels; AVX2 builds have them packed only).
bool is_int8_type(GgmlType t) { return kquant_int_supported(t); }

const GgmlType kTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
                           GgmlType::kQ5_1, GgmlType::kQ2_K, GgmlType::kQ3_K,
                           GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

}  // namespace

TEST_CASE("quantized matmul matches a double reference", "[cpu][matmul][quant]") {
  constexpr int K = 768, kRows = 13, kTokens = 9;  // 3 super-blocks; odd tiles
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (GgmlType t : kTypes) {
    for (Q8Path path : {Q8Path::kDequantFma, Q8Path::kInt8}) {
      // kInt8: Q4_K/Q5_K/Q6_K take int8 activations (other types ignore it).
      const bool int8 = path == Q8Path::kInt8 && is_int8_type(t);
      INFO(ggml_type_name(t) << (int8 ? " int8 activations" : " f32 activations"));
      REQUIRE(matmul_type_supported(t));
      std::vector<uint8_t> data = random_matrix(t, kRows, K, rng);
      const WeightView w{t, {K, kRows}, data.data(), ggml_row_size(t, K)};
      std::vector<float> x(size_t(kTokens) * K), y(size_t(kTokens) * kRows, -1.0f);
      for (float& v : x) v = u(rng);
      multiply(w, x.data(), kTokens, y.data(), kRows, 0, kRows, path);
      // The activations the kernel sees: x itself, or d * q of its int8 blocks.
      std::vector<double> xs(x.begin(), x.end());
      if (int8) {
        std::vector<BlockQ8K> xq(size_t(kTokens) * K / 256);
        quantize_rows_q8k(x.data(), kTokens, K, xq.data());
        for (size_t i = 0; i < xs.size(); ++i) xs[i] = double(xq[i / 256].d) * xq[i / 256].qs[i % 256];
      }
      std::vector<float> wr(K);
      int bad = 0;
      for (int r = 0; r < kRows; ++r) {
        dequantize_row(t, w.row(r), wr.data(), K);
        double wmax = 0.0;
        for (float v : wr) wmax = std::max(wmax, std::fabs(double(v)));
        for (int tk = 0; tk < kTokens; ++tk) {
          double ref = 0.0, mag = 0.0, xsum = 0.0;
          for (int k = 0; k < K; ++k) {
            const double xv = xs[size_t(tk) * K + k];
            ref += double(wr[k]) * xv;
            mag += std::fabs(double(wr[k]) * xv);
            xsum += std::fabs(xv);
          }
          // f32 path: K/16 sequential adds per lane plus a 4-level horizontal
          // sum: (K/16 + 5) * 2^-24 * sum |w x|. int8 path: exact integer
          // block sums, then a few f32 roundings per block on terms bounded by
          // sum |w x| and the mins (<= max|w| * sum |x|): 64 * 2^-24 of both.
          const double tol = int8 ? 64 * std::ldexp(1.0, -24) * (mag + wmax * xsum)
                                  : (K / 16 + 5) * std::ldexp(1.0, -24) * mag;
          const double err = std::fabs(double(y[size_t(tk) * kRows + r]) - ref);
          if (err > tol && ++bad <= 3) UNSCOPED_INFO("row " << r << " token " << tk << ": err " << err << " tol " << tol);
        }
      }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("quantized matmul with one-hot activations reproduces dequantize_row",
          "[cpu][matmul][quant]") {
  // x = identity (K tokens, token j = e_j): y[j][r] = W[r][j] exactly, so the
  // weights decoded inside the kernel equal dequantize_row's bit for bit.
  constexpr int K = 512, kRows = 6;
  std::mt19937 rng(5);
  for (GgmlType t : kTypes) {
    INFO(ggml_type_name(t));
    std::vector<uint8_t> data = random_matrix(t, kRows, K, rng);
    const WeightView w{t, {K, kRows}, data.data(), ggml_row_size(t, K)};
    std::vector<float> x(size_t(K) * K, 0.0f), y(size_t(K) * kRows);
    for (int j = 0; j < K; ++j) x[size_t(j) * K + j] = 1.0f;
    multiply(w, x.data(), K, y.data(), kRows, 0, kRows, Q8Path::kDequantFma);
    std::vector<float> wr(K);
    int bad = 0;
    for (int r = 0; r < kRows; ++r) {
      dequantize_row(t, w.row(r), wr.data(), K);
      for (int j = 0; j < K; ++j) bad += !(y[size_t(j) * kRows + r] == wr[j]);
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("quantized matmul rows do not depend on batch or row range", "[cpu][matmul][quant]") {
  constexpr int K = 512, kRows = 11, kTokens = 10;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (GgmlType t : kTypes) for (Q8Path path : {Q8Path::kDequantFma, Q8Path::kInt8}) {
    INFO(ggml_type_name(t) << (path == Q8Path::kInt8 ? " vnni" : " dequant-fma"));
    std::vector<uint8_t> data = random_matrix(t, kRows, K, rng);
    const WeightView w{t, {K, kRows}, data.data(), ggml_row_size(t, K)};
    std::vector<float> x(size_t(kTokens) * K);
    for (float& v : x) v = u(rng);
    std::vector<float> full(size_t(kTokens) * kRows);
    multiply(w, x.data(), kTokens, full.data(), kRows, 0, kRows, path);
    // Every prefix batch size, every single token, and split row ranges.
    for (int n = 1; n <= kTokens; ++n) {
      std::vector<float> y(size_t(n) * kRows);
      multiply(w, x.data(), n, y.data(), kRows, 0, kRows, path);
      CHECK(std::memcmp(y.data(), full.data(), y.size() * 4) == 0);
    }
    for (int tk = 0; tk < kTokens; ++tk) {
      std::vector<float> y(kRows);
      multiply(w, x.data() + size_t(tk) * K, 1, y.data(), kRows, 0, kRows, path);
      CHECK(std::memcmp(y.data(), full.data() + size_t(tk) * kRows, kRows * 4) == 0);
    }
    for (int split : {1, 3, 5, 7}) {
      std::vector<float> y(size_t(kTokens) * kRows);
      multiply(w, x.data(), kTokens, y.data(), kRows, 0, split, path);
      multiply(w, x.data(), kTokens, y.data(), kRows, split, kRows, path);
      CHECK(std::memcmp(y.data(), full.data(), y.size() * 4) == 0);
    }
  }
}

}  // namespace larder

namespace larder {

TEST_CASE("quantize_rows_q8k matches a scalar reference", "[cpu][matmul][quant]") {
  // d = max|x| / 127, q = lround(x / d) (half away from zero), bsums of 16;
  // inputs include exact halves (x = (n + 0.5) * d) and an all-zero block.
  constexpr int K = 1024;
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> x(K);
  for (float& v : x) v = u(rng);
  for (int i = 0; i < 256; ++i) x[256 + i] = (i == 0 ? 127.0f : float(i % 50 - 25) + 0.5f) * (i % 3 ? 1 : -1);
  for (int i = 0; i < 256; ++i) x[512 + i] = 0.0f;
  std::vector<BlockQ8K> q(K / 256);
  quantize_rows_q8k(x.data(), 1, K, q.data());
  for (int b = 0; b < K / 256; ++b) {
    INFO("block " << b);
    float amax = 0.0f;
    for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[256 * b + i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    CHECK(q[b].d == d);
    int bad = 0;
    for (int i = 0; i < 256; ++i) {
      const long want = std::clamp<long>(std::lround(x[256 * b + i] * id), -127, 127);
      bad += q[b].qs[i] != want;
    }
    CHECK(bad == 0);
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += q[b].qs[16 * j + i];
      CHECK(q[b].bsums[j] == sum);
    }
  }
}

TEST_CASE("int8 k-quant matmul: extreme quants and scales stay exact", "[cpu][matmul][quant]") {
  // Every quant bit set (Q4_K 15, Q5_K 31, Q6_K stored 63), or none, with the
  // largest scales and activations of +-127 after quantization: the integer
  // lanes are at their bounds (matmul_kquant_int.cpp) and must neither
  // saturate nor wrap. Reference: dequantize_row and a double dot product.
  constexpr int K = 512, kRows = 5, kTokens = 3;
  for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    for (uint8_t fill : {uint8_t(0xFF), uint8_t(0x00), uint8_t(0xA5)}) {
      INFO(ggml_type_name(t) << " fill " << int(fill));
      std::vector<uint8_t> data(ggml_row_size(t, K) * kRows, fill);
      const size_t bb = ggml_type_size(t);
      for (size_t off = 0; off < data.size(); off += bb) {
        if (t == GgmlType::kQ6_K) {  // scales -128 / 127 alternating, d = 2^-8
          for (int s = 0; s < 16; ++s) data[off + offsetof(BlockQ6_K, scales) + s] = s % 2 ? 0x7F : 0x80;
        } else {  // 6-bit scales and mins at 63 (all scale bits set)
          std::memset(&data[off + offsetof(BlockQ4_K, scales)], 0xFF, 12);
        }
        for (size_t f : f16_fields(t)) {
          const uint16_t h = fp32_to_fp16(f == 0 ? 1.0f / 256 : 1.0f / 512);
          std::memcpy(&data[off + f], &h, 2);
        }
      }
      const WeightView w{t, {K, kRows}, data.data(), ggml_row_size(t, K)};
      std::vector<float> x(size_t(kTokens) * K);
      for (int k = 0; k < K; ++k) {
        x[k] = 1.0f;                       // all +127
        x[K + k] = -1.0f;                  // all -127
        x[2 * K + k] = k % 2 ? 2.0f : -2.0f;
      }
      std::vector<float> y(size_t(kTokens) * kRows);
      multiply(w, x.data(), kTokens, y.data(), kRows, 0, kRows, Q8Path::kInt8);
      std::vector<BlockQ8K> xq(size_t(kTokens) * K / 256);
      quantize_rows_q8k(x.data(), kTokens, K, xq.data());
      std::vector<float> wr(K);
      for (int r = 0; r < kRows; ++r) {
        dequantize_row(t, w.row(r), wr.data(), K);
        for (int tk = 0; tk < kTokens; ++tk) {
          double ref = 0.0, mag = 0.0;
          for (int k = 0; k < K; ++k) {
            const size_t i = size_t(tk) * K + k;
            const double xv = double(xq[i / 256].d) * xq[i / 256].qs[i % 256];
            ref += double(wr[k]) * xv;
            mag += std::fabs(double(wr[k]) * xv);
          }
          const double err = std::fabs(double(y[size_t(tk) * kRows + r]) - ref);
          CHECK(err <= 64 * std::ldexp(1.0, -24) * mag);
        }
      }
    }
  }
}


TEST_CASE("parallel matmul gives the same bits for any chunk size and thread count",
          "[cpu][matmul][quant][threads]") {
  // Rows are handed out in chunks to whichever thread is free; the int8
  // activations are quantized once and shared. 301 rows: a ragged last tile
  // and last chunk. 1024 x 301 is above kMatmulParallelMinMacs for one token.
  constexpr int K = 1024, kRows = 301, kMaxTokens = 9;
  static_assert(int64_t(K) * kRows >= kMatmulParallelMinMacs);
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  ThreadPool pools[] = {ThreadPool(1), ThreadPool(2), ThreadPool(3)};
  for (GgmlType t : {GgmlType::kF32, GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K,
                     GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    std::vector<uint8_t> data = random_matrix(t, kRows, K, rng);
    if (t == GgmlType::kF32) {  // random bytes would include NaNs
      for (size_t i = 0; i < data.size(); i += 4) {
        const float f = u(rng);
        std::memcpy(&data[i], &f, 4);
      }
    }
    const WeightView w{t, {K, kRows}, data.data(), ggml_row_size(t, K)};
    std::vector<float> x(size_t(kMaxTokens) * K);
    for (float& v : x) v = u(rng);
    for (Q8Path path : {Q8Path::kDequantFma, Q8Path::kInt8}) for (int n : {1, 3, kMaxTokens}) {
      INFO(ggml_type_name(t) << (path == Q8Path::kInt8 ? " vnni" : " dequant-fma") << " tokens " << n);
      MatmulInput in;
      in.prepare(t, x.data(), n, K, path);
      std::vector<float> ref(size_t(n) * kRows);
      matmul_rows(w, in, ref.data(), kRows, 0, kRows);
      for (ThreadPool& pool : pools) for (int64_t chunk : {0, 4, 8, 12, 64, 400}) {
        INFO(pool.n_threads() << " threads, chunk " << chunk);
        for (int rep = 0; rep < 3; ++rep) {
          std::vector<float> y(size_t(n) * kRows, -1.0f);
          matmul_parallel(pool, w, in, y.data(), kRows, chunk);
          REQUIRE(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)) == 0);
        }
      }
    }
  }
}

}  // namespace larder
