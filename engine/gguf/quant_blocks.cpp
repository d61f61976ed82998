// Scalar dequantizers for the quantized GGML block formats; the layouts are
// in docs/quant-formats.md. Plain loops over the value index: these run for
// token embeddings (one row per token) and for the scratch-row matmul path.
#include "engine/gguf/quant_blocks.h"

#include <cstring>

namespace larder {

namespace {

float f16_at(const uint16_t& h) {
  uint16_t v;
  std::memcpy(&v, &h, 2);  // the field may be unaligned in the mmap
  return fp16_to_fp32(v);
}

// 4-bit quants of a legacy block: value j < 16 low nibble of qs[j], j + 16 high.
inline int q4_at(const uint8_t* qs, int i) { return i < 16 ? qs[i] & 15 : qs[i - 16] >> 4; }

// Fifth bit of value i: bit i of the little-endian 32-bit qh.
inline int q5_high(const uint8_t* qh, int i) { return (qh[i / 8] >> (i % 8)) & 1; }

// 2-bit quant of value i (Q2_K / Q3_K low bits): half h, group g, lane l.
inline int q2_at(const uint8_t* qs, int i) {
  const int h = i / 128, g = (i % 128) / 32, l = i % 32;
  return (qs[32 * h + l] >> (2 * g)) & 3;
}

void dequant_q4_0(const BlockQ4_0* b, float* y) {
  const float d = f16_at(b->d);
  for (int i = 0; i < kQK4; ++i) y[i] = d * float(q4_at(b->qs, i) - 8);
}
void dequant_q4_1(const BlockQ4_1* b, float* y) {
  const float d = f16_at(b->d), m = f16_at(b->m);
  for (int i = 0; i < kQK4; ++i) y[i] = d * float(q4_at(b->qs, i)) + m;
}
void dequant_q5_0(const BlockQ5_0* b, float* y) {
  const float d = f16_at(b->d);
  for (int i = 0; i < kQK4; ++i) y[i] = d * float((q4_at(b->qs, i) | q5_high(b->qh, i) << 4) - 16);
}
void dequant_q5_1(const BlockQ5_1* b, float* y) {
  const float d = f16_at(b->d), m = f16_at(b->m);
  for (int i = 0; i < kQK4; ++i) y[i] = d * float(q4_at(b->qs, i) | q5_high(b->qh, i) << 4) + m;
}

void dequant_q2_k(const BlockQ2_K* b, float* y) {
  const float d = f16_at(b->d), dmin = f16_at(b->dmin);
  for (int s = 0; s < 16; ++s) {
    const float dl = d * float(b->scales[s] & 15);   // exact: 11 + 4 bits
    const float ml = dmin * float(b->scales[s] >> 4);
    for (int i = 16 * s; i < 16 * s + 16; ++i) y[i] = dl * float(q2_at(b->qs, i)) - ml;
  }
}

void dequant_q3_k(const BlockQ3_K* b, float* y) {
  const float d = f16_at(b->d);
  int sc[16];
  q3k_scales(b->scales, sc);
  for (int s = 0; s < 16; ++s) {
    const float dl = d * float(sc[s]);
    for (int i = 16 * s; i < 16 * s + 16; ++i) {
      const int h = i / 128, g = (i % 128) / 32, l = i % 32;
      const int hb = (b->hmask[l] >> (4 * h + g)) & 1;
      y[i] = dl * float(q2_at(b->qs, i) - (hb ? 0 : 4));
    }
  }
}

// Q4_K / Q5_K nibble of value i: chunk c = i / 64 uses qs[32c .. 32c + 31],
// low nibbles for the first 32 values of the chunk, high for the next 32.
inline int q4k_at(const uint8_t* qs, int i) {
  const uint8_t byte = qs[32 * (i / 64) + i % 32];
  return (i % 64) < 32 ? byte & 15 : byte >> 4;
}

void dequant_q4_k(const BlockQ4_K* b, float* y) {
  const float d = f16_at(b->d), dmin = f16_at(b->dmin);
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    k4_scale_min(b->scales, s, &sc, &m);
    const float dl = d * float(sc), ml = dmin * float(m);
    for (int i = 32 * s; i < 32 * s + 32; ++i) y[i] = dl * float(q4k_at(b->qs, i)) - ml;
  }
}

void dequant_q5_k(const BlockQ5_K* b, float* y) {
  const float d = f16_at(b->d), dmin = f16_at(b->dmin);
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    k4_scale_min(b->scales, s, &sc, &m);
    const float dl = d * float(sc), ml = dmin * float(m);
    for (int i = 32 * s; i < 32 * s + 32; ++i) {
      const int q = q4k_at(b->qs, i) | (((b->qh[i % 32] >> s) & 1) << 4);
      y[i] = dl * float(q) - ml;
    }
  }
}

void dequant_q6_k(const BlockQ6_K* b, float* y) {
  const float d = f16_at(b->d);
  for (int i = 0; i < kQK_K; ++i) {
    const int h = i / 128, g = (i % 128) / 32, l = i % 32;
    const uint8_t lb = b->ql[64 * h + l + ((g & 1) ? 32 : 0)];
    const int low = g < 2 ? lb & 15 : lb >> 4;
    const int high = (b->qh[32 * h + l] >> (2 * g)) & 3;
    y[i] = d * float(b->scales[i / 16]) * float((low | high << 4) - 32);
  }
}

// IQ4_NL / IQ4_XS: value i of a 32-value (sub-)block is the table entry of
// index q4_at(qs, i), times the scale (every product exact: 11 + 6 + 7 bits).
void dequant_iq4_nl(const BlockIQ4_NL* b, float* y) {
  const float d = f16_at(b->d);
  for (int i = 0; i < kQK4; ++i) y[i] = d * float(kIQ4Values[q4_at(b->qs, i)]);
}
void dequant_iq4_xs(const BlockIQ4_XS* b, float* y) {
  const float d = f16_at(b->d);
  uint16_t scales_h;
  std::memcpy(&scales_h, &b->scales_h, 2);
  for (int ib = 0; ib < 8; ++ib) {
    const float dl = d * float(iq4xs_scale(scales_h, b->scales_l, ib));
    for (int i = 0; i < kQK4; ++i) y[32 * ib + i] = dl * float(kIQ4Values[q4_at(b->qs + 16 * ib, i)]);
  }
}

template <class B, class F>
void each_block(const uint8_t* src, int64_t n_blocks, float* dst, int per, F f) {
  for (int64_t k = 0; k < n_blocks; ++k)
    f(reinterpret_cast<const B*>(src + k * int64_t(sizeof(B))), dst + k * per);
}

}  // namespace

void q3k_scales(const uint8_t* S, int out[16]) {
  for (int s = 0; s < 16; ++s) {
    const int low = s < 8 ? S[s] & 15 : S[s - 8] >> 4;
    const int high = (S[8 + s % 4] >> (2 * (s / 4))) & 3;
    out[s] = (low | high << 4) - 32;
  }
}

bool dequantize_blocks(GgmlType type, const uint8_t* src, int64_t n_blocks, float* dst) {
  switch (type) {
    case GgmlType::kQ4_0: each_block<BlockQ4_0>(src, n_blocks, dst, kQK4, dequant_q4_0); return true;
    case GgmlType::kQ4_1: each_block<BlockQ4_1>(src, n_blocks, dst, kQK4, dequant_q4_1); return true;
    case GgmlType::kQ5_0: each_block<BlockQ5_0>(src, n_blocks, dst, kQK4, dequant_q5_0); return true;
    case GgmlType::kQ5_1: each_block<BlockQ5_1>(src, n_blocks, dst, kQK4, dequant_q5_1); return true;
    case GgmlType::kQ2_K: each_block<BlockQ2_K>(src, n_blocks, dst, kQK_K, dequant_q2_k); return true;
    case GgmlType::kQ3_K: each_block<BlockQ3_K>(src, n_blocks, dst, kQK_K, dequant_q3_k); return true;
    case GgmlType::kQ4_K: each_block<BlockQ4_K>(src, n_blocks, dst, kQK_K, dequant_q4_k); return true;
    case GgmlType::kQ5_K: each_block<BlockQ5_K>(src, n_blocks, dst, kQK_K, dequant_q5_k); return true;
    case GgmlType::kQ6_K: each_block<BlockQ6_K>(src, n_blocks, dst, kQK_K, dequant_q6_k); return true;
    case GgmlType::kIQ4_NL: each_block<BlockIQ4_NL>(src, n_blocks, dst, kQK4, dequant_iq4_nl); return true;
    case GgmlType::kIQ4_XS: each_block<BlockIQ4_XS>(src, n_blocks, dst, kQK_K, dequant_iq4_xs); return true;
    default: return false;
  }
}

}  // namespace larder
