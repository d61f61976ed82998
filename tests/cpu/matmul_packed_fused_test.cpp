// matmul_packed_parallel over several products in one job (engine/cpu/
// matmul_packed.h): each product's rows against its scalar definition, bit
// for bit, whatever the threads and wherever the chunks cut between products.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "engine/cpu/matmul_packed.h"
#include "engine/cpu/thread_pool.h"
#include "tests/cpu/packed_matrices.h"
#include "tests/support/skip.h"

namespace larder {

using namespace testing;

TEST_CASE("fused packed products: each equals its scalar definition, for any thread count",
          "[cpu][matmul][q8packed]") {
  if (!q8_packed_supported()) LARDER_SKIP("no AVX-512 VNNI or AVX2 in this build");
  std::mt19937 rng(21);
  const int K = 512, n = 9;
  // Part-filled last groups (1000, 37, 20 rows), Q8_0 beside Q4_K and Q6_K
  // (as a Q4_K_M layer's q, k, v), so that chunks span two matrices.
  const Q8Matrix q8a{K, 1000, random_blocks(size_t(1000) * (K / 32), rng, false)};
  const Q8Matrix q8b{K, 37, random_blocks(size_t(37) * (K / 32), rng, false)};
  const Q4KMatrix q4 = random_q4k(K, 200, rng, false);
  const Q6KMatrix q6 = random_q6k(K, 20, rng, false);
  const std::vector<BlockQ8_0> x8 = random_blocks(size_t(n) * (K / 32), rng, false, kActLo);
  const std::vector<BlockQ8K> xk = random_q8k(size_t(n) * (K / 256), rng, false);
  std::vector<Q8PackedAct> a8(x8.size());
  std::vector<Q4KPackedAct> a4(xk.size());
  std::vector<Q6KPackedAct> a6(xk.size());
  prepare_q8_packed_act(x8.data(), n, K, a8.data(), GgmlType::kQ8_0);
  prepare_q4k_packed_act(xk.data(), n, K, a4.data());
  prepare_q6k_packed_act(xk.data(), n, K, a6.data());
  struct Part {
    PackedMatrix p;
    const void* act;
    std::vector<float> want;
  };
  std::vector<Part> parts;
  parts.push_back({PackedMatrix::pack(q8a.view()), a8.data(), q8_0_definition(q8a, x8, n)});
  parts.push_back({PackedMatrix::pack(q4.view()), a4.data(), q4k_definition(q4, xk, n)});
  parts.push_back({PackedMatrix::pack(q8b.view()), a8.data(), q8_0_definition(q8b, x8, n)});
  parts.push_back({PackedMatrix::pack(q6.view()), a6.data(), q6k_definition(q6, xk, n)});
  ThreadPool one(1), two(2), three(3);
  // 4 products, and 10 (more than one job takes: the rest go in a second).
  for (const size_t n_products : {size_t(4), size_t(10)}) {
    for (ThreadPool* pool : {&one, &two, &three}) {
      for (int tokens : {1, n}) {
        INFO(n_products << " products, " << pool->n_threads() << " threads, " << tokens << " tokens");
        std::vector<std::vector<float>> ys(n_products);
        std::vector<PackedProduct> products;
        for (size_t i = 0; i < n_products; ++i) {
          const Part& part = parts[i % parts.size()];
          ys[i].assign(size_t(tokens) * part.p.rows(), -1.0f);
          products.push_back({&part.p, part.act, ys[i].data(), int(part.p.rows())});
        }
        matmul_packed_parallel(*pool, products, tokens);
        for (size_t i = 0; i < n_products; ++i) {
          INFO("product " << i);
          REQUIRE(std::memcmp(ys[i].data(), parts[i % parts.size()].want.data(), ys[i].size() * sizeof(float)) == 0);
        }
      }
    }
  }
}

}  // namespace larder
