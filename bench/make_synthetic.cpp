// Writes a random-weight llama GGUF with a given shape, for benchmarks that
// compare larder and llama.cpp on real model sizes without downloading one.
//
// usage: make_synthetic [--preset llama-3.2-1b|small] [--type q8_0|f16|f32|bf16]
//                       [--layers N] [--seed N] OUT.gguf
//   llama-3.2-1b: 16 layers, n_embd 2048, 32 heads, 8 KV heads (head_dim 64),
//                 n_ff 8192, vocab 128256 (Llama-3.2-1B's shapes; the
//                 vocabulary is a synthetic SentencePiece one of that size)
//   small:        8 layers, n_embd 1024, 16 heads, 4 KV heads, n_ff 2816, vocab 32000
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/support/gguf_writer.h"

namespace {

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: make_synthetic [--preset llama-3.2-1b|small] [--type q8_0|f16|f32|bf16] "
               "[--layers N] [--seed N] OUT.gguf\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  larder::testing::RandomLlamaSpec spec;
  std::string preset = "llama-3.2-1b", type = "q8_0", out;
  int layers = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (a == "--preset") preset = next();
    else if (a == "--type") type = next();
    else if (a == "--layers") layers = std::atoi(next().c_str());
    else if (a == "--seed") spec.seed = std::strtoull(next().c_str(), nullptr, 10);
    else if (!a.empty() && a[0] == '-') usage();
    else out = a;
  }
  if (out.empty()) usage();
  if (preset == "llama-3.2-1b") {
    spec.n_vocab = 128256; spec.n_embd = 2048; spec.n_layer = 16; spec.n_head = 32;
    spec.n_head_kv = 8; spec.n_ff = 8192; spec.n_ctx = 4096; spec.tied_output = true;
  } else if (preset == "small") {
    spec.n_vocab = 32000; spec.n_embd = 1024; spec.n_layer = 8; spec.n_head = 16;
    spec.n_head_kv = 4; spec.n_ff = 2816; spec.n_ctx = 2048;
  } else {
    usage();
  }
  if (layers > 0) spec.n_layer = layers;
  if (type == "q8_0") spec.weight_type = larder::GgmlType::kQ8_0;
  else if (type == "f16") spec.weight_type = larder::GgmlType::kF16;
  else if (type == "bf16") spec.weight_type = larder::GgmlType::kBF16;
  else if (type == "f32") spec.weight_type = larder::GgmlType::kF32;
  else usage();
  larder::Status st = larder::testing::write_random_llama_gguf(out, spec);
  if (!st.is_ok()) {
    std::fprintf(stderr, "make_synthetic: %s\n", st.to_string().c_str());
    return 1;
  }
  std::printf("wrote %s (%s, %s)\n", out.c_str(), preset.c_str(), type.c_str());
  return 0;
}
