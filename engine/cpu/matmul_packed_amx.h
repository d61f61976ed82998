// The K-quant (Q4_K, Q6_K) prefill loop on AMX, shared by
// matmul_packed_q4k.cpp and matmul_packed_q6k.cpp. Private to engine/cpu.
//
// Why it pays where Q8_0 on AMX does not (docs/cpu-kernels.md): a K-quant's
// sub-block scales are small integers, so they fold into the weights. Per
// group of 16 rows and super-block, the products p = sc_i * q_j (Q4_K,
// 0..945) or sc_i * (q_j - 32) (Q6_K, -4064..4096) are split as
//   p = 64 * hi + lo,   lo = p & 63 (0..63),   hi = p >> 6 (-64..64)
// (both int8), and two TDPBSSDs per 64 values give the super-block's exact
// int32 sum S = 64 * sum(hi x) + sum(lo x) for 16 tokens x 16 rows: one
// store per super-block instead of one per 32 values, and the same S as the
// VNNI tiles, so the same f32 steps give the same bits.
//
// Unpacked form of one group's super-block (8 KiB, built per group in a
// thread's scratch, reused by every 16-token tile of a token block):
//   [k4 = 0..3][part: 0 = hi, 1 = lo][16 B-tile rows][16 rows x 4 bytes]
// B-tile row j of K-step k4 holds values 64 k4 + 4 j .. + 3 of each row.
#pragma once

#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(LARDER_PACKED_AVX512)
#define LARDER_KQUANT_AMX 1

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/cpu/matmul_packed.h"
#include "engine/cpu/matmul_packed_tiles.h"
#include "engine/cpu/simd.h"

namespace larder::packed_detail {

inline constexpr size_t kAmxSuperBlockBytes = 8192;  // unpacked: 4 K-steps x 2 parts x 1 KiB

// Loads the K-quant tile configuration on this thread if another is loaded
// (tiles 0, 1: C hi / lo; 2: A; 3, 4: B hi / lo; all 16 rows x 64 bytes).
void configure_kquant_tiles();
// This thread's 64-byte aligned scratch of at least `bytes` (grown, kept).
uint8_t* amx_scratch(size_t bytes);

// Stores p (16 int16 words per 32 bytes: the even bytes' products in pe, the
// odd bytes' in po, each -4096..4096) as the hi and lo int8 planes.
inline void amx_split_store(__m512i pe, __m512i po, uint8_t* hi, uint8_t* lo) {
  const __m512i m63 = _mm512_set1_epi16(63), mlow = _mm512_set1_epi16(0x00FF);
  _mm512_store_si512(lo, _mm512_or_si512(_mm512_and_si512(pe, m63), _mm512_slli_epi16(_mm512_and_si512(po, m63), 8)));
  _mm512_store_si512(hi, _mm512_or_si512(_mm512_and_si512(_mm512_srai_epi16(pe, 6), mlow),
                                         _mm512_slli_epi16(_mm512_srai_epi16(po, 6), 8)));
}

// Rows [row_begin, row_end) x n_tokens tokens of a packed K-quant matrix,
// where kquant_amx_active() and n_tokens >= 16; returns how many tokens it
// did (0 or n_tokens: the caller's vector tiles take the rest). A last tile
// of fewer than 16 tokens runs on a zero-padded copy of its activations (the
// unpacked weights are there already; its padding rows are not stored).
// unpack(sb, out) writes one super-block's unpacked form (8 KiB at out) from
// its packed bytes sb; finish(acc, hi, lo, sb, a, nb) adds the super-block's
// f32 step to acc[t] for the 16 tokens from its int32 sums hi[t][r], lo[t][r]
// (a: token 0's activations of that super-block, nb apart).
template <class Act, class Unpack, class Finish>
int run_kquant_amx(const PackedMatrix& w, const Act* x, int n_tokens, float* y, int y_stride,
                    int64_t row_begin, int64_t row_end, Unpack&& unpack, Finish&& finish) {
  if (n_tokens < 16 || !kquant_amx_active()) return 0;
  constexpr int kR = PackedMatrix::kGroupRows;
  constexpr size_t kActBlockBytes = 1024 * 1024;  // a token block's activations stay in L2
  const int nb = w.n_blocks();
  const size_t block_bytes = w.type() == GgmlType::kQ4_K ? PackedMatrix::kQ4KBlockBytes : PackedMatrix::kQ6KBlockBytes;
  const int64_t g_begin = row_begin / kR, g_end = (row_end + kR - 1) / kR;
  const int tail = int(row_end - (g_end - 1) * kR);
  const size_t x_stride = size_t(nb) * sizeof(Act);
  const int block = std::max(16, int(kActBlockBytes / x_stride) / 16 * 16);
  configure_kquant_tiles();
  const size_t unpacked_bytes = size_t(nb) * kAmxSuperBlockBytes;
  uint8_t* bt = amx_scratch(unpacked_bytes + 16 * x_stride);
  const int full = n_tokens / 16 * 16, rem = n_tokens - full;
  Act* pad = reinterpret_cast<Act*>(bt + unpacked_bytes);  // the last tile's tokens, then zeros
  if (rem > 0) {
    std::memcpy(static_cast<void*>(pad), x + size_t(full) * nb, size_t(rem) * x_stride);
    std::memset(static_cast<void*>(pad + size_t(rem) * nb), 0, size_t(16 - rem) * x_stride);
  }
  alignas(64) int32_t chi[16][16], clo[16][16];
  for (int tb = 0; tb < n_tokens; tb += block) {
    const int te = std::min(n_tokens, tb + block);
    for (int64_t g = g_begin; g < g_end; ++g) {
      const uint8_t* grp = w.group(g);
      for (int s = 0; s < nb; ++s) unpack(grp + size_t(s) * block_bytes, bt + size_t(s) * kAmxSuperBlockBytes);
      const __mmask16 last = g + 1 == g_end ? __mmask16((1u << tail) - 1u) : __mmask16(0xffff);
      for (int t0 = tb; t0 < te; t0 += 16) {
        const int nt = std::min(16, te - t0);
        const Act* xt = nt == 16 ? x + size_t(t0) * nb : pad;
        __m512 acc[16];
        for (__m512& a : acc) a = _mm512_setzero_ps();
        for (int s = 0; s < nb; ++s) {
          const Act* a = xt + s;
          const uint8_t* b = bt + size_t(s) * kAmxSuperBlockBytes;
          _tile_zero(0);
          _tile_zero(1);
          for (int k4 = 0; k4 < 4; ++k4) {
            _tile_loadd(2, a->qs + 64 * k4, x_stride);
            _tile_loadd(3, b + k4 * 2048, 64);
            _tile_loadd(4, b + k4 * 2048 + 1024, 64);
            _tile_dpbssd(0, 2, 3);
            _tile_dpbssd(1, 2, 4);
          }
          _tile_stored(0, chi, 64);
          _tile_stored(1, clo, 64);
          finish(acc, chi, clo, grp + size_t(s) * block_bytes, a, nb);
        }
        for (int t = 0; t < nt; ++t) _mm512_mask_storeu_ps(y + size_t(t0 + t) * y_stride + g * kR, last, acc[t]);
      }
    }
  }
  return n_tokens;
}

// Prefill of a K-quant: on AMX where kquant_amx_active() and there are 16
// tokens or more (run_kquant_amx), else on the vector tiles.
template <class Act, int kT, class Unpack, class Finish>
void run_kquant_prefill(const GroupTileFn<Act> (&tiles)[kT], const PackedMatrix& w, const Act* x, int n_tokens,
                        float* y, int y_stride, int64_t row_begin, int64_t row_end, Unpack&& unpack, Finish&& finish) {
  if (run_kquant_amx(w, x, n_tokens, y, y_stride, row_begin, row_end, unpack, finish) == n_tokens) return;
  run_group_tiles(tiles, w, x, n_tokens, y, y_stride, row_begin, row_end);
}

// S[t] = 64 * hi[t] + lo[t], the 16 rows' exact super-block sums for token t.
inline __m512i amx_sum(const int32_t (&hi)[16][16], const int32_t (&lo)[16][16], int t) {
  return _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(hi[t]), 6), _mm512_load_si512(lo[t]));
}

}  // namespace larder::packed_detail
#endif
