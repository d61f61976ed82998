// The loop the packed K-quant kernels share (matmul_packed_q4k.cpp,
// matmul_packed_q6k.cpp): tiles of up to kT tokens x one group of 16 rows,
// tokens in blocks whose activations stay in L2 while the groups stream past.
// Private to engine/cpu.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/cpu/matmul_packed.h"

namespace larder::packed_detail {

// Packs groups [g_begin, g_end) of a K-quant matrix (blocks of 256): each
// group's bytes zeroed (padding rows stay all 0: q, scales and d), then
// pack_block(out, r, block) for every super-block of its real rows, out the
// group's bytes for that super-block (block_bytes apart), r the row in the group.
template <class Block, class Fn>
void pack_kquant_groups(const WeightView& w, uint8_t* data, size_t group_stride, size_t block_bytes,
                        int64_t g_begin, int64_t g_end, Fn&& pack_block) {
  constexpr int kR = PackedMatrix::kGroupRows;
  const int nb = int(w.ne[0] / 256);
  for (int64_t g = g_begin; g < g_end; ++g) {
    uint8_t* grp = data + size_t(g) * group_stride;
    std::memset(grp, 0, group_stride);
    const int64_t r_end = std::min<int64_t>(kR, w.ne[1] - g * kR);
    for (int64_t r = 0; r < r_end; ++r) {
      const auto* src = reinterpret_cast<const Block*>(w.row(g * kR + r));
      for (int s = 0; s < nb; ++s) pack_block(grp + size_t(s) * block_bytes, int(r), src[s]);
    }
  }
}

// Decode and verification tiles (up to 4 tokens) prefetch the weights this
// many super-blocks ahead of the one they compute (2.3 / 3.4 KB per stream
// for Q4_K / Q6_K), to L1; the hardware prefetchers fetch further ahead.
// Measured on the Intel Xeon with AMX (2026-12-03, 2 threads, 1B-shaped
// matrices past the L3, each beside a plain read of its bytes): 1 ahead streams
// 0.97-1.03 of a plain read of the same bytes; 2, 4, 8, 16, 32 ahead 0.89,
// 0.83, 0.79, 0.85, 0.82 (far prefetches to L1 are evicted or hold its fill
// buffers).
inline constexpr int kSuperBlocksAhead = 1;

// A tile: (group bytes, token 0's activations, blocks per row, y at token 0
// and the group's first row, y's row stride, rows of the group to write).
template <class Act>
using GroupTileFn = void (*)(const uint8_t*, const Act*, int, float*, int, int);

// A decode tile: one token over G groups at once (group g at the first's
// bytes + g * group stride), G independent streams of weights.
template <class Act>
using DecodeGroupsFn = void (*)(const uint8_t*, size_t, const Act*, int, float*, int, int);

// How many groups a K-quant decode tile (Q2_K .. Q6_K) of type streams at once, up to
// their kGDecode of 4; Q3_K .. Q6_K by CPU vendor, once per process. Each row's
// arithmetic is the same whatever the count (only the order in which rows
// are visited changes), so the bits do not depend on it.
//   Intel Xeon with AMX (2026-12-03, 2 threads): 4 groups streamed faster than
//     2 or 6 (1 was not measured there): 4.
//   AMD EPYC Zen 5 (2026-12-05, bench_decode on the 1B-shaped Q4_K_M file,
//     1 and 4 alternated run by run in one process, both orders): 1 group,
//     which reads a row chunk's weights as one sequential stream, decodes
//     5-11 % faster on 2 threads and 10 % on 1; 2 groups matched 4: 1.
// Q8_0's tile keeps its 4: on the same Zen 5 one group was 12-17 % slower.
// Q2_K takes 4 on both: on the Zen 5 (2026-12-07, 1B-shaped matrices, 2
// threads, 1 and 4 alternated pass by pass in one process: test_cpu
// "[.bench-decode]" with LARDER_BENCH_DECODE_GROUPS=1,4), 4 streamed 7-15 %
// faster, while Q3_K was even and Q4_K 6-10 % slower.
int kquant_decode_groups(GgmlType type);

// Rows [row_begin, row_end) of w times one token's activations, the groups
// in runs of up to max_groups (1..kG); tiles[G - 1] takes G groups.
template <class Act, int kG>
void run_decode_groups(const DecodeGroupsFn<Act> (&tiles)[kG], const PackedMatrix& w, const Act* x, float* y,
                       int y_stride, int64_t row_begin, int64_t row_end, int max_groups = kG) {
  constexpr int kR = PackedMatrix::kGroupRows;
  const int64_t g_begin = row_begin / kR, g_end = (row_end + kR - 1) / kR;
  const int tail = int(row_end - (g_end - 1) * kR);
  const int64_t run = std::clamp(max_groups, 1, kG);
  for (int64_t g = g_begin; g < g_end; g += run) {
    const int G = int(std::min(run, g_end - g));
    tiles[G - 1](w.group(g), w.group_stride(), x, w.n_blocks(), y + g * kR, y_stride, g + G == g_end ? tail : kR);
  }
}

// Rows [row_begin, row_end) of w times n_tokens activations; tiles[T - 1]
// takes T tokens.
template <class Act, int kT>
void run_group_tiles(const GroupTileFn<Act> (&tiles)[kT], const PackedMatrix& w, const Act* x, int n_tokens,
                     float* y, int y_stride, int64_t row_begin, int64_t row_end) {
  constexpr size_t kActBlockBytes = 512 * 1024;
  constexpr int kR = PackedMatrix::kGroupRows;
  const int nb = w.n_blocks();
  const int64_t g_begin = row_begin / kR, g_end = (row_end + kR - 1) / kR;
  const int tail = int(row_end - (g_end - 1) * kR);
  int block = int(kActBlockBytes / (size_t(nb) * sizeof(Act)));
  block = std::max(kT, block / kT * kT);
  for (int tb = 0; tb < n_tokens; tb += block) {
    const int te = std::min(n_tokens, tb + block);
    for (int64_t g = g_begin; g < g_end; ++g) {
      const int last = g + 1 == g_end ? tail : kR;
      for (int t0 = tb; t0 < te; t0 += kT) {
        const int T = std::min(kT, te - t0);
        tiles[T - 1](w.group(g), x + size_t(t0) * nb, nb, y + size_t(t0) * y_stride + g * kR, y_stride, last);
      }
    }
  }
}

}  // namespace larder::packed_detail
