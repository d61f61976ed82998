// Random Q8_0, Q4_0, Q4_K and Q6_K matrices and the packed kernels' contracts
// (engine/cpu/matmul_packed.h) written out as scalar loops, for the packed
// kernels' tests (matmul_packed_test.cpp, matmul_packed_fused_test.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/gguf/quant_blocks.h"
#include "engine/model/model.h"
#include "tests/cpu/matmul_test_util.h"

namespace larder::testing {

// ---- Q8_0 -------------------------------------------------------------------

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
inline std::vector<BlockQ8_0> random_blocks(size_t n, std::mt19937& rng, bool extremes, int lo = kWeightLo) {
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
inline std::vector<float> q8_0_definition(const Q8Matrix& m, const std::vector<BlockQ8_0>& x, int n_tokens) {
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

// ---- Q4_0 -------------------------------------------------------------------

struct Q40Matrix {
  int K = 0, rows = 0;
  std::vector<BlockQ4_0> blocks;  // [rows][K / 32]
  WeightView view() const {
    WeightView w;
    w.type = GgmlType::kQ4_0;
    w.ne[0] = K;
    w.ne[1] = rows;
    w.data = reinterpret_cast<const uint8_t*>(blocks.data());
    w.row_bytes = size_t(K / 32) * sizeof(BlockQ4_0);
    return w;
  }
};

// Random quants (or, with extremes, blocks of all 0 or all 15: w = -8 or 7)
// and f16 scales of either sign.
inline Q40Matrix random_q4_0(int K, int rows, std::mt19937& rng, bool extremes) {
  Q40Matrix m{K, rows, std::vector<BlockQ4_0>(size_t(rows) * (K / 32))};
  for (BlockQ4_0& b : m.blocks) {
    b.d = uint16_t((rng() & 0x83ff) | (uint16_t(8 + rng() % 10) << 10));
    const uint8_t fill = (rng() & 1) ? 0xFF : 0x00;
    for (uint8_t& q : b.qs) q = extremes ? fill : uint8_t(rng());
  }
  return m;
}

// Value i of a Q4_0 block as ggml's dequantize_row_q4_0 reads it: q in 0..15,
// w = q - 8; values 0..15 in the low nibbles, 16..31 in the high ones.
inline int q4_0_w(const BlockQ4_0& b, int i) {
  return (i < 16 ? (b.qs[i] & 0xF) : (b.qs[i - 16] >> 4)) - 8;
}

// The packed kernel's Q4_0 contract as scalar code: Q8_0's, with w = q - 8.
inline std::vector<float> q4_0_definition(const Q40Matrix& m, const std::vector<BlockQ8_0>& x, int n_tokens) {
  const int nb = m.K / 32;
  std::vector<float> y(size_t(n_tokens) * m.rows);
  for (int t = 0; t < n_tokens; ++t)
    for (int r = 0; r < m.rows; ++r) {
      float acc = 0.0f;
      for (int b = 0; b < nb; ++b) {
        const BlockQ4_0& w = m.blocks[size_t(r) * nb + b];
        const BlockQ8_0& a = x[size_t(t) * nb + b];
        int32_t isum = 0;
        for (int i = 0; i < 32; ++i) isum += q4_0_w(w, i) * int32_t(a.qs[i]);
        const float scale = float(half_to_double(w.d)) * float(half_to_double(a.d));
        acc = std::fma(float(isum), scale, acc);
      }
      y[size_t(t) * m.rows + r] = acc;
    }
  return y;
}

// ---- Q4_K -------------------------------------------------------------------

// The 6-bit scale and min of sub-block i, written out from ggml's
// get_scale_min_k4 (the GGUF k-quants layout) for the reference.
inline void q4k_sc_m(const uint8_t* s, int i, int* sc, int* m) {
  if (i < 4) {
    *sc = s[i] & 63;
    *m = s[i + 4] & 63;
  } else {
    *sc = (s[i + 4] & 0xF) | ((s[i - 4] >> 6) << 4);
    *m = (s[i + 4] >> 4) | ((s[i] >> 6) << 4);
  }
}
// Value v of a super-block: 64-value chunks, low nibbles then high nibbles.
inline int q4k_q(const BlockQ4_K& b, int v) {
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

inline Q4KMatrix random_q4k(int K, int rows, std::mt19937& rng, bool extremes) {
  Q4KMatrix m{K, rows, std::vector<BlockQ4_K>(size_t(rows) * (K / 256))};
  for (BlockQ4_K& b : m.blocks) {
    b.d = uint16_t((rng() & 0x3ff) | (uint16_t(6 + rng() % 8) << 10));
    b.dmin = uint16_t((rng() & 0x3ff) | (uint16_t(6 + rng() % 8) << 10));
    for (uint8_t& x : b.scales) x = extremes ? 0xFF : uint8_t(rng());
    for (uint8_t& x : b.qs) x = extremes ? 0xFF : uint8_t(rng());
  }
  return m;
}

inline std::vector<BlockQ8K> random_q8k(size_t n, std::mt19937& rng, bool extremes) {
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
inline std::vector<float> q4k_definition(const Q4KMatrix& m, const std::vector<BlockQ8K>& x, int n_tokens) {
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

// ---- Q6_K -------------------------------------------------------------------

// Value v of a Q6_K super-block as ggml's dequantize_row_q6_K reads it,
// written out for the reference: q in 0..63 (the stored value is q - 32).
inline int q6k_q(const BlockQ6_K& b, int v) {
  const int n = v / 128, g = (v % 128) / 32, l = v % 32;
  const int low = (g == 0)   ? (b.ql[64 * n + l] & 0xF)
                  : (g == 1) ? (b.ql[64 * n + l + 32] & 0xF)
                  : (g == 2) ? (b.ql[64 * n + l] >> 4)
                             : (b.ql[64 * n + l + 32] >> 4);
  return low | (((b.qh[32 * n + l] >> (2 * g)) & 3) << 4);
}

using Q6KMatrix = KQuantMatrix<BlockQ6_K, GgmlType::kQ6_K>;

inline Q6KMatrix random_q6k(int K, int rows, std::mt19937& rng, bool extremes) {
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
inline std::vector<float> q6k_definition(const Q6KMatrix& m, const std::vector<BlockQ8K>& x, int n_tokens) {
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

}  // namespace larder::testing
