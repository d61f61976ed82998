// ggml type table, fp16/bf16 conversions and dequantize_row. Expected values
// are worked out by hand from the IEEE 754 binary16 / bfloat16 encodings and
// ggml-common.h's block structs (comments show the arithmetic), or checked
// against the CPU's F16C conversion instructions where available.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "engine/gguf/ggml_types.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

using namespace larder;

TEST_CASE("ggml type table", "[gguf][types]") {
  CHECK(std::string(ggml_type_name(GgmlType::kQ8_0)) == "Q8_0");
  CHECK(std::string(ggml_type_name(GgmlType::kBF16)) == "BF16");
  CHECK(ggml_type_name(GgmlType(4)) == nullptr);   // removed Q4_2 id
  CHECK(ggml_type_name(GgmlType(99)) == nullptr);
  CHECK(ggml_type_supported(GgmlType::kF32));
  CHECK(ggml_type_supported(GgmlType::kF16));
  CHECK(ggml_type_supported(GgmlType::kBF16));
  CHECK(ggml_type_supported(GgmlType::kQ8_0));
  CHECK_FALSE(ggml_type_supported(GgmlType::kQ8_K));  // activation-only type, never a weight
  CHECK_FALSE(ggml_type_supported(GgmlType(99)));
  // Bytes per block from ggml-common.h (see ggml_types.cpp for the sums).
  CHECK(ggml_type_size(GgmlType::kQ4_0) == 2 + 16);
  CHECK(ggml_type_size(GgmlType::kQ8_0) == 2 + 32);
  CHECK(ggml_type_size(GgmlType::kQ4_K) == 2 + 2 + 12 + 128);
  CHECK(ggml_type_size(GgmlType::kQ6_K) == 128 + 64 + 16 + 2);
  CHECK(ggml_type_size(GgmlType::kQ8_K) == 4 + 256 + 32);
  CHECK(ggml_block_size(GgmlType::kQ2_K) == 256);
  CHECK(ggml_block_size(GgmlType::kF16) == 1);
  CHECK(ggml_row_size(GgmlType::kF16, 10) == 20);
  CHECK(ggml_row_size(GgmlType::kQ8_0, 64) == 68);   // 2 blocks x 34
  CHECK(ggml_row_size(GgmlType::kQ8_0, 33) == 0);    // not a multiple of 32
  CHECK(ggml_row_size(GgmlType::kQ6_K, 512) == 420); // 2 blocks x 210
  CHECK(ggml_row_size(GgmlType(99), 32) == 0);
}

TEST_CASE("fp16 conversion of known values", "[gguf][types]") {
  // binary16 = sign | 5-bit exponent (bias 15) | 10-bit mantissa.
  CHECK(fp32_to_fp16(1.0f) == 0x3C00);         // exp 15
  CHECK(fp32_to_fp16(-2.0f) == 0xC000);        // sign, exp 16
  CHECK(fp32_to_fp16(0.0f) == 0x0000);
  CHECK(fp32_to_fp16(-0.0f) == 0x8000);
  CHECK(fp32_to_fp16(65504.0f) == 0x7BFF);     // largest finite: (2-2^-10)*2^15
  CHECK(fp32_to_fp16(65519.0f) == 0x7BFF);     // below the midpoint 65520
  CHECK(fp32_to_fp16(65520.0f) == 0x7C00);     // midpoint ties to even -> 2^16 = inf
  CHECK(fp32_to_fp16(1e10f) == 0x7C00);
  CHECK(fp32_to_fp16(0.1f) == 0x2E66);         // 0.1 = 1.6*2^-4: mant round(0.6*1024)=614=0x266, exp 11
  CHECK(fp32_to_fp16(std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
  CHECK(fp32_to_fp16(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  CHECK(fp32_to_fp16(std::ldexp(1.0f, -25)) == 0x0000);  // half of it: tie to even (0)
  CHECK(fp32_to_fp16(std::ldexp(1.5f, -25)) == 0x0001);  // above the tie
  CHECK(fp32_to_fp16(std::ldexp(3.0f, -25)) == 0x0002);  // 1.5 ulp: tie between 1 and 2 -> 2
  CHECK(fp32_to_fp16(std::ldexp(1023.5f, -24)) == 0x0400);  // tie between 0x3FF and 0x400 -> even
  CHECK(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);      // tie -> even mantissa 0
  CHECK(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);  // tie between 1 and 2 -> 2
  CHECK(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3C01);  // above tie
  CHECK(fp32_to_fp16(std::numeric_limits<float>::infinity()) == 0x7C00);
  CHECK(fp32_to_fp16(-std::numeric_limits<float>::infinity()) == 0xFC00);
  const uint16_t nan = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan & 0x7C00) == 0x7C00);
  CHECK((nan & 0x03FF) != 0);

  CHECK(fp16_to_fp32(0x3C00) == 1.0f);
  CHECK(fp16_to_fp32(0x7BFF) == 65504.0f);
  CHECK(fp16_to_fp32(0x0001) == std::ldexp(1.0f, -24));
  CHECK(fp16_to_fp32(0x03FF) == std::ldexp(1023.0f, -24));
  CHECK(fp16_to_fp32(0x8000) == 0.0f);
  CHECK(std::signbit(fp16_to_fp32(0x8000)));
  CHECK(fp16_to_fp32(0xC000) == -2.0f);
  CHECK(fp16_to_fp32(0x3555) == Approx(0.333251953125f));  // (1+341/1024)*2^-2
  CHECK(std::isinf(fp16_to_fp32(0x7C00)));
  CHECK(std::isnan(fp16_to_fp32(0x7E00)));
}

TEST_CASE("fp16 round trip is exact for every finite half", "[gguf][types]") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0) continue;  // nan payloads
    const uint16_t back = fp32_to_fp16(fp16_to_fp32(uint16_t(h)));
    if (back != h) FAIL("half 0x" << std::hex << h << " came back as 0x" << back);
  }
}

#if defined(__F16C__)
TEST_CASE("fp16 conversion agrees with the F16C instructions", "[gguf][types]") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float hw = _cvtsh_ss(uint16_t(h));
    const float sw = fp16_to_fp32(uint16_t(h));
    if (std::isnan(hw)) {
      CHECK(std::isnan(sw));
      continue;
    }
    if (std::memcmp(&hw, &sw, 4) != 0) FAIL("half 0x" << std::hex << h);
  }
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = bits(rng);
    // Half the draws in the interesting range |x| in [2^-26, 2^17).
    if (i & 1) u = (u & 0x807FFFFFu) | ((101u + (u >> 23) % 42u) << 23);
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    const uint16_t hw = _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
    const uint16_t sw = fp32_to_fp16(f);
    if (hw != sw) FAIL("float bits 0x" << std::hex << u << ": hw 0x" << hw << " sw 0x" << sw);
  }
}
#endif

TEST_CASE("bf16 conversion", "[gguf][types]") {
  CHECK(fp32_to_bf16(1.0f) == 0x3F80);
  CHECK(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);      // tie -> even
  CHECK(fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);  // tie between 0x3F81, 0x3F82
  CHECK(fp32_to_bf16(-2.0f) == 0xC000);
  CHECK(bf16_to_fp32(0x4049) == 3.140625f);  // 1.5703125 * 2 = (1 + 73/128) * 2
  const uint16_t nan = fp32_to_bf16(std::numeric_limits<float>::quiet_NaN());
  CHECK(std::isnan(bf16_to_fp32(nan)));
}

TEST_CASE("dequantize_row for F32, F16, BF16 and Q8_0", "[gguf][types]") {
  const float f32[3] = {1.5f, -2.0f, 0.25f};
  float out[64];
  dequantize_row(GgmlType::kF32, f32, out, 3);
  CHECK(out[0] == 1.5f);
  CHECK(out[2] == 0.25f);

  // 0x3E00 = 1.5, 0xC000 = -2, 0x3400 = 0.25 (exp 13 -> 2^-2); a 9-value row
  // exercises both the 8-wide and the scalar path.
  const uint16_t f16[9] = {0x3E00, 0xC000, 0x3400, 0, 0x3C00, 0x3C00, 0x3C00, 0x3C00, 0x7BFF};
  dequantize_row(GgmlType::kF16, f16, out, 9);
  CHECK(out[0] == 1.5f);
  CHECK(out[1] == -2.0f);
  CHECK(out[2] == 0.25f);
  CHECK(out[4] == 1.0f);
  CHECK(out[8] == 65504.0f);

  const uint16_t bf16[2] = {0x3FC0, 0xC000};  // 1.5, -2
  dequantize_row(GgmlType::kBF16, bf16, out, 2);
  CHECK(out[0] == 1.5f);
  CHECK(out[1] == -2.0f);

  // Two Q8_0 blocks: d = 0x3800 (0.5) with q[j] = j - 16, then d = 0xB400
  // (-0.25) with q[j] = 127 for all j.
  uint8_t q8[68];
  const uint16_t d0 = 0x3800, d1 = 0xB400;
  std::memcpy(q8, &d0, 2);
  for (int j = 0; j < 32; ++j) q8[2 + j] = uint8_t(int8_t(j - 16));
  std::memcpy(q8 + 34, &d1, 2);
  for (int j = 0; j < 32; ++j) q8[36 + j] = uint8_t(int8_t(127));
  dequantize_row(GgmlType::kQ8_0, q8, out, 64);
  CHECK(out[0] == -8.0f);    // 0.5 * -16
  CHECK(out[16] == 0.0f);
  CHECK(out[31] == 7.5f);    // 0.5 * 15
  CHECK(out[32] == -31.75f); // -0.25 * 127
  CHECK(out[63] == -31.75f);
}
