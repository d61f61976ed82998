// Q8_0 weights repacked at load for the int8 GEMM (prefill) and GEMV (decode).
//
// Layout. Rows are taken in groups of 16 (the last group padded with zero
// rows of scale 0). A group is stored as
//   quants: nb blocks x 8 chunks x 64 bytes, chunk j of block b holding, for
//           each row r of the group, bytes 4j..4j+3 of block b of row r, as
//           w + 128 (u8), at byte 4r of the chunk;
//   scales: nb x 16 f16, the rows' block scales d_w;
// padded to 64 bytes (group stride). So one 64-byte load is the operand of one
// vpdpbusd whose 16 int32 lanes are the 16 rows' partial dot products:
// nothing is reduced across lanes, and a token's 4 activation bytes are a
// broadcast (llama.cpp repacks Q4_0 the same way for AVX2 / ARM, "q4_0_8x8").
//
// Arithmetic, per output y[t][r] (the contract the tests check against a
// scalar definition with memcmp):
//   isum_b = sum_{i<32} w[r][32b+i] * q_x[t][32b+i]                 (exact int32)
//   acc    = fma(float(isum_b), d_w[r][b] * d_x[t][b], acc)  for b = 0, 1, ... nb-1
// starting from acc = 0, with d_x, q_x the activations' Q8_0 blocks
// (quantize_rows_q8_0). float(isum_b) and d_w * d_x (two f16 values) are
// exact in f32, so the only rounding is the fma's, in block order. The same
// sequence runs whatever the number of tokens, the tile, the row range or
// the thread: prefill, decode and restored pages give the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/gguf/ggml_types.h"
#include "engine/model/model.h"

namespace larder {

class ThreadPool;

// True when this build has the packed kernels (AVX-512 with VNNI).
bool q8_packed_supported();

// One token's Q8_0 block as the packed kernel reads it: the 32 quants, the
// int32 -128 * sum(qs) that turns the u8 weights' sum back into w * x, and d
// as f32. 40 bytes.
struct Q8PackedAct {
  int8_t qs[32];
  int32_t neg_c;
  float d;
};
static_assert(sizeof(Q8PackedAct) == 40);

// xq: [n_tokens][k / 32] Q8_0 blocks -> out: [n_tokens][k / 32].
void prepare_q8_packed_act(const BlockQ8_0* xq, int n_tokens, int k, Q8PackedAct* out);

class PackedQ8_0 {
 public:
  static constexpr int kGroupRows = 16;
  static constexpr size_t kChunkBytes = 64;
  static constexpr size_t kBlockQuantBytes = 8 * kChunkBytes;  // 32 values x 16 rows

  PackedQ8_0() = default;

  // Repacks a Q8_0 matrix (w.ne[0] = K, a multiple of 32; w.ne[1] rows),
  // reading it once. With a pool the groups are shared among its threads.
  // Memory: the matrix's own size (34 bytes per 32 weights), rounded up to 16
  // rows. Requires w.type == Q8_0.
  static PackedQ8_0 pack(const WeightView& w, ThreadPool* pool = nullptr);

  int64_t rows() const { return rows_; }
  int k() const { return k_; }
  int n_blocks() const { return k_ / kQ8_0BlockSize; }
  int64_t n_groups() const { return (rows_ + kGroupRows - 1) / kGroupRows; }
  size_t group_stride() const { return group_stride_; }
  size_t bytes() const { return size_t(n_groups()) * group_stride_; }
  // Group g's quants; its scales follow at quants + n_blocks() * kBlockQuantBytes.
  const uint8_t* group(int64_t g) const { return data_.get() + size_t(g) * group_stride_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  int64_t rows_ = 0;
  int k_ = 0;
  size_t group_stride_ = 0;
  std::unique_ptr<uint8_t[], Free> data_;
};

// y[t][r] for r in [row_begin, row_end), t in [0, n_tokens); row_begin a
// multiple of 16, row_end a multiple of 16 or w.rows(). x: [n_tokens][k / 32]
// (prepare_q8_packed_act). y: [n_tokens][y_stride]. Requires q8_packed_supported().
void matmul_q8_packed_rows(const PackedQ8_0& w, const Q8PackedAct* x, int n_tokens, float* y,
                           int y_stride, int64_t row_begin, int64_t row_end);

// All rows, in chunks of whole groups that the pool's threads take as they
// free up; same bits as one matmul_q8_packed_rows call.
void matmul_q8_packed_parallel(ThreadPool& pool, const PackedQ8_0& w, const Q8PackedAct* x,
                               int n_tokens, float* y, int y_stride);

}  // namespace larder
