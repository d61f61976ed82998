// ggml storage types: names, block layouts and scalar conversions.
// Block sizes and byte sizes follow ggml's ggml-common.h block structs
// (QK4_0 = QK8_0 = 32, QK_K = 256).
#include "engine/gguf/ggml_types.h"

#include "engine/gguf/quant_blocks.h"

#include <cassert>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace larder {

namespace {

struct TypeTraits {
  const char* name;
  int64_t block_size;   // values per block
  size_t type_size;     // bytes per block
  bool supported;       // larder computes with it
};

// Returns nullptr for ids larder does not know at all.
const TypeTraits* traits(GgmlType t) {
  // Sizes from ggml-common.h:
  //   block_q4_0 {f16 d; u8 qs[16]}                 = 18
  //   block_q4_1 {f16 d, m; u8 qs[16]}              = 20
  //   block_q5_0 {f16 d; u8 qh[4]; u8 qs[16]}       = 22
  //   block_q5_1 {f16 d, m; u8 qh[4]; u8 qs[16]}    = 24
  //   block_q8_0 {f16 d; i8 qs[32]}                 = 34
  //   block_q8_1 {f16 d, s; i8 qs[32]}              = 36
  //   block_q2_K {u8 scales[16]; u8 qs[64]; f16 d, dmin}          = 84
  //   block_q3_K {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}  = 110
  //   block_q4_K {f16 d, dmin; u8 scales[12]; u8 qs[128]}         = 144
  //   block_q5_K {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]} = 176
  //   block_q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}    = 210
  //   block_q8_K {f32 d; i8 qs[256]; i16 bsums[16]}               = 292
  //   block_iq4_nl {f16 d; u8 qs[16]}                             = 18
  //   block_iq4_xs {f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]} = 136
  static const TypeTraits kF32{"F32", 1, 4, true};
  static const TypeTraits kF16{"F16", 1, 2, true};
  static const TypeTraits kQ4_0{"Q4_0", 32, 18, true};
  static const TypeTraits kQ4_1{"Q4_1", 32, 20, true};
  static const TypeTraits kQ5_0{"Q5_0", 32, 22, true};
  static const TypeTraits kQ5_1{"Q5_1", 32, 24, true};
  static const TypeTraits kQ8_0{"Q8_0", 32, 34, true};
  static const TypeTraits kQ8_1{"Q8_1", 32, 36, false};
  static const TypeTraits kQ2_K{"Q2_K", 256, 84, true};
  static const TypeTraits kQ3_K{"Q3_K", 256, 110, true};
  static const TypeTraits kQ4_K{"Q4_K", 256, 144, true};
  static const TypeTraits kQ5_K{"Q5_K", 256, 176, true};
  static const TypeTraits kQ6_K{"Q6_K", 256, 210, true};
  static const TypeTraits kQ8_K{"Q8_K", 256, 292, false};
  static const TypeTraits kIQ4_NL{"IQ4_NL", 32, 18, true};
  static const TypeTraits kIQ4_XS{"IQ4_XS", 256, 136, true};
  // Named and sized (so a file holding them parses and its loader can say
  // which type it refuses), not computed with. Sizes from ggml-common.h's
  // block structs: d (f16) and, per 256 values, IQ2_XXS u16 qs[32]; IQ2_XS
  // u16 qs[32], u8 scales[8]; IQ3_XXS u8 qs[96]; IQ1_S u8 qs[32], u16 qh[8];
  // IQ3_S u8 qs[64], qh[8], signs[32], scales[4]; IQ2_S u8 qs[64], qh[8],
  // scales[8]; IQ1_M (no d) u8 qs[32], qh[16], scales[8].
  static const TypeTraits kIQ2_XXS{"IQ2_XXS", 256, 66, false};
  static const TypeTraits kIQ2_XS{"IQ2_XS", 256, 74, false};
  static const TypeTraits kIQ3_XXS{"IQ3_XXS", 256, 98, false};
  static const TypeTraits kIQ1_S{"IQ1_S", 256, 50, false};
  static const TypeTraits kIQ3_S{"IQ3_S", 256, 110, false};
  static const TypeTraits kIQ2_S{"IQ2_S", 256, 82, false};
  static const TypeTraits kIQ1_M{"IQ1_M", 256, 56, false};
  static const TypeTraits kBF16{"BF16", 1, 2, true};
  switch (t) {
    case GgmlType::kF32: return &kF32;
    case GgmlType::kF16: return &kF16;
    case GgmlType::kQ4_0: return &kQ4_0;
    case GgmlType::kQ4_1: return &kQ4_1;
    case GgmlType::kQ5_0: return &kQ5_0;
    case GgmlType::kQ5_1: return &kQ5_1;
    case GgmlType::kQ8_0: return &kQ8_0;
    case GgmlType::kQ8_1: return &kQ8_1;
    case GgmlType::kQ2_K: return &kQ2_K;
    case GgmlType::kQ3_K: return &kQ3_K;
    case GgmlType::kQ4_K: return &kQ4_K;
    case GgmlType::kQ5_K: return &kQ5_K;
    case GgmlType::kQ6_K: return &kQ6_K;
    case GgmlType::kQ8_K: return &kQ8_K;
    case GgmlType::kIQ4_NL: return &kIQ4_NL;
    case GgmlType::kIQ4_XS: return &kIQ4_XS;
    case GgmlType::kIQ2_XXS: return &kIQ2_XXS;
    case GgmlType::kIQ2_XS: return &kIQ2_XS;
    case GgmlType::kIQ3_XXS: return &kIQ3_XXS;
    case GgmlType::kIQ1_S: return &kIQ1_S;
    case GgmlType::kIQ3_S: return &kIQ3_S;
    case GgmlType::kIQ2_S: return &kIQ2_S;
    case GgmlType::kIQ1_M: return &kIQ1_M;
    case GgmlType::kBF16: return &kBF16;
  }
  return nullptr;
}

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

const char* ggml_type_name(GgmlType t) {
  const TypeTraits* tr = traits(t);
  return tr ? tr->name : nullptr;
}

bool ggml_type_supported(GgmlType t) {
  const TypeTraits* tr = traits(t);
  return tr && tr->supported;
}

int64_t ggml_block_size(GgmlType t) {
  const TypeTraits* tr = traits(t);
  return tr ? tr->block_size : 0;
}

size_t ggml_type_size(GgmlType t) {
  const TypeTraits* tr = traits(t);
  return tr ? tr->type_size : 0;
}

size_t ggml_row_size(GgmlType t, int64_t n) {
  const TypeTraits* tr = traits(t);
  if (!tr || n < 0 || n % tr->block_size != 0) return 0;
  const uint64_t blocks = uint64_t(n / tr->block_size);
  // Overflow: blocks * type_size must fit in size_t.
  if (blocks > SIZE_MAX / tr->type_size) return 0;
  return size_t(blocks) * tr->type_size;
}

// binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in binary32.
    const float mag = float(mant) * (1.0f / 16777216.0f);
    return bits_float(float_bits(mag) | sign);
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf / nan
  return bits_float(sign | ((exp + (127 - 15)) << 23) | (mant << 13));
}

uint16_t fp32_to_fp16(float f) {
  uint32_t u = float_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u >= 0x7f800000u) {
    // inf stays inf; nan stays a quiet nan keeping the top payload bits.
    if (u == 0x7f800000u) return sign | 0x7c00u;
    return uint16_t(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
  }
  if (u >= 0x47800000u) return sign | 0x7c00u;  // >= 65536: overflow to inf
  if (u < 0x38800000u) {
    // Below the smallest normal half (2^-14): the result is a subnormal
    // half m * 2^-24 with m = round_to_nearest_even(|f| * 2^24). The ulp of
    // 0.5f is 2^-24, the half subnormal ulp, so |f| + 0.5f makes the FPU do
    // that rounding and the low mantissa bits of the sum are m (m = 0x400
    // when it rounds up to the smallest normal, which is its encoding too).
    const float shifted = bits_float(u) + 0.5f;
    return uint16_t(sign | uint16_t(float_bits(shifted) - float_bits(0.5f)));
  }
  // Normal: rebias the exponent, then round the 13 dropped mantissa bits to
  // nearest even. A carry out of the mantissa correctly bumps the exponent
  // (and 65520 and up become inf, 0x7c00).
  const uint32_t mant_odd = (u >> 13) & 1u;
  u += (uint32_t(15 - 127) << 23) + 0xfffu + mant_odd;
  return uint16_t(sign | uint16_t(u >> 13));
}

uint16_t fp32_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // quiet nan
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  const uint8_t* s = static_cast<const uint8_t*>(src);
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, s, size_t(n) * 4);
      return;
    case GgmlType::kF16: {
      int64_t i = 0;
#if defined(__F16C__)
      for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i * 2));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
      }
#endif
      for (; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + i * 2, 2);
        dst[i] = fp16_to_fp32(h);
      }
      return;
    }
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + i * 2, 2);
        dst[i] = bf16_to_fp32(h);
      }
      return;
    case GgmlType::kQ8_0: {
      assert(n % kQ8_0BlockSize == 0);
      const int64_t n_blocks = n / kQ8_0BlockSize;
      for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* blk = s + b * int64_t(sizeof(BlockQ8_0));
        uint16_t dh;
        std::memcpy(&dh, blk, 2);
        const float d = fp16_to_fp32(dh);
        const int8_t* q = reinterpret_cast<const int8_t*>(blk + 2);
        float* out = dst + b * kQ8_0BlockSize;
        for (int j = 0; j < kQ8_0BlockSize; ++j) out[j] = d * float(q[j]);
      }
      return;
    }
    default:
      // Q4_0 .. Q5_1, Q2_K .. Q6_K, IQ4_NL, IQ4_XS: engine/gguf/quant_blocks.cpp.
      if (dequantize_blocks(type, s, n / ggml_block_size(type), dst)) return;
      // Programming error: callers check ggml_type_supported first.
      assert(false && "dequantize_row: unsupported type");
      std::memset(dst, 0, size_t(n) * sizeof(float));
      return;
  }
}

}  // namespace larder
