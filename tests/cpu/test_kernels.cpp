// Unit tests of the CPU kernels: rmsnorm, RoPE, the matmul tiles of every
// weight type, and the thread pool.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/cpu/kernels.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "tests/cpu/matmul_test_util.h"

namespace larder {

using testing::half_to_double;
using testing::multiply;

namespace {

double bf16_to_double(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A random weight matrix of `rows` x `K` stored as `type`, with the exact
// value of every element (as double) for the reference loop.
struct TestMatrix {
  GgmlType type;
  int K = 0, rows = 0;
  std::vector<uint8_t> bytes;
  std::vector<double> value;  // [rows][K]
  WeightView view() const {
    WeightView w;
    w.type = type;
    w.ne[0] = K;
    w.ne[1] = rows;
    w.data = bytes.data();
    w.row_bytes = bytes.size() / rows;
    return w;
  }
};

TestMatrix make_matrix(GgmlType type, int K, int rows, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  TestMatrix m{type, K, rows, {}, std::vector<double>(size_t(K) * rows)};
  if (type == GgmlType::kF32) {
    m.bytes.resize(size_t(K) * rows * 4);
    for (size_t i = 0; i < m.value.size(); ++i) {
      const float f = u(rng);
      std::memcpy(&m.bytes[i * 4], &f, 4);
      m.value[i] = f;
    }
  } else if (type == GgmlType::kF16 || type == GgmlType::kBF16) {
    m.bytes.resize(size_t(K) * rows * 2);
    for (size_t i = 0; i < m.value.size(); ++i) {
      // Random bit patterns of finite values in about [-2, 2].
      uint16_t h;
      if (type == GgmlType::kF16) {
        h = uint16_t((rng() & 0x83ff) | (uint16_t(1 + rng() % 15) << 10));  // exp 1..15
        m.value[i] = half_to_double(h);
      } else {
        h = uint16_t((rng() & 0x807f) | (uint16_t(100 + rng() % 28) << 7));  // exp 100..127
        m.value[i] = bf16_to_double(h);
      }
      std::memcpy(&m.bytes[i * 2], &h, 2);
    }
  } else {  // Q8_0
    const int nb = K / 32;
    m.bytes.resize(size_t(rows) * nb * sizeof(BlockQ8_0));
    auto* blk = reinterpret_cast<BlockQ8_0*>(m.bytes.data());
    for (int r = 0; r < rows; ++r)
      for (int b = 0; b < nb; ++b) {
        BlockQ8_0& q = blk[size_t(r) * nb + b];
        q.d = uint16_t((rng() & 0x3ff) | (uint16_t(5 + rng() % 10) << 10));  // positive f16
        const double d = half_to_double(q.d);
        for (int i = 0; i < 32; ++i) {
          q.qs[i] = int8_t(int(rng() % 255) - 127);
          m.value[size_t(r) * K + b * 32 + i] = d * q.qs[i];
        }
      }
  }
  return m;
}

const char* type_label(GgmlType t) {
  switch (t) {
    case GgmlType::kF32: return "F32";
    case GgmlType::kF16: return "F16";
    case GgmlType::kBF16: return "BF16";
    default: return "Q8_0";
  }
}

}  // namespace

TEST_CASE("rmsnorm matches hand-computed values", "[cpu][kernels]") {
  // x = [1,2,3,4]: mean(x^2) = 7.5, 1/sqrt(7.5) = 0.36514837167; times weight.
  const float x[4] = {1, 2, 3, 4};
  const float w[4] = {1, 0.5f, 2, -1};
  float out[4];
  rmsnorm(out, x, w, 4, 0.0f);
  const double expect[4] = {0.3651483716701107, 0.3651483716701107, 2.1908902300206643,
                            -1.4605934866804429};
  for (int i = 0; i < 4; ++i) CHECK(out[i] == Approx(expect[i]).epsilon(1e-6));
  // eps = 1e-5 adds to the mean: 1/sqrt(7.50001) = 0.365148127...
  rmsnorm(out, x, w, 4, 1e-5f);
  CHECK(out[0] == Approx(1.0 / std::sqrt(7.50001)).epsilon(1e-6));
}

TEST_CASE("rope rotates adjacent pairs or NEOX halves", "[cpu][kernels]") {
  // Expected values: python3 math.cos/sin of theta_i = pos * base^(-2i/n_rot),
  // pair (a, b) -> (a cos - b sin, a sin + b cos).
  float c[2], s[2];
  SECTION("pos 1, base 10000, head_dim = n_rot = 4: theta = [1, 0.01]") {
    rope_tables(1, 4, 10000.0f, c, s);
    float xn[4] = {1, 2, 3, 4};
    rope_apply(xn, 1, 4, 4, /*neox=*/false, c, s);
    const double en[4] = {-1.1426396637476532, 1.922075596544176, 2.9598506679133294,
                          4.029799501669161};
    for (int i = 0; i < 4; ++i) CHECK(xn[i] == Approx(en[i]).epsilon(1e-6));
    float xx[4] = {1, 2, 3, 4};
    rope_apply(xx, 1, 4, 4, /*neox=*/true, c, s);
    const double ex[4] = {-1.9841106485555495, 1.959900667496664, 2.4623779024123156,
                          4.019799668334994};
    for (int i = 0; i < 4; ++i) CHECK(xx[i] == Approx(ex[i]).epsilon(1e-6));
  }
  SECTION("pos 3, base 100, head_dim 6, n_rot 4, two heads: dims 4, 5 stay") {
    rope_tables(3, 4, 100.0f, c, s);  // theta = [3, 0.3]
    float xn[12] = {0.5f, -1, 2, 0.25f, 7, 8, 0.5f, -1, 2, 0.25f, 7, 8};
    rope_apply(xn, 2, 6, 4, false, c, s);
    const double en[6] = {-0.35387624024035547, 1.060552500630379, 1.8367929265858771,
                          0.8298745356040806, 7, 8};
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 6; ++i) CHECK(xn[h * 6 + i] == Approx(en[i]).epsilon(1e-6).margin(1e-7));
    float xx[6] = {0.5f, -1, 2, 0.25f, 7, 8};
    rope_apply(xx, 1, 6, 4, true, c, s);
    const double ex[6] = {-0.7772362644199571, -1.0292165407909408, -1.9094249891709572,
                          -0.056686084379938106, 7, 8};
    for (int i = 0; i < 6; ++i) CHECK(xx[i] == Approx(ex[i]).epsilon(1e-6).margin(1e-7));
  }
}

TEST_CASE("swiglu and softmax", "[cpu][kernels]") {
  // silu(1) * 2 = 2 / (1 + e^-1) = 1.4621171572600098; silu(-2) * 0.5 = -0.11920292202211755.
  float g[2] = {1, -2};
  const float u[2] = {2, 0.5f};
  swiglu(g, u, 2);
  CHECK(g[0] == Approx(1.4621171572600098).epsilon(1e-6));
  CHECK(g[1] == Approx(-0.11920292202211755).epsilon(1e-6));
  // softmax([1, 2, 3]) = e^i / sum = [0.09003057, 0.24472847, 0.66524096].
  float x[3] = {1, 2, 3};
  softmax(x, 3);
  CHECK(x[0] == Approx(0.09003057317038046).epsilon(1e-6));
  CHECK(x[2] == Approx(0.6652409557748219).epsilon(1e-6));
}

TEST_CASE("swiglu over the whole float range against a double reference, whatever the position",
          "[cpu][kernels]") {
  // g from -120 to 120 (exp(-g) overflows past ~88.7: silu -> -0, and
  // underflows below ~-88: silu -> g), 0 and the float extremes; n = 1001 so
  // the vector path has a tail.
  std::vector<float> g, u;
  for (int i = 0; i < 1001; ++i) {
    g.push_back(-120.0f + 0.24f * float(i));
    u.push_back(i % 3 == 0 ? -1.5f : 0.75f);
  }
  g[500] = 0.0f;
  g[7] = -3.4e38f;
  g[8] = 3.4e38f;
  std::vector<float> out = g;
  swiglu(out.data(), u.data(), int(out.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("g " << g[i]);
    const double want = double(g[i]) / (1.0 + std::exp(-double(g[i]))) * double(u[i]);
    // exp within a few ulp, then one division and one product in f32.
    CHECK(std::fabs(double(out[i]) - want) <= 1e-6 * std::fabs(want) + 1e-30);
    // The same input alone (the scalar tail of any other n) gives the same bits.
    float one = g[i];
    swiglu(&one, &u[i], 1);
    CHECK(std::memcmp(&one, &out[i], sizeof(float)) == 0);
  }
}

TEST_CASE("matmul of every weight type against a double reference", "[cpu][matmul]") {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  struct Case { GgmlType type; int K, rows; Q8Path path; };
  std::vector<Case> cases;
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16})
    for (int K : {64, 172, 100, 16, 7}) cases.push_back({t, K, 37, Q8Path::kDequantFma});
  for (Q8Path p : {Q8Path::kDequantFma, Q8Path::kInt8})
    for (int K : {32, 64, 96, 256}) cases.push_back({GgmlType::kQ8_0, K, 37, p});

  for (const Case& c : cases) {
    INFO(type_label(c.type) << " K=" << c.K << " rows=" << c.rows
                            << (c.path == Q8Path::kInt8 ? " vnni" : ""));
    const TestMatrix m = make_matrix(c.type, c.K, c.rows, rng);
    const WeightView w = m.view();
    constexpr int kMaxTokens = 9;
    std::vector<float> x(size_t(kMaxTokens) * c.K);
    for (float& v : x) v = u(rng);

    // All tokens at once ("prefill").
    std::vector<float> y(size_t(kMaxTokens) * c.rows);
    multiply(w, x.data(), kMaxTokens, y.data(), c.rows, 0, c.rows, c.path);
    for (int t = 0; t < kMaxTokens; ++t)
      for (int r = 0; r < c.rows; ++r) {
        // Reference: plain double loop over the exact weight values.
        double ref = 0, abs_sum = 0, w_abs = 0;
        for (int k = 0; k < c.K; ++k) {
          ref += m.value[size_t(r) * c.K + k] * x[size_t(t) * c.K + k];
          abs_sum += std::fabs(m.value[size_t(r) * c.K + k] * x[size_t(t) * c.K + k]);
          w_abs += std::fabs(m.value[size_t(r) * c.K + k]);
        }
        // f32 accumulation: |err| <= K * 2^-24 * sum|w x| (bound, with slack).
        double tol = 1e-6 + c.K * 6e-8 * abs_sum;
        // VNNI rounds each activation to its block's step d_x = max|x| / 127 (|x| < 1 here):
        // |err| <= sum|w| * d_x / 2 (+ the f16 rounding of d_x, 2^-11 relative).
        if (c.type == GgmlType::kQ8_0 && c.path == Q8Path::kInt8) tol += w_abs * (1.0 / 127) * 0.51 + 1e-3 * abs_sum;
        REQUIRE(std::fabs(double(y[size_t(t) * c.rows + r]) - ref) <= tol);
      }

    // One token at a time ("decode") and odd row ranges give the same bits.
    std::vector<float> y1(c.rows);
    for (int t = 0; t < kMaxTokens; ++t) {
      multiply(w, x.data() + size_t(t) * c.K, 1, y1.data(), c.rows, 0, 5, c.path);
      multiply(w, x.data() + size_t(t) * c.K, 1, y1.data(), c.rows, 5, c.rows, c.path);
      REQUIRE(std::memcmp(y1.data(), y.data() + size_t(t) * c.rows, c.rows * sizeof(float)) == 0);
    }
    for (int n = 1; n <= kMaxTokens; ++n) {
      std::vector<float> yn(size_t(n) * c.rows);
      multiply(w, x.data(), n, yn.data(), c.rows, 0, c.rows, c.path);
      REQUIRE(std::memcmp(yn.data(), y.data(), yn.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("quantize_rows_q8_0 follows llama.cpp's reference quantizer", "[cpu][matmul]") {
  // Block of 32: x_i = (i - 10) / 4 -> max|x| = 5.25 (i = 31), d = 5.25/127,
  // q_i = round(x_i / d) = round((i - 10) * 127 / 21).
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = (i - 10) / 4.0f;
  BlockQ8_0 b;
  quantize_rows_q8_0(x.data(), 1, 32, &b);
  CHECK(half_to_double(b.d) == Approx(5.25 / 127).epsilon(1e-3));
  for (int i = 0; i < 32; ++i) CHECK(int(b.qs[i]) == int(std::lround((i - 10) * 127.0 / 21.0)));
}

TEST_CASE("quantize_rows_q8_0 matches the scalar definition on every lane", "[cpu][matmul]") {
  // d = max|x| / 127 (f32, stored as f16), q = lround(x * (1 / d)) (half
  // away from zero); blocks of random values, of exact halves (max 127 so
  // d = 1: x = n + 0.5 rounds away from zero), all zeros, one nonzero lane.
  constexpr int K = 32 * 24;
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> x(K);
  for (float& v : x) v = u(rng);
  for (int i = 0; i < 32; ++i) x[32 + i] = (i == 5 ? 127.0f : float(i % 20 - 10) + 0.5f) * (i % 3 ? 1 : -1);
  for (int i = 0; i < 32; ++i) x[64 + i] = 0.0f;
  for (int i = 0; i < 32; ++i) x[96 + i] = i == 31 ? -1e-3f : 0.0f;
  const int nb = K / 32;
  std::vector<BlockQ8_0> q(size_t(2 * nb));
  quantize_rows_q8_0(x.data(), 1, K, q.data());
  quantize_rows_q8_0(x.data(), 2, K / 2, q.data() + nb);  // the same blocks as 2 rows
  for (int b = 0; b < nb; ++b) {
    INFO("block " << b);
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    CHECK(q[b].d == fp32_to_fp16(d));
    int bad = 0;
    for (int i = 0; i < 32; ++i) bad += q[b].qs[i] != std::lround(x[32 * b + i] * id);
    CHECK(bad == 0);
    CHECK(std::memcmp(&q[b], &q[size_t(nb + b)], sizeof(BlockQ8_0)) == 0);
  }
  CHECK(q[1].qs[1] == -9);  // x = -8.5: half away from zero (half to even would give -8)
  CHECK(q[3].qs[31] == -127);
}

TEST_CASE("thread pool covers every item once", "[cpu][threads]") {
  for (int nt : {1, 2, 3}) {
    ThreadPool pool(nt);
    CHECK(pool.n_threads() == nt);
    for (int64_t n : {1, 3, 4, 37, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> bad_thread{0};  // Catch2 assertions are not thread-safe: count here
      for (int rep = 0; rep < 50; ++rep) {
        pool.parallel_for(n, 4, [&](int64_t b, int64_t e, int thread) {
          if (thread < 0 || thread >= nt) bad_thread.fetch_add(1);
          for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
      }
      CHECK(bad_thread.load() == 0);
      for (int64_t i = 0; i < n; ++i) REQUIRE(hits[i].load() == 50);
    }
  }
}

}  // namespace larder
