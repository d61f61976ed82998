// Matrix-vector / matrix-matrix products with weights used in place from the
// GGUF mapping (F32, F16, BF16, Q8_0 and the types of matmul_kquant.h), for both prefill and decode.
//
//   y[t][r] = sum_k W[r][k] * x[t][k]     t in [0, n_tokens), r in [row_begin, row_end)
//
// W is a WeightView: ne[0] = K (row length), ne[1] = rows. x: [n_tokens][K]
// f32 (row stride K). y: [n_tokens][y_stride] f32.
//
// Determinism: every y[t][r] is computed by the same sequence of operations
// whatever n_tokens, the row range or the tile it falls in (16-lane partial
// sums along k in increasing order, one fused multiply-add per chunk, a
// masked last chunk, then a fixed horizontal reduction; 8 lanes on AVX2
// builds, matmul_dense_avx2.cpp). So a row of the
// output never depends on the other rows of x: prefill of any split, decode
// of one or many sequences give bit-identical results. OpenBLAS sgemm does
// not have this property (its result rows change with M on this machine for
// every core type tried), which is why prefill does not use it.
//
// Q8_0 has two paths:
//   kDequantFma: each block's int8 weights are scaled by d (exact in f32) and
//                multiplied with the f32 activations.
//   kInt8:       llama.cpp ggml_vec_dot_q8_0_q8_0: the activations are first
//                quantized to Q8_0 blocks (quantize_rows_q8_0) and each block
//                pair is an exact int8 dot product (AVX-512 VNNI vpdpbusd; on
//                AVX2 builds only through the packed kernels, matmul_packed.h)
//                scaled by d_w * d_x. Rounds the activations to 8 bits.
//                One-token calls (decode) use a tile that forms the same int32
//                sums with fewer instructions and prefetches the next rows;
//                same bits.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/gguf/ggml_types.h"
#include "engine/cpu/matmul_kquant.h"
#include "engine/cpu/matmul_packed.h"
#include "engine/model/model.h"

namespace larder {

class ThreadPool;

enum class Q8Path { kDequantFma, kInt8 };

// The Q8_0 path the forward pass uses (chosen by measurement, see matmul.cpp).
Q8Path default_q8_path();

// True when the weight type has a kernel here (every type ggml_type_supported() accepts).
bool matmul_type_supported(GgmlType t);

// One token's Q8_0 activations laid out for the VNNI decode tile, per pair
// of blocks (b, b+1): the 64 quants, 16 int32 start values (-128 times the
// sum of each vpdpbusd lane's 4 quants) and 16 f32 scales [d_b x8 | d_b+1 x8]
// (see tile_q8_vnni in matmul.cpp).
struct PreparedQ8Pair {
  int8_t qx[64];
  int32_t neg_c[16];
  float dx[16];
};

// The activations of one matrix product, prepared once for the weight's
// kernel and then shared, read-only, by every row range and thread that
// multiplies them: int8 kernels quantize the activations here rather than
// once per matmul_rows call. The quantized values depend on x only, so any
// split of the rows gives the same bits.
class MatmulInput {
 public:
  // Prepares x ([n_tokens][k] f32, k the weight's row length) for weights of
  // type `type` multiplied on q8_path:
  //   Q8_0, kInt8:              Q8_0 blocks (quantize_rows_q8_0) and, for one
  //                             token on a VNNI build, the decode tile's pairs;
  //   Q4_0 .. Q5_1, IQ4_NL, IQ4_XS, kInt8, packed: Q8_0 blocks, where the build packs them;
  //   Q2_K .. Q6_K, kInt8:      256-value int8 blocks (quantize_rows_q8k) when
  //                             the build has the integer kernels (Q4_K ..
  //                             Q6_K) or packed ones for the type (Q2_K ..
  //                             Q6_K);
  //   anything else:            x as it is.
  // With `packed` (the weight is a PackedMatrix, matmul_packed.h), Q8_0,
  // Q4_0 .. Q5_1, IQ4_NL, IQ4_XS, Q2_K .. Q6_K get the packed kernels' blocks
  // instead of the decode pairs: each path gets only what it reads.
  // x is kept by pointer: it must stay valid and unchanged while the input is
  // used. Buffers grow to the largest input seen and are reused.
  void prepare(GgmlType type, const float* x, int n_tokens, int k,
               Q8Path q8_path = default_q8_path(), bool packed = false);

  GgmlType type() const { return type_; }
  const float* x() const { return x_; }
  int n_tokens() const { return n_tokens_; }
  int k() const { return k_; }
  Q8Path q8_path() const { return q8_path_; }
  // [n_tokens][k / 32]; null unless prepared for Q8_0 on kInt8 (or packed
  // Q4_0 .. Q5_1, IQ4_NL, IQ4_XS).
  const BlockQ8_0* q8_0() const { return has_q8_0_ ? q8_0_.data() : nullptr; }
  // [(k / 32 + 1) / 2]; null unless q8_0() is set, n_tokens == 1 and the build has VNNI.
  const PreparedQ8Pair* q8_0_pairs() const { return has_pairs_ ? pairs_.data() : nullptr; }
  // The activations of the repacked kernels (matmul_packed.h) for this type:
  // [n_tokens][k / 32] Q8PackedAct for Q8_0, Q4_0 .. Q5_1, IQ4_NL, IQ4_XS, [n_tokens][k / 256]
  // Q4KPackedAct for Q4_K and Q5_K, Q6KPackedAct for Q6_K, Q3_K and Q2_K; null unless
  // prepared with `packed` for a packed_type_supported(type) on kInt8, and
  // always for F16 (its packed kernels read the f32 rows themselves).
  const void* packed() const {
    if (!has_packed_) return nullptr;
    if (type_ == GgmlType::kQ4_K || type_ == GgmlType::kQ5_K) return packed_q4k_.data();
    if (type_ == GgmlType::kQ6_K || type_ == GgmlType::kQ3_K || type_ == GgmlType::kQ2_K) return packed_q6k_.data();
    return packed_.data();
  }
  // [n_tokens][k / 256]; null unless prepared for Q4_K / Q5_K / Q6_K integer
  // kernels or packed Q2_K, Q3_K.
  const BlockQ8K* q8k() const { return has_q8k_ ? q8k_.data() : nullptr; }

 private:
  GgmlType type_ = GgmlType::kF32;
  const float* x_ = nullptr;
  int n_tokens_ = 0;
  int k_ = 0;
  Q8Path q8_path_ = Q8Path::kDequantFma;
  bool has_q8_0_ = false, has_pairs_ = false, has_packed_ = false, has_q8k_ = false;
  std::vector<BlockQ8_0> q8_0_;
  std::vector<PreparedQ8Pair> pairs_;
  std::vector<Q8PackedAct> packed_;
  std::vector<Q4KPackedAct> packed_q4k_;
  std::vector<Q6KPackedAct> packed_q6k_;
  std::vector<BlockQ8K> q8k_;
};

// y[t][r] for r in [row_begin, row_end), t in [0, in.n_tokens()); y is
// [n_tokens][y_stride]. `in` must have been prepared for w's type with
// k = w.ne[0]. Safe to call from several threads at once on disjoint row
// ranges of the same input.
void matmul_rows(const WeightView& w, const MatmulInput& in, float* y, int y_stride,
                 int64_t row_begin, int64_t row_end);

// Below this many multiply-adds (n_tokens * rows * k) matmul_parallel runs on
// the calling thread: waking workers costs more than the work. stories260K
// decode (at most 512 x 64 per matmul) never leaves the calling thread.
constexpr int64_t kMatmulParallelMinMacs = int64_t(1) << 18;

// Every row of w into y ([n_tokens][y_stride]), cut into chunks of
// chunk_rows rows (0: the pool's parallel_for choice for the row tile of 4;
// otherwise a multiple of 4) that the pool's threads take as they free up.
// Same bits as one matmul_rows call over all rows, whatever the thread count
// or chunk size.
void matmul_parallel(ThreadPool& pool, const WeightView& w, const MatmulInput& in, float* y,
                     int y_stride, int64_t chunk_rows = 0);

// Quantizes n_rows rows of k floats (k a multiple of 32) to Q8_0 blocks as
// llama.cpp quantize_row_q8_0_ref: d = max|x| / 127, q = round(x / d).
// out: [n_rows][k/32].
void quantize_rows_q8_0(const float* x, int n_rows, int k, BlockQ8_0* out);

}  // namespace larder
