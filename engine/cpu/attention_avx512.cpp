// The AVX-512 attention pass (head_dim a multiple of 16, at most 256; of 32
// over Q8_0 pages): the query heads of one kv head and up to
// kAttentionTileTokens tokens share a pass over its K/V, 16 positions at a
// time, with an online softmax per chunk of kAttentionChunk positions and
// the chunks' states folded in order (attention.h). attention.cpp dispatches
// to it; attention_avx2.cpp is the 8-lane pass of the same arithmetic.
#include "engine/cpu/attention_detail.h"

#if defined(__AVX512F__)

#include <algorithm>
#include <cassert>
#include <cmath>

#include "engine/cpu/simd.h"
#include "engine/gguf/ggml_types.h"

namespace larder::attention_detail {

namespace {

// ---- head_dim a multiple of 16 (every real model): query heads of one kv
// head together, keys 16 at a time --------------------------------------------
//
// Arithmetic per query head h (fixed, whatever the batch, the head range or
// the thread, so a token's output depends only on its q and the pages), in
// one pass over its positions in blocks b of 16 (a block: 16 consecutive
// positions of a page, from its slot 0; the token's last block is masked at
// its own position):
//   score_p = hsum16(sum_c q_c * k_{p,c}) * scale   (c: 16-lane chunks of the
//             head dims in order, one FMA each; hsum16: the fixed butterfly
//             of hsum16x16 below, the same tree for every position)
//   m_b     = max(m_{b-1}, max_{p in b} score_p)     (the running max, m_0 = the first block's)
//   when m_b > m_{b-1}: l and acc are multiplied by exp_avx512(m_{b-1} - m_b)
//   e_p     = exp_avx512(score_p - m_b)
//   l      += e_b (16 lanes)
//   acc    += sum_{p in b} e_p v_p, one FMA per p in increasing p
//   out_h   = acc * (1 / reduce_add(l))
// (the online softmax of Milakov & Gimelshein 2018, "Online normalizer
// calculation for softmax", as FlashAttention uses it: no row of scores is
// stored, and each block's K and V rows are read together, once). The
// blocks go in chunks of kAttentionChunk positions (attention.h): m, l and
// acc start afresh in each chunk, and the chunks' (m, l, acc) are folded in
// chunk order by fold_chunk before out_h is taken from the fold.
// K/V are read in the page dtype (F16 widened exactly to f32).

// v[0..15] -> lane i = the sum of the 16 lanes of v[i] (a butterfly of
// 128/256-bit shuffles; every input goes through the same tree of adds).
inline __m512 hsum16x16(__m512 v[16]) {
  __m512 a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i)  // lanes 0-7: v[2i], 8-15: v[2i+1], halves added
    a[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
  for (int i = 0; i < 4; ++i)  // quarter k: input 4i + k, 4 lanes
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xDD));
  for (int i = 0; i < 2; ++i)  // quarter q: inputs 8i + q, 8i + 4 + q, 2 lanes each
    c[i] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0x44),
                         _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0xEE));
  const __m512 d = _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], 0x88), _mm512_shuffle_ps(c[0], c[1], 0xDD));
  // d's lane 4q + m holds input q + 4m (see the shuffles): put input i in lane i.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, d);
}

constexpr int kMaxGroupHeads = 4;  // query heads sharing one pass over K/V
constexpr int kMaxRows = kMaxGroupHeads * kAttentionTileTokens;
static_assert(kMaxRows == kAttentionDecodeHeads);
static_assert(kMaxGroupHeads == kAttentionGroupHeads);

// 16 positions' V rows of one kv head (attention_detail.h).
using VRows = attention_detail::KvRows;

// Query heads whose V sums (NC registers each) one pass over a V row feeds:
// as many as fit 16 of the 32 registers, at most kMaxGroupHeads.
template <int NC>
inline constexpr int kVHeads = std::max(1, std::min(kMaxGroupHeads, 16 / NC));

// Where v_accumulate reads V rows (VRows): f32 (F32 pages in place, or
// widened into a buffer), F16 or Q8_0 in the page.
enum class VSrc { kF32, kF16, kQ8 };

// Chunk c (values 16c .. 16c + 15) of row j of vr as f32: Q8_0 as d * q, one
// f32 product, exactly as rows_f32_avx512 widens it.
template <VSrc S>
[[gnu::always_inline]] inline __m512 v_chunk(const VRows& vr, int j, int c) {
  if constexpr (S == VSrc::kF16) {
    return _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(vr.h + size_t(j) * vr.h_stride + 16 * c)));
  } else if constexpr (S == VSrc::kQ8) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(vr.q8 + size_t(j) * vr.q8_stride) + c / 2;
    const __m512 q = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs + 16 * (c % 2)))));
    return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(b->d)), q);
  } else {
    return _mm512_loadu_ps(vr.f + size_t(j) * vr.f_stride + 16 * c);
  }
}

// a[h * 16 * NC ..] += sum_j e[h * e_stride + j] * v_j for HN query heads
// (consecutive rows of the V sums and of the weights e) over positions j < n
// (1 <= n <= 16) of one 16-row block, one FMA per position in increasing j:
// each head's sums get the arithmetic they would get alone, and each V row
// is loaded (and widened from F16 or Q8_0) once for all HN heads.
// pf.row_at(j) goes beside row j (always inlined: where GCC left this as a
// call, the prefetches' gain was gone).
template <int NC, int HN, VSrc S>
[[gnu::always_inline]] inline void v_accumulate(const VRows& vr, const float* e, size_t e_stride, int n, float* a,
                                                const attention_detail::RowPrefetch& pf) {
  __m512 acc[HN][NC];
  for (int h = 0; h < HN; ++h)
    for (int c = 0; c < NC; ++c) acc[h][c] = _mm512_loadu_ps(a + size_t(h) * 16 * NC + 16 * c);
  // A do-while: with a loop that might run zero times GCC copied the sums
  // to the stack and back around it, 32 stores and 32 loads a call for
  // heads of 64 dims (in-cache decode attention at 16k: 0.91x as long this way).
  assert(n >= 1);
  int j = 0;
  do {
    pf.row_at(j);
    __m512 v[NC];
    for (int c = 0; c < NC; ++c) v[c] = v_chunk<S>(vr, j, c);
    for (int h = 0; h < HN; ++h) {
      const __m512 ej = _mm512_set1_ps(e[size_t(h) * e_stride + j]);
      for (int c = 0; c < NC; ++c) acc[h][c] = _mm512_fmadd_ps(ej, v[c], acc[h][c]);
    }
  } while (++j < n);
  for (int h = 0; h < HN; ++h)
    for (int c = 0; c < NC; ++c) _mm512_storeu_ps(a + size_t(h) * 16 * NC + 16 * c, acc[h][c]);
}

// v_accumulate for hn (1 .. kMaxGroupHeads) heads, hn a run-time count.
template <int NC, VSrc S>
inline void v_accumulate_heads(int hn, const VRows& vr, const float* e, size_t e_stride, int n, float* a,
                               const attention_detail::RowPrefetch& pf) {
  static_assert(kMaxGroupHeads == 4);
  switch (hn) {
    case 1: v_accumulate<NC, 1, S>(vr, e, e_stride, n, a, pf); break;
    case 2: v_accumulate<NC, 2, S>(vr, e, e_stride, n, a, pf); break;
    case 3: v_accumulate<NC, 3, S>(vr, e, e_stride, n, a, pf); break;
    default: v_accumulate<NC, 4, S>(vr, e, e_stride, n, a, pf); break;
  }
}

// One 16-position block of the online softmax above for HN query heads
// (consecutive in q, in the running maxima mx, the sums l and the V sums
// acc, hd = 16 * NC apart), over K rows kr (F16 ones widened as they are
// used, to the same f32 values as widened first), positions j < nkt: the
// scores, the running max (rescaling l and acc when it rises), and e_p,
// stored in e[head][16] (0 past nkt). Each head's arithmetic is what it
// would get alone. Reading F16 K rows in place for a decode step, instead of
// widening them into a buffer first, made its attention 0.9x as long at 16k
// positions (docs/cpu-kernels.md).
template <int NC, int HN, bool F16>
inline void block_softmax(const attention_detail::KvRows& kr, const float* q, int nkt, float scale, float* mx,
                          __m512* lsum, float* acc, float (*e)[16]) {
  const __mmask16 m = __mmask16((1u << nkt) - 1u);
  __m512 sc[HN];
  auto kc = [&](int j, int c) {
    if constexpr (F16)
      return _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kr.h + size_t(j) * kr.h_stride + 16 * c)));
    else
      return _mm512_loadu_ps(kr.f + size_t(j) * kr.f_stride + 16 * c);
  };
  if constexpr (HN >= 2 && F16 && HN * NC <= 16) {
    // A decode step's four heads of one kv head: each F16 K chunk is widened
    // once for all four (per head it was widened four times, and
    // vcvtph2ps, one a cycle, set the pace: in cache a 16k-position step
    // took 0.88x as long this way, docs/cpu-kernels.md), and one hsum16x16
    // takes 4 positions x 4 heads (slot 4h + i: position 4g + i of head h).
    // Each slot gets the arithmetic of the per-head loop below (the same
    // products in the same order, and hsum16x16 treats every slot alike).
    // The f32 rows of a prefill tile stay with that loop (1.04x as long
    // this way). Up to 16 q chunks (HN * NC) sit in registers beside the 16
    // partial sums: four heads of up to 64 dims, or two of up to 128
    // (kScoreHeads; four heads of 128 were 1.17x as long this way). Groups
    // of 2 or 3 heads (kv groups of 2, 3, or 7 = 4 + 3, and heads of 80 to
    // 128 dims in pairs) take the same form with the other heads' slots
    // zero: a hsum16x16 a quarter or half idle costs less than widening K
    // per head (in cache, groups of 3: 0.86x as long; 2: 0.88x).
    __m512 qr[HN][NC];
    for (int h = 0; h < HN; ++h)
      for (int c = 0; c < NC; ++c) qr[h][c] = _mm512_loadu_ps(q + size_t(h) * 16 * NC + 16 * c);
    __m512 s4[4];
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      __m512 part[16];
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const int j = 4 * g + i;
        for (int h = HN; h < 4; ++h) part[4 * h + i] = _mm512_setzero_ps();  // unused slots
        if (j >= nkt) {
          for (int h = 0; h < HN; ++h) part[4 * h + i] = _mm512_setzero_ps();
          continue;
        }
        const __m512 k0 = kc(j, 0);
        for (int h = 0; h < HN; ++h) part[4 * h + i] = _mm512_mul_ps(qr[h][0], k0);
        for (int c = 1; c < NC; ++c) {
          const __m512 k = kc(j, c);
          for (int h = 0; h < HN; ++h) part[4 * h + i] = _mm512_fmadd_ps(qr[h][c], k, part[4 * h + i]);
        }
      }
      s4[g] = _mm512_mul_ps(hsum16x16(part), _mm512_set1_ps(scale));
    }
    // s4[g]'s 128-bit block h is head h's positions 4g .. 4g + 3: transpose
    // the 4 x 4 blocks so that sc[h] holds head h's 16 positions in order.
    const __m512 t0 = _mm512_shuffle_f32x4(s4[0], s4[1], 0x44), t1 = _mm512_shuffle_f32x4(s4[0], s4[1], 0xEE);
    const __m512 t2 = _mm512_shuffle_f32x4(s4[2], s4[3], 0x44), t3 = _mm512_shuffle_f32x4(s4[2], s4[3], 0xEE);
    sc[0] = _mm512_shuffle_f32x4(t0, t2, 0x88);
    if constexpr (HN > 1) sc[1] = _mm512_shuffle_f32x4(t0, t2, 0xDD);
    if constexpr (HN > 2) sc[2] = _mm512_shuffle_f32x4(t1, t3, 0x88);
    if constexpr (HN > 3) sc[3] = _mm512_shuffle_f32x4(t1, t3, 0xDD);
  } else {
    for (int h = 0; h < HN; ++h) {
      const float* qh = q + size_t(h) * 16 * NC;
      __m512 part[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        if (j >= nkt) {
          part[j] = _mm512_setzero_ps();
          continue;
        }
        __m512 a = _mm512_mul_ps(_mm512_loadu_ps(qh), kc(j, 0));
        for (int c = 1; c < NC; ++c) a = _mm512_fmadd_ps(_mm512_loadu_ps(qh + 16 * c), kc(j, c), a);
        part[j] = a;
      }
      sc[h] = _mm512_mul_ps(hsum16x16(part), _mm512_set1_ps(scale));
    }
  }
  float bmax[HN];
  for (int h = 0; h < HN; ++h) bmax[h] = _mm512_mask_reduce_max_ps(m, sc[h]);
  for (int h = 0; h < HN; ++h) {
    if (bmax[h] > mx[h]) {
      if (mx[h] != -INFINITY) {
        const __m512 f = exp_avx512(_mm512_set1_ps(mx[h] - bmax[h]));
        lsum[h] = _mm512_mul_ps(lsum[h], f);
        float* a = acc + size_t(h) * 16 * NC;
        for (int c = 0; c < NC; ++c) _mm512_storeu_ps(a + 16 * c, _mm512_mul_ps(_mm512_loadu_ps(a + 16 * c), f));
      }
      mx[h] = bmax[h];
    }
  }
  for (int h = 0; h < HN; ++h) {
    const __m512 ev = _mm512_maskz_mov_ps(m, exp_avx512(_mm512_sub_ps(sc[h], _mm512_set1_ps(mx[h]))));
    lsum[h] = _mm512_add_ps(lsum[h], ev);
    _mm512_store_ps(e[h], ev);
  }
}

// Query heads one block_softmax call takes: kMaxGroupHeads, or 2 for heads
// of 80 to 128 dims, whose four heads' q chunks do not fit in registers
// beside the partial sums but two heads' do, so that a decode step's F16 K
// chunks are widened once per pair instead of once per head (heads of 128,
// in cache at 16k positions: 0.93x as long, docs/cpu-kernels.md).
template <int NC>
inline constexpr int kScoreHeads = NC > 4 && NC <= 8 ? 2 : kMaxGroupHeads;

// block_softmax for hn (1 .. kMaxGroupHeads) heads, hn a run-time count.
template <int NC, bool F16>
inline void block_softmax_heads(int hn, const attention_detail::KvRows& kr, const float* q, int nkt, float scale,
                                float* mx, __m512* lsum, float* acc, float (*e)[16]) {
  switch (hn) {
    case 1: block_softmax<NC, 1, F16>(kr, q, nkt, scale, mx, lsum, acc, e); break;
    case 2: block_softmax<NC, 2, F16>(kr, q, nkt, scale, mx, lsum, acc, e); break;
    case 3: block_softmax<NC, 3, F16>(kr, q, nkt, scale, mx, lsum, acc, e); break;
    default: block_softmax<NC, 4, F16>(kr, q, nkt, scale, mx, lsum, acc, e); break;
  }
}

// The running state of one row's online softmax over a run of positions: m
// (the max score), l (16 lanes of sums of e_p) and the V sums (hd floats,
// kept apart: the tiles hold them in scratch).
struct RowState {
  float m;
  __m512 l;
};

// Folds chunk state (s, s_acc) into the state (t, t_acc) of the chunks
// before it, both nonempty: the state with the smaller max is scaled by
// exp(its max - the larger), once, by one FMA per lane into the other
// (equal maxima: s is scaled, by exp(0) = 1). attend_tile16 and
// attend_token_merge fold with this alone, so a split attention and one
// pass give the same bits.
template <int NC>
[[gnu::always_inline]] inline void fold_chunk(RowState& t, float* t_acc, const RowState& s, const float* s_acc) {
  if (s.m > t.m) {
    const __m512 f = exp_avx512(_mm512_set1_ps(t.m - s.m));
    t.l = _mm512_fmadd_ps(t.l, f, s.l);
    for (int c = 0; c < NC; ++c)
      _mm512_storeu_ps(t_acc + 16 * c,
                       _mm512_fmadd_ps(_mm512_loadu_ps(t_acc + 16 * c), f, _mm512_loadu_ps(s_acc + 16 * c)));
    t.m = s.m;
  } else {
    const __m512 f = exp_avx512(_mm512_set1_ps(s.m - t.m));
    t.l = _mm512_fmadd_ps(s.l, f, t.l);
    for (int c = 0; c < NC; ++c)
      _mm512_storeu_ps(t_acc + 16 * c,
                       _mm512_fmadd_ps(_mm512_loadu_ps(s_acc + 16 * c), f, _mm512_loadu_ps(t_acc + 16 * c)));
  }
}

// out = acc / (the sum of l's lanes), as every pass ends a row.
template <int NC>
[[gnu::always_inline]] inline void finish_row(const RowState& st, const float* acc, float* out) {
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(st.l));
  for (int c = 0; c < NC; ++c) _mm512_storeu_ps(out + 16 * c, _mm512_mul_ps(_mm512_loadu_ps(acc + 16 * c), inv));
}

// n_kv consecutive kv heads (the first at offset off of a K/V row, the next
// hd values on), each with nh query heads: NH = n_kv * nh heads, contiguous
// in q and out (q and out at the first one's slice), for nt consecutive
// tokens at positions pos0 .. pos0 + nt - 1: token t's heads at
// q + t * q_stride, out likewise. Every 16-row K block is widened once per
// kv head and used by all nt * nh query rows of it (row r = t * NH + head),
// and every V row once for up to kVHeads of them; each row keeps the
// arithmetic above, so a token's output depends neither on nt nor on the
// heads it is computed with. Several kv heads at once are for decode: a
// page's K/V rows are then read as one run per row instead of one hd-wide
// slice per row per pass. rows = nt * NH <= kMaxRows. scratch: 2 * rows * hd
// floats (the V sums of the current chunk and of the chunks before it).
// Positions go in chunks of kAttentionChunk (attention.h): each row's online
// softmax starts afresh in each chunk, and the chunks' states are folded in
// order (fold_chunk). With partial set, only chunk `chunk` is computed (nt
// must be 1) and each row's state is written to partial (row r at r *
// (kPartialHeader + hd)) instead of out, for attend_token_merge.
// NC = hd / 16 is a template argument so that the per-chunk accumulators
// and the 16 partial dot products stay in registers (with a run-time count
// GCC kept them in memory and copied them with memcpy: 3x slower).
template <int NC>
void attend_tile16(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos0, int nt, int hd,
                   size_t off, int n_kv, const float* q, size_t q_stride, float* out, int nh, float* scratch,
                   int chunk = 0, float* partial = nullptr) {
  constexpr int nc = NC;
  const KvLayout& lay = pool.layout();
  const int ps = lay.page_size, last = pos0 + nt - 1, n_pages = last / ps + 1;
  const int NH = n_kv * nh, rows = nt * NH;
  assert(rows <= kMaxRows);
  assert(partial == nullptr || nt == 1);
  const float scale = float(1.0 / std::sqrt(double(hd)));
  float* accs = scratch;                       // [rows][hd] V sums of the current chunk
  float* done_accs = scratch + size_t(rows) * hd;  // [rows][hd] those of the chunks before it, folded
  alignas(64) float kconv[16 * 256];  // 16 K rows of up to 256 head dims, widened from Q8_0, or from F16 for a tile
  alignas(64) float e[kMaxRows][16];  // one block's e_p for the query heads of one kv head and token
  float mx[kMaxRows];                 // running max m per row
  __m512 lsum[kMaxRows];              // l per row
  RowState done[kMaxRows];            // the chunks before this one, folded
  const bool f16 = lay.dtype == KvDtype::kF16, q8 = lay.dtype == KvDtype::kQ8_0;
  // Rows summed over a whole page (each of its blocks of up to 16 slots,
  // for every kv head), and whether this pass reads every kv head of them.
  const int block_slots = std::min(16, ps), row_steps = ps * n_kv;
  const bool whole_rows = off == 0 && size_t(n_kv) * hd == size_t(lay.kv_dim);
  const attention_detail::ChunkPlan plan(ps, n_pages, last, partial != nullptr, chunk);
  auto reaches = [&](int r, int ch) { return attention_detail::ChunkPlan::reaches(pos0 + r / NH, ch); };
  for (int ch = plan.begin; ch < plan.end; ++ch) {
    for (int r = 0; r < rows; ++r) {
      mx[r] = -INFINITY;
      lsum[r] = _mm512_setzero_ps();
    }
    std::fill_n(accs, size_t(rows) * hd, 0.0f);
    for (int pi = plan.page_begin(ch); pi < plan.page_end(ch); ++pi) {
      const int n_slots = pi + 1 < n_pages ? ps : last - pi * ps + 1;
      const uint8_t* kb = static_cast<const uint8_t*>(pool.k_block(pages[pi], layer));
      const uint8_t* vb = static_cast<const uint8_t*>(pool.v_block(pages[pi], layer));
      for (int j0 = 0; j0 < n_slots; j0 += 16) {
        const int p0 = pi * ps + j0;  // the block's first position; its 16 lanes
                                      // may run past the page, into slots the next block rewrites
        const int nk = std::min(16, n_slots - j0);
        for (int kv = 0; kv < n_kv; ++kv) {
          // K rows: F16 ones widened as they are used by a single token, and
          // once into kconv for a tile of several, which all read them.
          attention_detail::KvRows kr;
          if (f16 && nt == 1) {
            kr = attention_detail::block_rows(kb + size_t(j0) * lay.row_bytes(), lay, off + size_t(kv) * hd, nk, hd,
                                              kconv, attention_detail::rows_f32_avx512);
          } else {
            kr.f = attention_detail::rows_f32_avx512(kb + size_t(j0) * lay.row_bytes(), lay, off + size_t(kv) * hd, nk,
                                                     hd, kconv, &kr.f_stride);
          }
          // V rows, read in place whatever the dtype (F16 and Q8_0 ones
          // widened as they are summed; off and hd are multiples of 32 for
          // Q8_0 here), so no buffer.
          const VRows vr = attention_detail::block_rows(vb + size_t(j0) * lay.row_bytes(), lay, off + size_t(kv) * hd,
                                                        nk, hd, nullptr, attention_detail::rows_f32_avx512, true);
          // The next page's rows, prefetched as the first token's first heads
          // sum this block's V rows: in address order when this pass reads
          // whole rows (a decode step on one thread), else this kv head's slice.
          attention_detail::RowPrefetch pf;
          if (pi + 1 < n_pages) {
            const void* nk_block = pool.k_block(pages[pi + 1], layer);
            const void* nv_block = pool.v_block(pages[pi + 1], layer);
            pf = whole_rows ? attention_detail::RowPrefetch::whole_blocks(nk_block, nv_block, lay,
                                                                           (j0 / 16 * n_kv + kv) * block_slots,
                                                                           row_steps)
                            : attention_detail::RowPrefetch(nk_block, nv_block, lay, j0, off + size_t(kv) * hd, hd);
          }
          const attention_detail::RowPrefetch none;
          const int t_first = std::max(0, p0 - pos0);
          for (int t = t_first; t < nt; ++t) {  // tokens before p0 see none of the block
            const int nkt = std::min(nk, pos0 + t - p0 + 1);
            for (int h = kv * nh; h < (kv + 1) * nh; h += kScoreHeads<nc>) {
              const int hn = std::min(kScoreHeads<nc>, (kv + 1) * nh - h), r = t * NH + h;
              const float* qt = q + size_t(t) * q_stride + size_t(h) * hd;
              (kr.h ? block_softmax_heads<nc, true> : block_softmax_heads<nc, false>)(
                  hn, kr, qt, nkt, scale, mx + r, lsum + r, accs + size_t(r) * hd, e + (h - kv * nh));
            }
            for (int h = kv * nh; h < (kv + 1) * nh; h += kVHeads<nc>) {
              const float* eh = e[h - kv * nh];
              float* a = accs + size_t(t * NH + h) * hd;
              const int hn = std::min(kVHeads<nc>, (kv + 1) * nh - h);
              const attention_detail::RowPrefetch& p = t == t_first && h == kv * nh ? pf : none;
              (f16  ? v_accumulate_heads<nc, VSrc::kF16>
               : q8 ? v_accumulate_heads<nc, VSrc::kQ8>
                    : v_accumulate_heads<nc, VSrc::kF32>)(hn, vr, eh, 16, nkt, a, p);
            }
          }
        }
      }
    }
    if (partial != nullptr) {  // one chunk's state, as it is
      for (int r = 0; r < rows; ++r) {
        float* pr = partial + size_t(r) * (kPartialHeader + hd);
        _mm512_storeu_ps(pr, _mm512_setzero_ps());
        pr[0] = mx[r];
        pr[1] = 16.0f;  // lanes of sums (kPartialHeader)
        _mm512_storeu_ps(pr + 16, lsum[r]);
        std::copy_n(accs + size_t(r) * hd, hd, pr + kPartialHeader);
      }
      return;
    }
    if (ch + 1 == plan.end) break;  // the last chunk's state is folded as each row ends, below
    for (int r = 0; r < rows; ++r) {
      if (!reaches(r, ch)) continue;  // a token before this chunk: it saw none of it
      float* da = done_accs + size_t(r) * hd;
      if (ch == 0) {  // every token reaches chunk 0
        done[r] = {mx[r], lsum[r]};
        std::copy_n(accs + size_t(r) * hd, hd, da);
      } else {
        fold_chunk<nc>(done[r], da, {mx[r], lsum[r]}, accs + size_t(r) * hd);
      }
    }
  }
  for (int r = 0; r < rows; ++r) {
    float* o = out + size_t(r / NH) * q_stride + size_t(r % NH) * hd;
    float* a = accs + size_t(r) * hd;
    if (plan.n_chunks == 1) {  // one chunk: its state as it is
      finish_row<nc>({mx[r], lsum[r]}, a, o);
      continue;
    }
    float* da = done_accs + size_t(r) * hd;
    if (reaches(r, plan.n_chunks - 1)) fold_chunk<nc>(done[r], da, {mx[r], lsum[r]}, a);
    finish_row<nc>(done[r], da, o);
  }
}

// attend_token_merge's fold for heads of 16 * NC dims.
template <int NC>
void merge_rows(const float* partials, int n_chunks, int n_rows, float* out, float* acc) {
  constexpr int hd = 16 * NC;
  const size_t row = kPartialHeader + hd, chunk = size_t(n_rows) * row;
  for (int r = 0; r < n_rows; ++r) {
    const float* p0 = partials + size_t(r) * row;
    assert(p0[1] == 16.0f);  // written by the 16-lane pass
    RowState t{p0[0], _mm512_loadu_ps(p0 + 16)};
    std::copy_n(p0 + kPartialHeader, hd, acc);
    for (int c = 1; c < n_chunks; ++c) {
      const float* pc = p0 + size_t(c) * chunk;
      fold_chunk<NC>(t, acc, {pc[0], _mm512_loadu_ps(pc + 16)}, pc + kPartialHeader);
    }
    finish_row<NC>(t, acc, out + size_t(r) * hd);
  }
}

using Tile16Fn = void (*)(const PagePool&, int, std::span<const int32_t>, int, int, int, size_t, int, const float*,
                          size_t, float*, int, float*, int, float*);
constexpr Tile16Fn kTiles16[16] = {
    &attend_tile16<1>,  &attend_tile16<2>,  &attend_tile16<3>,  &attend_tile16<4>,
    &attend_tile16<5>,  &attend_tile16<6>,  &attend_tile16<7>,  &attend_tile16<8>,
    &attend_tile16<9>,  &attend_tile16<10>, &attend_tile16<11>, &attend_tile16<12>,
    &attend_tile16<13>, &attend_tile16<14>, &attend_tile16<15>, &attend_tile16<16>};
static_assert(16 * 16 == kMaxHeadDim);
using MergeFn = void (*)(const float*, int, int, float*, float*);
constexpr MergeFn kMerges16[16] = {
    &merge_rows<1>,  &merge_rows<2>,  &merge_rows<3>,  &merge_rows<4>,  &merge_rows<5>,  &merge_rows<6>,
    &merge_rows<7>,  &merge_rows<8>,  &merge_rows<9>,  &merge_rows<10>, &merge_rows<11>, &merge_rows<12>,
    &merge_rows<13>, &merge_rows<14>, &merge_rows<15>, &merge_rows<16>};

}  // namespace

void tile16(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos0, int nt, int hd,
            size_t off, int n_kv, const float* q, size_t q_stride, float* out, int nh, float* scratch, int chunk,
            float* partial) {
  assert(hd % 16 == 0 && size_t(hd) <= kMaxHeadDim);
  kTiles16[hd / 16 - 1](pool, layer, pages, pos0, nt, hd, off, n_kv, q, q_stride, out, nh, scratch, chunk,
                        partial);
}

void merge16(const float* partials, int n_chunks, int n_rows, int hd, float* out, float* acc) {
  assert(hd % 16 == 0 && size_t(hd) <= kMaxHeadDim);
  kMerges16[hd / 16 - 1](partials, n_chunks, n_rows, out, acc);
}

}  // namespace larder::attention_detail

#endif  // __AVX512F__
