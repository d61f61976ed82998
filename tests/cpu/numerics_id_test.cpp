// A tripwire for the numerics id (engine/cpu/forward.h, cpu_numerics_id()).
// The cache's root hash carries that id so that K/V pages written by a build
// with other arithmetic are recomputed, not restored: a restored prompt must
// give the bits of a cold prefill. That holds only if every change to a
// kernel's arithmetic bumps kCpuArithmeticVersion, which nothing else checks
// (a change made for speed can move the last bits of a sum unnoticed).
//
// Here small random models go through each kernel family (packed Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K and Q3_K, the Q4_K / Q6_K and Q5_K / Q6_K mixes,
// packed F16, F32 row tiles; attention of head_dim 64 and 8;
// K/V in f32, f16 and q8_0): a prompt is prefilled, two tokens are decoded,
// and the bits of every logit and every written K/V row are hashed. Each
// hash is compared with the one recorded for this build's numerics id. The
// recorded values are not a claim that these bits are right (the other
// tests check the arithmetic against independent references); they say
// which bits this id stands for, at any optimization level (the test
// command also runs this in a Debug build; CMakeLists.txt's
// -ffp-contract=off keeps the optimizer from fusing multiply-adds of its
// own). A mismatch means the arithmetic changed:
// bump kCpuArithmeticVersion (which gives a new id) and record the values
// this test prints for it. For an id with no recorded values (another ISA,
// a new version) the test prints them and checks nothing; so it does where
// the AMX tiles run, since the values were recorded on a CPU without AMX
// (the AMX tiles are meant to give the same bits, and matmul_packed_test
// checks that per tile, but a whole-model difference there should be
// looked into on that machine, not fail every build).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/matmul_packed.h"
#include "tests/cpu/forward_harness.h"
#include "tests/support/random_llama.h"
#include "tests/support/temp_dir.h"

namespace larder {
namespace {

// FNV-1a, 64 bits, over bytes, continuing from h.
uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

struct Config {
  const char* name;
  GgmlType type;
  testing::WeightMix mix;
  int n_embd, n_head, n_head_kv;
  KvDtype kv;
  int n_prompt = 150;
};

constexpr Config kConfigs[] = {
    {"q8_0-hd64-kvf16", GgmlType::kQ8_0, testing::WeightMix::kUniform, 256, 4, 2, KvDtype::kF16},
    {"q8_0-hd64-kvf32", GgmlType::kQ8_0, testing::WeightMix::kUniform, 256, 4, 2, KvDtype::kF32},
    {"q8_0-hd64-kvq8_0", GgmlType::kQ8_0, testing::WeightMix::kUniform, 256, 4, 2, KvDtype::kQ8_0},
    {"q4_k_m-hd64-kvf16", GgmlType::kQ4_K, testing::WeightMix::kQ4_K_M, 256, 4, 2, KvDtype::kF16},
    {"q4_0-hd64-kvf16", GgmlType::kQ4_0, testing::WeightMix::kUniform, 256, 4, 2, KvDtype::kF16},
    {"q5_0-hd64-kvf16", GgmlType::kQ5_0, testing::WeightMix::kUniform, 256, 4, 2, KvDtype::kF16},
    {"q3_k-hd64-kvf16", GgmlType::kQ3_K, testing::WeightMix::kUniform, 256, 4, 2, KvDtype::kF16},
    {"q2_k-hd64-kvf16", GgmlType::kQ2_K, testing::WeightMix::kUniform, 256, 4, 2, KvDtype::kF16},
    {"q5_k_m-hd64-kvf16", GgmlType::kQ5_K, testing::WeightMix::kQ5_K_M, 256, 4, 2, KvDtype::kF16},
    {"q4_1-hd64-kvf16", GgmlType::kQ4_1, testing::WeightMix::kUniform, 256, 4, 2, KvDtype::kF16},
    {"q5_1-hd64-kvf16", GgmlType::kQ5_1, testing::WeightMix::kUniform, 256, 4, 2, KvDtype::kF16},
    {"iq4_nl-hd64-kvf16", GgmlType::kIQ4_NL, testing::WeightMix::kUniform, 256, 4, 2, KvDtype::kF16},
    {"iq4_xs-hd64-kvf16", GgmlType::kIQ4_XS, testing::WeightMix::kUniform, 256, 4, 2, KvDtype::kF16},
    {"f16-hd64-kvf16", GgmlType::kF16, testing::WeightMix::kUniform, 256, 4, 2, KvDtype::kF16},
    {"f32-hd8-kvf16", GgmlType::kF32, testing::WeightMix::kUniform, 64, 8, 4, KvDtype::kF16},
    // Past two chunks of attention positions (kAttentionChunk, attention.h):
    // F16 products keep attention's last bits in the logits.
    {"f16-hd64-kvf16-ctx2100", GgmlType::kF16, testing::WeightMix::kUniform, 256, 4, 2, KvDtype::kF16, 2100},
    // The same past two chunks for heads of 8, which every vector build gives
    // to the 8-position pass (attention_avx2.cpp), AVX-512 builds included.
    {"f32-hd8-kvf16-ctx2100", GgmlType::kF32, testing::WeightMix::kUniform, 64, 8, 4, KvDtype::kF16, 2100},
};

// The hash of one config: an n_prompt-token prompt prefilled in one batch,
// then two greedy decode steps (on 2 threads); the logits of all three
// calls, then every written K and V row of every layer in position order.
uint64_t run_config(const testing::TempDir& dir, const Config& c) {
  testing::RandomLlamaSpec s;
  s.n_vocab = 640;
  s.n_embd = c.n_embd;
  s.n_head = c.n_head;
  s.n_head_kv = c.n_head_kv;
  s.n_ff = 512;
  s.n_layer = 2;
  s.weight_type = c.type;
  s.mix = c.mix;
  s.weight_stddev = 0.08f;
  s.n_ctx = std::max(512, c.n_prompt + 16);
  const std::string path = dir.sub(std::string(c.name) + ".gguf");
  REQUIRE(testing::write_random_llama_gguf(path, s).is_ok());
  testing::ForwardHarness h(path, c.kv, 2);
  std::mt19937 rng(11);
  std::vector<int32_t> prompt(size_t(c.n_prompt));
  for (int32_t& t : prompt) t = int32_t(3 + rng() % 600);
  const int n_pos = int(prompt.size()) + 2;
  const int seq = h.new_seq(n_pos);
  uint64_t hash = 0xcbf29ce484222325ull;
  std::vector<float> logits = h.prefill(seq, prompt);
  hash = fnv1a(hash, logits.data(), logits.size() * sizeof(float));
  for (int pos = int(prompt.size()); pos < n_pos; ++pos) {
    const int32_t next = testing::argmax(logits.data(), h.n_vocab());
    logits = h.decode({{next, pos, seq, true}});
    hash = fnv1a(hash, logits.data(), logits.size() * sizeof(float));
  }
  const KvLayout& lay = h.pool->layout();
  for (int l = 0; l < lay.n_layer; ++l) {
    for (int pos = 0; pos < n_pos; ++pos) {
      const int page = h.pages[seq][size_t(pos / lay.page_size)];
      const size_t at = size_t(pos % lay.page_size) * lay.row_bytes();
      hash = fnv1a(hash, static_cast<const uint8_t*>(h.pool->k_block(page, l)) + at, lay.row_bytes());
      hash = fnv1a(hash, static_cast<const uint8_t*>(h.pool->v_block(page, l)) + at, lay.row_bytes());
    }
  }
  return hash;
}

struct Recorded {
  const char* numerics_id;
  const char* config;
  uint64_t hash;
};

// Recorded by this test (see the top of the file), on the Zen 5 machine.
constexpr Recorded kRecorded[] = {
    {"cpu-9-avx512vnni", "q8_0-hd64-kvf16", 0x9e10c27f555309d6ull},
    {"cpu-9-avx512vnni", "q8_0-hd64-kvf32", 0x95d1cb8075694268ull},
    {"cpu-9-avx512vnni", "q8_0-hd64-kvq8_0", 0xeeab12b7ce36e6ecull},
    {"cpu-9-avx512vnni", "q4_k_m-hd64-kvf16", 0xc2bbfb1da85ceb50ull},
    {"cpu-9-avx512vnni", "q4_0-hd64-kvf16", 0xd1756df6ef73595eull},
    {"cpu-9-avx512vnni", "q5_0-hd64-kvf16", 0xafeec33070390854ull},
    {"cpu-9-avx512vnni", "q3_k-hd64-kvf16", 0xc1a847b3876f0f75ull},
    {"cpu-9-avx512vnni", "q2_k-hd64-kvf16", 0xefceb9a7684cb200ull},
    {"cpu-9-avx512vnni", "q5_k_m-hd64-kvf16", 0x94bd20c55b869311ull},
    {"cpu-9-avx512vnni", "q4_1-hd64-kvf16", 0x0d9c97d1402a525cull},
    {"cpu-9-avx512vnni", "q5_1-hd64-kvf16", 0x08e2f2af7446d96eull},
    {"cpu-9-avx512vnni", "iq4_nl-hd64-kvf16", 0x53d06de0e7d443deull},
    {"cpu-9-avx512vnni", "iq4_xs-hd64-kvf16", 0xa96c98b6b265c386ull},
    {"cpu-9-avx512vnni", "f16-hd64-kvf16", 0xc13a0851b45e975full},
    {"cpu-9-avx512vnni", "f32-hd8-kvf16", 0xa615be5ea97336dbull},
    {"cpu-9-avx512vnni", "f16-hd64-kvf16-ctx2100", 0x00885827844910a7ull},
    {"cpu-9-avx512vnni", "f32-hd8-kvf16-ctx2100", 0x5fcea8bef0c9f352ull},
    // An AVX2 build (-march=x86-64-v3), recorded on an AVX-512 machine.
    {"cpu-9-avx2", "q8_0-hd64-kvf16", 0xf736fbcacaaad600ull},
    {"cpu-9-avx2", "q8_0-hd64-kvf32", 0x5c2d7100daa43368ull},
    {"cpu-9-avx2", "q8_0-hd64-kvq8_0", 0xeeab12b7ce36e6ecull},
    {"cpu-9-avx2", "q4_k_m-hd64-kvf16", 0x6ce72198ed444c69ull},
    {"cpu-9-avx2", "q4_0-hd64-kvf16", 0x3dd9da658dedd860ull},
    {"cpu-9-avx2", "q5_0-hd64-kvf16", 0xafeec33070390854ull},
    {"cpu-9-avx2", "q3_k-hd64-kvf16", 0xd124ba2bbf3a314cull},
    {"cpu-9-avx2", "q2_k-hd64-kvf16", 0x3c53cc406638a48dull},
    {"cpu-9-avx2", "q5_k_m-hd64-kvf16", 0x61dd501c165a7254ull},
    {"cpu-9-avx2", "q4_1-hd64-kvf16", 0x0d9c97d1402a525cull},
    {"cpu-9-avx2", "q5_1-hd64-kvf16", 0xd6e3a7a574f41ef7ull},
    {"cpu-9-avx2", "iq4_nl-hd64-kvf16", 0x11d9a1b3805dc260ull},
    {"cpu-9-avx2", "iq4_xs-hd64-kvf16", 0xf6ae73de3b824184ull},
    {"cpu-9-avx2", "f16-hd64-kvf16", 0x9611db7cd53bd9b3ull},
    {"cpu-9-avx2", "f32-hd8-kvf16", 0x340ee8e2ef22d572ull},
    {"cpu-9-avx2", "f16-hd64-kvf16-ctx2100", 0x742f517d11de86ecull},
    {"cpu-9-avx2", "f32-hd8-kvf16-ctx2100", 0xad3edc43342a3175ull},
    // A portable build (-DLARDER_NATIVE=OFF, no -march flags), GCC 12.
    {"cpu-9-scalar", "q8_0-hd64-kvf16", 0xf3d88b0ff4e9aa9bull},
    {"cpu-9-scalar", "q8_0-hd64-kvf32", 0x28eb53611f52f2f1ull},
    {"cpu-9-scalar", "q8_0-hd64-kvq8_0", 0x8d13e0a7814bee69ull},
    {"cpu-9-scalar", "q4_k_m-hd64-kvf16", 0x3f7ca96944e99168ull},
    {"cpu-9-scalar", "q4_0-hd64-kvf16", 0x13289a44ef6cb3beull},
    {"cpu-9-scalar", "q5_0-hd64-kvf16", 0x0cc052587a6eddc0ull},
    {"cpu-9-scalar", "q3_k-hd64-kvf16", 0xd8344fad30619110ull},
    {"cpu-9-scalar", "q2_k-hd64-kvf16", 0x111dbee5a6d811a4ull},
    {"cpu-9-scalar", "q5_k_m-hd64-kvf16", 0xdf9ad67366f29c51ull},
    {"cpu-9-scalar", "q4_1-hd64-kvf16", 0x5bf85f1d29c2d8fdull},
    {"cpu-9-scalar", "q5_1-hd64-kvf16", 0x47689eef021754c4ull},
    {"cpu-9-scalar", "iq4_nl-hd64-kvf16", 0x36487a8dcd043adeull},
    {"cpu-9-scalar", "iq4_xs-hd64-kvf16", 0xbee56731e2a97769ull},
    {"cpu-9-scalar", "f16-hd64-kvf16", 0x374ed87bf1029df4ull},
    {"cpu-9-scalar", "f32-hd8-kvf16", 0xe30c674453a244a4ull},
    {"cpu-9-scalar", "f16-hd64-kvf16-ctx2100", 0x46c94e5e0cc548f0ull},
    {"cpu-9-scalar", "f32-hd8-kvf16-ctx2100", 0x5fb932bf4d05fe50ull},
};

}  // namespace

TEST_CASE("the numerics id names the bits of the CPU arithmetic", "[cpu][model][numerics]") {
  const std::string id = cpu_numerics_id();
  const bool amx = packed_amx_active() || kquant_amx_active();
  testing::TempDir dir("numerics-id");
  std::string unrecorded;
  for (const Config& c : kConfigs) {
    INFO("numerics id " << id << ", config " << c.name);
    const uint64_t hash = run_config(dir, c);
    const Recorded* rec = nullptr;
    for (const Recorded& r : kRecorded)
      if (id == r.numerics_id && std::strcmp(c.name, r.config) == 0) rec = &r;
    char line[160];
    std::snprintf(line, sizeof line, "    {\"%s\", \"%s\", 0x%016llxull},\n", id.c_str(), c.name,
                  static_cast<unsigned long long>(hash));
    if (rec == nullptr || amx) {
      if (rec != nullptr && hash != rec->hash) WARN("with AMX, other bits than recorded:\n" << line);
      unrecorded += line;
      continue;
    }
    INFO("the arithmetic changed under the same numerics id: bump kCpuArithmeticVersion in "
         "engine/cpu/forward.cpp and record the new values (this one under the new id:\n"
         << line << ")");
    CHECK(hash == rec->hash);
  }
  if (!unrecorded.empty())
    WARN((amx ? "AMX tiles active, nothing checked; this machine's values for " : "no recorded bits for numerics id ")
         << id << (amx ? ":\n" : "; to record them, add to kRecorded:\n") << unrecorded);
}

}  // namespace larder
