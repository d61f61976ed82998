// Random llama models for tests and benchmarks (see random_llama.h).
#include "tests/support/random_llama.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "engine/gguf/quant_blocks.h"
#include "tests/support/quant_encode.h"

namespace larder::testing {

namespace {

// splitmix64 (Steele, Lea, Flood 2014): a fast, well-mixed 64-bit generator.
inline uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Row generator: ~N(0, stddev^2) from the sum of four 16-bit uniforms
// (Irwin-Hall, variance 4/12), seeded per (seed, tensor, row).
GgufRowFn normal_rows(uint64_t seed, uint64_t tensor_index, int64_t ne0, float stddev) {
  return [=](int64_t row, float* out) {
    uint64_t st = seed * 0x2545F4914F6CDD1Dull ^ (tensor_index << 40) ^ uint64_t(row);
    splitmix64(&st);
    // (sum - 2*65535) / 65536 has variance ~1/3; multiply by sqrt(3).
    const float scale = stddev * 1.7320508f / 65536.0f;
    for (int64_t i = 0; i < ne0; ++i) {
      const uint64_t r = splitmix64(&st);
      const int64_t sum = int64_t(r & 0xFFFF) + int64_t((r >> 16) & 0xFFFF) +
                          int64_t((r >> 32) & 0xFFFF) + int64_t(r >> 48) - 2 * 65535;
      out[i] = float(sum) * scale;
    }
  };
}

GgufRowFn ones_rows(int64_t ne0) {
  return [ne0](int64_t, float* out) { std::fill(out, out + ne0, 1.0f); };
}

// 1 + N(0, stddev^2): norm weights that are not all ones.
GgufRowFn around_one_rows(uint64_t seed, uint64_t tensor_index, int64_t ne0, float stddev) {
  GgufRowFn normal = normal_rows(seed, tensor_index, ne0, stddev);
  return [normal, ne0](int64_t row, float* out) {
    normal(row, out);
    for (int64_t i = 0; i < ne0; ++i) out[i] += 1.0f;
  };
}

void add_vocab(GgufWriter& w, int n_vocab) {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  tokens.reserve(size_t(n_vocab));
  auto push = [&](std::string piece, int32_t type) {
    if (int(tokens.size()) >= n_vocab) return;
    const int id = int(tokens.size());
    scores.push_back(id < 259 ? 0.0f : -float(id - 259));
    types.push_back(type);
    tokens.push_back(std::move(piece));
  };
  push("<unk>", 2);
  push("<s>", 3);
  push("</s>", 3);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    push(buf, 6);
  }
  const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space
  push(kSpace, 1);
  for (char c = 0x21; c <= 0x7E; ++c) push(std::string(1, c), 1);
  // Lowercase words by length; shorter ones come first so that every piece
  // can be reached by merging two earlier pieces.
  for (int len = 1; int(tokens.size()) < n_vocab; ++len) {
    std::string s(size_t(len), 'a');
    while (int(tokens.size()) < n_vocab) {
      push(kSpace + s, 1);
      if (len >= 2) push(s, 1);  // single letters are already ASCII pieces
      int i = len - 1;           // next string in lexicographic order
      while (i >= 0 && s[size_t(i)] == 'z') s[size_t(i--)] = 'a';
      if (i < 0) break;
      ++s[size_t(i)];
    }
  }
  w.add("tokenizer.ggml.model", gguf_str("llama"));
  w.add("tokenizer.ggml.tokens", gguf_str_array(tokens));
  w.add("tokenizer.ggml.scores", gguf_f32_array(scores));
  w.add("tokenizer.ggml.token_type", gguf_i32_array(types));
  w.add("tokenizer.ggml.unknown_token_id", gguf_u32(0));
  w.add("tokenizer.ggml.bos_token_id", gguf_u32(1));
  w.add("tokenizer.ggml.eos_token_id", gguf_u32(2));
  w.add("tokenizer.ggml.add_bos_token", gguf_bool(true));
  w.add("tokenizer.ggml.add_eos_token", gguf_bool(false));
  w.add("tokenizer.ggml.add_space_prefix", gguf_bool(true));
}

void add_bpe_vocab(GgufWriter& w, const BpeVocabSpec& v) {
  w.add("tokenizer.ggml.model", gguf_str("gpt2"));
  w.add("tokenizer.ggml.pre", gguf_str(v.pre));
  w.add("tokenizer.ggml.tokens", gguf_str_array(v.tokens));
  w.add("tokenizer.ggml.token_type", gguf_i32_array(v.types));
  w.add("tokenizer.ggml.merges", gguf_str_array(v.merges));
  if (v.bos_id >= 0) w.add("tokenizer.ggml.bos_token_id", gguf_u32(uint32_t(v.bos_id)));
  if (v.eos_id >= 0) w.add("tokenizer.ggml.eos_token_id", gguf_u32(uint32_t(v.eos_id)));
  if (v.eot_id >= 0) w.add("tokenizer.ggml.eot_token_id", gguf_u32(uint32_t(v.eot_id)));
  if (v.padding_id >= 0) w.add("tokenizer.ggml.padding_token_id", gguf_u32(uint32_t(v.padding_id)));
  w.add("tokenizer.ggml.add_bos_token", gguf_bool(v.add_bos));
}

// Rows of token_embd and output (one per token id): zero for unused BPE
// ids, scaled where the spec says.
GgufRowFn embd_rows(const RandomLlamaSpec& s, GgufRowFn normal) {
  std::vector<float> scale(size_t(s.n_vocab), 1.0f);
  if (s.bpe) {
    for (size_t i = 0; i < scale.size(); ++i) {
      if (s.bpe->types[i] == 5) scale[i] = 0.0f;
    }
  }
  for (const auto& [id, f] : s.embd_row_scales) scale[size_t(id)] *= f;
  const int64_t ne0 = s.n_embd;
  return [normal = std::move(normal), scale = std::move(scale), ne0](int64_t row, float* out) {
    normal(row, out);
    const float f = scale[size_t(row)];
    if (f != 1.0f) {
      for (int64_t i = 0; i < ne0; ++i) out[i] *= f;
    }
  };
}

// general.file_type: llama.cpp's llama_ftype for the spec.
uint32_t llama_ftype_of(const RandomLlamaSpec& s) {
  if (s.mix == WeightMix::kQ4_K_M) return 15;
  if (s.mix == WeightMix::kQ5_K_M) return 17;
  switch (s.weight_type) {
    case GgmlType::kF32: return 0;
    case GgmlType::kF16: return 1;
    case GgmlType::kQ4_0: return 2;
    case GgmlType::kQ4_1: return 3;
    case GgmlType::kQ8_0: return 7;
    case GgmlType::kQ5_0: return 8;
    case GgmlType::kQ5_1: return 9;
    case GgmlType::kQ2_K: return 10;
    case GgmlType::kQ3_K: return 11;  // Q3_K_S
    case GgmlType::kQ4_K: return 14;  // Q4_K_S
    case GgmlType::kQ5_K: return 16;  // Q5_K_S
    case GgmlType::kQ6_K: return 18;
    case GgmlType::kIQ4_NL: return 25;
    case GgmlType::kIQ4_XS: return 30;
    default: return 32;  // BF16
  }
}

// llama.cpp's use_more_bits: the layers that Q4_K_M / Q5_K_M give more bits.
bool use_more_bits(int i_layer, int n_layer) {
  return i_layer < n_layer / 8 || i_layer >= 7 * n_layer / 8 || (i_layer - n_layer / 8) % 3 == 2;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

GgmlType random_llama_matrix_type(const RandomLlamaSpec& spec, const std::string& name, int layer,
                                  int64_t ne0) {
  GgmlType t = spec.weight_type;
  if (spec.mix != WeightMix::kUniform) {
    t = spec.mix == WeightMix::kQ4_K_M ? GgmlType::kQ4_K : GgmlType::kQ5_K;
    const bool is_output = name == "output.weight" || (spec.tied_output && name == "token_embd.weight");
    if (is_output) {
      t = ne0 % kQK_K != 0 ? GgmlType::kQ8_0 : GgmlType::kQ6_K;
    } else if ((ends_with(name, ".attn_v.weight") || ends_with(name, ".ffn_down.weight")) &&
               layer >= 0 && use_more_bits(layer, spec.n_layer)) {
      t = GgmlType::kQ6_K;
    }
  }
  if (ne0 % ggml_block_size(t) != 0) {
    switch (t) {
      case GgmlType::kQ4_K: t = GgmlType::kQ5_0; break;
      case GgmlType::kQ5_K: t = GgmlType::kQ5_1; break;
      case GgmlType::kQ6_K: t = GgmlType::kQ8_0; break;
      case GgmlType::kQ2_K:
      case GgmlType::kQ3_K: t = GgmlType::kQ4_0; break;
      case GgmlType::kIQ4_XS: t = GgmlType::kIQ4_NL; break;  // as llama-quantize
      default: break;
    }
    if (ne0 % ggml_block_size(t) != 0) t = GgmlType::kF16;
  }
  return t;
}

Status write_random_llama_gguf(const std::string& path, const RandomLlamaSpec& spec) {
  const RandomLlamaSpec& s = spec;
  if (s.n_vocab < 259 || s.n_embd <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 ||
      s.n_ff <= 0 || s.n_ctx <= 0) {
    return Status::invalid_argument("RandomLlamaSpec: sizes must be positive and n_vocab >= 259");
  }
  const int head_dim = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  if ((s.head_dim <= 0 && s.n_embd % s.n_head != 0) || s.n_head % s.n_head_kv != 0 || head_dim % 2 != 0) {
    return Status::invalid_argument(
        "RandomLlamaSpec: n_embd must be a multiple of n_head (or head_dim given), the head dim "
        "even, and n_head a multiple of n_head_kv");
  }
  if (!s.rope_freq_factors.empty() && int(s.rope_freq_factors.size()) != head_dim / 2) {
    return Status::invalid_argument("RandomLlamaSpec: rope_freq_factors needs head_dim / 2 values");
  }
  if (s.bpe && (int(s.bpe->tokens.size()) != s.n_vocab || s.bpe->types.size() != s.bpe->tokens.size())) {
    return Status::invalid_argument("RandomLlamaSpec: bpe needs n_vocab tokens and types");
  }
  for (const auto& [id, f] : s.embd_row_scales) {
    if (id < 0 || id >= s.n_vocab) return Status::invalid_argument("RandomLlamaSpec: embd_row_scales id out of range");
  }
  const GgmlType wt = s.weight_type;
  if (s.mix == WeightMix::kUniform && !ggml_type_supported(wt)) {
    return Status::invalid_argument("RandomLlamaSpec: weight_type must be a type larder reads");
  }
  const int kv_dim = head_dim * s.n_head_kv;
  const int q_dim = head_dim * s.n_head;
  const uint32_t file_type = llama_ftype_of(s);

  GgufWriter w;
  const std::string& arch = s.architecture;
  w.add("general.architecture", gguf_str(arch));
  w.add("general.name", gguf_str("random-" + arch));
  w.add("general.file_type", gguf_u32(file_type));
  w.set_alignment(32);
  const std::string a = arch + ".";
  w.add(a + "vocab_size", gguf_u32(uint32_t(s.n_vocab)));
  w.add(a + "context_length", gguf_u32(uint32_t(s.n_ctx)));
  w.add(a + "embedding_length", gguf_u32(uint32_t(s.n_embd)));
  w.add(a + "block_count", gguf_u32(uint32_t(s.n_layer)));
  w.add(a + "feed_forward_length", gguf_u32(uint32_t(s.n_ff)));
  w.add(a + "attention.head_count", gguf_u32(uint32_t(s.n_head)));
  w.add(a + "attention.head_count_kv", gguf_u32(uint32_t(s.n_head_kv)));
  if (s.head_dim > 0) {
    w.add(a + "attention.key_length", gguf_u32(uint32_t(head_dim)));
    w.add(a + "attention.value_length", gguf_u32(uint32_t(head_dim)));
  }
  w.add(a + "rope.dimension_count", gguf_u32(uint32_t(head_dim)));
  w.add(a + "attention.layer_norm_rms_epsilon", gguf_f32(s.rms_eps));
  w.add(a + "rope.freq_base", gguf_f32(s.rope_freq_base));
  if (!s.rope_scaling_type.empty()) w.add(a + "rope.scaling.type", gguf_str(s.rope_scaling_type));
  if (s.rope_scaling_factor > 0.0f) w.add(a + "rope.scaling.factor", gguf_f32(s.rope_scaling_factor));
  if (s.bpe) {
    add_bpe_vocab(w, *s.bpe);
  } else {
    add_vocab(w, s.n_vocab);
  }
  if (!s.chat_template.empty()) w.add("tokenizer.chat_template", gguf_str(s.chat_template));

  uint64_t index = 0;
  int layer = -1;
  auto matrix = [&](const std::string& name, int64_t ne0, int64_t ne1) {
    const GgmlType t = random_llama_matrix_type(s, name, layer, ne0);
    return w.add_tensor_rows(name, {ne0, ne1}, t, normal_rows(s.seed, index++, ne0, s.weight_stddev));
  };
  // The optional tensors draw from their own index range, so a spec that
  // adds them keeps every other tensor's values.
  uint64_t extra_index = uint64_t(1) << 20;
  auto vec = [&](const std::string& name, int64_t ne0, GgufRowFn fn) {
    ++extra_index;
    return w.add_tensor_rows(name, {ne0}, GgmlType::kF32, std::move(fn));
  };
  auto norm = [&](const std::string& name) {
    ++index;
    return w.add_tensor_rows(name, {s.n_embd}, GgmlType::kF32, ones_rows(s.n_embd));
  };
  {
    const std::string name = "token_embd.weight";
    const GgmlType t = random_llama_matrix_type(s, name, layer, s.n_embd);
    LARDER_RETURN_IF_ERROR(w.add_tensor_rows(name, {s.n_embd, s.n_vocab}, t,
                                             embd_rows(s, normal_rows(s.seed, index++, s.n_embd, s.weight_stddev))));
  }
  LARDER_RETURN_IF_ERROR(norm("output_norm.weight"));
  if (!s.tied_output) {
    const std::string name = "output.weight";
    const GgmlType t = random_llama_matrix_type(s, name, layer, s.n_embd);
    LARDER_RETURN_IF_ERROR(w.add_tensor_rows(name, {s.n_embd, s.n_vocab}, t,
                                             embd_rows(s, normal_rows(s.seed, index++, s.n_embd, s.weight_stddev))));
  }
  for (int i = 0; i < s.n_layer; ++i) {
    layer = i;
    const std::string p = "blk." + std::to_string(i) + ".";
    LARDER_RETURN_IF_ERROR(norm(p + "attn_norm.weight"));
    LARDER_RETURN_IF_ERROR(matrix(p + "attn_q.weight", s.n_embd, q_dim));
    LARDER_RETURN_IF_ERROR(matrix(p + "attn_k.weight", s.n_embd, kv_dim));
    LARDER_RETURN_IF_ERROR(matrix(p + "attn_v.weight", s.n_embd, kv_dim));
    LARDER_RETURN_IF_ERROR(matrix(p + "attn_output.weight", q_dim, s.n_embd));
    if (s.qkv_bias) {
      LARDER_RETURN_IF_ERROR(vec(p + "attn_q.bias", q_dim, normal_rows(s.seed, extra_index, q_dim, s.bias_stddev)));
      LARDER_RETURN_IF_ERROR(vec(p + "attn_k.bias", kv_dim, normal_rows(s.seed, extra_index, kv_dim, s.bias_stddev)));
      LARDER_RETURN_IF_ERROR(vec(p + "attn_v.bias", kv_dim, normal_rows(s.seed, extra_index, kv_dim, s.bias_stddev)));
    }
    if (s.qk_norm) {
      LARDER_RETURN_IF_ERROR(vec(p + "attn_q_norm.weight", head_dim, around_one_rows(s.seed, extra_index, head_dim, 0.2f)));
      LARDER_RETURN_IF_ERROR(vec(p + "attn_k_norm.weight", head_dim, around_one_rows(s.seed, extra_index, head_dim, 0.2f)));
    }
    LARDER_RETURN_IF_ERROR(norm(p + "ffn_norm.weight"));
    LARDER_RETURN_IF_ERROR(matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff));
    LARDER_RETURN_IF_ERROR(matrix(p + "ffn_up.weight", s.n_embd, s.n_ff));
    LARDER_RETURN_IF_ERROR(matrix(p + "ffn_down.weight", s.n_ff, s.n_embd));
  }
  layer = -1;
  if (!s.rope_freq_factors.empty()) {
    LARDER_RETURN_IF_ERROR(w.add_tensor("rope_freqs.weight", {int64_t(s.rope_freq_factors.size())},
                                        GgmlType::kF32, s.rope_freq_factors));
  }
  return w.write(path);
}

std::vector<float> llama3_rope_freq_factors(int n_rot, float freq_base, float factor,
                                            float low_freq_factor, float high_freq_factor,
                                            int original_context) {
  constexpr double kPi = 3.14159265358979323846;
  const double low_wavelen = double(original_context) / low_freq_factor;
  const double high_wavelen = double(original_context) / high_freq_factor;
  std::vector<float> out(size_t(n_rot / 2));
  for (int i = 0; i < n_rot / 2; ++i) {
    const double freq = std::pow(double(freq_base), -2.0 * i / double(n_rot));
    const double wavelen = 2.0 * kPi / freq;
    double f = 1.0;
    if (wavelen > low_wavelen) {
      f = factor;
    } else if (wavelen >= high_wavelen) {
      const double t = (double(original_context) / wavelen - low_freq_factor) /
                       (high_freq_factor - low_freq_factor);
      f = 1.0 / ((1.0 - t) / factor + t);
    }
    out[size_t(i)] = float(f);
  }
  return out;
}

}  // namespace larder::testing
