// The synthetic models of tests/arch: one small random-weight GGUF per model
// family, with the shape ratios and metadata of the real family (GQA ratio,
// head_dim, rope base and scaling, biases, Q/K norms, tied output), written
// deterministically (same spec and seed -> same bytes) by
// write_random_llama_gguf. scripts/arch/llama_cpp_reference.mjs runs the
// same files through llama.cpp; tests/arch/fixtures/ holds its outputs.
#pragma once

#include <string>
#include <vector>

#include "engine/gguf/ggml_types.h"
#include "storage/status.h"
#include "tests/support/random_llama.h"

namespace larder::testing {

// How a family model's matrices are stored: one type for all (llama-quantize
// --pure), or a llama.cpp mix (Q4_K_M, Q5_K_M; `type` unused).
struct ArchQuant {
  ArchQuant(GgmlType t, WeightMix m = WeightMix::kUniform) : type(t), mix(m) {}  // NOLINT: implicit
  GgmlType type;
  WeightMix mix;
};

struct ArchFamily {
  std::string name;       // fixture prefix: "<name>-<type>.json"
  std::string shaped_as;  // the real model whose metadata it mimics
  RandomLlamaSpec spec;   // weight_type and mix are set per quant
  std::vector<ArchQuant> types;
};

// The families checked against llama.cpp, in a fixed order.
const std::vector<ArchFamily>& arch_families();

// Fixed prompt (BOS then pseudo-random ids of the 512-token vocabulary) and
// the number of greedy steps the fixtures record.
const std::vector<int32_t>& arch_prompt();
constexpr int kArchGreedySteps = 20;

// "F32", "F16", "Q8_0", "Q4_K": as in fixture names and llama.cpp's
// ggml_type_name; "Q4_K_M", "Q5_K_M" for the mixes.
std::string arch_type_name(const ArchQuant& q);

// Writes family `f` stored as `q` to path. Errors: as write_random_llama_gguf.
Status write_arch_model(const ArchFamily& f, const ArchQuant& q, const std::string& path);

// tests/arch/fixtures, found next to this source file.
std::string arch_fixture_dir();

}  // namespace larder::testing
