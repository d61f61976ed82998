// Block structs of the GGML quantized types larder decodes, and scalar
// dequantizers. The formats are written down in docs/quant-formats.md (from
// the GGUF spec, llama.cpp's k-quants PR #1684 and ggml-common.h's structs);
// scripts/quant/ref_dequant.py is the independent reference that the tests'
// fixtures come from.
//
// Every dequantized value is the exact real value rounded once to binary32:
// all products in these formulas are exact in f32 (see the doc), so the
// order of the multiplications does not matter.
#pragma once

#include <cstdint>

#include "engine/gguf/ggml_types.h"

namespace larder {

constexpr int kQK4 = 32;    // values per legacy block (Q4_0 .. Q5_1)
constexpr int kQK_K = 256;  // values per k-quant super-block

struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
struct BlockQ4_1 { uint16_t d, m; uint8_t qs[16]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ2_K { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; };
struct BlockQ3_K { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; };
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct BlockQ5_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
struct BlockIQ4_NL { uint16_t d; uint8_t qs[16]; };
struct BlockIQ4_XS { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; };
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136);
// The structs are read in place from the mmap: any byte alignment must work.
static_assert(alignof(BlockQ4_0) <= 2 && alignof(BlockQ6_K) <= 2);

// The 6-bit scale and min of sub-block s (0..7) of a Q4_K / Q5_K block from
// its 12 packed bytes (docs/quant-formats.md, "Q4_K and Q5_K scales").
inline void k4_scale_min(const uint8_t* S, int s, int* sc, int* m) {
  if (s < 4) {
    *sc = S[s] & 63;
    *m = S[s + 4] & 63;
  } else {
    *sc = (S[s + 4] & 15) | ((S[s - 4] >> 6) << 4);
    *m = (S[s + 4] >> 4) | ((S[s] >> 6) << 4);
  }
}

// The value each 4-bit index of IQ4_NL and IQ4_XS stands for (before the
// block's scale): ggml's kvalues_iq4nl (docs/quant-formats.md, "IQ4_NL and
// IQ4_XS").
inline constexpr int8_t kIQ4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

// The 6-bit scale of sub-block ib (0..7, 32 values each) of an IQ4_XS block,
// minus 32 (so in -32..31): low 4 bits from scales_l, high 2 from scales_h.
// `scales_h` is the block's little-endian u16 field, read with memcpy.
inline int iq4xs_scale(uint16_t scales_h, const uint8_t* scales_l, int ib) {
  return (((scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((scales_h >> (2 * ib)) & 3) << 4)) - 32;
}

// The sixteen 6-bit scales of a Q3_K block, minus 32 (so in -32..31).
void q3k_scales(const uint8_t* S, int out[16]);

// Dequantize n_blocks consecutive blocks at src into dst
// (n_blocks * 32 or * 256 floats). type: Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS. Returns false (writing nothing) for any
// other type.
bool dequantize_blocks(GgmlType type, const uint8_t* src, int64_t n_blocks, float* dst);

}  // namespace larder
