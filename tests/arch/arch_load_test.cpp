// Model::load on the family files: hparams and optional tensors per
// architecture, refusals that name what is unsupported, and a fingerprint
// that follows the new tensors and RoPE settings.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "engine/model/model.h"
#include "tests/arch/arch_families.h"
#include "tests/support/random_llama.h"

using namespace larder;
using namespace larder::testing;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("larder_archload_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// A small spec (n_embd 64) of the given family.
RandomLlamaSpec small(const std::string& family) {
  for (const ArchFamily& f : arch_families()) {
    if (f.name != family) continue;
    RandomLlamaSpec s = f.spec;
    s.n_embd = 64;
    s.n_ff = 128;
    s.n_head = s.n_head > 4 ? 4 : s.n_head;
    s.n_head_kv = s.n_head_kv > 2 ? 2 : s.n_head_kv;
    if (s.head_dim > 0) s.head_dim = 32;  // q_dim 128 != n_embd 64
    if (!s.rope_freq_factors.empty()) {
      const int hd = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
      s.rope_freq_factors = llama3_rope_freq_factors(hd, s.rope_freq_base, 32.0f, 1.0f, 4.0f, 64);
    }
    return s;
  }
  FAIL("no family " << family);
  return {};
}

Result<std::unique_ptr<Model>> load_spec(const RandomLlamaSpec& s) {
  const std::string path = temp_path("m.gguf");
  REQUIRE(write_random_llama_gguf(path, s).is_ok());
  auto r = Model::load(path);
  std::filesystem::remove(path);  // the mapping stays valid after unlink
  return r;
}

// A family file with one tensor left out or one metadata key added.
Status load_edited(const RandomLlamaSpec& s, const std::string& drop_tensor) {
  const std::string path = temp_path("e.gguf");
  REQUIRE(write_random_llama_gguf(path, s).is_ok());
  auto src = GgufFile::open(path);
  REQUIRE(src.is_ok());
  GgufWriter w;
  for (const auto& kv : (*src)->metadata()) w.add(kv.first, kv.second);
  for (const GgufTensorInfo& t : (*src)->tensors()) {
    if (t.name == drop_tensor) continue;
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    w.add_tensor_raw(t.name, ne, uint32_t(t.type), std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  const std::string out = temp_path("e2.gguf");
  REQUIRE(w.write(out).is_ok());
  auto r = Model::load(out);
  std::filesystem::remove(path);
  std::filesystem::remove(out);
  return r.status();
}

bool has(const Status& s, const std::string& needle) {
  return s.message().find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("each family loads with its architecture's settings", "[arch][model]") {
  struct Row {
    std::string family, arch;
    bool neox, bias, qk_norm, factors;
    float freq_scale;
    int head_dim, q_dim;
  };
  const Row rows[] = {
      {"llama3", "llama", false, false, false, true, 1.0f, 16, 64},
      {"mistral", "llama", false, false, false, false, 1.0f, 16, 64},
      {"llama-linear", "llama", false, false, false, false, 0.25f, 16, 64},
      {"qwen2", "qwen2", true, true, false, false, 1.0f, 16, 64},
      {"qwen3", "qwen3", true, false, true, false, 1.0f, 32, 128},
  };
  for (const Row& r : rows) {
    INFO(r.family);
    auto m = load_spec(small(r.family));
    REQUIRE(m.is_ok());
    const LlamaHparams& hp = (*m)->hparams();
    CHECK(hp.architecture == r.arch);
    CHECK(hp.rope_neox == r.neox);
    CHECK(hp.has_qkv_bias == r.bias);
    CHECK(hp.has_qk_norm == r.qk_norm);
    CHECK(hp.has_rope_freq_factors == r.factors);
    CHECK(hp.has_out_bias == false);
    CHECK(hp.rope_freq_scale == r.freq_scale);
    CHECK(hp.head_dim == r.head_dim);
    CHECK(hp.q_dim() == r.q_dim);
    CHECK(((*m)->layers()[1].bq.data != nullptr) == r.bias);
    CHECK(((*m)->layers()[1].attn_k_norm.data != nullptr) == r.qk_norm);
    CHECK(((*m)->rope_freq_factors().data != nullptr) == r.factors);
  }
}

TEST_CASE("required family tensors are named when missing", "[arch][model]") {
  Status s = load_edited(small("qwen2"), "blk.1.attn_v.bias");
  CHECK(s.code() == StatusCode::kCorruption);
  CHECK(has(s, "'blk.1.attn_v.bias' is missing"));
  s = load_edited(small("qwen3"), "blk.0.attn_q_norm.weight");
  CHECK(s.code() == StatusCode::kCorruption);
  CHECK(has(s, "'blk.0.attn_q_norm.weight' is missing"));
  s = load_edited(small("qwen3"), "");
  CHECK(s.is_ok());
}

TEST_CASE("unsupported RoPE scaling types and architectures are refused by name", "[arch][model]") {
  RandomLlamaSpec s = small("mistral");
  s.rope_scaling_type = "yarn";
  s.rope_scaling_factor = 4.0f;
  auto r = load_spec(s);
  CHECK(r.status().code() == StatusCode::kUnsupported);
  CHECK(has(r.status(), "'yarn'"));
  s = small("mistral");
  s.architecture = "phi3";
  r = load_spec(s);
  CHECK(r.status().code() == StatusCode::kUnsupported);
  CHECK(has(r.status(), "'phi3'"));
}

TEST_CASE("the fingerprint follows rope scaling, biases and norms", "[arch][model]") {
  auto fp = [](const RandomLlamaSpec& s) {
    auto m = load_spec(s);
    REQUIRE(m.is_ok());
    return (*m)->fingerprint();
  };
  RandomLlamaSpec a = small("llama-linear");
  RandomLlamaSpec b = a;
  b.rope_scaling_factor = 2.0f;
  CHECK(fp(a) != fp(b));
  CHECK(fp(a) == fp(a));
  RandomLlamaSpec q = small("qwen2");
  RandomLlamaSpec q2 = q;
  q2.bias_stddev = 0.3f;  // only the bias values differ
  CHECK(fp(q) != fp(q2));
  RandomLlamaSpec l = small("llama3");
  RandomLlamaSpec l2 = l;
  l2.rope_freq_factors[3] += 1.0f;
  CHECK(fp(l) != fp(l2));
}
