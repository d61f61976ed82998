// CPU-side logic of the CUDA backend (engine/cuda/plan/): batch packing,
// attention tiling, matmul path choice, weight formats, device memory sizing
// and page-copy runs. Expected values are worked out by hand in the comments.
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>

#include "engine/cuda/plan/batch_plan.h"
#include "engine/cuda/plan/memory_plan.h"
#include "engine/cuda/plan/weight_plan.h"
#include "tests/support/random_llama.h"

using namespace larder;
using namespace larder::cuda_plan;

TEST_CASE("matmul path: GEMV up to 8 tokens, cuBLAS GEMM above", "[cuda][plan]") {
  CHECK(choose_matmul_path(1) == MatmulPath::kGemv);
  CHECK(choose_matmul_path(8) == MatmulPath::kGemv);
  CHECK(choose_matmul_path(9) == MatmulPath::kGemm);
  CHECK(choose_matmul_path(512) == MatmulPath::kGemm);
}

TEST_CASE("attention tile tokens: 32 rows per block, at most 16 tokens", "[cuda][plan]") {
  // group -> min(16, 32 / group); > 32 unsupported.
  const std::vector<std::pair<int, int>> table = {{1, 16}, {2, 16}, {3, 10}, {4, 8}, {8, 4},
                                                  {16, 2}, {32, 1}, {33, 0}, {0, 0}};
  for (auto [group, want] : table) {
    INFO("group " << group);
    CHECK(attention_tile_tokens(group) == want);
  }
}

TEST_CASE("batch plan: block tables, table starts, tiles and logit rows", "[cuda][plan]") {
  // seq 0: pages {7, 3}; seq 1: pages {5}; page_size 4.
  std::vector<int32_t> t0 = {7, 3}, t1 = {5};
  std::vector<SeqBlockTable> seqs = {{t0}, {t1}};
  // Prefill of seq 0 at positions 2..6 (5 tokens), then decode of seq 1 at pos 3.
  std::vector<BatchToken> batch = {{10, 2, 0, false}, {11, 3, 0, false}, {12, 4, 0, false},
                                   {13, 5, 0, false}, {14, 6, 0, true},  {15, 3, 1, true}};
  BatchLimits lim{100, 4, 8, /*tile_tokens=*/3};
  auto r = plan_device_batch(batch, seqs, lim);
  REQUIRE(r.is_ok());
  const DeviceBatchPlan& p = r.value();
  CHECK(p.tokens == std::vector<int32_t>{10, 11, 12, 13, 14, 15});
  CHECK(p.pos == std::vector<int32_t>{2, 3, 4, 5, 6, 3});
  CHECK(p.block_tables == std::vector<int32_t>{7, 3, 5});
  CHECK(p.seq_table_offset == std::vector<int32_t>{0, 2, 3});
  CHECK(p.table_start == std::vector<int32_t>{0, 0, 0, 0, 0, 2});
  CHECK(p.logit_rows == std::vector<int32_t>{4, 5});
  CHECK(p.max_pos == 6);
  // Tiles of at most 3 consecutive tokens of one sequence: [0,3) [3,5) [5,6).
  REQUIRE(p.tiles.size() == 3);
  CHECK(p.tiles[0].first_token == 0);
  CHECK(p.tiles[0].n_tokens == 3);
  CHECK(p.tiles[0].max_pos == 4);
  CHECK(p.tiles[1].first_token == 3);
  CHECK(p.tiles[1].n_tokens == 2);
  CHECK(p.tiles[1].max_pos == 6);
  CHECK(p.tiles[2].seq == 1);
  CHECK(p.tiles[2].n_tokens == 1);
  CHECK(p.tiles[2].max_pos == 3);

  // Packed: tokens | pos | table_start | tiles (4 each) | logit rows | block tables.
  PackedBatch pk = pack_batch(p);
  CHECK(pk.tokens == 0);
  CHECK(pk.pos == 6);
  CHECK(pk.table_start == 12);
  CHECK(pk.tiles == 18);
  CHECK(pk.logit_rows == 30);
  CHECK(pk.block_tables == 32);
  CHECK(pk.data.size() == 35);
  CHECK(pk.data[18 + 4] == 3);   // tile 1 first token
  CHECK(pk.data[18 + 11] == 3);  // tile 2 max_pos
  CHECK(pk.data[34] == 5);
  CHECK(pk.n_tiles == 3);
  CHECK(pk.n_logit_rows == 2);
}

TEST_CASE("batch plan: a gap in positions or another sequence starts a new tile", "[cuda][plan]") {
  std::vector<int32_t> t0 = {0, 1}, t1 = {2, 3};
  std::vector<SeqBlockTable> seqs = {{t0}, {t1}};
  std::vector<BatchToken> batch = {{1, 0, 0, false}, {1, 0, 1, false}, {1, 1, 0, false}, {1, 3, 0, false}};
  auto r = plan_device_batch(batch, seqs, BatchLimits{10, 16, 4, 16});
  REQUIRE(r.is_ok());
  CHECK(r.value().tiles.size() == 4);
}

TEST_CASE("batch plan rejects bad tokens, sequences, positions and pages", "[cuda][plan]") {
  std::vector<int32_t> t0 = {0};
  std::vector<int32_t> bad_page = {9};
  std::vector<SeqBlockTable> seqs = {{t0}};
  const BatchLimits lim{10, 16, 4, 16};
  auto fails = [&](std::vector<BatchToken> b, std::vector<SeqBlockTable> s, const char* what) {
    auto r = plan_device_batch(b, s, lim);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains(what));
  };
  fails({{10, 0, 0, true}}, seqs, "token id 10");
  fails({{-1, 0, 0, true}}, seqs, "token id -1");
  fails({{1, 0, 1, true}}, seqs, "seq index 1");
  fails({{1, 16, 0, true}}, seqs, "pos 16");
  fails({{1, 0, 0, true}}, {{bad_page}}, "page id 9");
}

TEST_CASE("page copies merge consecutive page ids into runs", "[cuda][plan]") {
  const std::vector<int32_t> pages = {3, 4, 5, 9, 10, 2};
  const size_t pb = 1000;
  auto runs = plan_page_copies(pages, pb, 64);
  REQUIRE(runs.size() == 3);
  CHECK((runs[0].first_page == 3 && runs[0].n_pages == 3 && runs[0].host_offset == 0));
  CHECK((runs[1].first_page == 9 && runs[1].n_pages == 2 && runs[1].host_offset == 3000));
  CHECK((runs[2].first_page == 2 && runs[2].n_pages == 1 && runs[2].host_offset == 5000));
  // Capped at 2 pages per run (the staging buffer): 3,4 | 5 | 9,10 | 2.
  auto capped = plan_page_copies(pages, pb, 2);
  REQUIRE(capped.size() == 4);
  CHECK((capped[1].first_page == 5 && capped[1].n_pages == 1 && capped[1].host_offset == 2000));
  CHECK(plan_page_copies({}, pb, 4).empty());
}

TEST_CASE("device memory check names every term and the largest pool that fits", "[cuda][plan]") {
  DeviceMemoryRequest r;
  r.weight_bytes = size_t(2) << 30;   // 2 GiB
  r.scratch_bytes = size_t(1) << 30;  // 1 GiB
  r.reserve_bytes = size_t(1) << 30;  // 1 GiB
  r.page_bytes = size_t(1) << 20;     // 1 MiB
  r.n_pages = 4096;                   // 4 GiB
  r.free_bytes = size_t(10) << 30;
  r.total_bytes = size_t(12) << 30;
  CHECK(check_device_memory(r).is_ok());
  r.free_bytes = size_t(6) << 30;  // 2 GiB left for the pool: 2048 pages
  Status st = check_device_memory(r);
  REQUIRE_FALSE(st.is_ok());
  CHECK(st.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(st.message(), Catch::Contains("weights 2147483648 bytes (2.00 GiB)"));
  CHECK_THAT(st.message(), Catch::Contains("KV pool 4294967296 bytes"));
  CHECK_THAT(st.message(), Catch::Contains("4096 pages x 1048576 bytes"));
  CHECK_THAT(st.message(), Catch::Contains("free 6442450944 bytes"));
  CHECK_THAT(st.message(), Catch::Contains("largest KV pool that fits is 2048 pages"));
}

TEST_CASE("activation scratch bytes for a 1B-shaped model", "[cuda][plan]") {
  LlamaHparams hp;
  hp.n_embd = 2048;
  hp.n_head = 32;
  hp.n_head_kv = 8;
  hp.head_dim = 64;
  hp.n_ff = 8192;
  hp.n_vocab = 128256;
  // n = 512, F16: x 4 MiB, xb 2 MiB, q 4 MiB, k+v 2 MiB, gate+up 32 MiB, hb 8 MiB,
  // logits 64 x 128256 x 4 = 32833536 bytes. All multiples of 256.
  const size_t mib = size_t(1) << 20;
  CHECK(activation_scratch_bytes(hp, 512, DeviceType::kF16) == 52 * mib + 32833536);
}

namespace {

std::string temp_gguf(const char* name) {
  std::random_device rd;
  return (std::filesystem::temp_directory_path() / (std::string("larder-plan-") + std::to_string(rd()) + name)).string();
}

std::unique_ptr<Model> random_model(GgmlType type, bool tied) {
  testing::RandomLlamaSpec spec;  // 512 vocab, 64 embd, 2 layers, 4/2 heads, ff 128
  spec.weight_type = type;
  spec.tied_output = tied;
  const std::string path = temp_gguf(".gguf");
  REQUIRE(testing::write_random_llama_gguf(path, spec).is_ok());
  auto m = Model::load(path);
  std::filesystem::remove(path);  // the mapping stays valid
  REQUIRE(m.is_ok());
  return std::move(m).value();
}

}  // namespace

TEST_CASE("weight plan: compute type, conversions, tied output, bytes", "[cuda][plan]") {
  // Shapes: token_embd 512x64, per layer wq 64x64, wk/wv 32x64 (kv_dim 2 x 16),
  // wo 64x64, gate/up 128x64, down 64x128; norms 64 floats.
  // Matrix elements: 32768 + 2 x (4096 + 2048 + 2048 + 4096 + 8192 + 8192 + 8192) = 106496.
  // Norm bytes: (1 + 2 x 2) x 256 = 1280 (64 floats each = 256 bytes).
  const size_t matrix_elems = 106496;
  const size_t norm_bytes = 1280;
  SECTION("F32 model, default: F16 on the device, tied output uploaded once") {
    auto m = random_model(GgmlType::kF32, true);
    auto r = plan_weight_upload(*m, WeightPlanOptions{});
    REQUIRE(r.is_ok());
    const WeightPlan& p = r.value();
    CHECK(p.compute == DeviceType::kF16);
    REQUIRE(p.tensors.size() == 3 + 2 * 9);
    CHECK(p.tensors[2].alias_of == 0);
    CHECK(p.tensors[0].convert);
    CHECK_FALSE(p.tensors[1].convert);
    CHECK(p.tensors[size_t(p.index(1, 8))].name == "blk.1.ffn_down");
    CHECK(p.tensors[size_t(p.index(1, 8))].cols == 128);
    CHECK(p.device_bytes == matrix_elems * 2 + norm_bytes);
  }
  SECTION("F32 model with f32_weights = f32: F32 on the device") {
    auto m = random_model(GgmlType::kF32, false);
    auto r = plan_weight_upload(*m, WeightPlanOptions{false});
    REQUIRE(r.is_ok());
    CHECK(r.value().compute == DeviceType::kF32);
    CHECK(r.value().tensors[2].alias_of == -1);
    CHECK_FALSE(r.value().tensors[0].convert);
    // An untied output adds 512 x 64 elements.
    CHECK(r.value().device_bytes == (matrix_elems + 32768) * 4 + norm_bytes);
  }
  SECTION("Q8_0 model: expanded to F16") {
    auto m = random_model(GgmlType::kQ8_0, true);
    auto r = plan_weight_upload(*m, WeightPlanOptions{});
    REQUIRE(r.is_ok());
    CHECK(r.value().compute == DeviceType::kF16);
    CHECK(r.value().tensors[size_t(r.value().index(0, 1))].convert);
    CHECK(r.value().device_bytes == matrix_elems * 2 + norm_bytes);
  }
  SECTION("BF16 model stays BF16, copied as it is") {
    auto m = random_model(GgmlType::kBF16, true);
    auto r = plan_weight_upload(*m, WeightPlanOptions{});
    REQUIRE(r.is_ok());
    CHECK(r.value().compute == DeviceType::kBF16);
    CHECK_FALSE(r.value().tensors[size_t(r.value().index(0, 1))].convert);
  }
  SECTION("F16 model stays F16") {
    auto m = random_model(GgmlType::kF16, true);
    auto r = plan_weight_upload(*m, WeightPlanOptions{});
    REQUIRE(r.is_ok());
    CHECK(r.value().compute == DeviceType::kF16);
    CHECK_FALSE(r.value().tensors[0].convert);
    CHECK(r.value().src_bytes == matrix_elems * 2 + norm_bytes);
  }
}
