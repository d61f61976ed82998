// Attention of query heads sharing one kv head, 8 lanes wide (head_dim a
// multiple of 8): in AVX2 builds for every such head size, in AVX-512 builds
// for those the 16-lane pass of attention_avx512.cpp does not take (not a
// multiple of 16; over Q8_0 pages, not of 32). A tile of consecutive tokens (as attend_tile16); F16 K/V
// rows are widened in registers as they are used, each chunk once for a
// token's query heads of one kv head in groups of 4, 2 or 1 (block_scores,
// block_v_sums), Q8_0 ones once per block for all of the tile's rows.
//
// Arithmetic per query head h (fixed, whatever the batch, the head range or
// the thread, so a token's output depends only on its q and the pages), over
// its positions in blocks b of 8 (8 consecutive positions of a page from its
// slot 0; the token's last block masked at its own position):
//   score_p = hsum8(sum_c q_c * k_{p,c}) * scale   (c: 8-lane chunks of the
//             head dims in order, one FMA each; hsum8: the fixed tree of
//             hsum8x8 below)
//   m_b     = max(m_{b-1}, max_{p in b} score_p)   (the running max)
//   when m_b > m_{b-1}: l and acc are multiplied by exp_avx2(m_{b-1} - m_b)
//   e_p     = exp_avx2(score_p - m_b)              (simd_avx2.h)
//   l      += e_b (8 lanes)
//   acc    += sum_{p in b} e_p v_p, one FMA per p in increasing p
//   out_h   = acc * (1 / hsum8(l))
// (the online softmax of attention_avx512.cpp's 16-lane pass: no score rows
// are stored, and a block's K and V rows are read together, once). As there,
// the blocks go in chunks of kAttentionChunk positions (attention.h): m, l
// and acc start afresh in each chunk, and the chunks' (m, l, acc) are folded
// in chunk order by fold_chunk8 before out_h is taken from the fold.
// K/V are read in the page dtype (F16 widened exactly to f32, Q8_0 as d * q).
#include "engine/cpu/attention_detail.h"

#ifdef LARDER_ATTENTION_AVX2

#include <algorithm>
#include <cassert>
#include <cmath>
#include <utility>

#include "engine/cpu/simd_avx2.h"
#include "engine/gguf/ggml_types.h"
#include "engine/gguf/quant_blocks.h"

namespace larder::attention_detail {

namespace {

// v[0..7] -> lane i = the sum of the 8 lanes of v[i] (horizontal adds, then
// the two 128-bit halves; every input goes through the same tree).
inline __m256 hsum8x8(const __m256 v[8]) {
  const __m256 a0 = _mm256_hadd_ps(v[0], v[1]), a1 = _mm256_hadd_ps(v[2], v[3]);
  const __m256 a2 = _mm256_hadd_ps(v[4], v[5]), a3 = _mm256_hadd_ps(v[6], v[7]);
  const __m256 b0 = _mm256_hadd_ps(a0, a1), b1 = _mm256_hadd_ps(a2, a3);
  return _mm256_add_ps(_mm256_permute2f128_ps(b0, b1, 0x20), _mm256_permute2f128_ps(b0, b1, 0x31));
}

inline float hsum8(__m256 v) {
  __m256 in[8] = {v, v, v, v, v, v, v, v};
  return _mm_cvtss_f32(_mm256_castps256_ps128(hsum8x8(in)));
}

// n rows (values off .. off + hd of each) of a K or V block as f32: F32 read
// in place (*stride = kv_dim), F16 and Q8_0 widened exactly into dst ([n][hd]).
const float* rows_f32(const void* block, const KvLayout& lay, size_t off, int n, int hd, float* dst,
                      size_t* stride) {
  if (lay.dtype == KvDtype::kF32) {
    *stride = size_t(lay.kv_dim);
    return static_cast<const float*>(block) + off;
  }
  *stride = size_t(hd);
  for (int j = 0; j < n; ++j) {
    const uint8_t* row = static_cast<const uint8_t*>(block) + size_t(j) * lay.row_bytes();
    float* o = dst + size_t(j) * hd;
    if (lay.dtype == KvDtype::kF16) {
      const uint16_t* src = reinterpret_cast<const uint16_t*>(row) + off;
      for (int c = 0; c < hd; c += 8)
        _mm256_storeu_ps(o + c, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + c))));
      continue;
    }
    const auto* blocks = reinterpret_cast<const BlockQ8_0*>(row);
    for (int c = 0; c < hd; c += 8) {  // off % 8 == 0: 8 values never straddle a block
      const size_t at = off + size_t(c);
      const BlockQ8_0& b = blocks[at / 32];
      const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + at % 32))));
      _mm256_storeu_ps(o + c, _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(b.d)), q));
    }
  }
  return dst;
}

constexpr int kBlock = 8;

// The 8 values of chunk c of row j of r, as f32.
template <bool F16>
inline __m256 load8(const KvRows& r, int j, int c) {
  if constexpr (F16)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r.h + size_t(j) * r.h_stride + 8 * c)));
  else
    return _mm256_loadu_ps(r.f + size_t(j) * r.f_stride + 8 * c);
}

}  // namespace

bool heads8_supported(int hd) {
  return hd % 8 == 0 && hd <= 256;
}

namespace {

// Scores of HN query heads (HN = 1, 2 or 4: consecutive in q, hd apart) of
// one kv head over the block's K rows j < nkt, into sc[h] (lane j: head h's
// position j, scaled; lanes past nkt 0). Each K chunk is loaded (and widened
// from F16) once for all HN heads: per head, vcvtph2ps (one a cycle) paced
// the scores, as it did on AVX-512 (docs/cpu-kernels.md). One hsum8x8 takes
// P = 8 / HN positions x HN heads (slot P * h + i: head h, position P * g +
// i of group g), and a transpose of P-lane pieces puts each head's scores
// back in order. Every score has the arithmetic of the per-head form:
// mul(q_0, k_0), then one FMA per chunk in order, then the same tree of
// hsum8x8, which treats every slot alike.
template <int NC, int HN, bool F16>
[[gnu::always_inline]] inline void block_scores(const KvRows& k, const float* q, int hd, int nkt, float scale,
                                                __m256 sc[HN]) {
  static_assert(HN == 1 || HN == 2 || HN == 4);
  constexpr int P = kBlock / HN;
  const int nc = NC > 0 ? NC : hd / 8;
  __m256 s[HN];
  auto group = [&]<bool kFull>(int g) {
    const int ni = kFull ? P : std::clamp(nkt - P * g, 0, P);
    __m256 part[kBlock];
#pragma GCC unroll 8
    for (int i = 0; i < P; ++i) {
      if (!kFull && i >= ni) {
        for (int h = 0; h < HN; ++h) part[P * h + i] = _mm256_setzero_ps();
        continue;
      }
      const __m256 k0 = load8<F16>(k, P * g + i, 0);
      for (int h = 0; h < HN; ++h) part[P * h + i] = _mm256_mul_ps(_mm256_loadu_ps(q + size_t(h) * hd), k0);
    }
    for (int c = 1; c < nc; ++c) {
#pragma GCC unroll 8
      for (int i = 0; i < P; ++i) {
        if (!kFull && i >= ni) continue;
        const __m256 kc = load8<F16>(k, P * g + i, c);
        for (int h = 0; h < HN; ++h)
          part[P * h + i] = _mm256_fmadd_ps(_mm256_loadu_ps(q + size_t(h) * hd + 8 * c), kc, part[P * h + i]);
      }
    }
    s[g] = _mm256_mul_ps(hsum8x8(part), _mm256_set1_ps(scale));
  };
  if (nkt == kBlock) {
#pragma GCC unroll 4
    for (int g = 0; g < HN; ++g) group.template operator()<true>(g);
  } else {
    for (int g = 0; g < HN; ++g) group.template operator()<false>(g);
  }
  if constexpr (HN == 1) {
    sc[0] = s[0];
  } else if constexpr (HN == 2) {  // s[g]: head 0 in lanes 0-3, head 1 in 4-7
    sc[0] = _mm256_permute2f128_ps(s[0], s[1], 0x20);
    sc[1] = _mm256_permute2f128_ps(s[0], s[1], 0x31);
  } else {  // s[g]: pair h (lanes 2h, 2h + 1) is head h: a 4 x 4 transpose of pairs
    const __m256d t0 = _mm256_unpacklo_pd(_mm256_castps_pd(s[0]), _mm256_castps_pd(s[1]));
    const __m256d t1 = _mm256_unpackhi_pd(_mm256_castps_pd(s[0]), _mm256_castps_pd(s[1]));
    const __m256d t2 = _mm256_unpacklo_pd(_mm256_castps_pd(s[2]), _mm256_castps_pd(s[3]));
    const __m256d t3 = _mm256_unpackhi_pd(_mm256_castps_pd(s[2]), _mm256_castps_pd(s[3]));
    sc[0] = _mm256_castpd_ps(_mm256_permute2f128_pd(t0, t2, 0x20));
    sc[1] = _mm256_castpd_ps(_mm256_permute2f128_pd(t1, t3, 0x20));
    sc[2] = _mm256_castpd_ps(_mm256_permute2f128_pd(t0, t2, 0x31));
    sc[3] = _mm256_castpd_ps(_mm256_permute2f128_pd(t1, t3, 0x31));
  }
}

// V sums of HN query heads (their sums at o + h * hd): o_h += e[h][j] * v_j
// over j < nkt, one FMA per position in increasing j, CW = 8 / HN chunks of
// all HN heads at a time (8 sums in registers), so that each V chunk is
// loaded (and widened) once for the HN heads. pf (when not null) goes beside
// the rows of the first chunks.
template <int NC, int HN, bool F16>
[[gnu::always_inline]] inline void block_v_sums(const KvRows& v, const float (*e)[kBlock], int nkt, float* o,
                                                int hd, const RowPrefetch* pf) {
  constexpr int CW = kBlock / HN;
  // CN chunks from c0 for the HN heads, CN a compile-time count so that the
  // sums stay in registers (with a run-time count GCC kept them on the stack).
  auto pass = [&]<int CN>(int c0) {
    __m256 acc[HN][CN];
    for (int h = 0; h < HN; ++h)
      for (int c = 0; c < CN; ++c) acc[h][c] = _mm256_loadu_ps(o + size_t(h) * hd + 8 * (c0 + c));
    const bool prefetch = pf != nullptr && c0 == 0;
    for (int j = 0; j < nkt; ++j) {
      if (prefetch) pf->row_at(j);
      __m256 vc[CN];
      for (int c = 0; c < CN; ++c) vc[c] = load8<F16>(v, j, c0 + c);
      for (int h = 0; h < HN; ++h) {
        const __m256 ej = _mm256_set1_ps(e[h][j]);
        for (int c = 0; c < CN; ++c) acc[h][c] = _mm256_fmadd_ps(ej, vc[c], acc[h][c]);
      }
    }
    for (int h = 0; h < HN; ++h)
      for (int c = 0; c < CN; ++c) _mm256_storeu_ps(o + size_t(h) * hd + 8 * (c0 + c), acc[h][c]);
  };
  // CW chunks at a time, then the rest (fewer than CW) in one pass.
  const int nc = NC > 0 ? NC : hd / 8;
  int c0 = 0;
#pragma GCC unroll 8
  for (; c0 + CW <= nc; c0 += CW) pass.template operator()<CW>(c0);
  const int rest = nc - c0;
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((rest == I + 1 ? pass.template operator()<I + 1>(c0) : void()), ...);
  }(std::make_integer_sequence<int, CW - 1>{});
}

// One block of the online softmax for HN heads of one token (rows r .. r +
// HN - 1, their q at qh and V sums at oh, hd apart): scores, the running
// max (rescaling l and the sums when it rises), e_p, and the V sums.
template <int NC, int HN, bool F16>
inline void block_step(const KvRows& k, const KvRows& v, const float* qh, float* oh, int hd, int nkt, float scale,
                       __m256 keep, float* mx, __m256* lsum, const RowPrefetch* pf) {
  const int nc = NC > 0 ? NC : hd / 8;
  __m256 sc[HN];
  block_scores<NC, HN, F16>(k, qh, hd, nkt, scale, sc);
  alignas(32) float e[HN][kBlock];
  for (int h = 0; h < HN; ++h) {
    _mm256_store_ps(e[h], sc[h]);
    float bmax = e[h][0];
    for (int j = 1; j < nkt; ++j) bmax = e[h][j] > bmax ? e[h][j] : bmax;
    if (bmax > mx[h]) {
      if (mx[h] != -INFINITY) {
        const __m256 f = exp_avx2(_mm256_set1_ps(mx[h] - bmax));
        lsum[h] = _mm256_mul_ps(lsum[h], f);
        float* o = oh + size_t(h) * hd;
        for (int c = 0; c < nc; ++c) _mm256_storeu_ps(o + 8 * c, _mm256_mul_ps(_mm256_loadu_ps(o + 8 * c), f));
      }
      mx[h] = bmax;
    }
    const __m256 ev = _mm256_and_ps(keep, exp_avx2(_mm256_sub_ps(sc[h], _mm256_set1_ps(mx[h]))));
    lsum[h] = _mm256_add_ps(lsum[h], ev);
    _mm256_store_ps(e[h], ev);
  }
  block_v_sums<NC, HN, F16>(v, e, nkt, oh, hd, pf);
}

// The running state of one row's online softmax over a run of positions: m
// (the max score) and l (8 lanes of sums of e_p); its V sums are kept apart.
struct RowState8 {
  float m;
  __m256 l;
};

// Folds chunk state (s, s_acc) into the state (t, t_acc) of the chunks
// before it, both nonempty: the state with the smaller max is scaled by
// exp_avx2(its max - the larger), once, by one FMA per lane into the other
// (equal maxima: s is scaled, by exp(0) = 1). The 16-lane pass's fold_chunk
// at 8 lanes; attend_tile8 and merge8 fold with this alone, so a split
// attention and one pass give the same bits.
template <int NC>
[[gnu::always_inline]] inline void fold_chunk8(RowState8& t, float* t_acc, const RowState8& s, const float* s_acc,
                                               int hd) {
  const int nc = NC > 0 ? NC : hd / 8;
  const bool s_larger = s.m > t.m;
  const __m256 f = exp_avx2(_mm256_set1_ps(s_larger ? t.m - s.m : s.m - t.m));
  if (s_larger) {
    t.l = _mm256_fmadd_ps(t.l, f, s.l);
    for (int c = 0; c < nc; ++c)
      _mm256_storeu_ps(t_acc + 8 * c,
                       _mm256_fmadd_ps(_mm256_loadu_ps(t_acc + 8 * c), f, _mm256_loadu_ps(s_acc + 8 * c)));
    t.m = s.m;
  } else {
    t.l = _mm256_fmadd_ps(s.l, f, t.l);
    for (int c = 0; c < nc; ++c)
      _mm256_storeu_ps(t_acc + 8 * c,
                       _mm256_fmadd_ps(_mm256_loadu_ps(s_acc + 8 * c), f, _mm256_loadu_ps(t_acc + 8 * c)));
  }
}

// out = acc / (hsum8 of l), as every row ends (acc and out may be the same).
template <int NC>
[[gnu::always_inline]] inline void finish_row8(const RowState8& st, const float* acc, float* out, int hd) {
  const int nc = NC > 0 ? NC : hd / 8;
  const __m256 inv = _mm256_set1_ps(1.0f / hsum8(st.l));
  for (int c = 0; c < nc; ++c) _mm256_storeu_ps(out + 8 * c, _mm256_mul_ps(_mm256_loadu_ps(acc + 8 * c), inv));
}

// The online softmax of rows r = t * nh + h (nt tokens at pos0.., nh query
// heads of the kv head at offset off) over pages [pi_begin, pi_end) of the
// token's pages: running max mx[r], sums lsum[r], V sums at acc_base + t *
// acc_stride + h * hd. One chunk's pages, in a function of its own: inlined
// into attend_tile8_t with the chunk loop around it, a 16k decode step took
// 1.05-1.1x as long (GCC 12).
template <int NC, bool F16>
[[gnu::noinline]] void chunk_pages_pass(const PagePool& pool, int layer, std::span<const int32_t> pages, int pi_begin,
                                        int pi_end, int pos0, int nt, int hd, size_t off, const float* q,
                                        size_t q_stride, float* acc_base, size_t acc_stride, int nh, float* mx,
                                        __m256* lsum) {
  const KvLayout& lay = pool.layout();
  const int ps = lay.page_size, last = pos0 + nt - 1, n_pages = last / ps + 1;
  const float scale = float(1.0 / std::sqrt(double(hd)));
  alignas(32) float kconv[kBlock * 256];  // 8 Q8_0 K rows of up to 256 head dims, widened
  alignas(32) float vconv[kBlock * 256];  // 8 Q8_0 V rows likewise
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int pi = pi_begin; pi < pi_end; ++pi) {
    const int n_slots = pi + 1 < n_pages ? ps : last - pi * ps + 1;
    const uint8_t* kb = static_cast<const uint8_t*>(pool.k_block(pages[pi], layer));
    const uint8_t* vb = static_cast<const uint8_t*>(pool.v_block(pages[pi], layer));
    for (int j0 = 0; j0 < n_slots; j0 += kBlock) {
      const int p0 = pi * ps + j0;  // its 8 lanes may run past the page, into slots the next block rewrites
      const int nk = std::min(kBlock, n_slots - j0);
      const KvRows k = block_rows(kb + size_t(j0) * lay.row_bytes(), lay, off, nk, hd, kconv, rows_f32);
      const KvRows v = block_rows(vb + size_t(j0) * lay.row_bytes(), lay, off, nk, hd, vconv, rows_f32);
      // The next page's rows, prefetched as the first token's first heads
      // sum this block's V rows (RowPrefetch).
      const RowPrefetch pf = pi + 1 < n_pages ? RowPrefetch(pool.k_block(pages[pi + 1], layer),
                                                            pool.v_block(pages[pi + 1], layer), lay, j0, off, hd)
                                              : RowPrefetch();
      const int t_first = std::max(0, p0 - pos0);
      for (int t = t_first; t < nt; ++t) {  // tokens before p0 see none of the block
        const int nkt = std::min(nk, pos0 + t - p0 + 1);
        const __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nkt), lane));
        // The token's heads in groups of 4, then 2, then 1 (each head's
        // arithmetic is the same in any of them).
        for (int h = 0; h < nh;) {
          const int hn = nh - h >= 4 ? 4 : nh - h >= 2 ? 2 : 1, r = t * nh + h;
          const float* qh = q + size_t(t) * q_stride + size_t(h) * hd;
          float* oh = acc_base + size_t(t) * acc_stride + size_t(h) * hd;
          const RowPrefetch* p = t == t_first && h == 0 ? &pf : nullptr;
          if (hn == 4)
            block_step<NC, 4, F16>(k, v, qh, oh, hd, nkt, scale, keep, mx + r, lsum + r, p);
          else if (hn == 2)
            block_step<NC, 2, F16>(k, v, qh, oh, hd, nkt, scale, keep, mx + r, lsum + r, p);
          else
            block_step<NC, 1, F16>(k, v, qh, oh, hd, nkt, scale, keep, mx + r, lsum + r, p);
          h += hn;
        }
      }
    }
  }
}

// NC = hd / 8 as a template argument (0: a run-time count) so that the dot
// products' and V sums' registers stay registers, as in attend_tile16.
// Positions go in chunks of kAttentionChunk (attention.h): each row's online
// softmax starts afresh in each chunk, its V sums in its out slice, and the
// chunks' states are folded in order into scratch (fold_chunk8). With
// partial set (nt = 1), only chunk `chunk`, each row's state written to
// partial (row r at r * (kPartialHeader + hd)) instead of out, which is then
// scratch for the V sums.
template <int NC, bool F16>
void attend_tile8_t(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos0, int nt, int hd,
                    size_t off, const float* q, size_t q_stride, float* out, int nh, float* scratch, int chunk,
                    float* partial) {
  const KvLayout& lay = pool.layout();
  const int ps = lay.page_size, last = pos0 + nt - 1, n_pages = last / ps + 1;
  const int nc = NC > 0 ? NC : hd / 8;
  const int rows = nt * nh;  // row r = t * nh + h
  assert(partial == nullptr || nt == 1);
  float mx[kMaxTileRows];                 // running max m per row
  __m256 lsum[kMaxTileRows];              // l per row
  RowState8 done[kMaxTileRows];           // the chunks before the current one, folded
  // Row r = t * nh + h's V sums, at acc_base + t * acc_stride + h * hd: in
  // its out slice, or (a chunk's state alone) in scratch.
  float* const acc_base = partial ? scratch : out;
  const size_t acc_stride = partial ? size_t(nh) * hd : q_stride;
  auto acc_of = [&](int r) { return acc_base + size_t(r / nh) * acc_stride + size_t(r % nh) * hd; };
  float* done_accs = partial ? nullptr : scratch;  // [rows][hd] V sums of the folded chunks
  const ChunkPlan plan(ps, n_pages, last, partial != nullptr, chunk);
  auto reaches = [&](int r, int ch) { return ChunkPlan::reaches(pos0 + r / nh, ch); };
  for (int ch = plan.begin; ch < plan.end; ++ch) {
    for (int r = 0; r < rows; ++r) {
      mx[r] = -INFINITY;
      lsum[r] = _mm256_setzero_ps();
      float* o = acc_of(r);
      for (int c = 0; c < nc; ++c) _mm256_storeu_ps(o + 8 * c, _mm256_setzero_ps());
    }
    chunk_pages_pass<NC, F16>(pool, layer, pages, plan.page_begin(ch), plan.page_end(ch), pos0, nt, hd, off, q,
                              q_stride, acc_base, acc_stride, nh, mx, lsum);
    if (partial != nullptr) {  // one chunk's state, as it is
      for (int r = 0; r < rows; ++r) {
        float* pr = partial + size_t(r) * (kPartialHeader + hd);
        std::fill_n(pr, kPartialHeader, 0.0f);
        pr[0] = mx[r];
        pr[1] = 8.0f;  // lanes of sums (kPartialHeader)
        _mm256_storeu_ps(pr + 16, lsum[r]);
        std::copy_n(acc_of(r), hd, pr + kPartialHeader);
      }
      return;
    }
    if (ch + 1 == plan.end) break;  // the last chunk's state is folded as each row ends, below
    for (int r = 0; r < rows; ++r) {
      if (!reaches(r, ch)) continue;  // a token before this chunk: it saw none of it
      float* da = done_accs + size_t(r) * hd;
      if (ch == 0) {  // every token reaches chunk 0
        done[r] = {mx[r], lsum[r]};
        std::copy_n(acc_of(r), hd, da);
      } else {
        fold_chunk8<NC>(done[r], da, {mx[r], lsum[r]}, acc_of(r), hd);
      }
    }
  }
  for (int r = 0; r < rows; ++r) {
    float* o = acc_of(r);
    if (plan.n_chunks == 1) {  // one chunk: its state as it is
      finish_row8<NC>({mx[r], lsum[r]}, o, o, hd);
      continue;
    }
    float* da = done_accs + size_t(r) * hd;
    if (reaches(r, plan.n_chunks - 1)) fold_chunk8<NC>(done[r], da, {mx[r], lsum[r]}, o, hd);
    finish_row8<NC>(done[r], da, o, hd);
  }
}

// merge8's fold for heads of 8 * NC dims (NC = 0: hd / 8 at run time).
template <int NC>
void merge_rows8(const float* partials, int n_chunks, int n_rows, int hd, float* out, float* acc) {
  const size_t row = kPartialHeader + size_t(hd), chunk = size_t(n_rows) * row;
  for (int r = 0; r < n_rows; ++r) {
    const float* p0 = partials + size_t(r) * row;
    assert(p0[1] == 8.0f);  // written by the 8-lane pass
    RowState8 t{p0[0], _mm256_loadu_ps(p0 + 16)};
    std::copy_n(p0 + kPartialHeader, hd, acc);
    for (int c = 1; c < n_chunks; ++c) {
      const float* pc = p0 + size_t(c) * chunk;
      fold_chunk8<NC>(t, acc, {pc[0], _mm256_loadu_ps(pc + 16)}, pc + kPartialHeader, hd);
    }
    finish_row8<NC>(t, acc, out + size_t(r) * hd, hd);
  }
}

}  // namespace

void attend_tile8(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos0, int nt, int hd,
                  size_t off, const float* q, size_t q_stride, float* out, int nh, float* scratch, int chunk,
                  float* partial) {
  assert(heads8_supported(hd) && nh <= kMaxHeads && nt <= kMaxTileTokens);
  const bool f16 = pool.layout().dtype == KvDtype::kF16;
  auto run = [&]<int NC>() {
    f16 ? attend_tile8_t<NC, true>(pool, layer, pages, pos0, nt, hd, off, q, q_stride, out, nh, scratch, chunk,
                                   partial)
        : attend_tile8_t<NC, false>(pool, layer, pages, pos0, nt, hd, off, q, q_stride, out, nh, scratch, chunk,
                                    partial);
  };
  switch (hd / 8) {  // the head sizes of the models larder runs, then any
    case 1: run.template operator()<1>(); break;
    case 8: run.template operator()<8>(); break;
    case 16: run.template operator()<16>(); break;
    default: run.template operator()<0>(); break;
  }
}

void merge8(const float* partials, int n_chunks, int n_rows, int hd, float* out, float* acc) {
  assert(heads8_supported(hd));
  switch (hd / 8) {
    case 1: merge_rows8<1>(partials, n_chunks, n_rows, hd, out, acc); break;
    case 8: merge_rows8<8>(partials, n_chunks, n_rows, hd, out, acc); break;
    case 16: merge_rows8<16>(partials, n_chunks, n_rows, hd, out, acc); break;
    default: merge_rows8<0>(partials, n_chunks, n_rows, hd, out, acc); break;
  }
}

}  // namespace larder::attention_detail

#endif
