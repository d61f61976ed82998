// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS and Q2_K .. Q6_K weights repacked at load for the int8 GEMM (prefill) and
// GEMV (decode), and F16 ones for the f32 FMA kernels: rows interleaved 16 to
// a vector, so that one
// vpdpbusd forms partial sums of 16 rows in its 16 int32 lanes and nothing is
// reduced across lanes (llama.cpp repacks Q4_0 the same way for AVX2 / ARM,
// "q4_0_8x8").
//
// Q8_0 layout. Rows are taken in groups of 16 (the last group padded with zero
// rows of scale 0). A group is stored as
//   quants: nb blocks x 8 chunks x 64 bytes, chunk j of block b holding, for
//           each row r of the group, bytes 4j..4j+3 of block b of row r, as
//           w + 128 (u8), at byte 4r of the chunk;
//   scales: nb x 16 f16, the rows' block scales d_w;
// padded to 64 bytes (group stride); a token's 4 activation bytes are a
// broadcast.
//
// Q8_0 arithmetic, per output y[t][r] (the contract the tests check against a
// scalar definition with memcmp):
//   isum_b = sum_{i<32} w[r][32b+i] * q_x[t][32b+i]                 (exact int32)
//   acc    = fma(float(isum_b), d_w[r][b] * d_x[t][b], acc)  for b = 0, 1, ... nb-1
// starting from acc = 0, with d_x, q_x the activations' Q8_0 blocks
// (quantize_rows_q8_0). float(isum_b) and d_w * d_x (two f16 values) are
// exact in f32, so the only rounding is the fma's, in block order.
//
// Q4_0 layout: as Q8_0's, with 4 chunks of 64 bytes per block: chunk j of
// block b holds, for each row r, bytes 4j..4j+3 of block b's qs of row r
// as they are (low nibbles: q[4j + k], high nibbles: q[16 + 4j + k], q in
// 0..15, w = q - 8), at byte 4r; then the scales, nb x 16 f16. Padding rows:
// q = 8 and scale 0.
//
// Q4_0 arithmetic: Q8_0's, with w = q - 8 (so isum_b is exact in int32 and
// the order of its terms does not matter) and the same Q8_0 activations:
//   isum_b = sum_{i<32} (q[r][32b+i] - 8) * q_x[t][32b+i]
//   acc    = fma(float(isum_b), d_w[r][b] * d_x[t][b], acc)  in block order
// (llama.cpp's Q4_0 x Q8_0 dot product forms the same integer sums).
//
// Q4_1, Q5_1 (w = d q + m, q in 0..15 or 0..31): Q4_0's and Q5_0's layouts,
// with the mins m (nb x 16 f16) after the scales. Arithmetic, with
// isum_b = sum_{i<32} q[r][32b+i] * q_x[t][32b+i] and S_x = d_x *
// sum_i q_x[t][32b+i] (exact in f32: 11 + 12 significant bits):
//   acc = fma(float(isum_b), d_w * d_x, acc); acc = fma(m_w, S_x, acc)
// per block in order. (llama.cpp's Q8_1 blocks round S_x to f16 first.)
//
// Q5_0 layout: Q4_0's 4 nibble chunks, then one 64-byte vector of fifth
// bits (320 bytes a block): its byte 4r + k holds, in bit j, bit 4j + k of
// row r's qh (the fifth bit of value 4j + k; j = 0..7), then the scales.
// q = nibble | fifth bit << 4 in 0..31, w = q - 16. Padding rows: q = 16,
// scale 0. Arithmetic: Q4_0's with w = q - 16 (llama.cpp's Q5_0 x Q8_0).
//
// IQ4_NL layout: Q4_0's (the 4-bit indices i as they are in the file), then
// the scales, nb x 16 f16. IQ4_XS: the same indices per 32-value sub-block
// (packed as nb = K / 32 blocks of 32), then the sub-block scales ls - 32
// (nb x 16 int8), then the super-block scales d (nb / 8 x 16 f16): 20 bytes
// of scales a block, as the file's 4.25 bits a weight. The block scale is
// d * (ls - 32), exact in f32 (11 + 6 significant bits). Padding rows: i = 8,
// scales 0.
// Arithmetic: Q8_0's, with w = kIQ4Values[i] (-127..113, quant_blocks.h):
//   isum_b = sum_{i<32} kIQ4Values[i[r][32b+i]] * q_x[t][32b+i]
//   acc    = fma(float(isum_b), scale_w[r][b] * d_x[t][b], acc)  in block order.
// llama.cpp's IQ4_NL x Q8_0 forms the same integer sums. Its IQ4_XS takes
// Q8_K activations (one scale per 256 values) and folds ls - 32 into the
// integer sums; larder's Q8_0 activations round x per 32 values instead, as
// for every other 32-value type.
//
// Q4_K layout, per group and super-block of 256 values (2368 bytes):
//   quants: 8 sub-blocks x 4 vectors of 64 bytes; vector c of sub-block i
//           holds at byte 4r + k, low nibble: q[r][32i + 4c + k], high
//           nibble: q[r][32i + 16 + 4c + k] (q in 0..15);
//   sc[i][r] (u8, 8 x 16), m pairs [k][r] = (m_2k, m_2k+1) (u8, 4 x 16 x 2),
//   d[r], dmin[r] (f16, 16 each).
// Q4_K arithmetic, per output, with the activations' Q8_K blocks (x_q, d_x,
// quantize_rows_q8k) and xs_i the sum of x_q over sub-block i:
//   S  = sum_i sc_i * sum_{j<32} q_j x_q,j        (exact int32)
//   Mn = sum_i m_i * xs_i                          (exact int32)
//   acc = fma(float(S), d * d_x, acc); acc = fma(-float(Mn), dmin * d_x, acc)
// per super-block in order, from acc = 0 (d, dmin widened from f16).
//
// Q5_K layout, per group and super-block (2880 bytes): Q4_K's 2368 bytes
// (the low 4 bits of q, 0..31, as Q4_K's nibbles; sc, m, d, dmin), then 8
// vectors of fifth bits: vector i holds at byte 4r + k, in bit c, the fifth
// bit of q[r][32i + 4c + k] and in bit 4 + c that of q[r][32i + 16 + 4c + k].
// Arithmetic: Q4_K's (llama.cpp's Q5_K x Q8_K forms the same integer sums).
//
// Q6_K layout, per group and super-block (3392 bytes, 3360 used): the low 4
// bits of the quants (q in 0..63) as Q4_K's nibble planes (2048 bytes), their
// high 2 bits in 16 vectors (vector (i2, half) holds, at byte 4r + k, bits
// 2c, 2c+1: q[r][32 i2 + 16 half + 4c + k] >> 4), sc[i][r] (int8, 16 x 16),
// d[r] (f16). Q6_K arithmetic, with xs_i the sum of x_q over the 16 values
// of sub-block i (Q8_K's bsums):
//   S   = sum_i sc_i * (sum_{j<16} q_j x_q,j - 32 xs_i)   (exact int32)
//   acc = fma(float(S), d * d_x, acc)  per super-block in order, from 0.
//
// Q3_K layout, per group and super-block (1856 bytes, 1824 used): the
// low 2 bits of q = w + 4 (0..7) in 16 vectors as Q6_K's high-bit planes
// (vector (i2, half) holds, at byte 4r + k, in bits 2c, 2c+1: the low bits
// of q[r][32 i2 + 16 half + 4c + k]), 1024 bytes; their high bits in 8
// vectors (vector i2 holds in bit 4 half + c of byte 4r + k the high bit of
// that value), 512 bytes; sc[i][r] = the 6-bit scale - 32 (int8, 16 x 16);
// d[r] (f16). Arithmetic: Q6_K's with offset 4 (llama.cpp's Q3_K x Q8_K
// forms the same integer sums):
//   S   = sum_i sc_i * (sum_{j<16} q_j x_q,j - 4 xs_i)    (exact int32)
//   acc = fma(float(S), d * d_x, acc)  per super-block in order, from 0.
//
// Q2_K layout, per group and super-block (1600 bytes): q (0..3) in 16
// two-bit planes as Q3_K's low bits (1024 bytes), the 4-bit scales sc and
// mins m (u8, 256 bytes each, the two sub-blocks of a step side by side:
// byte 32 (i / 2) + 2 r + i % 2 holds row r's of sub-block i, as Q4_K's
// mins), d[r], dmin[r] (f16).
// Arithmetic (llama.cpp's Q2_K x Q8_K forms the same integer sums), with
// xs_i the sum of x_q over sub-block i (Q8_K's bsums):
//   S  = sum_i sc_i * sum_{j<16} q_j x_q,j          (exact int32)
//   Mn = sum_i m_i * -xs_i                           (exact int32)
//   acc = fma(float(S), d * d_x, acc); acc = fma(float(Mn), dmin * d_x, acc)
// per super-block in order, from acc = 0.
//
// F16 layout (AVX-512 and AVX2 builds), per group: K vectors of 16 f16 values (32
// bytes), vector k holding w[r][k] of the group's 16 rows at word r (padding
// rows +0). F16 arithmetic, per output, with the f32 activations x as they are
// (no quantization):
//   acc = fma(float(w[r][k]), x[t][k], acc)   for k = 0, 1, ... K-1, from 0
// one f32 chain per output in k order (f16 -> f32 is exact).
//
// The same sequence runs whatever the number of tokens, the tile, the row
// range or the thread: prefill, decode and restored pages give the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "engine/gguf/ggml_types.h"
#include "engine/model/model.h"

// Which tiles this build has: AVX-512 with VNNI (matmul_packed.cpp,
// matmul_packed_q4k.cpp, matmul_packed_q6k.cpp) or, without it, AVX2 with FMA
// and F16C (matmul_packed_avx2.cpp, matmul_packed_avx2_kquant.cpp). Both
// give the same bits.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#define LARDER_PACKED_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define LARDER_PACKED_AVX2 1
#endif

namespace larder {

class ThreadPool;

// True when this build has the packed kernels (AVX-512 with VNNI, or AVX2).
bool q8_packed_supported();

// One token's Q8_0 block as the packed Q8_0, Q4_0 .. Q5_1, IQ4_NL and IQ4_XS
// kernels read it: the 32 quants; for weights stored as u8 w + offset (Q8_0,
// IQ4_NL, IQ4_XS: 128, Q4_0: 8, Q5_0: 16), neg_c = -offset * sum(qs), which turns the sum of those back
// into w * x; for Q4_1 and Q5_1 (w = d q + m), s = d * sum(qs) (exact in
// f32) for the min term; d as f32. 40 bytes.
struct Q8PackedAct {
  int8_t qs[32];
  union {
    int32_t neg_c;
    float s;
  };
  float d;
};
static_assert(sizeof(Q8PackedAct) == 40);

// The packed types read with Q8PackedAct: Q8_0, Q4_0, Q5_0, Q4_1, Q5_1,
// IQ4_NL and IQ4_XS (whose 256-value blocks are packed as 8 blocks of 32).
inline bool packed_q8_act_type(GgmlType t) {
  return t == GgmlType::kQ8_0 || t == GgmlType::kQ4_0 || t == GgmlType::kQ5_0 || t == GgmlType::kQ4_1 ||
         t == GgmlType::kQ5_1 || t == GgmlType::kIQ4_NL || t == GgmlType::kIQ4_XS;
}

// xq: [n_tokens][k / 32] Q8_0 blocks -> out: [n_tokens][k / 32], for weights
// of weight_type (a packed_q8_act_type).
void prepare_q8_packed_act(const BlockQ8_0* xq, int n_tokens, int k, Q8PackedAct* out, GgmlType weight_type);

struct BlockQ8K;

// One token's Q8_K super-block as the packed Q4_K and Q5_K kernels read it: the 256
// quants, the sub-block sums as int16 pairs (xs_2k | xs_2k+1 << 16), d.
struct Q4KPackedAct {
  int8_t qs[256];
  int32_t xs_pairs[4];
  float d;
  int32_t pad[3];
};
static_assert(sizeof(Q4KPackedAct) == 288);

// xq: [n_tokens][k / 256] -> out: [n_tokens][k / 256].
void prepare_q4k_packed_act(const BlockQ8K* xq, int n_tokens, int k, Q4KPackedAct* out);

// One token's Q8_K super-block for the packed Q6_K, Q3_K and Q2_K kernels:
// the quants, -offset times each 16-value sum (offset: what the packed quants
// add to w, 32 for Q6_K, 4 for Q3_K, 0 for Q2_K), for Q2_K's mins those sums
// negated in int16 pairs (|xs| <= 16 * 128; zero for the others), d.
struct Q6KPackedAct {
  int8_t qs[256];
  int32_t neg_oxs[16];
  int32_t neg_xs_pairs[8];  // -xs_2j | -xs_2j+1 << 16 (int16 each): Q2_K only
  float d;
  int32_t pad[3];
};
static_assert(sizeof(Q6KPackedAct) == 368);
void prepare_q6k_packed_act(const BlockQ8K* xq, int n_tokens, int k, Q6KPackedAct* out);  // offset 32
void prepare_q3k_packed_act(const BlockQ8K* xq, int n_tokens, int k, Q6KPackedAct* out);  // offset 4
// Q2_K: offset 0, and neg_xs_pairs for its mins.
void prepare_q2k_packed_act(const BlockQ8K* xq, int n_tokens, int k, Q6KPackedAct* out);

// True for the types PackedMatrix::pack accepts on this build.
bool packed_type_supported(GgmlType t);

class PackedMatrix {
 public:
  static constexpr int kGroupRows = 16;
  static constexpr size_t kChunkBytes = 64;
  static constexpr size_t kBlockQuantBytes = 8 * kChunkBytes;  // Q8_0: 32 values x 16 rows
  static constexpr size_t kQ40BlockQuantBytes = 4 * kChunkBytes;  // Q4_0: 32 values x 16 rows
  static constexpr size_t kQ50BlockQuantBytes = 5 * kChunkBytes;  // Q5_0: the same and fifth bits
  static constexpr size_t kQ4KBlockBytes = 2368;                // Q4_K: 256 values x 16 rows
  static constexpr size_t kQ5KBlockBytes = 2880;                // Q5_K: 256 values x 16 rows
  static constexpr size_t kQ6KBlockBytes = 3392;                // Q6_K: 256 values x 16 rows
  static constexpr size_t kQ3KBlockBytes = 1856;                // Q3_K: 256 values x 16 rows
  static constexpr size_t kQ2KBlockBytes = 1600;                // Q2_K: 256 values x 16 rows

  PackedMatrix() = default;

  // Repacks a Q8_0, Q4_0 .. Q5_1, IQ4_NL, IQ4_XS, Q2_K .. Q6_K or F16 matrix (w.ne[0] = K, a
  // multiple of the block size; w.ne[1] rows), reading it once. With a pool the groups are shared
  // among its threads. Memory: about the matrix's own size, rounded up to 16
  // rows. Requires packed_type_supported(w.type).
  static PackedMatrix pack(const WeightView& w, ThreadPool* pool = nullptr);

  GgmlType type() const { return type_; }
  int64_t rows() const { return rows_; }
  int k() const { return k_; }
  // Blocks per row: of 32 values (Q8_0, Q4_0 .. Q5_1, IQ4_NL, IQ4_XS), 256
  // (Q2_K .. Q6_K) or 1 (F16).
  int n_blocks() const {
    if (type_ == GgmlType::kF16) return k_;
    return k_ / (packed_q8_act_type(type_) ? kQ8_0BlockSize : 256);
  }
  // Quant bytes of one block of a group (Q8_0, Q4_0 .. Q5_1, IQ4_NL,
  // IQ4_XS; the scales follow n_blocks() of them).
  size_t block_quant_bytes() const {
    if (type_ == GgmlType::kQ4_0 || type_ == GgmlType::kQ4_1 || type_ == GgmlType::kIQ4_NL ||
        type_ == GgmlType::kIQ4_XS)
      return kQ40BlockQuantBytes;
    if (type_ == GgmlType::kQ5_0 || type_ == GgmlType::kQ5_1) return kQ50BlockQuantBytes;
    return kBlockQuantBytes;
  }
  // Their scales' bytes per block (and mins': Q4_1, Q5_1): f16 scales, but
  // IQ4_XS's an int8 ls - 32 per block and an f16 d per 8 blocks.
  size_t block_scale_bytes() const {
    if (type_ == GgmlType::kIQ4_XS) return kGroupRows * sizeof(int8_t) + kGroupRows * sizeof(uint16_t) / 8;
    const bool mins = type_ == GgmlType::kQ4_1 || type_ == GgmlType::kQ5_1;
    return (mins ? 2 : 1) * kGroupRows * sizeof(uint16_t);
  }
  int64_t n_groups() const { return (rows_ + kGroupRows - 1) / kGroupRows; }
  size_t group_stride() const { return group_stride_; }
  size_t bytes() const { return size_t(n_groups()) * group_stride_; }
  // Group g's bytes (Q8_0, Q4_0 .. Q5_1: quants, then scales at n_blocks() *
  // block_quant_bytes(); the K-quants: kQ4KBlockBytes, kQ5KBlockBytes, ...
  // per super-block).
  const uint8_t* group(int64_t g) const { return data_.get() + size_t(g) * group_stride_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  GgmlType type_ = GgmlType::kQ8_0;
  int64_t rows_ = 0;
  int k_ = 0;
  size_t group_stride_ = 0;
  std::unique_ptr<uint8_t[], Free> data_;
};

// y[t][r] for r in [row_begin, row_end), t in [0, n_tokens); row_begin a
// multiple of 16, row_end a multiple of 16 or w.rows(). x: the activations
// prepared for w's type, [n_tokens][n_blocks] Q8PackedAct (Q8_0, Q4_0 ..
// Q5_1, IQ4_NL, IQ4_XS with their offsets),
// Q4KPackedAct (Q4_K, Q5_K) or Q6KPackedAct (Q6_K, Q3_K, Q2_K with their offsets), or the f32 rows themselves
// ([n_tokens][K], F16). y: [n_tokens][y_stride].
void matmul_packed_rows(const PackedMatrix& w, const void* x, int n_tokens, float* y, int y_stride,
                        int64_t row_begin, int64_t row_end);

// All rows, in chunks of whole groups that the pool's threads take as they
// free up; same bits as one matmul_packed_rows call.
void matmul_packed_parallel(ThreadPool& pool, const PackedMatrix& w, const void* x, int n_tokens,
                            float* y, int y_stride);

// One product of a fused job: all rows of *w times x (prepared for w's
// type, as above), into y ([n_tokens][y_stride]).
struct PackedProduct {
  const PackedMatrix* w;
  const void* x;
  float* y;
  int y_stride;
};

// Several products of the same tokens in one parallel job (a layer's q, k
// and v, or its gate and up): their groups are laid end to end and cut into
// chunks as one matrix's would be, so in a decode step each thread streams
// longer runs of weights and the threads meet at one barrier instead of one
// per matrix. A chunk that spans two matrices makes one matmul_packed_rows
// call on each. Same bits as matmul_packed_rows on every product.
void matmul_packed_parallel(ThreadPool& pool, std::span<const PackedProduct> products, int n_tokens);

namespace packed_detail {
// matmul_packed_pack32.cpp: the 32-value formats' packers (Q8_0; Q4_0 .. Q5_1
// and IQ4_NL; IQ4_XS), groups [g_begin, g_end).
void pack_q8_0_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin, int64_t g_end);
void pack_q4_0_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin, int64_t g_end);
void pack_iq4xs_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin, int64_t g_end);
// Per-type halves of the above (matmul_packed_q4k.cpp, matmul_packed_q6k.cpp).
void pack_q4k_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin,
                     int64_t g_end);
void pack_q5k_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin,
                     int64_t g_end);
void matmul_q4k_rows(const PackedMatrix& w, const Q4KPackedAct* x, int n_tokens, float* y,
                     int y_stride, int64_t row_begin, int64_t row_end);
void pack_q3k_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin,
                     int64_t g_end);
void pack_q2k_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin,
                     int64_t g_end);
void pack_q6k_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin,
                     int64_t g_end);
void matmul_q6k_rows(const PackedMatrix& w, const Q6KPackedAct* x, int n_tokens, float* y,
                     int y_stride, int64_t row_begin, int64_t row_end);
// matmul_packed_f16.cpp.
void pack_f16_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin, int64_t g_end);
void matmul_f16_rows(const PackedMatrix& w, const float* x, int n_tokens, float* y, int y_stride,
                     int64_t row_begin, int64_t row_end);
// The AVX2 tiles: Q8_0; Q4_0 .. Q5_1, IQ4_NL, IQ4_XS (matmul_packed_avx2.cpp);
// Q4_K; Q6_K, Q3_K and Q2_K (matmul_packed_avx2_kquant.cpp).
void matmul_q8_rows_avx2(const PackedMatrix& w, const Q8PackedAct* x, int n_tokens, float* y, int y_stride,
                         int64_t row_begin, int64_t row_end);
// Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, IQ4_XS.
void matmul_q4_0_rows_avx2(const PackedMatrix& w, const Q8PackedAct* x, int n_tokens, float* y, int y_stride,
                           int64_t row_begin, int64_t row_end);
void matmul_q4k_rows_avx2(const PackedMatrix& w, const Q4KPackedAct* x, int n_tokens, float* y, int y_stride,
                          int64_t row_begin, int64_t row_end);
void matmul_q6k_rows_avx2(const PackedMatrix& w, const Q6KPackedAct* x, int n_tokens, float* y, int y_stride,
                          int64_t row_begin, int64_t row_end);
// matmul_packed_amx.cpp: true when this build has the AMX tile and the
// kernel granted the tile state; the Q8_0 tile of 16 tokens x one group
// (q: the group's bytes; x: token 0's blocks; y: token 0, the group's first row).
bool amx_usable();
void q8_tile_amx16(const uint8_t* q, const Q8PackedAct* x, int nb, float* y, int y_stride, int last_rows);
}  // namespace packed_detail

// Whether Q8_0 prefill may use AMX where amx_usable() (default false: it
// measured no faster, see matmul_packed.cpp). The bits are the same either
// way; tests switch it on and off to check both paths.
void set_packed_amx(bool enabled);
// True when the Q8_0 prefill tiles run on AMX.
bool packed_amx_active();

// Whether Q4_K and Q6_K prefill of 16 tokens or more (16 at a time, a last
// part tile zero-padded) may use AMX where this build has it and amx_usable()
// (default true: matmul_packed_amx.h). Same bits either way; tests switch it.
void set_kquant_amx(bool enabled);
// True when Q4_K / Q6_K prefill runs on AMX.
bool kquant_amx_active();

// How many groups of 16 rows the AVX-512 Q2_K .. Q6_K decode tiles stream at
// once (1..4; larger values act as 4); 0, the default, picks per type (Q2_K
// 4, the others by CPU vendor: packed_detail::kquant_decode_groups in
// matmul_packed_tiles.h has the measurements). Same bits whatever the count;
// tests set each one.
void set_kquant_decode_groups(int groups);

}  // namespace larder
