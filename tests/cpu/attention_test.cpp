// attend_token against a double-precision softmax attention over the same
// K/V values (as stored: F32, F16-rounded or Q8_0), and its independence from
// the head range and from the tile of tokens (attend_tokens) it is called
// with.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/cpu/attention.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "engine/gguf/ggml_types.h"
#include "tests/cpu/matmul_test_util.h"

namespace larder {

using testing::half_to_double;

namespace {

// Writes k and v ([kv_dim] f32) at position p with kv_write and records the
// values as stored (F16-rounded, Q8_0 as d * q, F32 as they are) at
// kref / vref[p * kv_dim ..], for the reference below.
void store_kv(PagePool& pool, std::span<const int32_t> pages, int p, const std::vector<float>& k,
              const std::vector<float>& v, std::vector<double>& kref, std::vector<double>& vref) {
  const KvDtype dtype = pool.layout().dtype;
  const int kv_dim = int(k.size());
  std::vector<BlockQ8_0> qk(kv_dim / 32 + 1), qv(kv_dim / 32 + 1);
  if (dtype == KvDtype::kQ8_0) {
    quantize_rows_q8_0(k.data(), 1, kv_dim, qk.data());
    quantize_rows_q8_0(v.data(), 1, kv_dim, qv.data());
  }
  for (int i = 0; i < kv_dim; ++i) {
    const size_t at = size_t(p) * kv_dim + i;
    if (dtype == KvDtype::kQ8_0) {
      kref[at] = half_to_double(qk[i / 32].d) * qk[i / 32].qs[i % 32];
      vref[at] = half_to_double(qv[i / 32].d) * qv[i / 32].qs[i % 32];
    } else {
      kref[at] = dtype == KvDtype::kF16 ? half_to_double(fp32_to_fp16(k[i])) : k[i];
      vref[at] = dtype == KvDtype::kF16 ? half_to_double(fp32_to_fp16(v[i])) : v[i];
    }
  }
  kv_write(pool, 0, pages, p, k.data(), v.data());
}

// Query head h of q ([n_head][head_dim]) attending over positions 0..pos of
// kref / vref ([pos][kv_dim] as stored), in double: softmax(q.k / sqrt(hd)) v.
std::vector<double> reference_head(const float* q, const std::vector<double>& kref, const std::vector<double>& vref,
                                   const AttentionShape& shape, int h, int pos) {
  const int hd = shape.head_dim, kv_dim = shape.kv_dim(), g = h / (shape.n_head / shape.n_head_kv);
  std::vector<double> s(pos + 1), o(hd, 0.0);
  double mx = -INFINITY, sum = 0;
  for (int p = 0; p <= pos; ++p) {
    double d = 0;
    for (int i = 0; i < hd; ++i) d += double(q[size_t(h) * hd + i]) * kref[size_t(p) * kv_dim + g * hd + i];
    s[p] = d / std::sqrt(double(hd));
    mx = std::max(mx, s[p]);
  }
  for (double& x : s) sum += (x = std::exp(x - mx));
  for (int p = 0; p <= pos; ++p)
    for (int i = 0; i < hd; ++i) o[i] += s[p] / sum * vref[size_t(p) * kv_dim + g * hd + i];
  return o;
}

}  // namespace

TEST_CASE("attention matches a double softmax reference for any head range", "[cpu][attention]") {
  struct Case { int n_head, n_head_kv, head_dim, page_size; KvDtype dtype; };
  for (const Case c : {Case{8, 2, 64, 16, KvDtype::kF32}, Case{8, 2, 64, 16, KvDtype::kF16},
                       Case{6, 3, 32, 8, KvDtype::kF16}, Case{14, 2, 128, 32, KvDtype::kF32},
                       Case{4, 4, 16, 64, KvDtype::kF16}, Case{8, 4, 8, 16, KvDtype::kF32},
                       Case{8, 2, 64, 16, KvDtype::kQ8_0}, Case{8, 4, 8, 16, KvDtype::kQ8_0},
                       Case{6, 2, 48, 32, KvDtype::kQ8_0},
                       // the 8-lane tiles' template sizes and a run-time one (24), with F16 pages
                       Case{8, 4, 8, 16, KvDtype::kF16}, Case{6, 2, 24, 16, KvDtype::kF16},
                       Case{4, 1, 128, 16, KvDtype::kF16},
                       // a decode step's four-head pass over F16 K (heads of
                       // up to 64 dims) in groups of 8 and 12 query heads
                       // (two and three passes a kv head), heads of 32 and 48
                       Case{16, 2, 64, 16, KvDtype::kF16}, Case{12, 1, 48, 8, KvDtype::kF16},
                       Case{8, 2, 32, 16, KvDtype::kF16},
                       // the same pass for groups of 3 and of 7 (4, then 3)
                       Case{12, 4, 64, 16, KvDtype::kF16}, Case{14, 2, 32, 16, KvDtype::kF16},
                       // and for pairs of heads of 96 and 128 dims (groups of 4 and 3)
                       Case{8, 2, 96, 16, KvDtype::kF16}, Case{6, 2, 128, 8, KvDtype::kF16},
                       // the 8-lane pass's groups of 4, 2 and 1 heads sharing
                       // each K and V chunk (a kv head's 7 query heads go as
                       // 4, then 3 = 2 + 1; 5 as 4, then 1), with template (8)
                       // and run-time (24, 40) head sizes
                       Case{16, 2, 8, 16, KvDtype::kF16}, Case{14, 2, 24, 16, KvDtype::kF32},
                       Case{16, 4, 8, 16, KvDtype::kQ8_0}, Case{10, 2, 40, 8, KvDtype::kF16},
                       // pages of fewer than 16 slots and of more than the
                       // context (the next page's rows are prefetched per page)
                       Case{8, 2, 64, 1, KvDtype::kF16}, Case{8, 4, 32, 4, KvDtype::kQ8_0},
                       Case{8, 2, 64, 2, KvDtype::kF32}, Case{8, 8, 16, 256, KvDtype::kF16},
                       // heads of no vector pass (a multiple of neither 8 nor
                       // 16): the one-token fallback
                       Case{6, 3, 20, 16, KvDtype::kF32}, Case{6, 3, 20, 8, KvDtype::kF16},
                       Case{8, 8, 4, 16, KvDtype::kQ8_0}, Case{4, 2, 12, 4, KvDtype::kF16}}) {
    INFO("heads " << c.n_head << "/" << c.n_head_kv << " hd " << c.head_dim << " page " << c.page_size
                  << " " << kv_dtype_name(c.dtype));
    const AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim};
    const int kv_dim = shape.kv_dim(), max_pos = 150;
    const KvLayout lay{1, kv_dim, c.page_size, c.dtype};
    auto pool = PagePool::create(lay, max_pos / c.page_size + 1).value();
    std::vector<int32_t> pages;
    for (int i = 0; i <= max_pos / c.page_size; ++i) pages.push_back(*pool->allocate());
    std::reverse(pages.begin(), pages.end());  // not in pool order

    std::mt19937 rng(c.head_dim * 31 + c.page_size);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    // K/V as stored (F16-rounded when the pool is F16), for the reference.
    std::vector<double> kref(size_t(max_pos + 1) * kv_dim), vref(kref.size());
    std::vector<float> k(kv_dim), v(kv_dim);
    for (int p = 0; p <= max_pos; ++p) {
      for (int i = 0; i < kv_dim; ++i) {
        k[i] = 2.0f * nd(rng);
        v[i] = nd(rng);
      }
      store_kv(*pool, pages, p, k, v, kref, vref);
    }
    std::vector<float> q(size_t(c.n_head) * c.head_dim);
    for (float& x : q) x = nd(rng);
    std::vector<float> scores(attention_scratch_floats(max_pos, c.page_size, kAttentionTileTokens));
    const int group = c.n_head / c.n_head_kv;
    for (int pos : {0, 1, 15, 16, 17, 63, 100, max_pos}) {
      INFO("pos " << pos);
      std::vector<float> out(q.size(), NAN);
      attend_token(*pool, 0, pages, pos, shape, q.data(), out.data(), scores.data(), 0, c.n_head);
      for (int h = 0; h < c.n_head; ++h) {
        const std::vector<double> o = reference_head(q.data(), kref, vref, shape, h, pos);
        // Scores carry ~hd * 2^-24 relative error each (|s| up to ~30), exp
        // a few ulp: the output is a weighted mean of |v| <~ 5.
        for (int i = 0; i < c.head_dim; ++i)
          REQUIRE(std::fabs(double(out[size_t(h) * c.head_dim + i]) - o[i]) <= 2e-4);
      }
      // Any split of the heads (one at a time, odd ranges across kv groups)
      // gives the same bits.
      std::vector<float> split(q.size(), NAN);
      for (int h = 0; h < c.n_head; ++h)
        attend_token(*pool, 0, pages, pos, shape, q.data(), split.data(), scores.data(), h, h + 1);
      REQUIRE(std::memcmp(split.data(), out.data(), out.size() * sizeof(float)) == 0);
      std::vector<float> odd(q.size(), NAN);
      const int cut = std::min(c.n_head - 1, group + 1);
      attend_token(*pool, 0, pages, pos, shape, q.data(), odd.data(), scores.data(), 0, cut);
      attend_token(*pool, 0, pages, pos, shape, q.data(), odd.data(), scores.data(), cut, c.n_head);
      REQUIRE(std::memcmp(odd.data(), out.data(), out.size() * sizeof(float)) == 0);
    }
    // A tile of consecutive tokens (a prefill chunk) gives each token the
    // bits it gets alone: tiles starting inside and at a page, crossing page
    // ends, longer than kAttentionTileTokens, and cut into head ranges.
    const size_t qd = size_t(c.n_head) * c.head_dim;
    std::vector<float> qs(qd * 40);
    for (float& x : qs) x = nd(rng);
    struct Tile { int pos0, n; };
    for (const Tile t : {Tile{0, 1}, Tile{0, 16}, Tile{3, 5}, Tile{15, 2}, Tile{16, 16}, Tile{30, 40},
                         Tile{max_pos - 20, 21}, Tile{max_pos - 2, 3}}) {
      INFO("tile at " << t.pos0 << " of " << t.n);
      std::vector<float> alone(qd * t.n, NAN), tiled(qd * t.n, NAN), cut_tiled(qd * t.n, NAN);
      for (int i = 0; i < t.n; ++i)
        attend_token(*pool, 0, pages, t.pos0 + i, shape, qs.data() + qd * i, alone.data() + qd * i,
                     scores.data(), 0, c.n_head);
      attend_tokens(*pool, 0, pages, t.pos0, t.n, shape, qs.data(), tiled.data(), scores.data(), 0, c.n_head);
      REQUIRE(std::memcmp(tiled.data(), alone.data(), tiled.size() * sizeof(float)) == 0);
      const int cut = std::min(c.n_head - 1, group + 1);
      attend_tokens(*pool, 0, pages, t.pos0, t.n, shape, qs.data(), cut_tiled.data(), scores.data(), 0, cut);
      attend_tokens(*pool, 0, pages, t.pos0, t.n, shape, qs.data(), cut_tiled.data(), scores.data(), cut,
                    c.n_head);
      REQUIRE(std::memcmp(cut_tiled.data(), alone.data(), cut_tiled.size() * sizeof(float)) == 0);
    }
  }
}

// Past kAttentionChunk positions the 16- and 8-position passes fold chunks
// of positions (attention.h): still the double softmax reference, the same
// bits whatever the head range and tile, and attend_token_chunk for each
// chunk folded by attend_token_merge gives attend_token's bits.
TEST_CASE("attention over several chunks of positions matches the reference and splits by chunk",
          "[cpu][attention]") {
  struct Case { int n_head, n_head_kv, head_dim, page_size; KvDtype dtype; };
  for (const Case c : {Case{8, 2, 64, 16, KvDtype::kF16}, Case{8, 2, 64, 16, KvDtype::kF32},
                       Case{8, 2, 64, 16, KvDtype::kQ8_0}, Case{8, 4, 32, 4, KvDtype::kF16},
                       Case{4, 1, 128, 1024, KvDtype::kF16}, Case{16, 2, 64, 16, KvDtype::kF16},
                       Case{6, 3, 48, 8, KvDtype::kF32}, Case{8, 2, 64, 1, KvDtype::kF16},
                       Case{8, 4, 32, 2, KvDtype::kQ8_0},
                       // the 8-position pass in AVX-512 builds too (heads of
                       // 8, 24 and 40 dims: template and run-time sizes; of
                       // 48 over Q8_0 pages, which the 16-position pass
                       // does not take) and groups of 4, 2 + 1 and 4 + 1 heads
                       Case{8, 4, 8, 16, KvDtype::kF16}, Case{6, 2, 24, 8, KvDtype::kF16},
                       Case{10, 2, 40, 16, KvDtype::kF32}, Case{16, 4, 8, 4, KvDtype::kQ8_0},
                       Case{8, 2, 48, 16, KvDtype::kQ8_0},
                       // heads of 20 dims: the one-token fallback, without chunks
                       Case{6, 3, 20, 16, KvDtype::kF32}}) {
    INFO("heads " << c.n_head << "/" << c.n_head_kv << " hd " << c.head_dim << " page " << c.page_size
                  << " " << kv_dtype_name(c.dtype));
    const AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim};
    const int kv_dim = shape.kv_dim(), max_pos = 2 * kAttentionChunk + 52;
    const KvLayout lay{1, kv_dim, c.page_size, c.dtype};
    const int n_pages = max_pos / c.page_size + 1;
    auto pool = PagePool::create(lay, n_pages).value();
    std::vector<int32_t> pages;
    for (int i = 0; i < n_pages; ++i) pages.push_back(*pool->allocate());
    std::reverse(pages.begin(), pages.end());
    std::mt19937 rng(c.head_dim * 17 + c.page_size);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<double> kref(size_t(max_pos + 1) * kv_dim), vref(kref.size());
    std::vector<float> k(kv_dim), v(kv_dim);
    for (int p = 0; p <= max_pos; ++p) {
      // |K| rises to 1.5 chunks and falls after, so that the second chunk's
      // maxima pass the first's and the third's stay below the second's
      // (both sides of the fold; each fails the test without its exp).
      const float drift = 1.0f + 2.0f * std::sin(3.14159265f * float(p) / float(3 * kAttentionChunk));
      for (int i = 0; i < kv_dim; ++i) {
        k[i] = drift * nd(rng);
        v[i] = nd(rng);
      }
      store_kv(*pool, pages, p, k, v, kref, vref);
    }
    const size_t qd = size_t(c.n_head) * c.head_dim;
    std::vector<float> qs(qd * 40);
    for (float& x : qs) x = nd(rng);
    std::vector<float> scratch(attention_scratch_floats(max_pos, c.page_size, kAttentionTileTokens));
    const int group = c.n_head / c.n_head_kv;
    const bool splits = attention_splits(shape, c.dtype);
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
    CHECK(splits == (c.head_dim % 8 == 0));  // the 16- or 8-position pass
#else
    CHECK(!splits);
#endif
    for (int pos : {kAttentionChunk - 1, kAttentionChunk, kAttentionChunk + 1, 2 * kAttentionChunk - 1,
                    2 * kAttentionChunk, max_pos}) {
      INFO("pos " << pos);
      const float* q = qs.data() + qd * size_t(pos % 40);
      std::vector<float> out(qd, NAN);
      attend_token(*pool, 0, pages, pos, shape, q, out.data(), scratch.data(), 0, c.n_head);
      for (int h = 0; h < c.n_head; ++h) {
        const std::vector<double> o = reference_head(q, kref, vref, shape, h, pos);
        for (int i = 0; i < c.head_dim; ++i)
          REQUIRE(std::fabs(double(out[size_t(h) * c.head_dim + i]) - o[i]) <= 2e-4);
      }
      std::vector<float> split(qd, NAN);
      for (int h = 0; h < c.n_head; ++h)
        attend_token(*pool, 0, pages, pos, shape, q, split.data(), scratch.data(), h, h + 1);
      REQUIRE(std::memcmp(split.data(), out.data(), out.size() * sizeof(float)) == 0);
      if (!splits) continue;
      // By chunks: all heads at once, and one kv head's group at a time,
      // the chunks computed in reverse order.
      const int n_chunks = attention_chunks(pos);
      REQUIRE(n_chunks == pos / kAttentionChunk + 1);
      for (int hb : {0, -1}) {
        const int h0 = hb < 0 ? 0 : hb, per = hb < 0 ? group : c.n_head;
        std::vector<float> merged(qd, NAN);
        for (int h = h0; h < c.n_head; h += per) {
          const size_t each = attention_partial_floats(shape, per);
          std::vector<float> partials(each * n_chunks, NAN);
          for (int ch = n_chunks - 1; ch >= 0; --ch)
            attend_token_chunk(*pool, 0, pages, pos, ch, shape, q, partials.data() + each * ch, scratch.data(), h,
                               h + per);
          attend_token_merge(partials.data(), n_chunks, shape, c.dtype, merged.data(), scratch.data(), h, h + per);
        }
        REQUIRE(std::memcmp(merged.data(), out.data(), out.size() * sizeof(float)) == 0);
      }
    }
    // Tiles of a prefill chunk across chunk boundaries give each token the
    // bits it gets alone.
    struct Tile { int pos0, n; };
    for (const Tile t : {Tile{kAttentionChunk - 8, 16}, Tile{kAttentionChunk - 3, 30},
                         Tile{2 * kAttentionChunk - 16, 16}, Tile{2 * kAttentionChunk + 1, 5}}) {
      INFO("tile at " << t.pos0 << " of " << t.n);
      std::vector<float> alone(qd * t.n, NAN), tiled(qd * t.n, NAN);
      for (int i = 0; i < t.n; ++i)
        attend_token(*pool, 0, pages, t.pos0 + i, shape, qs.data() + qd * i, alone.data() + qd * i,
                     scratch.data(), 0, c.n_head);
      attend_tokens(*pool, 0, pages, t.pos0, t.n, shape, qs.data(), tiled.data(), scratch.data(), 0, c.n_head);
      REQUIRE(std::memcmp(tiled.data(), alone.data(), tiled.size() * sizeof(float)) == 0);
    }
  }
}

// Non-finite K/V (an F16 overflow, a NaN from a broken model) in a chunk
// give the same bits split by chunks as in one pass, whatever they are.
TEST_CASE("attention split by chunks keeps one pass's bits on non-finite K/V", "[cpu][attention]") {
  // Heads of 64 (the 16-position pass in AVX-512 builds, the 8-position one
  // in AVX2 builds) and of 24 (the 8-position pass in both).
  // Pages of F32 and of F16 (kv_write keeps inf and NaN in F16).
  const int hd = GENERATE(64, 24);
  const KvDtype dtype = GENERATE(KvDtype::kF32, KvDtype::kF16);
  const AttentionShape shape{8, 2, hd};
  if (!attention_splits(shape, dtype)) return;  // no vector pass in this build
  const int kv_dim = shape.kv_dim(), max_pos = 2 * kAttentionChunk + 20;
  const KvLayout lay{1, kv_dim, 16, dtype};
  auto pool = PagePool::create(lay, max_pos / 16 + 1).value();
  std::vector<int32_t> pages;
  for (int i = 0; i <= max_pos / 16; ++i) pages.push_back(*pool->allocate());
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(size_t(shape.n_head) * shape.head_dim), scratch(attention_scratch_floats(max_pos, 16, 1));
  for (float& x : q) x = nd(rng);
  struct Bad { int pos; float k, v; };
  for (const Bad bad : {Bad{2 * kAttentionChunk, -INFINITY, INFINITY}, Bad{2 * kAttentionChunk, 1.0f, NAN},
                        Bad{kAttentionChunk + 5, INFINITY, 1.0f}, Bad{7, NAN, 1.0f}}) {
    std::vector<float> k(kv_dim), v(kv_dim);
    for (int p = 0; p <= max_pos; ++p) {
      for (int i = 0; i < kv_dim; ++i) {
        k[i] = p == bad.pos ? bad.k : nd(rng);
        v[i] = p == bad.pos ? bad.v : nd(rng);
      }
      kv_write(*pool, 0, pages, p, k.data(), v.data());
    }
    for (int pos : {bad.pos, bad.pos + 3, max_pos}) {
      INFO("hd " << hd << " " << kv_dtype_name(dtype) << ", bad K " << bad.k << " V " << bad.v << " at " << bad.pos
                 << ", pos " << pos);
      std::vector<float> out(q.size()), merged(q.size());
      attend_token(*pool, 0, pages, pos, shape, q.data(), out.data(), scratch.data(), 0, shape.n_head);
      const int n_chunks = attention_chunks(pos);
      const size_t each = attention_partial_floats(shape, shape.n_head);
      std::vector<float> partials(each * n_chunks);
      for (int c = 0; c < n_chunks; ++c)
        attend_token_chunk(*pool, 0, pages, pos, c, shape, q.data(), partials.data() + each * c, scratch.data(), 0,
                           shape.n_head);
      attend_token_merge(partials.data(), n_chunks, shape, dtype, merged.data(), scratch.data(), 0, shape.n_head);
      REQUIRE(std::memcmp(merged.data(), out.data(), out.size() * sizeof(float)) == 0);
    }
  }
}

// Decode attention at a long context, as a 1B model's decode step runs it
// (hidden: `test_cpu "[.bench-attention]"`): 16 layers, 32 query heads over
// 8 kv heads of 64 dims, F16 pages of 16 tokens, one token at position
// LARDER_BENCH_CONTEXT - 1 (default 16384); per layer the kv heads are split
// over a ThreadPool one per call, or a share of whole kv heads per thread,
// one call each (the forward pass within kAttentionChunk positions), or by
// chunks of positions (attend_token_chunk, folded by attend_token_merge: the
// forward pass past that on several threads); then a prefill tile of 16
// tokens at the same depth (kv heads split over the threads). Printed, not
// asserted: GB/s of K/V bytes beside a plain read of the same pages on the
// same threads. LARDER_BENCH_PAGES=N has every page id repeat the first N
// pages, so that K/V stay in cache and the arithmetic alone is timed;
// LARDER_BENCH_KV_DTYPE=f32 or q8_0 stores K/V in that type instead.
TEST_CASE("decode attention bandwidth at a long context", "[.bench-attention]") {
  const char* env = std::getenv("LARDER_BENCH_CONTEXT");
  const int ctx = env ? std::max(16, std::atoi(env)) : 16384;
  const int n_layer = 16, n_head = 32, n_head_kv = 8, hd = 64, ps = 16;
  const AttentionShape shape{n_head, n_head_kv, hd};
  const char* dtype_env = std::getenv("LARDER_BENCH_KV_DTYPE");  // f16 (default), f32 or q8_0
  const std::string dtype_name = dtype_env ? dtype_env : "f16";
  const KvDtype dtype = dtype_name == "f32" ? KvDtype::kF32 : dtype_name == "q8_0" ? KvDtype::kQ8_0 : KvDtype::kF16;
  const KvLayout lay{n_layer, shape.kv_dim(), ps, dtype};
  const int n_pages = (ctx + ps - 1) / ps;
  auto pool = PagePool::create(lay, n_pages).value();
  std::vector<int32_t> pages;
  for (int i = 0; i < n_pages; ++i) pages.push_back(*pool->allocate());
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> k(shape.kv_dim()), v(shape.kv_dim());
  for (float& x : k) x = nd(rng);
  for (float& x : v) x = nd(rng);
  for (int l = 0; l < n_layer; ++l)
    for (int p = 0; p < ctx; ++p) kv_write(*pool, l, pages, p, k.data(), v.data());
  if (const char* cached = std::getenv("LARDER_BENCH_PAGES"))
    for (size_t i = 0; i < pages.size(); ++i) pages[i] = pages[i % size_t(std::max(1, std::atoi(cached)))];
  constexpr int kTile = kAttentionTileTokens;
  std::vector<float> q(size_t(kTile) * n_head * hd), out_buf(q.size() + 16);
  // 64-byte aligned, as CpuForward's attention output is: threads write
  // neighbouring kv heads' slices, which then share no cache line.
  float* const out = out_buf.data() + (16 - reinterpret_cast<uintptr_t>(out_buf.data()) / 4 % 16) % 16;
  for (float& x : q) x = nd(rng);
  const size_t kv_bytes = size_t(n_layer) * ctx * 2 * lay.row_bytes();
  for (int threads : {1, 2}) {
    ThreadPool tp(threads);
    const size_t per = attention_scratch_floats(ctx - 1, ps, 1);
    std::vector<float> scratch(per * threads);
    auto step = [&](int per_call) {  // kv heads per attend_token call
      for (int l = 0; l < n_layer; ++l)
        tp.parallel_chunks(n_head_kv, per_call, [&](int64_t b, int64_t e, int t) {
          attend_token(*pool, l, pages, ctx - 1, shape, q.data(), out, scratch.data() + per * t, int(b) * 4,
                       int(e) * 4);
        });
    };
    std::vector<uint64_t> sink(size_t(threads) * 8);
    auto read = [&] {  // every page's K/V bytes layer by layer, as a step reads
                       // them; pages split over the threads
      for (int l = 0; l < lay.n_layer; ++l)
        tp.parallel_for(n_pages, 1, [&](int64_t b, int64_t e, int t) {
          for (int64_t i = b; i < e; ++i)  // a layer's K and V blocks are adjacent
            sink[size_t(t) * 8] += testing::read_fold(pool->k_block(pages[i], l), 2 * lay.block_bytes());
        });
    };
    const double tr = testing::best_seconds(read);
    for (int per_call : {1, n_head_kv / threads}) {
      const double ts = testing::best_seconds([&] { step(per_call); });
      std::printf("decode attention, context %d, %.0f MB of %s K/V, %d thread(s), %d kv head(s) a call: %.2f ms, "
                  "%.1f GB/s; plain read %.1f GB/s (%.2f)\n",
                  ctx, kv_bytes / 1e6, dtype_name.c_str(), threads, per_call, ts * 1e3, kv_bytes / ts / 1e9, kv_bytes / tr / 1e9, tr / ts);
    }
    // Split by chunks of positions, all kv heads an item, then folded on
    // this thread, as CpuForward does for a decode step on several threads.
    const int n_chunks = attention_chunks(ctx - 1);
    const size_t per_chunk = attention_partial_floats(shape, n_head);
    std::vector<float> partials(per_chunk * n_chunks);
    const double tsplit = testing::best_seconds([&] {
      for (int l = 0; l < n_layer; ++l) {
        tp.parallel_for(n_chunks, 1, [&](int64_t b, int64_t e, int t) {
          for (int64_t c = b; c < e; ++c)
            attend_token_chunk(*pool, l, pages, ctx - 1, int(c), shape, q.data(), partials.data() + per_chunk * c,
                               scratch.data() + per * t, 0, n_head);
        });
        attend_token_merge(partials.data(), n_chunks, shape, dtype, out, scratch.data(), 0, n_head);
      }
    });
    std::printf("decode attention, context %d, %d thread(s), split into %d chunks of positions: %.2f ms, %.1f GB/s "
                "(%.2f of the plain read)\n",
                ctx, threads, n_chunks, tsplit * 1e3, kv_bytes / tsplit / 1e9, tr / tsplit);
    const size_t per_tile = attention_scratch_floats(ctx - 1, ps, kTile);
    std::vector<float> tile_scratch(per_tile * threads);
    const double tp16 = testing::best_seconds([&] {
      for (int l = 0; l < n_layer; ++l)
        tp.parallel_chunks(n_head_kv, 1, [&](int64_t b, int64_t e, int t) {
          attend_tokens(*pool, l, pages, ctx - kTile, kTile, shape, q.data(), out,
                        tile_scratch.data() + per_tile * t, int(b) * 4, int(e) * 4);
        });
    });
    std::printf("prefill attention, %d tokens at context %d, %d thread(s): %.2f ms, %.1f GB/s of K/V\n", kTile, ctx,
                threads, tp16 * 1e3, kv_bytes / tp16 / 1e9);
  }
}

}  // namespace larder
