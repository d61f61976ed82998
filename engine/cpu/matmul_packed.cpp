#include "engine/cpu/matmul_packed.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#include "engine/cpu/huge_pages.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/matmul_packed_amx.h"
#include "engine/cpu/thread_pool.h"
#include "engine/gguf/quant_blocks.h"

#ifdef LARDER_PACKED_AVX512
#define LARDER_Q8_PACKED 1
#include "engine/cpu/simd.h"
#endif

namespace larder {

bool q8_packed_supported() {
#if defined(LARDER_PACKED_AVX512) || defined(LARDER_PACKED_AVX2)
  return true;
#else
  return false;
#endif
}

void prepare_q8_packed_act(const BlockQ8_0* xq, int n_tokens, int k, Q8PackedAct* out, GgmlType weight_type) {
  assert(packed_q8_act_type(weight_type));
  const bool mins = weight_type == GgmlType::kQ4_1 || weight_type == GgmlType::kQ5_1;
  const int32_t offset = weight_type == GgmlType::kQ4_0 ? 8 : weight_type == GgmlType::kQ5_0 ? 16 : 128;
  const size_t n = size_t(n_tokens) * size_t(k / kQ8_0BlockSize);
  for (size_t i = 0; i < n; ++i) {
    int32_t sum = 0;
    for (int j = 0; j < kQ8_0BlockSize; ++j) sum += xq[i].qs[j];
    std::memcpy(out[i].qs, xq[i].qs, sizeof(out[i].qs));
    out[i].d = fp16_to_fp32(xq[i].d);
    if (mins) {
      out[i].s = out[i].d * float(sum);  // exact: 11 + 12 significant bits
    } else {
      out[i].neg_c = -offset * sum;
    }
  }
}

void PackedMatrix::Free::operator()(uint8_t* p) const { std::free(p); }

namespace {
// Off by default: on the Sapphire Rapids machine (2026-12-02) the AMX tile
// measured 0.8-1.2x the VNNI tiles (230-378 against 208-370 GOP/s on one
// thread, 64 and 512 tokens, noisy): scaling every block's int32 tile by its per-row,
// per-token f32 scales (Q8_0's 32-value blocks) costs more than the TMUL saves.
std::atomic<bool> g_amx_enabled{false};
// On by default: K-quant scales fold into the weights (matmul_packed_amx.h).
std::atomic<bool> g_kquant_amx_enabled{true};
std::atomic<int> g_kquant_decode_groups{0};  // 0: by CPU vendor
}  // namespace

void set_kquant_decode_groups(int groups) { g_kquant_decode_groups = std::max(0, groups); }

namespace packed_detail {
int kquant_decode_groups(GgmlType type) {
  const int set = g_kquant_decode_groups.load(std::memory_order_relaxed);
  if (set > 0) return set;
  if (type == GgmlType::kQ2_K) return 4;
#if defined(__x86_64__) && defined(__GNUC__)
  static const int by_vendor = [] {
    __builtin_cpu_init();
    return __builtin_cpu_is("amd") ? 1 : 4;
  }();
  return by_vendor;
#else
  return 4;
#endif
}
}  // namespace packed_detail

void set_packed_amx(bool enabled) { g_amx_enabled = enabled; }
bool packed_amx_active() { return g_amx_enabled.load(std::memory_order_relaxed) && packed_detail::amx_usable(); }
void set_kquant_amx(bool enabled) { g_kquant_amx_enabled = enabled; }
bool kquant_amx_active() {
#ifdef LARDER_KQUANT_AMX
  return g_kquant_amx_enabled.load(std::memory_order_relaxed) && packed_detail::amx_usable();
#else
  return false;
#endif
}

bool packed_type_supported(GgmlType t) {  // packed_q8_act_type: Q8_0, Q4_0 .. Q5_1, IQ4_NL, IQ4_XS
  return q8_packed_supported() &&
         (packed_q8_act_type(t) || t == GgmlType::kQ2_K || t == GgmlType::kQ3_K || t == GgmlType::kQ4_K ||
          t == GgmlType::kQ5_K || t == GgmlType::kQ6_K || t == GgmlType::kF16);
}

PackedMatrix PackedMatrix::pack(const WeightView& w, ThreadPool* pool) {
  assert(packed_type_supported(w.type));
  PackedMatrix p;
  p.type_ = w.type;
  p.rows_ = w.ne[1];
  p.k_ = int(w.ne[0]);
  const int nb = p.n_blocks();
  const size_t raw = w.type == GgmlType::kQ4_K   ? size_t(nb) * kQ4KBlockBytes
                     : w.type == GgmlType::kQ5_K ? size_t(nb) * kQ5KBlockBytes
                     : w.type == GgmlType::kQ6_K ? size_t(nb) * kQ6KBlockBytes
                     : w.type == GgmlType::kQ3_K ? size_t(nb) * kQ3KBlockBytes
                     : w.type == GgmlType::kQ2_K ? size_t(nb) * kQ2KBlockBytes
                     : w.type == GgmlType::kF16  ? size_t(nb) * kGroupRows * sizeof(uint16_t)
                                                 : size_t(nb) * (p.block_quant_bytes() + p.block_scale_bytes());
  p.group_stride_ = (raw + 63) / 64 * 64;
  // On huge pages: decode streams every weight once per token. Measured on
  // the Intel Xeon with AMX (2026-12-03, 2 threads, the 1B-shaped Q4_K_M
  // file): decode 28.2-29.9 -> 31.3 tok/s against 4 KiB pages.
  void* mem = alloc_huge_aligned(p.bytes());
  if (mem == nullptr) throw std::bad_alloc();
  p.data_.reset(static_cast<uint8_t*>(mem));
  using PackFn = void (*)(const WeightView&, uint8_t*, size_t, int64_t, int64_t);
  PackFn pack_fn = &packed_detail::pack_q8_0_groups;
  switch (p.type_) {
    case GgmlType::kQ4_K: pack_fn = &packed_detail::pack_q4k_groups; break;
    case GgmlType::kQ5_K: pack_fn = &packed_detail::pack_q5k_groups; break;
    case GgmlType::kQ6_K: pack_fn = &packed_detail::pack_q6k_groups; break;
    case GgmlType::kQ3_K: pack_fn = &packed_detail::pack_q3k_groups; break;
    case GgmlType::kQ2_K: pack_fn = &packed_detail::pack_q2k_groups; break;
    case GgmlType::kF16: pack_fn = &packed_detail::pack_f16_groups; break;
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
    case GgmlType::kIQ4_NL: pack_fn = &packed_detail::pack_q4_0_groups; break;
    case GgmlType::kIQ4_XS: pack_fn = &packed_detail::pack_iq4xs_groups; break;
    default: break;  // Q8_0
  }
  auto pack_groups = [&](int64_t gb, int64_t ge, int) { pack_fn(w, p.data_.get(), p.group_stride_, gb, ge); };
  if (pool != nullptr && pool->n_threads() > 1) {
    pool->parallel_for(p.n_groups(), 16, pack_groups);
  } else {
    pack_groups(0, p.n_groups(), 0);
  }
  return p;
}

namespace {
// The block formats of the tiles below: Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL and IQ4_XS.
struct Q8Format;
struct Q40Format;
struct Q50Format;
struct Q41Format;
struct Q51Format;
struct IQ4NLFormat;
struct IQ4XSFormat;
}  // namespace

#ifdef LARDER_Q8_PACKED
namespace {

// Decode prefetches this far ahead in each group's stream: 4 Q8_0 blocks
// (measurements: docs/cpu-kernels.md, "Zen 5: attention in one pass" and
// "streams per decode tile").
constexpr size_t kPrefetchBytes = 4 * PackedMatrix::kBlockQuantBytes;

// The block formats the tile reads (matmul_packed.h): a block's quants
// are kQuantBytes per group, and part(blk, j) gives, at byte 4r + k, row r's
// weight 4j + k of the block plus the format's offset, as u8.
// kMins: the format has w = d q + m, its mins stored after the scales.
// kSubScales: its block scale is an int8 times an f16 per 8 blocks (IQ4_XS),
// not one f16.
struct Q8Format {  // 8 chunks of w + 128
  static constexpr size_t kQuantBytes = PackedMatrix::kBlockQuantBytes;
  static constexpr bool kMins = false;
  static constexpr bool kSubScales = false;
  static __m512i part(const uint8_t* blk, int j) {
    return _mm512_load_si512(blk + size_t(j) * PackedMatrix::kChunkBytes);
  }
};
struct Q40Format {  // 4 chunks of q = w + 8 in nibbles: values 0..15 low, 16..31 high
  static constexpr size_t kQuantBytes = PackedMatrix::kQ40BlockQuantBytes;
  static constexpr bool kMins = false;
  static constexpr bool kSubScales = false;
  static __m512i part(const uint8_t* blk, int j) {
    const __m512i v = _mm512_load_si512(blk + size_t(j % 4) * PackedMatrix::kChunkBytes);
    const __m512i low = _mm512_set1_epi8(0x0F);
    return j < 4 ? _mm512_and_si512(v, low) : _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
  }
};
struct Q50Format {  // Q4_0's nibbles plus a vector of fifth bits: q = w + 16
  static constexpr size_t kQuantBytes = PackedMatrix::kQ50BlockQuantBytes;
  static constexpr bool kMins = false;
  static constexpr bool kSubScales = false;
  static __m512i part(const uint8_t* blk, int j) {
    const __m512i h = _mm512_load_si512(blk + PackedMatrix::kQ40BlockQuantBytes);
#ifdef __GFNI__  // bit j to bit 4 of clean bytes; 0x0F ? nibble : it (0xE4)
    const __m512i v = _mm512_load_si512(blk + size_t(j % 4) * PackedMatrix::kChunkBytes);
    const __m512i fifth = _mm512_gf2p8affine_epi64_epi8(h, _mm512_set1_epi64(int64_t(move_bits(j, 4, 1))), 0);
    return _mm512_ternarylogic_epi32(j < 4 ? v : _mm512_srli_epi16(v, 4), fifth, _mm512_set1_epi8(0x0F), 0xE4);
#endif
    // Bit j of each byte to bit 4 (shifts within 16-bit lanes; the mask
    // drops what crossed from the neighbouring byte).
    const __m512i hs = j <= 4 ? _mm512_slli_epi16(h, unsigned(4 - j)) : _mm512_srli_epi16(h, unsigned(j - 4));
    return _mm512_or_si512(Q40Format::part(blk, j), _mm512_and_si512(hs, _mm512_set1_epi8(0x10)));
  }
};
struct Q41Format : Q40Format {  // Q4_0's quants, w = d q + m
  static constexpr bool kMins = true;
};
struct Q51Format : Q50Format {  // Q5_0's quants, w = d q + m
  static constexpr bool kMins = true;
};
struct IQ4NLFormat {  // Q4_0's nibbles are indices: w + 128 = kIQ4Values[i] + 128 (1..241)
  static constexpr size_t kQuantBytes = PackedMatrix::kQ40BlockQuantBytes;
  static constexpr bool kMins = false;
  static constexpr bool kSubScales = false;
  static __m512i part(const uint8_t* blk, int j) {
    const __m512i table = _mm512_broadcast_i32x4(_mm_xor_si128(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Values)), _mm_set1_epi8(char(0x80))));
    return _mm512_shuffle_epi8(table, Q40Format::part(blk, j));
  }
};
struct IQ4XSFormat : IQ4NLFormat {  // IQ4_NL's with scales d * (ls - 32)
  static constexpr bool kSubScales = true;
};

// T tokens x G groups of 16 rows over all nb blocks. q[g]: group g's quants,
// scales after nb * F::kQuantBytes bytes. x: token 0's blocks, token t at
// x + t * nb. y: token 0, the tile's first row; the last group writes
// `last_rows` rows.
template <class F, int T, int G>
void tile(const uint8_t* q0, size_t group_stride, const Q8PackedAct* x, int nb, float* y,
          int y_stride, int last_rows) {
  const uint8_t* q[G];
  const uint16_t* s[G];
  for (int g = 0; g < G; ++g) {
    q[g] = q0 + size_t(g) * group_stride;
    s[g] = reinterpret_cast<const uint16_t*>(q[g] + size_t(nb) * F::kQuantBytes);
  }
  __m512 acc[T][G];
  for (int t = 0; t < T; ++t)
    for (int g = 0; g < G; ++g) acc[t][g] = _mm512_setzero_ps();
  for (int b = 0; b < nb; ++b) {
    __m512i is[T][G];
    for (int t = 0; t < T; ++t) {
      // With mins, from 0 (the min term follows).
      const __m512i c = F::kMins ? _mm512_setzero_si512() : _mm512_set1_epi32(x[size_t(t) * nb + b].neg_c);
      for (int g = 0; g < G; ++g) is[t][g] = c;
    }
    const size_t off = size_t(b) * F::kQuantBytes;
    if constexpr (T <= 4) {  // decode and draft verification stream the weights once
      for (int g = 0; g < G; ++g) {
        const char* pf = reinterpret_cast<const char*>(q[g] + off + kPrefetchBytes);
        for (size_t l = 0; l < F::kQuantBytes / 64; ++l) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
      }
    }
    for (int j = 0; j < 8; ++j) {
      __m512i wv[G];
      for (int g = 0; g < G; ++g) wv[g] = F::part(q[g] + off, j);
      for (int t = 0; t < T; ++t) {
        int32_t x4;
        std::memcpy(&x4, x[size_t(t) * nb + b].qs + 4 * j, 4);
        const __m512i xv = _mm512_set1_epi32(x4);
        for (int g = 0; g < G; ++g) is[t][g] = _mm512_dpbusd_epi32(is[t][g], wv[g], xv);
      }
    }
    __m512 dw[G];
    for (int g = 0; g < G; ++g) {
      if constexpr (F::kSubScales) {  // d * (ls - 32): exact
        const auto* ls = reinterpret_cast<const uint8_t*>(s[g]) + size_t(b) * 16;
        const auto* d = reinterpret_cast<const uint8_t*>(s[g]) + size_t(nb) * 16 + size_t(b / 8) * 32;
        dw[g] = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d))),
                              _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ls)))));
      } else {
        dw[g] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s[g] + size_t(b) * 16)));
      }
    }
    for (int t = 0; t < T; ++t) {
      const __m512 dx = _mm512_set1_ps(x[size_t(t) * nb + b].d);
      for (int g = 0; g < G; ++g)
        acc[t][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[t][g]), _mm512_mul_ps(dw[g], dx), acc[t][g]);
    }
    if constexpr (F::kMins) {  // + m * s
      __m512 mw[G];
      for (int g = 0; g < G; ++g)
        mw[g] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s[g] + size_t(nb + b) * 16)));
      for (int t = 0; t < T; ++t) {
        const __m512 sx = _mm512_set1_ps(x[size_t(t) * nb + b].s);
        for (int g = 0; g < G; ++g) acc[t][g] = _mm512_fmadd_ps(mw[g], sx, acc[t][g]);
      }
    }
  }
  const __mmask16 last = __mmask16((1u << last_rows) - 1u);
  for (int t = 0; t < T; ++t) {
    float* yt = y + size_t(t) * y_stride;
    for (int g = 0; g + 1 < G; ++g) _mm512_storeu_ps(yt + 16 * g, acc[t][g]);
    _mm512_mask_storeu_ps(yt + 16 * (G - 1), last, acc[t][G - 1]);
  }
}

using TileFn = void (*)(const uint8_t*, size_t, const Q8PackedAct*, int, float*, int, int);

// Prefill tiles: up to kT tokens x kG groups (kT * kG * 2 + 2 * kG <= 32 zmm);
// decode (one token): up to kGDecode groups, more rows in flight.
constexpr int kT = 6;
constexpr int kG = 2;
constexpr int kGDecode = 4;

template <class F>
struct Tiles {
#define LARDER_G2(T) {&tile<F, T, 1>, &tile<F, T, 2>}
  static constexpr TileFn kPrefill[kT][kG] = {LARDER_G2(1), LARDER_G2(2), LARDER_G2(3),
                                              LARDER_G2(4), LARDER_G2(5), LARDER_G2(6)};
#undef LARDER_G2
  static constexpr TileFn kDecode[kGDecode] = {&tile<F, 1, 1>, &tile<F, 1, 2>, &tile<F, 1, 3>, &tile<F, 1, 4>};
};

// A token block's activations (n_tokens x nb x 40 bytes) stay in L2 while the
// groups stream past.
constexpr size_t kActBlockBytes = 512 * 1024;

// Prefill of the formats whose part() does work (nibbles, fifth bits, IQ4's
// byte shuffle): each tile redid it for its 6 tokens. IQ4_NL / IQ4_XS took
// 0.32-0.33 ms against Q4_0's and Q8_0's 0.25 for 64 tokens x 512 x 2048
// (one thread, test_cpu "[.bench-decode]"), Q5_0 / Q5_1 1.4-1.7x Q8_0's
// time at 256 tokens. So a token block of at least kUnpackMinTokens unpacks
// each pair of groups once into a scratch of F::part's bytes (Q8_0's layout:
// 8 chunks a block), the scales (and mins) copied after them as they are,
// and runs the tiles on that (Unpacked<F>): the same bytes into the same
// vpdpbusd, hence the same bits. At 256 tokens: IQ4_NL, IQ4_XS 1.0x Q8_0's
// time, Q5_0 1.03x, Q5_1 1.13-1.15x, Q4_1 1.1x (unchanged).
template <class F>
struct Unpacked {
  static constexpr size_t kQuantBytes = PackedMatrix::kBlockQuantBytes;
  static constexpr bool kMins = F::kMins;
  static constexpr bool kSubScales = F::kSubScales;
  static __m512i part(const uint8_t* blk, int j) { return Q8Format::part(blk, j); }
};
template <class F>
constexpr bool kUnpackPrefill = !std::is_same_v<F, Q8Format>;  // Q4_0 .. Q5_1, IQ4_NL, IQ4_XS
constexpr int kUnpackMinTokens = 2 * kT;

// Groups [g0, g0 + G) of w unpacked into *scratch (grown as needed; 64-byte
// aligned), `*stride` bytes apart.
template <class F>
const uint8_t* unpack_groups(const PackedMatrix& w, int64_t g0, int G, std::vector<__m512i>* scratch,
                             size_t* stride) {
  const int nb = w.n_blocks();
  const size_t scale_bytes = size_t(nb) * w.block_scale_bytes();
  *stride = (size_t(nb) * PackedMatrix::kBlockQuantBytes + scale_bytes + 63) / 64 * 64;
  if (scratch->size() * 64 < *stride * size_t(G)) scratch->resize(*stride * size_t(G) / 64);
  auto* out = reinterpret_cast<uint8_t*>(scratch->data());
  for (int g = 0; g < G; ++g) {
    const uint8_t* q = w.group(g0 + g);
    uint8_t* o = out + size_t(g) * *stride;
    for (int b = 0; b < nb; ++b)
      for (int j = 0; j < 8; ++j)
        _mm512_store_si512(o + size_t(b) * PackedMatrix::kBlockQuantBytes + size_t(j) * PackedMatrix::kChunkBytes,
                           F::part(q + size_t(b) * F::kQuantBytes, j));
    std::memcpy(o + size_t(nb) * PackedMatrix::kBlockQuantBytes, q + size_t(nb) * F::kQuantBytes, scale_bytes);
  }
  return out;
}

}  // namespace
#endif  // LARDER_Q8_PACKED

namespace {
// Q8_0 (F = Q8Format), Q4_0 (Q40Format), Q5_0, Q4_1, Q5_1, IQ4_NL or IQ4_XS rows on the
// tiles above (AVX2: matmul_packed_avx2.cpp's).
template <class F>
void matmul_q8_rows(const PackedMatrix& w, const Q8PackedAct* x, int n_tokens, float* y,
                    int y_stride, int64_t row_begin, int64_t row_end) {
  assert(row_begin % PackedMatrix::kGroupRows == 0);
  assert(row_end % PackedMatrix::kGroupRows == 0 || row_end == w.rows());
#ifdef LARDER_Q8_PACKED
  const int nb = w.n_blocks();
  const int64_t g_begin = row_begin / PackedMatrix::kGroupRows;
  const int64_t g_end = (row_end + PackedMatrix::kGroupRows - 1) / PackedMatrix::kGroupRows;
  const int tail = int(row_end - (g_end - 1) * PackedMatrix::kGroupRows);  // rows of the last group
  if (n_tokens == 1) {
    for (int64_t g0 = g_begin; g0 < g_end; g0 += kGDecode) {
      const int G = int(std::min<int64_t>(kGDecode, g_end - g0));
      Tiles<F>::kDecode[G - 1](w.group(g0), w.group_stride(), x, nb, y + g0 * PackedMatrix::kGroupRows,
                          y_stride, g0 + G == g_end ? tail : 16);
    }
    return;
  }
  int block = int(kActBlockBytes / (size_t(nb) * sizeof(Q8PackedAct)));
  block = std::max(kT, block / kT * kT);
  const bool amx = std::is_same_v<F, Q8Format> && packed_amx_active();
  if (amx) block = std::max(16, block / 16 * 16);
  for (int tb = 0; tb < n_tokens; tb += block) {
    const int te = std::min(n_tokens, tb + block);
    for (int64_t g0 = g_begin; g0 < g_end; g0 += kG) {
      const int G = int(std::min<int64_t>(kG, g_end - g0));
      const int last = g0 + G == g_end ? tail : 16;
      int t0 = tb;
      for (; amx && t0 + 16 <= te; t0 += 16) {
        for (int g = 0; g < G; ++g) {
          packed_detail::q8_tile_amx16(w.group(g0 + g), x + size_t(t0) * nb, nb,
                                       y + size_t(t0) * y_stride + (g0 + g) * PackedMatrix::kGroupRows, y_stride,
                                       g + 1 == G ? last : 16);
        }
      }
      if constexpr (kUnpackPrefill<F>) {
        if (te - t0 >= kUnpackMinTokens) {
          thread_local std::vector<__m512i> scratch;
          size_t stride = 0;
          const uint8_t* u = unpack_groups<F>(w, g0, G, &scratch, &stride);
          for (; t0 < te; t0 += kT) {
            const int T = std::min(kT, te - t0);
            Tiles<Unpacked<F>>::kPrefill[T - 1][G - 1](u, stride, x + size_t(t0) * nb, nb,
                                                  y + size_t(t0) * y_stride + g0 * PackedMatrix::kGroupRows,
                                                  y_stride, last);
          }
        }
      }
      for (; t0 < te; t0 += kT) {
        const int T = std::min(kT, te - t0);
        Tiles<F>::kPrefill[T - 1][G - 1](w.group(g0), w.group_stride(), x + size_t(t0) * nb, nb,
                                    y + size_t(t0) * y_stride + g0 * PackedMatrix::kGroupRows,
                                    y_stride, last);
      }
    }
  }
#elif defined(LARDER_PACKED_AVX2)
  if constexpr (!std::is_same_v<F, Q8Format>) {
    packed_detail::matmul_q4_0_rows_avx2(w, x, n_tokens, y, y_stride, row_begin, row_end);
  } else {
    packed_detail::matmul_q8_rows_avx2(w, x, n_tokens, y, y_stride, row_begin, row_end);
  }
#else
  (void)w; (void)x; (void)y; (void)y_stride;
  assert(false && "the packed kernels need an AVX-512 VNNI or AVX2 build");
#endif
}
}  // namespace

void matmul_packed_rows(const PackedMatrix& w, const void* x, int n_tokens, float* y, int y_stride,
                        int64_t row_begin, int64_t row_end) {
  if (n_tokens <= 0 || row_begin >= row_end) return;
  assert(row_begin % PackedMatrix::kGroupRows == 0);
  assert(row_end % PackedMatrix::kGroupRows == 0 || row_end == w.rows());
  if (w.type() == GgmlType::kQ4_K || w.type() == GgmlType::kQ5_K) {
    packed_detail::matmul_q4k_rows(w, static_cast<const Q4KPackedAct*>(x), n_tokens, y, y_stride,
                                   row_begin, row_end);
  } else if (w.type() == GgmlType::kQ6_K || w.type() == GgmlType::kQ3_K || w.type() == GgmlType::kQ2_K) {
    packed_detail::matmul_q6k_rows(w, static_cast<const Q6KPackedAct*>(x), n_tokens, y, y_stride,
                                   row_begin, row_end);
  } else if (w.type() == GgmlType::kF16) {
    packed_detail::matmul_f16_rows(w, static_cast<const float*>(x), n_tokens, y, y_stride, row_begin, row_end);
  } else if (w.type() == GgmlType::kQ4_0) {
    matmul_q8_rows<Q40Format>(w, static_cast<const Q8PackedAct*>(x), n_tokens, y, y_stride, row_begin, row_end);
  } else if (w.type() == GgmlType::kQ5_0) {
    matmul_q8_rows<Q50Format>(w, static_cast<const Q8PackedAct*>(x), n_tokens, y, y_stride, row_begin, row_end);
  } else if (w.type() == GgmlType::kQ4_1) {
    matmul_q8_rows<Q41Format>(w, static_cast<const Q8PackedAct*>(x), n_tokens, y, y_stride, row_begin, row_end);
  } else if (w.type() == GgmlType::kQ5_1) {
    matmul_q8_rows<Q51Format>(w, static_cast<const Q8PackedAct*>(x), n_tokens, y, y_stride, row_begin, row_end);
  } else if (w.type() == GgmlType::kIQ4_NL) {
    matmul_q8_rows<IQ4NLFormat>(w, static_cast<const Q8PackedAct*>(x), n_tokens, y, y_stride, row_begin, row_end);
  } else if (w.type() == GgmlType::kIQ4_XS) {
    matmul_q8_rows<IQ4XSFormat>(w, static_cast<const Q8PackedAct*>(x), n_tokens, y, y_stride, row_begin, row_end);
  } else {
    matmul_q8_rows<Q8Format>(w, static_cast<const Q8PackedAct*>(x), n_tokens, y, y_stride, row_begin, row_end);
  }
}

void matmul_packed_parallel(ThreadPool& pool, const PackedMatrix& w, const void* x, int n_tokens,
                            float* y, int y_stride) {
  const PackedProduct product{&w, x, y, y_stride};
  matmul_packed_parallel(pool, std::span<const PackedProduct>(&product, 1), n_tokens);
}

void matmul_packed_parallel(ThreadPool& pool, std::span<const PackedProduct> products, int n_tokens) {
  constexpr int kR = PackedMatrix::kGroupRows;
  constexpr size_t kMaxProducts = 8;
  if (products.size() > kMaxProducts) {
    matmul_packed_parallel(pool, products.subspan(kMaxProducts), n_tokens);
    products = products.first(kMaxProducts);
  }
  // first[i]: the fused index of product i's group 0; first[n]: all groups.
  int64_t first[kMaxProducts + 1] = {0};
  int64_t macs = 0;
  const size_t n = products.size();
  for (size_t i = 0; i < n; ++i) {
    const PackedMatrix& w = *products[i].w;
    first[i + 1] = first[i] + w.n_groups();
    macs += int64_t(n_tokens) * w.rows() * w.k();
  }
  auto run = [&](int64_t gb, int64_t ge, int) {
    for (size_t i = 0; i < n && gb < ge; ++i) {
      if (gb >= first[i + 1]) continue;
      const PackedProduct& p = products[i];
      const int64_t end = std::min(ge, first[i + 1]);
      matmul_packed_rows(*p.w, p.x, n_tokens, p.y, p.y_stride, (gb - first[i]) * kR,
                         std::min(p.w->rows(), (end - first[i]) * kR));
      gb = end;
    }
  };
  const int64_t groups = first[n];
  if (pool.n_threads() == 1 || macs < kMatmulParallelMinMacs) {
    run(0, groups, 0);
    return;
  }
  pool.parallel_chunks(groups, pool.chunk_size(groups, 1), run);
}

}  // namespace larder
