// What attend_tokens' passes share (attention_avx512.cpp: AVX-512,
// attention_avx2.cpp: AVX2 with FMA and F16C, attention_one.cpp: the
// one-token fallback). Private to engine/cpu.
#pragma once

#include <xmmintrin.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/cpu/attention.h"
#include "engine/gguf/ggml_types.h"
#include "engine/kv/page_pool.h"

// The AVX2 pass: the attention of AVX2 builds, and in AVX-512 builds that of
// the head sizes of a multiple of 8 that the 16-lane pass does not take (not
// a multiple of 16, as stories260K's 8; over Q8_0 pages, not of 32).
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define LARDER_ATTENTION_AVX2 1
#endif

namespace larder::attention_detail {

// Head sizes the vector passes take at most (CpuForward::create checks it).
constexpr size_t kMaxHeadDim = 256;

// Floats before a row's V sums in a partial state (attend_token_chunk): its
// max in the first of 16 and the count of lanes of its sums (16 or 8: which
// pass wrote it, for merge16 / merge8 to assert) in the second, then the 16
// lanes of its sums (8 from the 8-lane pass, the other 8 then 0).
constexpr size_t kPartialHeader = 32;

// Prefetches the next page's K and V rows into L1 while a pass reads the
// current page's, a few cache lines beside each V row it sums (row_at(j)),
// so that the loads of the next page overlap this page's arithmetic.
// Prefetching a whole page at once, as this did before, stalled the loads
// behind the burst: at 16k positions a decode step's attention took twice as
// long (docs/cpu-kernels.md). Two orders:
// - a slice (RowPrefetch(...)): row j of the next page's slice of one kv head
//   (values off .. off + hd) beside row j of this page's, when a pass reads
//   only some kv heads of each row;
// - whole blocks (RowPrefetch::whole_blocks): when one pass reads every kv
//   head of every row, the next page's K and V blocks are contiguous, and
//   their lines are prefetched in address order, an equal share per row
//   summed, which the hardware prefetchers also follow (a decode step on one
//   thread: 0.8x the time of the slice order at 16k positions).
// An empty one (RowPrefetch()) prefetches nothing.
struct RowPrefetch {
  const char* k = nullptr;  // slice: the first line of row j0's slice; whole: the next K block
  const char* v = nullptr;  // the same in the V block
  size_t row = 0;           // slice: bytes between rows
  int lines = 0;            // slice: cache lines a row's slice touches (0: nothing to prefetch)
  uint64_t step0 = 0;       // whole: this pass's first row summed, counted over the page
  uint64_t per_step = 0;    // whole: block lines per row summed, 16.16 fixed point

  RowPrefetch() = default;
  RowPrefetch(const void* k_block, const void* v_block, const KvLayout& lay, int j0, size_t off, int hd) {
    const bool q8 = lay.dtype == KvDtype::kQ8_0;
    const size_t elem = lay.dtype == KvDtype::kF16 ? 2 : 4;
    row = lay.row_bytes();
    const size_t at = size_t(j0) * row + (q8 ? off / 32 * 34 : off * elem);
    const size_t bytes = q8 ? ((off + size_t(hd) + 31) / 32 - off / 32) * 34 : size_t(hd) * elem;
    // Rows start at different offsets within a line when the row size is
    // not a multiple of 64 (Q8_0): one line more covers every row's slice.
    lines = int((bytes + 63) / 64) + (row % 64 != 0 || at % 64 != 0 ? 1 : 0);
    k = static_cast<const char*>(k_block) + at;
    v = static_cast<const char*>(v_block) + at;
  }
  // The next page's whole K and V blocks, over a page whose rows are summed
  // `steps` times in all (page_size rows for every kv head, in blocks of up
  // to 16 slots, each block for every kv head in turn); this pass's first
  // is number step.
  static RowPrefetch whole_blocks(const void* k_block, const void* v_block, const KvLayout& lay, int step,
                                  int steps) {
    RowPrefetch p;
    p.k = static_cast<const char*>(k_block);
    p.v = static_cast<const char*>(v_block);
    p.step0 = uint64_t(step);
    p.per_step = ((uint64_t(lay.block_bytes()) + 63) / 64 << 16) / uint64_t(steps);
    return p;
  }

  // Prefetches what goes beside row j (from j0) of this pass.
  [[gnu::always_inline]] void row_at(int j) const {
    if (per_step != 0) {
      const uint64_t s = step0 + uint64_t(j);
      for (uint64_t l = (s * per_step) >> 16, end = ((s + 1) * per_step) >> 16; l < end; ++l) {
        _mm_prefetch(k + 64 * size_t(l), _MM_HINT_T0);
        _mm_prefetch(v + 64 * size_t(l), _MM_HINT_T0);
      }
      return;
    }
    for (int i = 0; i < lines; ++i) {
      _mm_prefetch(k + size_t(j) * row + 64 * size_t(i), _MM_HINT_T0);
      _mm_prefetch(v + size_t(j) * row + 64 * size_t(i), _MM_HINT_T0);
    }
  }
};

// The chunks of kAttentionChunk positions (attention.h) that a vector pass
// over the n_pages pages of positions 0 .. last (pages of page_size slots)
// walks: every one, or with one_chunk only chunk `chunk` (the pass then
// writes that chunk's partial state, for attend_token_merge).
struct ChunkPlan {
  int chunk_pages = 0;  // pages per chunk
  int n_pages = 0;
  int n_chunks = 0;     // chunks of positions 0 .. last
  int begin = 0;        // the chunks walked: [begin, end)
  int end = 0;

  ChunkPlan(int page_size, int n_pages_, int last, bool one_chunk, int chunk) : n_pages(n_pages_) {
    assert(page_size <= kAttentionChunk);  // CpuForward::create checks it
    chunk_pages = kAttentionChunk / page_size;
    n_chunks = (n_pages + chunk_pages - 1) / chunk_pages;
    assert(n_chunks == attention_chunks(last));
    (void)last;
    begin = one_chunk ? chunk : 0;
    end = one_chunk ? chunk + 1 : n_chunks;
    assert(begin < n_chunks);
  }
  // Chunk ch's pages: [page_begin(ch), page_end(ch)).
  int page_begin(int ch) const { return ch * chunk_pages; }
  int page_end(int ch) const { return std::min(n_pages, (ch + 1) * chunk_pages); }
  // Whether a token at position pos reaches chunk ch: by position, whatever
  // its scores, so that non-finite K/V fold alike in one pass and in
  // attend_token_merge.
  static bool reaches(int pos, int ch) { return pos >= ch * kAttentionChunk; }
};

// A block's K or V rows of one kv head as a vector pass reads them: F16 in
// the page (h, h_stride halves apart, widened as they are used), f32 (f,
// f_stride floats apart: F32 pages in place, Q8_0 ones widened into a
// buffer), or Q8_0 in the page (q8: the slice's first block, q8_stride bytes
// apart; widened as they are used, where a pass does so).
struct KvRows {
  const uint16_t* h = nullptr;
  size_t h_stride = 0;
  const float* f = nullptr;
  size_t f_stride = 0;
  const uint8_t* q8 = nullptr;
  size_t q8_stride = 0;
};

// n rows of a block (its first row at `block`), values off .. off + hd of
// each: F16 in place; Q8_0 in place too where q8_in_place (off a multiple of
// 32), else like other dtypes through the pass's widen (its rows_f32:
// (block, lay, off, n, hd, conv, &stride) -> rows) into conv, which F32 rows
// do not touch.
template <class Widen>
inline KvRows block_rows(const uint8_t* block, const KvLayout& lay, size_t off, int n, int hd, float* conv,
                         Widen&& widen, bool q8_in_place = false) {
  KvRows r;
  if (lay.dtype == KvDtype::kF16) {
    r.h = reinterpret_cast<const uint16_t*>(block) + off;
    r.h_stride = lay.row_bytes() / 2;
  } else if (q8_in_place && lay.dtype == KvDtype::kQ8_0) {
    r.q8 = block + off / 32 * sizeof(BlockQ8_0);
    r.q8_stride = lay.row_bytes();
  } else {
    r.f = widen(block, lay, off, n, hd, conv, &r.f_stride);
  }
  return r;
}

// Values [off, off + hd) of row j of a Q8_0 K/V block (its first row at
// `block`), dequantized (d * q, one f32 product each) into out; returns out.
inline const float* q8_slice(const void* block, const KvLayout& lay, int j, size_t off, int hd, float* out) {
  const auto* row = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(block) + size_t(j) * lay.row_bytes());
  for (int i = 0; i < hd; ++i) {
    const BlockQ8_0& b = row[(off + i) / 32];
    out[i] = fp16_to_fp32(b.d) * float(b.qs[(off + i) % 32]);
  }
  return out;
}

#if defined(__AVX512F__)
// n rows (values off .. off + hd of each) of a K or V block as f32: F32
// blocks are read in place (*stride = kv_dim), F16 and Q8_0 ones widened
// exactly into dst ([n][hd], *stride = hd; Q8_0 as q8_slice does), 16 values
// per instruction where the head is aligned to them. Inline: the tiles of
// attention_avx512.cpp call it per 16-row block (defined there with external
// linkage instead, a 16-token prefill tile took 1.02-1.04x as long).
inline const float* rows_f32_avx512(const void* block, const KvLayout& lay, size_t off, int n, int hd, float* dst,
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
      if (hd % 16 == 0) {
        for (int c = 0; c < hd; c += 16)
          _mm512_storeu_ps(o + c, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + c))));
        continue;
      }
      for (int i = 0; i < hd; ++i) o[i] = fp16_to_fp32(src[i]);
      continue;
    }
    if (hd % 16 == 0 && off % 32 == 0) {
      const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(row) + off / 32;
      for (int c = 0; c < hd; c += 16) {
        const BlockQ8_0& blk = b[c / 32];
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(blk.d));
        const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs + c % 32))));
        _mm512_storeu_ps(o + c, _mm512_mul_ps(d, q));
      }
      continue;
    }
    q8_slice(block, lay, j, off, hd, o);
  }
  return dst;
}
#endif

// The one-token fallback (attention_one.cpp): attend_tokens for the token at
// pos and heads [head_begin, head_end) whose size no vector pass takes.
// scores: attention_scratch_floats(pos, page_size, 1) floats.
void attend_one(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos,
                const AttentionShape& shape, const float* q, float* out, float* scores, int head_begin,
                int head_end);

// The AVX-512 pass (attention_avx512.cpp).

// True when tile16 takes heads of hd dims over pages of dtype: in AVX-512
// builds, hd a multiple of 16 up to kMaxHeadDim, of 32 over Q8_0 pages.
inline bool tile16_supported(int hd, KvDtype dtype) {
#if defined(__AVX512F__)
  return hd % 16 == 0 && size_t(hd) <= kMaxHeadDim && (dtype != KvDtype::kQ8_0 || hd % 32 == 0);
#else
  (void)hd;
  (void)dtype;
  return false;
#endif
}

#if defined(__AVX512F__)

// n_kv kv heads from the one at value offset `off` of a K/V row, nh query
// heads each (n_kv * nh * nt <= kAttentionDecodeHeads rows; n_kv > 1 only
// with nt = 1), of nt consecutive tokens at pos0 .. pos0 + nt - 1: token t's
// heads at q + t * q_stride, out likewise. scratch: 2 * rows * hd floats.
// With partial set (nt = 1), only chunk `chunk` of the positions, each row's
// state written to partial (row r at r * (kPartialHeader + hd)) instead of
// out. Every row keeps the arithmetic of attention_avx512.cpp, whatever nt,
// n_kv or nh.
void tile16(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos0, int nt, int hd,
            size_t off, int n_kv, const float* q, size_t q_stride, float* out, int nh, float* scratch, int chunk,
            float* partial);

// Folds n_chunks chunk states of n_rows rows (attend_token_merge's layout:
// chunk c's row r at (c * n_rows + r) * (kPartialHeader + hd)) in chunk
// order and writes each row's hd outputs to out (rows hd apart). acc: hd
// floats of scratch.
void merge16(const float* partials, int n_chunks, int n_rows, int hd, float* out, float* acc);
#endif

// The AVX2 pass (attention_avx2.cpp).

// Query heads sharing one pass over their kv head's K/V.
constexpr int kMaxHeads = 4;

// True when attend_tile8 takes heads of this size (a multiple of 8, <= 256).
bool heads8_supported(int hd);

// Tokens of a tile (attention.h's kAttentionTileTokens) and their rows.
constexpr int kMaxTileTokens = 16;
constexpr int kMaxTileRows = kMaxHeads * kMaxTileTokens;

// Heads [0, nh) (nh <= kMaxHeads, all of one kv head at offset `off` of a K/V
// row) of nt <= kMaxTileTokens consecutive tokens at positions pos0 .. pos0 +
// nt - 1: token t's heads at q + t * q_stride, out likewise. Each (token,
// head) row gets the arithmetic of attention_avx2.cpp whatever nt, its
// positions in chunks of kAttentionChunk folded in order as tile16 folds
// them. scratch: nt * nh * hd floats (the V sums of the chunks before the
// current one; the current chunk's accumulate in out). With partial set (nt
// = 1), only chunk `chunk` of the positions, each row's state written to
// partial (row r at r * (kPartialHeader + hd): its max at 0, 8 (lanes) at 1,
// 8 lanes of sums at 16, the rest of the header 0) instead of out (which may be null).
void attend_tile8(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos0, int nt, int hd,
                  size_t off, const float* q, size_t q_stride, float* out, int nh, float* scratch, int chunk,
                  float* partial);

// Folds n_chunks chunk states of n_rows rows (attend_tile8's partial layout,
// chunk c's row r at (c * n_rows + r) * (kPartialHeader + hd)) in chunk order
// as attend_tile8 does and writes each row's hd outputs to out (rows hd
// apart). acc: hd floats of scratch.
void merge8(const float* partials, int n_chunks, int n_rows, int hd, float* out, float* acc);

}  // namespace larder::attention_detail
