// Decode (one token) and short-prefill throughput on Llama-3.2-1B-shaped
// matrices, weights streamed from memory rather than cache (hidden: run with
// `test_cpu "[.bench-decode]"`), through the row-major kernels and, for the
// types decode repacks (Q8_0, Q4_0 .. Q5_1, Q2_K .. Q6_K), through the packed ones.
//
// One "pass" multiplies one activation row by every matrix of n_layers
// layers (q 2048x2048, k and v 512x2048, o 2048x2048, gate and up
// 8192x2048, down 2048x8192), as the forward pass does: rows split over a
// ThreadPool in chunks of rows (matmul_parallel), int8 activations quantized
// once per matrix.
// Enough layers are allocated (>= LARDER_BENCH_MB, default 160 MB per type)
// that the L3 holds none of them when a matrix comes round again: a 32 MB
// L3 needs the default, the Intel machine's 480 MB one LARDER_BENCH_MB=1024. GB/s counts the weight bytes
// of a pass over its time; "read" is a plain AVX-512 read of the same
// buffers, split the same way, measured in the same rounds (the wall).
// Rounds interleave every type and thread count; medians are printed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/matmul.h"
#include "engine/cpu/matmul_packed.h"
#include "engine/cpu/thread_pool.h"
#include "engine/gguf/quant_blocks.h"
#include "tests/cpu/matmul_test_util.h"

namespace larder {
namespace {

struct Shape { int64_t rows, K; };
constexpr Shape kLayer[] = {{2048, 2048}, {512, 2048}, {512, 2048}, {2048, 2048},
                            {8192, 2048}, {8192, 2048}, {2048, 8192}};

struct TypeSet {
  GgmlType type;
  std::vector<std::vector<uint8_t>> data;  // one buffer per matrix
  std::vector<WeightView> views;
  size_t bytes = 0;
  std::vector<PackedMatrix> packed;  // the views repacked, where packed_type_supported
  size_t packed_bytes = 0;
};

// Random quant bytes with small finite f16 scales at every 16-bit field a
// block's scales could sit at (as matmul_quant_bench.cpp).
// total_mb < 8: one 512 x 2048 matrix (k / v shape), which stays in L2:
// the kernel's arithmetic speed without memory in the way.
TypeSet make_set(GgmlType type, std::mt19937& rng, int total_mb) {
  TypeSet s{type, {}, {}, 0, {}, 0};
  std::vector<Shape> shapes(std::begin(kLayer), std::end(kLayer));
  if (total_mb < 8) shapes = {Shape{512, 2048}};
  size_t layer_bytes = 0;
  for (const Shape& sh : shapes) layer_bytes += ggml_row_size(type, sh.K) * sh.rows;
  const int n_layers = total_mb < 8 ? 1 : int((size_t(total_mb) << 20) / layer_bytes + 1);
  const size_t bb = ggml_type_size(type);
  const uint16_t small = fp32_to_fp16(1.0f / 256);
  for (int l = 0; l < n_layers; ++l)
    for (const Shape& sh : shapes) {
      const size_t rb = ggml_row_size(type, sh.K);
      std::vector<uint8_t> d(rb * sh.rows);
      for (size_t i = 0; i + 4 <= d.size(); i += 4) {
        const uint32_t v = rng();
        std::memcpy(&d[i], &v, 4);
      }
      for (size_t off = 0; off < d.size(); off += bb)
        for (size_t f : {size_t(0), size_t(2), bb - 4, bb - 2}) std::memcpy(&d[off + f], &small, 2);
      s.bytes += d.size();
      s.data.push_back(std::move(d));
      s.views.push_back(WeightView{type, {sh.K, sh.rows}, s.data.back().data(), rb});
      if (packed_type_supported(type)) {
        s.packed.push_back(PackedMatrix::pack(s.views.back()));
        s.packed_bytes += s.packed.back().bytes();
      }
    }
  return s;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One pass of n tokens over every matrix of s. x: [n][8192], y: [n][8192].
double pass(const TypeSet& s, ThreadPool& pool, int n, const float* x, float* y,
            MatmulInput& in) {
  const double t0 = now_s();
  for (const WeightView& w : s.views) {
    in.prepare(w.type, x, n, int(w.ne[0]));
    matmul_parallel(pool, w, in, y, int(w.ne[1]));
  }
  return now_s() - t0;
}

// Plain read of every buffer of s, split like the matmuls.
double read_pass(const TypeSet& s, ThreadPool& pool, volatile float* sink) {
  const double t0 = now_s();
  for (const WeightView& w : s.views) {
    pool.parallel_for(w.ne[1], 4, [&](int64_t b, int64_t e, int thread) {
      sink[thread] = float(testing::read_fold(w.row(b), size_t(e - b) * w.row_bytes));
    });
  }
  return now_s() - t0;
}

// As pass, through the packed matrices of s (what decode runs for every
// packed type: matmul_packed.h), activations prepared for them once per
// matrix as the forward pass does.
double packed_pass(const TypeSet& s, ThreadPool& pool, int n, const float* x, float* y, MatmulInput& in) {
  const double t0 = now_s();
  for (size_t i = 0; i < s.views.size(); ++i) {
    const WeightView& w = s.views[i];
    in.prepare(w.type, x, n, int(w.ne[0]), Q8Path::kInt8, /*packed=*/true);
    matmul_packed_parallel(pool, s.packed[i], in.packed(), n, y, int(w.ne[1]));
  }
  return now_s() - t0;
}

// Plain read of the packed bytes of s, in the chunks of groups
// matmul_packed_parallel hands out.
double read_packed_pass(const TypeSet& s, ThreadPool& pool, volatile float* sink) {
  const double t0 = now_s();
  for (const PackedMatrix& m : s.packed) {
    const int64_t groups = m.n_groups();
    pool.parallel_chunks(groups, pool.chunk_size(groups, 1), [&](int64_t b, int64_t e, int thread) {
      sink[thread] = float(testing::read_fold(m.group(b), size_t(e - b) * m.group_stride()));
    });
  }
  return now_s() - t0;
}

double n_weights(const TypeSet& s) {
  double n = 0;
  for (const WeightView& w : s.views) n += double(w.ne[0]) * double(w.ne[1]);
  return n;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

TEST_CASE("decode matmul throughput, Llama-3.2-1B shapes", "[.bench-decode]") {
  // LARDER_BENCH_TYPES: comma-separated type names (default Q8_0,Q4_K,Q5_K,Q6_K;
  // also Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, IQ4_NL, IQ4_XS);
  // LARDER_BENCH_TOKENS: tokens per pass (default 1); LARDER_BENCH_ROUNDS (default 7);
  // LARDER_BENCH_MB: weight bytes per type (default 160; < 8: one L2-resident matrix).
  std::string names = std::getenv("LARDER_BENCH_TYPES") ? std::getenv("LARDER_BENCH_TYPES") : "Q8_0,Q4_K,Q5_K,Q6_K";
  for (char& c : names) c = char(std::toupper(static_cast<unsigned char>(c)));
  const int n = std::getenv("LARDER_BENCH_TOKENS") ? std::atoi(std::getenv("LARDER_BENCH_TOKENS")) : 1;
  const int rounds = std::getenv("LARDER_BENCH_ROUNDS") ? std::atoi(std::getenv("LARDER_BENCH_ROUNDS")) : 7;
  const int total_mb = std::getenv("LARDER_BENCH_MB") ? std::atoi(std::getenv("LARDER_BENCH_MB")) : 160;
  // LARDER_BENCH_PACKED_ONLY=1: only the packed kernels (and their read), for the types that have them.
  const bool packed_only = std::getenv("LARDER_BENCH_PACKED_ONLY") != nullptr;
  std::mt19937 rng(7);
  std::vector<TypeSet> sets;
  for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                     GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
                     GgmlType::kIQ4_NL, GgmlType::kIQ4_XS})
    if (("," + names + ",").find(std::string(",") + ggml_type_name(t) + ",") != std::string::npos)
      sets.push_back(make_set(t, rng, total_mb));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(size_t(n) * 8192), y(size_t(n) * 8192);
  for (float& v : x) v = u(rng);
  MatmulInput xq;
  ThreadPool pools[2] = {ThreadPool(1), ThreadPool(2)};
  volatile float sink[2] = {0, 0};
  // times[set][pool]: matmul, its read; the packed matmul, its read.
  using Times = std::vector<std::vector<std::vector<double>>>;
  Times mm(sets.size(), std::vector<std::vector<double>>(2)), rd = mm, pm = mm, pr = mm;
  // LARDER_BENCH_DECODE_GROUPS=1,4: the K-quant decode tiles' group counts
  // (set_kquant_decode_groups, 1..9; AVX-512 builds), each timed once per
  // round beside the others.
  std::vector<int> groups;
  if (const char* g = std::getenv("LARDER_BENCH_DECODE_GROUPS"))
    for (const char* p = g; *p != 0; ++p)
      if (*p >= '1' && *p <= '9') groups.push_back(*p - '0');
  std::vector<Times> by_groups(groups.size(), Times(sets.size(), std::vector<std::vector<double>>(2)));
  for (int round = 0; round < rounds + 1; ++round)
    for (size_t i = 0; i < sets.size(); ++i)
      for (int p = 0; p < 2; ++p) {
        // A small (cached) set is passed over `inner` times per timing.
        const int inner = total_mb < 8 ? 100 : 1;
        double tm = 0, tr = 0, tpm = 0, tpr = 0;
        const bool row_major = !packed_only || sets[i].packed.empty();
        for (int k = 0; row_major && k < inner; ++k) tm += pass(sets[i], pools[p], n, x.data(), y.data(), xq) / inner;
        for (int k = 0; row_major && k < inner; ++k) tr += read_pass(sets[i], pools[p], sink) / inner;
        const GgmlType t = sets[i].type;
        const bool kquant = t == GgmlType::kQ2_K || t == GgmlType::kQ3_K || t == GgmlType::kQ4_K ||
                            t == GgmlType::kQ5_K || t == GgmlType::kQ6_K;
        for (size_t j = 0; j < groups.size() && kquant && !sets[i].packed.empty(); ++j) {
          set_kquant_decode_groups(groups[j]);
          double tg = 0;
          for (int k = 0; k < inner; ++k) tg += packed_pass(sets[i], pools[p], n, x.data(), y.data(), xq) / inner;
          if (round > 0) by_groups[j][i][p].push_back(tg);
          set_kquant_decode_groups(0);
        }
        if (!sets[i].packed.empty()) {
          for (int k = 0; k < inner; ++k) tpm += packed_pass(sets[i], pools[p], n, x.data(), y.data(), xq) / inner;
          for (int k = 0; k < inner; ++k) tpr += read_packed_pass(sets[i], pools[p], sink) / inner;
        }
        if (round > 0) {  // round 0 warms up
          mm[i][p].push_back(tm), rd[i][p].push_back(tr);
          pm[i][p].push_back(tpm), pr[i][p].push_back(tpr);
        }
      }
  for (size_t j = 0; j < groups.size(); ++j)
    for (size_t i = 0; i < sets.size(); ++i)
      for (int p = 0; p < 2; ++p)
        if (!by_groups[j][i][p].empty())
          std::printf("%-5s threads %d, packed, %d decode groups: %6.1f GB/s  (packed read %6.1f GB/s)\n",
                      ggml_type_name(sets[i].type), p + 1, groups[j],
                      double(sets[i].packed_bytes) / 1e9 / median(by_groups[j][i][p]),
                      double(sets[i].packed_bytes) / 1e9 / median(pr[i][p]));
  std::printf("tokens %d, %d rounds, median (GB/s of weights; read = plain read of the same bytes)\n", n, rounds);
  for (size_t i = 0; i < sets.size(); ++i)
    for (int p = 0; p < 2; ++p) {
      const double tm = median(mm[i][p]), tr = median(rd[i][p]);
      const double gb = double(sets[i].bytes) / 1e9;
      if (tm > 0)
        std::printf("%-5s threads %d: %7.2f ms/pass %6.1f GB/s  read %6.1f GB/s  matmul/read %.2f  (%.0f MB, %.1f GFLOP/s)\n",
                  ggml_type_name(sets[i].type), p + 1, tm * 1e3, gb / tm, gb / tr, tr / tm,
                  gb * 1e3, 2.0 * n * n_weights(sets[i]) / tm / 1e9);
      if (sets[i].packed.empty()) continue;
      const double tpm = median(pm[i][p]), tpr = median(pr[i][p]);
      const double pgb = double(sets[i].packed_bytes) / 1e9;
      std::printf("%-5s threads %d, packed: %7.2f ms/pass %6.1f GB/s  read %6.1f GB/s  matmul/read %.2f  (%.0f MB)\n",
                  ggml_type_name(sets[i].type), p + 1, tpm * 1e3, pgb / tpm, pgb / tpr, tpr / tpm, pgb * 1e3);
    }
}

}  // namespace larder
