// ggml tensor storage types that larder reads, their block layouts, and
// scalar conversions. Layouts from ggml's ggml-common.h / gguf.md:
//   F32: 4 bytes/value. F16: IEEE binary16. BF16: upper 16 bits of f32.
//   Q8_0: blocks of 32 values: f16 scale d, then 32 x int8 q; x = d * q.
//   The other quantized types: docs/quant-formats.md, quant_blocks.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace larder {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,  // i-quants larder names but does not compute with,
  kIQ2_XS = 17,   // except IQ4_NL and IQ4_XS
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kIQ1_M = 29,
  kBF16 = 30,
};

constexpr int kQ8_0BlockSize = 32;
struct BlockQ8_0 {
  uint16_t d;       // f16 scale
  int8_t qs[32];    // quants
};
static_assert(sizeof(BlockQ8_0) == 34);

// Name for messages ("F32", "Q8_0", ...), or nullptr for an id larder does
// not know at all.
const char* ggml_type_name(GgmlType t);
// True for the types larder can compute with: F32, F16, BF16, Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS (not Q8_1 /
// Q8_K, which are activation formats, nor the other i-quants).
bool ggml_type_supported(GgmlType t);
// Values per block (1 for F32/F16/BF16, 32 for Q4_0..Q8_0 and IQ4_NL, 256
// for k-quants and IQ4_XS)
// and bytes per block.
int64_t ggml_block_size(GgmlType t);
size_t ggml_type_size(GgmlType t);
// Bytes of one row of n values; 0 if n is not a multiple of the block size.
size_t ggml_row_size(GgmlType t, int64_t n);

// IEEE half <-> float (round to nearest even), bfloat16 <-> float.
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
inline float bf16_to_fp32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t fp32_to_bf16(float f);  // round to nearest even

// Dequantize n values of one row stored as `type` at `src` into dst (f32).
// n must be a multiple of ggml_block_size(type).
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

}  // namespace larder
