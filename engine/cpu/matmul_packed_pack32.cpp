// The packers of the 32-value block formats (Q8_0, Q4_0 .. Q5_1, IQ4_NL,
// IQ4_XS): file blocks into the layouts of matmul_packed.h, group by group.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "engine/cpu/matmul_packed.h"
#include "engine/gguf/quant_blocks.h"

namespace larder::packed_detail {

// Groups [g_begin, g_end) of a Q8_0 matrix into the layout of matmul_packed.h.
void pack_q8_0_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin, int64_t g_end) {
  constexpr int kR = PackedMatrix::kGroupRows;
  constexpr size_t kQB = PackedMatrix::kBlockQuantBytes;
  const int nb = int(w.ne[0] / kQ8_0BlockSize);
  for (int64_t g = g_begin; g < g_end; ++g) {
    uint8_t* q = data + size_t(g) * group_stride;
    auto* s = reinterpret_cast<uint16_t*>(q + size_t(nb) * kQB);
    const int64_t r_end = std::min<int64_t>(kR, w.ne[1] - g * kR);
    // Padding rows: w = 0 (a full group writes every quant byte below).
    if (r_end < kR) std::memset(q, 0x80, size_t(nb) * kQB);
    std::memset(s, 0, group_stride - size_t(nb) * kQB);
    for (int64_t r = 0; r < r_end; ++r) {
      const auto* src = reinterpret_cast<const BlockQ8_0*>(w.row(g * kR + r));
      for (int b = 0; b < nb; ++b) {
        s[size_t(b) * kR + r] = src[b].d;
        uint8_t* dst = q + size_t(b) * kQB + size_t(r) * 4;
        for (int j = 0; j < 8; ++j) {
          uint32_t v;
          std::memcpy(&v, src[b].qs + 4 * j, 4);
          v ^= 0x80808080u;  // w + 128 as u8
          std::memcpy(dst + size_t(j) * PackedMatrix::kChunkBytes, &v, 4);
        }
      }
    }
  }
}

// The same for Q4_0 and Q5_0: chunk j of a block takes bytes 4j..4j+3 of
// each row's qs as they are (low nibbles: values 4j + k, high: 16 + 4j + k);
// Q5_0's fifth bits follow in one more vector, byte 4r + k holding bit
// (4j + k) of row r's qh in its bit j.
// Q4_1 and Q5_1 store the same quants (w = d q + m), and their mins m after
// the scales; IQ4_NL the same indices (w = kIQ4Values[i]).
void pack_q4_0_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin, int64_t g_end) {
  constexpr int kR = PackedMatrix::kGroupRows;
  const bool q5 = w.type == GgmlType::kQ5_0 || w.type == GgmlType::kQ5_1;
  const bool mins = w.type == GgmlType::kQ4_1 || w.type == GgmlType::kQ5_1;
  const size_t kQB = q5 ? PackedMatrix::kQ50BlockQuantBytes : PackedMatrix::kQ40BlockQuantBytes;
  const size_t block_bytes = ggml_type_size(w.type);
  const int nb = int(w.ne[0] / kQK4);
  for (int64_t g = g_begin; g < g_end; ++g) {
    uint8_t* q = data + size_t(g) * group_stride;
    auto* s = reinterpret_cast<uint16_t*>(q + size_t(nb) * kQB);
    const int64_t r_end = std::min<int64_t>(kR, w.ne[1] - g * kR);
    // Padding rows (a full group writes every quant byte below).
    if (r_end < kR) std::memset(q, 0x88, size_t(nb) * kQB);  // q = 8, w = 0 (Q4_0; IQ4_NL: scale 0)
    if (q5 && r_end < kR) {  // q = 16, w = 0
      for (int b = 0; b < nb; ++b) {
        std::memset(q + size_t(b) * kQB, 0x00, PackedMatrix::kQ40BlockQuantBytes);
        std::memset(q + size_t(b) * kQB + PackedMatrix::kQ40BlockQuantBytes, 0xFF, PackedMatrix::kChunkBytes);
      }
    }
    std::memset(s, 0, group_stride - size_t(nb) * kQB);
    for (int64_t r = 0; r < r_end; ++r) {
      const uint8_t* row = w.row(g * kR + r);
      for (int b = 0; b < nb; ++b) {
        const uint8_t* blk = row + size_t(b) * block_bytes;
        // d leads every block; then m (Q4_1, Q5_1), qh (Q5_0, Q5_1), qs.
        const uint8_t* qs = blk + block_bytes - 16;
        std::memcpy(&s[size_t(b) * kR + r], blk, sizeof(uint16_t));
        if (mins) std::memcpy(&s[size_t(nb + b) * kR + r], blk + 2, sizeof(uint16_t));
        uint8_t* dst = q + size_t(b) * kQB + size_t(r) * 4;
        for (int j = 0; j < 4; ++j) std::memcpy(dst + size_t(j) * PackedMatrix::kChunkBytes, qs + 4 * j, 4);
        if (!q5) continue;
        uint32_t qh;
        std::memcpy(&qh, qs - 4, 4);
        for (int k = 0; k < 4; ++k) {
          uint8_t bits = 0;
          for (int j = 0; j < 8; ++j) bits = uint8_t(bits | (((qh >> (4 * j + k)) & 1u) << j));
          dst[PackedMatrix::kQ40BlockQuantBytes + size_t(k)] = bits;
        }
      }
    }
  }
}

// IQ4_XS: each super-block's 8 sub-blocks as 8 blocks of IQ4_NL's layout;
// their scales ls - 32 (int8) after the quants, then the d (f16).
void pack_iq4xs_groups(const WeightView& w, uint8_t* data, size_t group_stride, int64_t g_begin, int64_t g_end) {
  constexpr int kR = PackedMatrix::kGroupRows;
  constexpr size_t kQB = PackedMatrix::kQ40BlockQuantBytes;
  const int nb = int(w.ne[0] / kQK4);
  for (int64_t g = g_begin; g < g_end; ++g) {
    uint8_t* q = data + size_t(g) * group_stride;
    auto* ls = reinterpret_cast<int8_t*>(q + size_t(nb) * kQB);
    auto* ds = reinterpret_cast<uint16_t*>(ls + size_t(nb) * kR);
    const int64_t r_end = std::min<int64_t>(kR, w.ne[1] - g * kR);
    if (r_end < kR) std::memset(q, 0x88, size_t(nb) * kQB);  // index 8, scales 0
    std::memset(ls, 0, group_stride - size_t(nb) * kQB);
    for (int64_t r = 0; r < r_end; ++r) {
      const auto* row = reinterpret_cast<const BlockIQ4_XS*>(w.row(g * kR + r));
      for (int sb = 0; sb < nb / 8; ++sb) {
        const BlockIQ4_XS& blk = row[sb];
        uint16_t scales_h;
        std::memcpy(&ds[size_t(sb) * kR + r], &blk.d, 2);
        std::memcpy(&scales_h, &blk.scales_h, 2);
        for (int ib = 0; ib < 8; ++ib) {
          const int b = 8 * sb + ib;
          ls[size_t(b) * kR + r] = int8_t(iq4xs_scale(scales_h, blk.scales_l, ib));
          uint8_t* dst = q + size_t(b) * kQB + size_t(r) * 4;
          for (int j = 0; j < 4; ++j)
            std::memcpy(dst + size_t(j) * PackedMatrix::kChunkBytes, blk.qs + 16 * ib + 4 * j, 4);
        }
      }
    }
  }
}

}  // namespace larder::packed_detail
