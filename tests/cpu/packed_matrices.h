// Random Q8_0, Q4_0 .. Q5_1, IQ4_NL, IQ4_XS and Q2_K .. Q6_K matrices and the packed kernels' contracts
// (engine/cpu/matmul_packed.h) written out as scalar loops, for the packed
// kernels' tests (matmul_packed_test.cpp, matmul_packed_fused_test.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "engine/gguf/quant_blocks.h"
#include "engine/model/model.h"
#include "tests/cpu/matmul_test_util.h"

namespace larder::testing {

// A matrix of `rows` rows of K values in blocks of kValues (32: Q8_0, Q4_0 ..
// Q5_1, IQ4_NL; 256: the K-quants, IQ4_XS), blocks [rows][K / kValues].
template <class Block, GgmlType kType, int kValues>
struct BlockMatrix {
  static constexpr int kBlockValues = kValues;
  int K = 0, rows = 0;
  std::vector<Block> blocks;
  WeightView view() const {
    WeightView w;
    w.type = kType;
    w.ne[0] = K;
    w.ne[1] = rows;
    w.data = reinterpret_cast<const uint8_t*>(blocks.data());
    w.row_bytes = size_t(K / kValues) * sizeof(Block);
    return w;
  }
};

// y[t][r] for every token t of x ([n_tokens][K / kValues] activation blocks)
// and row r of m: acc = step(w, a, acc) over the row's blocks w and the
// token's blocks a in block order, from acc = 0 (every packed contract is a
// sequence of per-block f32 steps).
template <class M, class Act, class Step>
std::vector<float> blockwise_product(const M& m, const std::vector<Act>& x, int n_tokens, Step step) {
  const int nb = m.K / M::kBlockValues;
  std::vector<float> y(size_t(n_tokens) * m.rows);
  for (int t = 0; t < n_tokens; ++t)
    for (int r = 0; r < m.rows; ++r) {
      float acc = 0.0f;
      for (int b = 0; b < nb; ++b) acc = step(m.blocks[size_t(r) * nb + b], x[size_t(t) * nb + b], acc);
      y[size_t(t) * m.rows + r] = acc;
    }
  return y;
}

// ---- Q8_0 -------------------------------------------------------------------

using Q8Matrix = BlockMatrix<BlockQ8_0, GgmlType::kQ8_0, 32>;

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
  return blockwise_product(m, x, n_tokens, [](const BlockQ8_0& w, const BlockQ8_0& a, float acc) {
    int32_t isum = 0;
    for (int i = 0; i < 32; ++i) isum += int32_t(w.qs[i]) * int32_t(a.qs[i]);
    const float scale = float(half_to_double(w.d)) * float(half_to_double(a.d));
    return std::fma(float(isum), scale, acc);
  });
}

// ---- Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, IQ4_XS ---------------------------------

// A matrix of 32-value Q4_0, Q5_0, Q4_1, Q5_1 or IQ4_NL blocks.
template <class Block, GgmlType kType>
using Q32Matrix = BlockMatrix<Block, kType, 32>;
using Q40Matrix = Q32Matrix<BlockQ4_0, GgmlType::kQ4_0>;
using Q50Matrix = Q32Matrix<BlockQ5_0, GgmlType::kQ5_0>;
using Q41Matrix = Q32Matrix<BlockQ4_1, GgmlType::kQ4_1>;
using Q51Matrix = Q32Matrix<BlockQ5_1, GgmlType::kQ5_1>;
using IQ4NLMatrix = Q32Matrix<BlockIQ4_NL, GgmlType::kIQ4_NL>;
// IQ4_XS: 256-value blocks, whose 32-value sub-blocks the kernels take as blocks.
using IQ4XSMatrix = BlockMatrix<BlockIQ4_XS, GgmlType::kIQ4_XS, 256>;

// Random quants (or, with extremes, blocks of all-zero or all-one bits: the
// smallest or largest w) and f16 scales of either sign.
template <class M>
M random_q32(int K, int rows, std::mt19937& rng, bool extremes) {
  M m{K, rows, decltype(M::blocks)(size_t(rows) * (K / M::kBlockValues))};
  for (auto& b : m.blocks) {
    b.d = uint16_t((rng() & 0x83ff) | (uint16_t(8 + rng() % 10) << 10));
    if constexpr (requires { b.m; }) b.m = uint16_t((rng() & 0x83ff) | (uint16_t(8 + rng() % 10) << 10));
    const uint8_t fill = (rng() & 1) ? 0xFF : 0x00;
    for (uint8_t& q : b.qs) q = extremes ? fill : uint8_t(rng());
    if constexpr (requires { b.qh; })
      for (uint8_t& q : b.qh) q = extremes ? fill : uint8_t(rng());
    if constexpr (requires { b.scales_l; }) {  // IQ4_XS: 6-bit scales, 0..63 (ls - 32: -32..31)
      for (uint8_t& q : b.scales_l) q = extremes ? fill : uint8_t(rng());
      b.scales_h = extremes ? uint16_t(fill * 0x101) : uint16_t(rng());
    }
  }
  return m;
}
inline Q40Matrix random_q4_0(int K, int rows, std::mt19937& rng, bool extremes) {
  return random_q32<Q40Matrix>(K, rows, rng, extremes);
}
inline Q50Matrix random_q5_0(int K, int rows, std::mt19937& rng, bool extremes) {
  return random_q32<Q50Matrix>(K, rows, rng, extremes);
}
inline Q41Matrix random_q4_1(int K, int rows, std::mt19937& rng, bool extremes) {
  return random_q32<Q41Matrix>(K, rows, rng, extremes);
}
inline Q51Matrix random_q5_1(int K, int rows, std::mt19937& rng, bool extremes) {
  return random_q32<Q51Matrix>(K, rows, rng, extremes);
}
inline IQ4NLMatrix random_iq4_nl(int K, int rows, std::mt19937& rng, bool extremes) {
  return random_q32<IQ4NLMatrix>(K, rows, rng, extremes);
}
inline IQ4XSMatrix random_iq4_xs(int K, int rows, std::mt19937& rng, bool extremes) {
  return random_q32<IQ4XSMatrix>(K, rows, rng, extremes);
}

// Value i of a block as ggml's dequantize_row_q4_0 / _q5_0 read it: values
// 0..15 in the low nibbles, 16..31 in the high ones; Q5_0's fifth bit of
// value i is bit i of qh (little-endian). w = q - 8 (Q4_0), q - 16 (Q5_0).
inline int q32_w(const BlockQ4_0& b, int i) {
  return (i < 16 ? (b.qs[i] & 0xF) : (b.qs[i - 16] >> 4)) - 8;
}
inline int q32_w(const BlockQ5_0& b, int i) {
  const int low = i < 16 ? (b.qs[i] & 0xF) : (b.qs[i - 16] >> 4);
  return (low | (((b.qh[i / 8] >> (i % 8)) & 1) << 4)) - 16;
}
// Q4_1, Q5_1: q itself (w = d q + m), laid out as Q4_0's and Q5_0's.
inline int q32_w(const BlockQ4_1& b, int i) { return i < 16 ? (b.qs[i] & 0xF) : (b.qs[i - 16] >> 4); }
inline int q32_w(const BlockQ5_1& b, int i) {
  const int low = i < 16 ? (b.qs[i] & 0xF) : (b.qs[i - 16] >> 4);
  return low | (((b.qh[i / 8] >> (i % 8)) & 1) << 4);
}
// IQ4_NL: the index, laid out as Q4_0's, into ggml's kvalues_iq4nl (written
// out here, not taken from quant_blocks.h).
constexpr int kIQ4Table[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
inline int iq4_w(const uint8_t* qs, int i) { return kIQ4Table[i < 16 ? (qs[i] & 0xF) : (qs[i - 16] >> 4)]; }
inline int q32_w(const BlockIQ4_NL& b, int i) { return iq4_w(b.qs, i); }

// The packed kernel's Q4_0 / Q5_0 contract as scalar code: Q8_0's, with
// w = q - 8 or q - 16; Q4_1 / Q5_1 add fma(m, d_x * sum(q_x)) per block.
template <class M>
std::vector<float> q32_definition(const M& m, const std::vector<BlockQ8_0>& x, int n_tokens) {
  return blockwise_product(m, x, n_tokens, [](const auto& w, const BlockQ8_0& a, float acc) {
    int32_t isum = 0, xsum = 0;
    for (int i = 0; i < 32; ++i) {
      isum += q32_w(w, i) * int32_t(a.qs[i]);
      xsum += a.qs[i];
    }
    const float scale = float(half_to_double(w.d)) * float(half_to_double(a.d));
    acc = std::fma(float(isum), scale, acc);
    if constexpr (requires { w.m; })  // s = d_x * sum, exact
      acc = std::fma(float(half_to_double(w.m)), float(half_to_double(a.d)) * float(xsum), acc);
    return acc;
  });
}

// The packed IQ4_XS contract as scalar code: IQ4_NL's per 32-value
// sub-block ib, with the scale d * (ls - 32), ls from ggml's
// dequantize_row_iq4_xs (low 4 bits in scales_l, high 2 in scales_h).
inline std::vector<float> q32_definition(const IQ4XSMatrix& m, const std::vector<BlockQ8_0>& x, int n_tokens) {
  const int nb = m.K / 32;
  std::vector<float> y(size_t(n_tokens) * m.rows);
  for (int t = 0; t < n_tokens; ++t)
    for (int r = 0; r < m.rows; ++r) {
      float acc = 0.0f;
      for (int b = 0; b < nb; ++b) {
        const BlockIQ4_XS& w = m.blocks[size_t(r) * (nb / 8) + b / 8];
        const BlockQ8_0& a = x[size_t(t) * nb + b];
        const int ib = b % 8;
        const int ls = ((w.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((w.scales_h >> (2 * ib)) & 3) << 4);
        int32_t isum = 0;
        for (int i = 0; i < 32; ++i) isum += iq4_w(w.qs + 16 * ib, i) * int32_t(a.qs[i]);
        const float dl = float(half_to_double(w.d)) * float(ls - 32);  // exact
        acc = std::fma(float(isum), dl * float(half_to_double(a.d)), acc);
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
using KQuantMatrix = BlockMatrix<Block, kType, 256>;
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

// The Q4_K contract of matmul_packed.h as scalar code, for any block with
// Q4_K's scales and mins (Q4_K, Q5_K): value(block, v) gives q.
template <class M, class Block>
std::vector<float> min_kquant_definition(const M& m, const std::vector<BlockQ8K>& x, int n_tokens,
                                         int (*value)(const Block&, int)) {
  return blockwise_product(m, x, n_tokens, [value](const Block& w, const BlockQ8K& a, float acc) {
    int32_t S = 0, Mn = 0;
    for (int i = 0; i < 8; ++i) {
      int sc, mn;
      q4k_sc_m(w.scales, i, &sc, &mn);
      int32_t isum = 0, xs = 0;
      for (int j = 0; j < 32; ++j) {
        isum += value(w, 32 * i + j) * a.qs[32 * i + j];
        xs += a.qs[32 * i + j];
      }
      S += sc * isum;
      Mn += mn * xs;
    }
    acc = std::fma(float(S), float(half_to_double(w.d)) * a.d, acc);
    return std::fma(-float(Mn), float(half_to_double(w.dmin)) * a.d, acc);
  });
}
inline std::vector<float> q4k_definition(const Q4KMatrix& m, const std::vector<BlockQ8K>& x, int n_tokens) {
  return min_kquant_definition(m, x, n_tokens, &q4k_q);
}

// ---- Q5_K -------------------------------------------------------------------

// Value v of a Q5_K super-block, 0..31, as ggml's dequantize_row_q5_K reads
// it: Q4_K's nibble plus 16 if bit 2j (values 64j..64j+31) or 2j + 1 (values
// 64j+32..64j+63) of qh[v % 32] is set.
inline int q5k_q(const BlockQ5_K& b, int v) {
  const int j = v / 64, l = v % 32;
  const bool second = v % 64 >= 32;
  const int low = second ? b.qs[32 * j + l] >> 4 : b.qs[32 * j + l] & 0xF;
  return low + (((b.qh[l] >> (2 * j + (second ? 1 : 0))) & 1) ? 16 : 0);
}

using Q5KMatrix = KQuantMatrix<BlockQ5_K, GgmlType::kQ5_K>;

inline Q5KMatrix random_q5k(int K, int rows, std::mt19937& rng, bool extremes) {
  Q5KMatrix m{K, rows, std::vector<BlockQ5_K>(size_t(rows) * (K / 256))};
  for (BlockQ5_K& b : m.blocks) {
    b.d = uint16_t((rng() & 0x3ff) | (uint16_t(6 + rng() % 8) << 10));
    b.dmin = uint16_t((rng() & 0x3ff) | (uint16_t(6 + rng() % 8) << 10));
    // Extremes: q = 31, scales and mins of 63.
    for (uint8_t& x : b.scales) x = extremes ? 0xFF : uint8_t(rng());
    for (uint8_t& x : b.qs) x = extremes ? 0xFF : uint8_t(rng());
    for (uint8_t& x : b.qh) x = extremes ? 0xFF : uint8_t(rng());
  }
  return m;
}

// The Q5_K contract of matmul_packed.h (Q4_K's, q in 0..31) as scalar code.
inline std::vector<float> q5k_definition(const Q5KMatrix& m, const std::vector<BlockQ8K>& x, int n_tokens) {
  return min_kquant_definition(m, x, n_tokens, &q5k_q);
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
  return blockwise_product(m, x, n_tokens, [](const BlockQ6_K& w, const BlockQ8K& a, float acc) {
    int32_t S = 0;
    for (int i = 0; i < 16; ++i) {
      int32_t isum = 0;
      for (int j = 0; j < 16; ++j) isum += (q6k_q(w, 16 * i + j) - 32) * a.qs[16 * i + j];
      S += int32_t(w.scales[i]) * isum;
    }
    return std::fma(float(S), float(half_to_double(w.d)) * a.d, acc);
  });
}

// ---- Q3_K -------------------------------------------------------------------

// The 16 scales of a Q3_K super-block (6 bits each, minus 32), written out as
// ggml's dequantize_row_q3_K unpacks its 12 bytes: 4 little-endian words,
// low nibbles from words 0-1, the top 2 bits from word 2.
inline void q3k_sc(const BlockQ3_K& b, int out[16]) {
  uint32_t aux[4];
  std::memcpy(aux, b.scales, 12);
  const uint32_t km1 = 0x03030303u, km2 = 0x0f0f0f0fu, tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & km2) | (((tmp >> 4) & km1) << 4);
  aux[3] = ((aux[1] >> 4) & km2) | (((tmp >> 6) & km1) << 4);
  aux[0] = (aux[0] & km2) | (((tmp >> 0) & km1) << 4);
  aux[1] = (aux[1] & km2) | (((tmp >> 2) & km1) << 4);
  int8_t sc[16];
  std::memcpy(sc, aux, 16);
  for (int i = 0; i < 16; ++i) out[i] = sc[i] - 32;
}
// Value v of a Q3_K super-block as ggml reads it: w = low 2 bits - (high
// bit set ? 0 : 4), in -4..3.
inline int q3k_w(const BlockQ3_K& b, int v) {
  const int n = v / 128, g = (v % 128) / 32, l = v % 32;
  const int low = (b.qs[32 * n + l] >> (2 * g)) & 3;
  return low - (((b.hmask[l] >> (4 * n + g)) & 1) ? 0 : 4);
}

using Q3KMatrix = KQuantMatrix<BlockQ3_K, GgmlType::kQ3_K>;

inline Q3KMatrix random_q3k(int K, int rows, std::mt19937& rng, bool extremes) {
  Q3KMatrix m{K, rows, std::vector<BlockQ3_K>(size_t(rows) * (K / 256))};
  for (BlockQ3_K& b : m.blocks) {
    b.d = uint16_t((rng() & 0x83ff) | (uint16_t(6 + rng() % 8) << 10));
    // Extremes: w = -4 everywhere, scales of -32 (all bits clear).
    for (uint8_t& x : b.qs) x = extremes ? 0 : uint8_t(rng());
    for (uint8_t& x : b.hmask) x = extremes ? 0 : uint8_t(rng());
    for (uint8_t& x : b.scales) x = extremes ? 0 : uint8_t(rng());
  }
  return m;
}

// The Q3_K contract of matmul_packed.h as scalar code, with q = w + 4.
inline std::vector<float> q3k_definition(const Q3KMatrix& m, const std::vector<BlockQ8K>& x, int n_tokens) {
  return blockwise_product(m, x, n_tokens, [](const BlockQ3_K& w, const BlockQ8K& a, float acc) {
    int sc[16];
    q3k_sc(w, sc);
    int32_t S = 0;
    for (int i = 0; i < 16; ++i) {
      int32_t isum = 0, xs = 0;
      for (int j = 0; j < 16; ++j) {
        isum += (q3k_w(w, 16 * i + j) + 4) * a.qs[16 * i + j];
        xs += a.qs[16 * i + j];
      }
      S += sc[i] * (isum - 4 * xs);
    }
    return std::fma(float(S), float(half_to_double(w.d)) * a.d, acc);
  });
}

// ---- Q2_K -------------------------------------------------------------------

// Value v of a Q2_K super-block as ggml's dequantize_row_q2_K reads it: q in
// 0..3 from qs (runs of 32 per half of 128, bits 2g), scale and min of
// sub-block v / 16 in the low and high nibbles of scales[v / 16];
// w = d * sc * q - dmin * m.
inline int q2k_q(const BlockQ2_K& b, int v) {
  const int n = v / 128, g = (v % 128) / 32, l = v % 32;
  return (b.qs[32 * n + l] >> (2 * g)) & 3;
}

using Q2KMatrix = KQuantMatrix<BlockQ2_K, GgmlType::kQ2_K>;

inline Q2KMatrix random_q2k(int K, int rows, std::mt19937& rng, bool extremes) {
  Q2KMatrix m{K, rows, std::vector<BlockQ2_K>(size_t(rows) * (K / 256))};
  for (BlockQ2_K& b : m.blocks) {
    b.d = uint16_t((rng() & 0x83ff) | (uint16_t(6 + rng() % 8) << 10));
    b.dmin = uint16_t((rng() & 0x83ff) | (uint16_t(6 + rng() % 8) << 10));
    // Extremes: q = 3, scales and mins of 15.
    for (uint8_t& x : b.qs) x = extremes ? 0xFF : uint8_t(rng());
    for (uint8_t& x : b.scales) x = extremes ? 0xFF : uint8_t(rng());
  }
  return m;
}

// The Q2_K contract of matmul_packed.h as scalar code.
inline std::vector<float> q2k_definition(const Q2KMatrix& m, const std::vector<BlockQ8K>& x, int n_tokens) {
  return blockwise_product(m, x, n_tokens, [](const BlockQ2_K& w, const BlockQ8K& a, float acc) {
    int32_t S = 0, Mn = 0;
    for (int i = 0; i < 16; ++i) {
      int32_t isum = 0, xs = 0;
      for (int j = 0; j < 16; ++j) {
        isum += q2k_q(w, 16 * i + j) * a.qs[16 * i + j];
        xs += a.qs[16 * i + j];
      }
      S += (w.scales[i] & 15) * isum;
      Mn += (w.scales[i] >> 4) * -xs;
    }
    acc = std::fma(float(S), float(half_to_double(w.d)) * a.d, acc);
    return std::fma(float(Mn), float(half_to_double(w.dmin)) * a.d, acc);
  });
}

}  // namespace larder::testing
