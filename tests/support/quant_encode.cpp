// Min/max block encoders for the quantized GGML formats (see quant_encode.h;
// layouts: docs/quant-formats.md).
#include "tests/support/quant_encode.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/gguf/quant_blocks.h"

namespace larder::testing {

namespace {

// f16 of v >= 0, rounded up: at most 2^-10 relative (2^-24 absolute for
// subnormals) above v, never below.
uint16_t f16_up(float v) {
  uint16_t h = fp32_to_fp16(v);
  if (fp16_to_fp32(h) < v) ++h;  // positive halves order like their bits
  return h;
}

float amax_of(const float* x, int n) {
  float a = 0.0f;
  for (int i = 0; i < n; ++i) a = std::max(a, std::fabs(x[i]));
  return a;
}

// round(t) clamped to [lo, hi]; 0 for a zero divisor.
int quant(float v, float step, int lo, int hi) {
  if (step == 0.0f) return std::clamp(0, lo, hi);
  return int(std::clamp<long>(std::lround(v / step), lo, hi));
}

template <class B>
void store(const B& b, uint8_t* dst) {
  std::memcpy(dst, &b, sizeof(B));
}

// ---- legacy types: 32 values, value j < 16 in the low nibble of qs[j], j + 16 in the high

void pack_nibbles(const int* q, uint8_t qs[16]) {
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t((q[j] & 15) | (q[j + 16] & 15) << 4);
}
void pack_fifth_bits(const int* q, uint8_t qh[4]) {
  std::memset(qh, 0, 4);
  for (int i = 0; i < 32; ++i) qh[i / 8] |= uint8_t(((q[i] >> 4) & 1) << (i % 8));
}

// Symmetric: x = d * (q - offset), |q - offset| <= levels.
float symmetric_32(const float* x, int levels, int offset, uint16_t* d_out, int q[32]) {
  const uint16_t h = f16_up(amax_of(x, 32) / float(levels));
  const float d = fp16_to_fp32(h);
  for (int i = 0; i < 32; ++i) q[i] = quant(x[i], d, -levels, levels) + offset;
  *d_out = h;
  return d;
}

// With a min: x = d * q + m, q in 0..qmax.
void with_min_32(const float* x, int qmax, uint16_t* d_out, uint16_t* m_out, int q[32]) {
  const float lo = *std::min_element(x, x + 32), hi = *std::max_element(x, x + 32);
  const uint16_t hd = f16_up((hi - lo) / float(qmax)), hm = fp32_to_fp16(lo);
  const float d = fp16_to_fp32(hd), m = fp16_to_fp32(hm);
  for (int i = 0; i < 32; ++i) q[i] = quant(x[i] - m, d, 0, qmax);
  *d_out = hd;
  *m_out = hm;
}

void encode_q4_0(const float* x, uint8_t* dst) {
  BlockQ4_0 b;
  int q[32];
  symmetric_32(x, 7, 8, &b.d, q);
  pack_nibbles(q, b.qs);
  store(b, dst);
}
void encode_q5_0(const float* x, uint8_t* dst) {
  BlockQ5_0 b;
  int q[32];
  symmetric_32(x, 15, 16, &b.d, q);
  pack_nibbles(q, b.qs);
  pack_fifth_bits(q, b.qh);
  store(b, dst);
}
void encode_q4_1(const float* x, uint8_t* dst) {
  BlockQ4_1 b;
  int q[32];
  with_min_32(x, 15, &b.d, &b.m, q);
  pack_nibbles(q, b.qs);
  store(b, dst);
}
void encode_q5_1(const float* x, uint8_t* dst) {
  BlockQ5_1 b;
  int q[32];
  with_min_32(x, 31, &b.d, &b.m, q);
  pack_nibbles(q, b.qs);
  pack_fifth_bits(q, b.qh);
  store(b, dst);
}

// ---- k-quants: 256 values in n_sub sub-blocks -------------------------------

// Scales of a k-quant super-block with mins: sub-block s stores
// x = d * sc[s] * q - dmin * m[s], q in 0..qmax, sc in 0..sc_max, m in 0..m_max.
struct KScales {
  uint16_t d = 0, dmin = 0;
  int sc[16] = {}, m[16] = {};
  int q[256] = {};
};

KScales kquant_with_min(const float* x, int n_sub, int qmax, int sc_max, int m_max) {
  const int len = 256 / n_sub;
  float step[16], neg_lo[16], max_step = 0.0f, max_neg_lo = 0.0f;
  for (int s = 0; s < n_sub; ++s) {
    const float* xs = x + s * len;
    const float lo = std::min(0.0f, *std::min_element(xs, xs + len));
    const float hi = *std::max_element(xs, xs + len);
    step[s] = (hi - lo) / float(qmax);
    neg_lo[s] = -lo;
    max_step = std::max(max_step, step[s]);
    max_neg_lo = std::max(max_neg_lo, neg_lo[s]);
  }
  KScales k;
  k.d = f16_up(max_step / float(sc_max));
  k.dmin = f16_up(max_neg_lo / float(m_max));
  const float d = fp16_to_fp32(k.d), dmin = fp16_to_fp32(k.dmin);
  for (int s = 0; s < n_sub; ++s) {
    k.sc[s] = d == 0.0f ? 0 : std::min(sc_max, int(std::ceil(step[s] / d)));
    k.m[s] = quant(neg_lo[s], dmin, 0, m_max);
    const float dl = d * float(k.sc[s]), ml = dmin * float(k.m[s]);
    for (int i = s * len; i < (s + 1) * len; ++i) k.q[i] = quant(x[i] + ml, dl, 0, qmax);
  }
  return k;
}

// Symmetric super-block: x = d * sc[s] * q, q in -qmax..qmax, sc in 0..sc_max.
KScales kquant_symmetric(const float* x, int n_sub, int qmax, int sc_max) {
  const int len = 256 / n_sub;
  float step[16], max_step = 0.0f;
  for (int s = 0; s < n_sub; ++s) {
    step[s] = amax_of(x + s * len, len) / float(qmax);
    max_step = std::max(max_step, step[s]);
  }
  KScales k;
  k.d = f16_up(max_step / float(sc_max));
  const float d = fp16_to_fp32(k.d);
  for (int s = 0; s < n_sub; ++s) {
    k.sc[s] = d == 0.0f ? 0 : std::min(sc_max, int(std::ceil(step[s] / d)));
    const float dl = d * float(k.sc[s]);
    for (int i = s * len; i < (s + 1) * len; ++i) k.q[i] = quant(x[i], dl, -qmax, qmax);
  }
  return k;
}

// 2-bit fields (Q2_K, Q3_K low bits): value i = 128 h + 32 g + l sits in bits
// 2g..2g+1 of qs[32 h + l].
void pack_2bit(const int* q, uint8_t qs[64]) {
  std::memset(qs, 0, 64);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, g = (i % 128) / 32, l = i % 32;
    qs[32 * h + l] |= uint8_t((q[i] & 3) << (2 * g));
  }
}

// Q4_K / Q5_K: eight 6-bit scales and mins in 12 bytes.
void pack_k4_scales(const int* sc, const int* m, uint8_t S[12]) {
  std::memset(S, 0, 12);
  for (int s = 0; s < 4; ++s) {
    S[s] = uint8_t(sc[s] | (sc[s + 4] >> 4) << 6);
    S[s + 4] = uint8_t(m[s] | (m[s + 4] >> 4) << 6);
    S[s + 8] = uint8_t((sc[s + 4] & 15) | (m[s + 4] & 15) << 4);
  }
}

// Q4_K / Q5_K low nibbles: value 64 c + l (l < 32) in the low nibble of
// qs[32 c + l], value 64 c + 32 + l in its high nibble.
void pack_k4_nibbles(const int* q, uint8_t qs[128]) {
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      qs[32 * c + l] = uint8_t((q[64 * c + l] & 15) | (q[64 * c + 32 + l] & 15) << 4);
}

void encode_q2_k(const float* x, uint8_t* dst) {
  const KScales k = kquant_with_min(x, 16, 3, 15, 15);
  BlockQ2_K b;
  for (int s = 0; s < 16; ++s) b.scales[s] = uint8_t(k.sc[s] | k.m[s] << 4);
  pack_2bit(k.q, b.qs);
  b.d = k.d;
  b.dmin = k.dmin;
  store(b, dst);
}

void encode_q3_k(const float* x, uint8_t* dst) {
  KScales k = kquant_symmetric(x, 16, 3, 31);
  BlockQ3_K b;
  int u[256];  // q + 4 in 0..7: low two bits in qs, bit 2 in hmask
  for (int i = 0; i < 256; ++i) u[i] = k.q[i] + 4;
  pack_2bit(u, b.qs);
  std::memset(b.hmask, 0, sizeof(b.hmask));
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, g = (i % 128) / 32, l = i % 32;
    b.hmask[l] |= uint8_t((u[i] >> 2) << (4 * h + g));
  }
  // Sixteen 6-bit scales sc + 32: low nibbles in bytes 0..7 (s < 8 low, s >= 8
  // high nibble of byte s - 8), top two bits in bytes 8..11 at 2 * (s / 4).
  std::memset(b.scales, 0, sizeof(b.scales));
  for (int s = 0; s < 16; ++s) {
    const int v = k.sc[s] + 32;
    b.scales[s % 8] |= uint8_t((v & 15) << (s < 8 ? 0 : 4));
    b.scales[8 + s % 4] |= uint8_t((v >> 4) << (2 * (s / 4)));
  }
  b.d = k.d;
  store(b, dst);
}

void encode_q4_k(const float* x, uint8_t* dst) {
  const KScales k = kquant_with_min(x, 8, 15, 63, 63);
  BlockQ4_K b;
  b.d = k.d;
  b.dmin = k.dmin;
  pack_k4_scales(k.sc, k.m, b.scales);
  pack_k4_nibbles(k.q, b.qs);
  store(b, dst);
}

void encode_q5_k(const float* x, uint8_t* dst) {
  const KScales k = kquant_with_min(x, 8, 31, 63, 63);
  BlockQ5_K b;
  b.d = k.d;
  b.dmin = k.dmin;
  pack_k4_scales(k.sc, k.m, b.scales);
  pack_k4_nibbles(k.q, b.qs);
  std::memset(b.qh, 0, sizeof(b.qh));  // fifth bit of value i: bit i / 32 of qh[i % 32]
  for (int i = 0; i < 256; ++i) b.qh[i % 32] |= uint8_t(((k.q[i] >> 4) & 1) << (i / 32));
  store(b, dst);
}

void encode_q6_k(const float* x, uint8_t* dst) {
  const KScales k = kquant_symmetric(x, 16, 31, 127);
  BlockQ6_K b;
  std::memset(b.ql, 0, sizeof(b.ql));
  std::memset(b.qh, 0, sizeof(b.qh));
  // Value 128 h + 32 g + l, u = q + 32: low four bits in ql[64 h + l] (g = 0
  // low nibble, g = 2 high) or ql[64 h + 32 + l] (g = 1 low, g = 3 high);
  // top two bits at 2 g in qh[32 h + l].
  for (int i = 0; i < 256; ++i) {
    const int u = k.q[i] + 32;
    const int h = i / 128, g = (i % 128) / 32, l = i % 32;
    b.ql[64 * h + l + ((g & 1) ? 32 : 0)] |= uint8_t((u & 15) << (g < 2 ? 0 : 4));
    b.qh[32 * h + l] |= uint8_t((u >> 4) << (2 * g));
  }
  for (int s = 0; s < 16; ++s) b.scales[s] = int8_t(k.sc[s]);
  b.d = k.d;
  store(b, dst);
}

// ---- IQ4_NL / IQ4_XS: 4-bit indices into kIQ4Values -------------------------

// The index of the table value nearest to t (the lower one on a tie).
int iq4_index(float t) {
  int best = 0;
  for (int i = 1; i < 16; ++i)
    if (std::fabs(t - float(kIQ4Values[i])) < std::fabs(t - float(kIQ4Values[best]))) best = i;
  return best;
}

// Indices of 32 values of step dl (x = dl * kIQ4Values[q]), nibbles as Q4_0's.
void iq4_nibbles(const float* x, float dl, uint8_t qs[16]) {
  int q[32];
  for (int i = 0; i < 32; ++i) q[i] = dl == 0.0f ? iq4_index(0.0f) : iq4_index(x[i] / dl);
  pack_nibbles(q, qs);
}

void encode_iq4_nl(const float* x, uint8_t* dst) {
  BlockIQ4_NL b;
  b.d = f16_up(amax_of(x, 32) / 127.0f);
  iq4_nibbles(x, fp16_to_fp32(b.d), b.qs);
  store(b, dst);
}

// Sub-block s stores step d * sc[s] (sc in 0..31, as ls = sc + 32), from the
// symmetric k-quant scale choice with 127 levels.
void encode_iq4_xs(const float* x, uint8_t* dst) {
  const KScales k = kquant_symmetric(x, 8, 127, 31);
  BlockIQ4_XS b;
  b.d = k.d;
  uint16_t scales_h = 0;
  std::memset(b.scales_l, 0, sizeof(b.scales_l));
  const float d = fp16_to_fp32(k.d);
  for (int s = 0; s < 8; ++s) {
    const int ls = k.sc[s] + 32;
    b.scales_l[s / 2] |= uint8_t((ls & 15) << (4 * (s % 2)));
    scales_h |= uint16_t((ls >> 4) << (2 * s));
    iq4_nibbles(x + 32 * s, d * float(k.sc[s]), b.qs + 16 * s);
  }
  std::memcpy(&b.scales_h, &scales_h, 2);
  store(b, dst);
}

}  // namespace

bool encode_quant_block(GgmlType type, const float* x, uint8_t* dst) {
  switch (type) {
    case GgmlType::kQ4_0: encode_q4_0(x, dst); return true;
    case GgmlType::kQ4_1: encode_q4_1(x, dst); return true;
    case GgmlType::kQ5_0: encode_q5_0(x, dst); return true;
    case GgmlType::kQ5_1: encode_q5_1(x, dst); return true;
    case GgmlType::kQ2_K: encode_q2_k(x, dst); return true;
    case GgmlType::kQ3_K: encode_q3_k(x, dst); return true;
    case GgmlType::kQ4_K: encode_q4_k(x, dst); return true;
    case GgmlType::kQ5_K: encode_q5_k(x, dst); return true;
    case GgmlType::kQ6_K: encode_q6_k(x, dst); return true;
    case GgmlType::kIQ4_NL: encode_iq4_nl(x, dst); return true;
    case GgmlType::kIQ4_XS: encode_iq4_xs(x, dst); return true;
    default: return false;
  }
}

}  // namespace larder::testing
