// Writes a random-weight llama GGUF with a given shape, for benchmarks that
// compare larder and llama.cpp on real model sizes without downloading one.
//
// usage: make_synthetic [--preset llama-3.2-1b|small] [--type TYPE] [--layers N]
//                       [--seed N] OUT.gguf
//   TYPE: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k (every
//         matrix in that type, as llama-quantize --pure) or q4_k_m q5_k_m
//         (llama.cpp's mixes; see random_llama_matrix_type in gguf_writer.h).
//         The quantized blocks come from the test encoders (min/max scales,
//         tests/support/quant_encode.h), not llama.cpp's quantizer.
//   llama-3.2-1b: 16 layers, n_embd 2048, 32 heads, 8 KV heads (head_dim 64),
//                 n_ff 8192, vocab 128256 (Llama-3.2-1B's shapes; the
//                 vocabulary is a synthetic SentencePiece one of that size)
//   small:        8 layers, n_embd 1024, 16 heads, 4 KV heads, n_ff 2816, vocab 32000
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_cli.h"
#include "tests/support/random_llama.h"

int main(int argc, char** argv) {
  larder::testing::RandomLlamaSpec spec;
  std::string preset = "llama-3.2-1b", type = "q8_0", out;
  int layers = 0;
  using larder::GgmlType;
  static const std::pair<const char*, GgmlType> kTypes[] = {
      {"f32", GgmlType::kF32},   {"f16", GgmlType::kF16},   {"bf16", GgmlType::kBF16},
      {"q8_0", GgmlType::kQ8_0}, {"q4_0", GgmlType::kQ4_0}, {"q4_1", GgmlType::kQ4_1},
      {"q5_0", GgmlType::kQ5_0}, {"q5_1", GgmlType::kQ5_1}, {"q2_k", GgmlType::kQ2_K},
      {"q3_k", GgmlType::kQ3_K}, {"q4_k", GgmlType::kQ4_K}, {"q5_k", GgmlType::kQ5_K},
      {"q6_k", GgmlType::kQ6_K}, {"iq4_nl", GgmlType::kIQ4_NL}, {"iq4_xs", GgmlType::kIQ4_XS}};
  std::vector<std::string> type_names{"q4_k_m", "q5_k_m"};
  for (const auto& [name, t] : kTypes) type_names.push_back(name);
  CLI::App app("make_synthetic: a random-weight llama GGUF of a given shape");
  app.add_option("--preset", preset, "shape")->check(CLI::IsMember({"llama-3.2-1b", "small"}));
  app.add_option("--type", type, "weight type")
      ->check(CLI::IsMember(type_names));
  app.add_option("--layers", layers, "layers (default: the preset's)")->check(larder::bench::kPositive);
  app.add_option("--seed", spec.seed, "weight seed");
  app.add_option("out", out, "output GGUF file")->required();
  larder::bench::parse_or_exit(app, argc, argv);
  if (preset == "llama-3.2-1b") {
    spec.n_vocab = 128256; spec.n_embd = 2048; spec.n_layer = 16; spec.n_head = 32;
    spec.n_head_kv = 8; spec.n_ff = 8192; spec.n_ctx = 4096; spec.tied_output = true;
  } else if (preset == "small") {
    spec.n_vocab = 32000; spec.n_embd = 1024; spec.n_layer = 8; spec.n_head = 16;
    spec.n_head_kv = 4; spec.n_ff = 2816; spec.n_ctx = 2048;
  }
  if (layers > 0) spec.n_layer = layers;
  for (const auto& [name, t] : kTypes) {
    if (type == name) spec.weight_type = t;
  }
  if (type == "q4_k_m") spec.mix = larder::testing::WeightMix::kQ4_K_M;
  if (type == "q5_k_m") spec.mix = larder::testing::WeightMix::kQ5_K_M;
  larder::Status st = larder::testing::write_random_llama_gguf(out, spec);
  if (!st.is_ok()) {
    std::fprintf(stderr, "make_synthetic: %s\n", st.to_string().c_str());
    return 1;
  }
  std::printf("wrote %s (%s, %s)\n", out.c_str(), preset.c_str(), type.c_str());
  return 0;
}
