// The packed Q8_0 prefill tile on AMX (Intel Sapphire Rapids and later):
// 16 tokens x 16 rows per block of 32 values in one TDPBSUD, the same int32
// block sums as the AVX-512 VNNI tiles (exact integers either way) and the
// same f32 step per block and output:
//   acc = fma(float(isum_b - 128 * sum(q_x)), d_w * d_x, acc)
// so its outputs are bit-identical to the VNNI tiles' (tests/cpu/
// matmul_packed_test.cpp checks both against one scalar definition).
//
// The packed layout (matmul_packed.h) is already AMX's B operand: block b's
// 8 chunks of 64 bytes are 8 tile rows of 16 columns x 4 bytes (u8 w + 128),
// and a token block's 32 quants are a row of the A tile (s8), so TDPBSUD
// (signed A x unsigned B) gives sum x (w + 128), as vpdpbusd does.
//
// Built only when the compiler targets AMX-INT8 (-march=native on such a
// CPU); used only when the kernel grants the process the tile state
// (arch_prctl ARCH_REQ_XCOMP_PERM, Linux 5.16+).
#include "engine/cpu/matmul_packed.h"

#include "engine/cpu/matmul_packed_amx.h"

#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AVX512F__)
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "engine/cpu/simd.h"
#define LARDER_AMX 1
#endif

namespace larder::packed_detail {

#ifdef LARDER_AMX
namespace {

constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtiledata = 18;

// Q8_0 tiles: 0, 1 the int32 sums (C) of two blocks in flight; 2, 3 their
// activations (A: 16 tokens x 32 bytes); 4, 5 their weights (B: 8 x 64 bytes).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 32, 32, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 8, 8};
};
static_assert(sizeof(TileConfig) == 64);

// K-quant tiles (matmul_packed_amx.h): 0, 1 C hi / lo, 2 A, 3, 4 B hi / lo.
TileConfig kquant_config() {
  TileConfig c;
  for (int i = 0; i < 16; ++i) c.colsb[i] = 0, c.rows[i] = 0;
  for (int i = 0; i < 5; ++i) c.colsb[i] = 64, c.rows[i] = 16;
  return c;
}

// The configuration loaded on this thread, if one of ours.
thread_local const TileConfig* t_loaded = nullptr;

void use_config(const TileConfig& config) {
  if (t_loaded == &config) return;
  _tile_loadconfig(&config);
  t_loaded = &config;
}

void configure_thread() {
  static const TileConfig config;
  use_config(config);
}

// acc[t] += the block's f32 step for the 16 tokens, from its int32 sums c[t].
inline void add_block(__m512 (&acc)[16], const int32_t (&c)[16][16], const Q8PackedAct* x, int nb, int b,
                      const uint16_t* scales) {
  const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + size_t(b) * 16)));
  for (int t = 0; t < 16; ++t) {
    const Q8PackedAct& a = x[size_t(t) * nb + b];
    const __m512i is = _mm512_add_epi32(_mm512_load_si512(c[t]), _mm512_set1_epi32(a.neg_c));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(dw, _mm512_set1_ps(a.d)), acc[t]);
  }
}

}  // namespace

void configure_kquant_tiles() {
  static const TileConfig config = kquant_config();
  use_config(config);
}

uint8_t* amx_scratch(size_t bytes) {
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  static thread_local std::unique_ptr<uint8_t, Free> buf;
  static thread_local size_t size = 0;
  if (size < bytes) {
    const size_t n = (bytes + 63) / 64 * 64;
    buf.reset(static_cast<uint8_t*>(std::aligned_alloc(64, n)));
    if (!buf) throw std::bad_alloc();
    size = n;
  }
  return buf.get();
}

bool amx_usable() {
  static const bool ok = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  return ok;
}

void q8_tile_amx16(const uint8_t* q, const Q8PackedAct* x, int nb, float* y, int y_stride, int last_rows) {
  configure_thread();
  const auto* scales = reinterpret_cast<const uint16_t*>(q + size_t(nb) * PackedMatrix::kBlockQuantBytes);
  const size_t x_stride = size_t(nb) * sizeof(Q8PackedAct);
  alignas(64) int32_t c0[16][16], c1[16][16];
  __m512 acc[16];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  // Two blocks in flight: while one block's sums are scaled, the TMUL
  // multiplies the next but one. (GCC's tile intrinsics take their tile
  // numbers as literals, hence the macro.)
#define LARDER_AMX_START(blk, TC, TA, TB)                                        \
  do {                                                                           \
    _tile_zero(TC);                                                              \
    _tile_loadd(TA, x[blk].qs, x_stride);                                        \
    _tile_loadd(TB, q + size_t(blk) * PackedMatrix::kBlockQuantBytes, 64);       \
    _tile_dpbsud(TC, TA, TB);                                                    \
  } while (0)
  LARDER_AMX_START(0, 0, 2, 4);
  if (nb > 1) LARDER_AMX_START(1, 1, 3, 5);
  for (int b = 0; b < nb; b += 2) {
    _tile_stored(0, c0, 64);
    if (b + 2 < nb) LARDER_AMX_START(b + 2, 0, 2, 4);
    add_block(acc, c0, x, nb, b, scales);
    if (b + 1 < nb) {
      _tile_stored(1, c1, 64);
      if (b + 3 < nb) LARDER_AMX_START(b + 3, 1, 3, 5);
      add_block(acc, c1, x, nb, b + 1, scales);
    }
  }
#undef LARDER_AMX_START
  const __mmask16 last = __mmask16((1u << last_rows) - 1u);
  for (int t = 0; t < 16; ++t) _mm512_mask_storeu_ps(y + size_t(t) * y_stride, last, acc[t]);
}
#else
bool amx_usable() { return false; }
void q8_tile_amx16(const uint8_t*, const Q8PackedAct*, int, float*, int, int) {}
#endif

}  // namespace larder::packed_detail
