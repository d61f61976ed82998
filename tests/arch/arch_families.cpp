#include "tests/arch/arch_families.h"
#include "tests/support/random_llama.h"

#include <filesystem>

namespace larder::testing {

namespace {

std::vector<ArchFamily> make_families() {
  std::vector<ArchFamily> v;
  const std::vector<ArchQuant> all = {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0};
  // The quantized types on the families whose rows are all multiples of 256
  // (n_embd 256, n_ff 1024, q_dim 256), so no k-quant falls back. With 2
  // layers the mixes store layer 1's attn_v and ffn_down (and the tied
  // output) in Q6_K, the rest in Q4_K / Q5_K.
  const std::vector<ArchQuant> quants = {
      {GgmlType::kQ4_K, WeightMix::kQ4_K_M}, {GgmlType::kQ5_K, WeightMix::kQ5_K_M},
      GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ4_0, GgmlType::kQ4_1,
      GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kIQ4_NL,
      GgmlType::kIQ4_XS};
  auto with_quants = [&](std::vector<ArchQuant> t) {
    t.insert(t.end(), quants.begin(), quants.end());
    return t;
  };
  RandomLlamaSpec base;
  base.n_vocab = 512;
  base.n_embd = 256;
  base.n_layer = 2;
  base.n_ctx = 2048;
  base.weight_stddev = 0.06f;  // large enough for peaked attention and clear argmaxes
  // Seeds are chosen (from 1..4) so that llama.cpp's greedy path has no near-tie
  // (top-2 log-prob gap under 0.015) in its first 17 steps for F32, F16, Q8_0:
  // random models have flat distributions, and a near-tie ends the comparison.
  // The quantized types came later with the same seeds; their near-ties are
  // teacher-forced and counted by llama_cpp_agreement_test.cpp.

  {  // Llama 3.2 1B: 32 heads / 8 kv heads, head_dim 64, base 500000, tied
     // output, llama3 frequency factors (factor 32, low 1, high 4). The original
     // context is cut from 8192 to 64 so that the factors change the rotations
     // of a 44-position test, not only those of positions > 2048.
    ArchFamily f{"llama3", "Llama-3.2-1B", base, with_quants(all)};
    f.spec.architecture = "llama";
    f.spec.n_head = 4;
    f.spec.n_head_kv = 1;
    f.spec.n_ff = 1024;
    f.spec.rope_freq_base = 500000.0f;
    f.spec.rope_freq_factors = llama3_rope_freq_factors(64, 500000.0f, 32.0f, 1.0f, 4.0f, 64);
    f.spec.tied_output = true;
    f.spec.seed = 2;
    v.push_back(f);
  }
  {  // Mistral 7B v0.3: "llama" in GGUF; 32 / 8 heads, head_dim 128 (here 64),
     // base 1e6, separate output head.
    ArchFamily f{"mistral", "Mistral-7B-v0.3", base, all};
    f.spec.n_head = 4;
    f.spec.n_head_kv = 1;
    f.spec.n_ff = 896;
    f.spec.rope_freq_base = 1000000.0f;
    f.spec.tied_output = false;
    f.spec.seed = 1;
    v.push_back(f);
  }
  {  // A llama with linear RoPE scaling (rope.scaling.type linear, factor 4,
     // as CodeLlama-style / SuperHOT conversions carry it).
    ArchFamily f{"llama-linear", "Llama-2 with linear rope scaling x4", base, {GgmlType::kF32}};
    f.spec.n_head = 8;
    f.spec.n_head_kv = 8;
    f.spec.n_ff = 512;
    f.spec.rope_scaling_type = "linear";
    f.spec.rope_scaling_factor = 4.0f;
    f.spec.tied_output = false;
    f.spec.seed = 1;
    v.push_back(f);
  }
  {  // Qwen2.5 0.5B: 14 / 2 heads, head_dim 64, base 1e6, rms eps 1e-6,
     // Q/K/V biases, NEOX rope, tied output.
    ArchFamily f{"qwen2", "Qwen2.5-0.5B", base, with_quants(all)};
    f.spec.architecture = "qwen2";
    f.spec.n_head = 4;
    f.spec.n_head_kv = 2;
    f.spec.n_ff = 1024;
    f.spec.rope_freq_base = 1000000.0f;
    f.spec.rms_eps = 1e-6f;
    f.spec.qkv_bias = true;
    f.spec.bias_stddev = 0.2f;  // real Qwen2 K biases are larger; 0.2 keeps the
                                // attention of a 0.06-stddev model from saturating
    f.spec.tied_output = true;
    f.spec.seed = 1;
    v.push_back(f);
  }
  {  // Qwen3 0.6B: 16 / 8 heads, head_dim 128 with n_embd 1024 (q_dim twice
     // n_embd; here 8 x 64 = 512 with n_embd 256), Q/K RMSNorm, base 1e6,
     // rms eps 1e-6, NEOX rope, tied output.
    ArchFamily f{"qwen3", "Qwen3-0.6B", base, all};
    f.spec.architecture = "qwen3";
    f.spec.n_head = 8;
    f.spec.n_head_kv = 4;
    f.spec.head_dim = 64;
    f.spec.n_ff = 768;
    f.spec.rope_freq_base = 1000000.0f;
    f.spec.rms_eps = 1e-6f;
    f.spec.qk_norm = true;
    f.spec.tied_output = true;
    f.spec.seed = 1;
    v.push_back(f);
  }
  return v;
}

}  // namespace

const std::vector<ArchFamily>& arch_families() {
  static const std::vector<ArchFamily> kFamilies = make_families();
  return kFamilies;
}

const std::vector<int32_t>& arch_prompt() {
  // BOS, then ids drawn once from [3, 512) (byte tokens and words alike).
  static const std::vector<int32_t> kPrompt = {1,   412, 87,  300, 17,  455, 263, 129,
                                               508, 64,  377, 201, 33,  490, 316, 98,
                                               271, 145, 433, 59,  382, 224, 11,  467};
  return kPrompt;
}

std::string arch_type_name(const ArchQuant& q) {
  switch (q.mix) {
    case WeightMix::kQ4_K_M: return "Q4_K_M";
    case WeightMix::kQ5_K_M: return "Q5_K_M";
    case WeightMix::kUniform: break;
  }
  return ggml_type_name(q.type);
}

Status write_arch_model(const ArchFamily& f, const ArchQuant& q, const std::string& path) {
  RandomLlamaSpec spec = f.spec;
  spec.weight_type = q.type;
  spec.mix = q.mix;
  return write_random_llama_gguf(path, spec);
}

std::string arch_fixture_dir() {
  return (std::filesystem::path(__FILE__).parent_path() / "fixtures").string();
}

}  // namespace larder::testing
