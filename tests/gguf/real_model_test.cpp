// The three stories260K GGUF files parse with the metadata and shapes given in
// ../shared/models/README.md (values below are copied from its tables, which
// were made by the converter, not by this code), and their tensors agree with
// each other within the storage types' rounding bounds.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/model/model.h"
#include "tests/support/test_models.h"

using namespace larder;

namespace {

struct FileCase {
  const char* file;
  size_t bytes;       // README table
  int64_t file_type;  // README table
  GgmlType matrix_type;
  GgmlType ffn_down_type;
};

const FileCase kFiles[] = {
    {"stories260K.gguf", 1054400, 0, GgmlType::kF32, GgmlType::kF32},
    {"stories260K-f16.gguf", 535744, 1, GgmlType::kF16, GgmlType::kF16},
    {"stories260K-q8_0.gguf", 344448, 7, GgmlType::kQ8_0, GgmlType::kF16},
};

std::vector<float> dequantize(const GgufTensorInfo& t) {
  std::vector<float> out(size_t(t.n_elements()));
  const int64_t rows = t.n_elements() / t.ne[0];
  const size_t row_bytes = ggml_row_size(t.type, t.ne[0]);
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t.type, t.data + size_t(r) * row_bytes, out.data() + r * t.ne[0], t.ne[0]);
  }
  return out;
}

}  // namespace

TEST_CASE("stories260K files parse with the README's metadata and shapes", "[gguf]") {
  for (const FileCase& fc : kFiles) {
    auto p = testing::test_model_path(fc.file);
    if (!p) LARDER_MISSING_MODEL(fc.file);
    INFO(fc.file);
    auto r = GgufFile::open(*p);
    REQUIRE(r.is_ok());
    const GgufFile& f = **r;
    CHECK(f.version() == 3);
    CHECK(f.file_size() == fc.bytes);
    CHECK(f.alignment() == 32);
    CHECK(f.get_string("general.architecture").value() == "llama");
    CHECK(f.get_string("general.name").value() == "stories260K");
    CHECK(f.get_int("general.file_type").value() == fc.file_type);
    CHECK(f.get_int("llama.embedding_length").value() == 64);
    CHECK(f.get_int("llama.block_count").value() == 5);
    CHECK(f.get_int("llama.attention.head_count").value() == 8);
    CHECK(f.get_int("llama.attention.head_count_kv").value() == 4);
    CHECK(f.get_int("llama.rope.dimension_count").value() == 8);
    CHECK(f.get_int("llama.feed_forward_length").value() == 172);
    CHECK(f.get_int("llama.context_length").value() == 512);
    CHECK(f.get_int("llama.vocab_size").value() == 512);
    CHECK(f.get_float("llama.attention.layer_norm_rms_epsilon").value() == Approx(1e-5));
    CHECK(f.get_float("llama.rope.freq_base").value() == 10000.0);
    CHECK(f.get_string("tokenizer.ggml.model").value() == "llama");
    CHECK(f.get_int("tokenizer.ggml.bos_token_id").value() == 1);
    CHECK(f.get_int("tokenizer.ggml.eos_token_id").value() == 2);
    CHECK(f.get_bool("tokenizer.ggml.add_bos_token").value() == true);
    // Wrong-type and absent keys.
    CHECK(f.get_int("general.name").status().code() == StatusCode::kInvalidArgument);
    CHECK(f.get_int("no.such.key").status().code() == StatusCode::kNotFound);

    const GgufValue* toks = f.find("tokenizer.ggml.tokens");
    REQUIRE(toks != nullptr);
    REQUIRE(toks->as_array() != nullptr);
    CHECK(toks->array_type == GgufValueType::kString);
    const auto& tv = *toks->as_array();
    REQUIRE(tv.size() == 512);
    CHECK(tv[0].as_string().value() == "<unk>");
    CHECK(tv[1].as_string().value() == "<s>");
    CHECK(tv[2].as_string().value() == "</s>");
    CHECK(tv[3].as_string().value() == "<0x00>");
    CHECK(tv[13].as_string().value() == "<0x0A>");   // README: '\n' is byte token 13
    CHECK(tv[410].as_string().value() == "\xE2\x96\x81");  // README: 410 is U+2581 alone
    const GgufValue* types = f.find("tokenizer.ggml.token_type");
    REQUIRE(types != nullptr);
    REQUIRE(types->as_array() != nullptr);
    CHECK((*types->as_array())[0].as_int().value() == 2);
    CHECK((*types->as_array())[1].as_int().value() == 3);
    CHECK((*types->as_array())[3].as_int().value() == 6);
    CHECK((*types->as_array())[300].as_int().value() == 1);
    const GgufValue* scores = f.find("tokenizer.ggml.scores");
    REQUIRE(scores != nullptr);
    REQUIRE(scores->as_array() != nullptr);
    CHECK((*scores->as_array())[258].as_float().value() == 0.0);
    CHECK((*scores->as_array())[300].as_float().value() == -41.0);  // -(300-259)

    CHECK(f.tensors().size() == 47);
    CHECK(f.find_tensor("output.weight") == nullptr);
    struct Shape { std::string name; int64_t ne0, ne1; int n_dims; GgmlType type; };
    const std::vector<Shape> shapes = {
        {"token_embd.weight", 64, 512, 2, fc.matrix_type},
        {"output_norm.weight", 64, 1, 1, GgmlType::kF32},
        {"blk.0.attn_norm.weight", 64, 1, 1, GgmlType::kF32},
        {"blk.4.attn_q.weight", 64, 64, 2, fc.matrix_type},
        {"blk.4.attn_k.weight", 64, 32, 2, fc.matrix_type},
        {"blk.2.attn_v.weight", 64, 32, 2, fc.matrix_type},
        {"blk.1.attn_output.weight", 64, 64, 2, fc.matrix_type},
        {"blk.3.ffn_norm.weight", 64, 1, 1, GgmlType::kF32},
        {"blk.3.ffn_gate.weight", 64, 172, 2, fc.matrix_type},
        {"blk.0.ffn_up.weight", 64, 172, 2, fc.matrix_type},
        {"blk.0.ffn_down.weight", 172, 64, 2, fc.ffn_down_type},
    };
    for (const Shape& s : shapes) {
      INFO(s.name);
      const GgufTensorInfo* t = f.find_tensor(s.name);
      REQUIRE(t != nullptr);
      CHECK(t->n_dims == s.n_dims);
      CHECK(t->ne[0] == s.ne0);
      CHECK(t->ne[1] == s.ne1);
      CHECK(t->type == s.type);
      CHECK(t->n_bytes == ggml_row_size(s.type, s.ne0) * size_t(s.ne1));
      CHECK(reinterpret_cast<uintptr_t>(t->data) % 32 == 0);  // mmap is page aligned
    }
  }
}

TEST_CASE("F16 and Q8_0 tensors match the F32 file within their rounding bounds", "[gguf]") {
  LARDER_REQUIRE_MODEL(f32_path, "stories260K.gguf");
  LARDER_REQUIRE_MODEL(f16_path, "stories260K-f16.gguf");
  LARDER_REQUIRE_MODEL(q8_path, "stories260K-q8_0.gguf");
  auto f32 = GgufFile::open(f32_path);
  auto f16 = GgufFile::open(f16_path);
  auto q8 = GgufFile::open(q8_path);
  REQUIRE(f32.is_ok());
  REQUIRE(f16.is_ok());
  REQUIRE(q8.is_ok());
  int checked_q8 = 0;
  for (const GgufTensorInfo& t : (*f32)->tensors()) {
    INFO(t.name);
    REQUIRE(t.type == GgmlType::kF32);
    std::vector<float> ref(size_t(t.n_elements()));
    std::memcpy(ref.data(), t.data, ref.size() * 4);

    // F16: round-to-nearest binary16 has relative error <= 2^-11 for normals
    // and absolute error <= 2^-25 for subnormals (IEEE 754).
    const GgufTensorInfo* h = (*f16)->find_tensor(t.name);
    REQUIRE(h != nullptr);
    std::vector<float> hv = dequantize(*h);
    for (size_t i = 0; i < ref.size(); ++i) {
      const float bound = std::max(std::fabs(ref[i]) * 0x1p-11f, 0x1p-25f);
      if (std::fabs(hv[i] - ref[i]) > bound) FAIL("f16 element " << i << ": " << hv[i] << " vs " << ref[i]);
    }

    // Q8_0: per block of 32, d = max|x|/127 rounded to f16 (d16), q = round(x/d).
    // |x - d16*q| <= |x - d*q| + |q|*|d - d16| <= d/2 + 127*|d - d16|, and
    // |d - d16| <= d * 2^-11 (f16 rounding), so the bound is d*(1/2 + 127*2^-11).
    // d is recomputed here from the F32 data, independently of the Q8_0 file.
    const GgufTensorInfo* q = (*q8)->find_tensor(t.name);
    REQUIRE(q != nullptr);
    if (q->type != GgmlType::kQ8_0) continue;
    ++checked_q8;
    std::vector<float> qv = dequantize(*q);
    for (size_t b = 0; b < ref.size() / 32; ++b) {
      float amax = 0;
      for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(ref[b * 32 + j]));
      const float d = amax / 127.0f;
      const float bound = d * (0.5f + 127.0f * 0x1p-11f) + 1e-7f;
      for (size_t j = 0; j < 32; ++j) {
        const size_t i = b * 32 + j;
        if (std::fabs(qv[i] - ref[i]) > bound) FAIL("q8_0 element " << i << ": " << qv[i] << " vs " << ref[i]);
      }
    }
  }
  // README: token_embd + 5 layers x (q, k, v, output, gate, up) are Q8_0.
  CHECK(checked_q8 == 1 + 5 * 6);
}

TEST_CASE("Model::load reads stories260K hparams and ties the output head", "[gguf][model]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto r = Model::load(path);
  REQUIRE(r.is_ok());
  const Model& m = **r;
  const LlamaHparams& hp = m.hparams();
  // README "Model shapes" table.
  CHECK(hp.architecture == "llama");
  CHECK(hp.name == "stories260K");
  CHECK(hp.n_vocab == 512);
  CHECK(hp.n_ctx_train == 512);
  CHECK(hp.n_embd == 64);
  CHECK(hp.n_layer == 5);
  CHECK(hp.n_head == 8);
  CHECK(hp.n_head_kv == 4);
  CHECK(hp.head_dim == 8);
  CHECK(hp.n_ff == 172);
  CHECK(hp.n_rot == 8);
  CHECK(hp.rms_eps == Approx(1e-5f));
  CHECK(hp.rope_freq_base == 10000.0f);
  CHECK(hp.rope_neox == false);
  CHECK(hp.kv_dim() == 32);
  CHECK(hp.q_dim() == 64);
  REQUIRE(m.layers().size() == 5);
  CHECK(m.output().data == m.token_embd().data);  // tied: no output.weight
  CHECK(m.token_embd().ne[0] == 64);
  CHECK(m.token_embd().ne[1] == 512);
  CHECK(m.token_embd().row_bytes == 64 * 4);
  CHECK(m.layers()[4].ffn_down.ne[0] == 172);
  CHECK(m.layers()[4].ffn_down.ne[1] == 64);
  CHECK(m.layers()[0].wk.ne[1] == 32);
  CHECK(m.layers()[0].attn_norm.type == GgmlType::kF32);
  // The view points at the named tensor.
  CHECK(m.layers()[3].wv.data == m.gguf().find_tensor("blk.3.attn_v.weight")->data);
}

TEST_CASE("Model fingerprint is stable across loads and differs between storage types", "[gguf][model]") {
  LARDER_REQUIRE_MODEL(f32_path, "stories260K.gguf");
  LARDER_REQUIRE_MODEL(f16_path, "stories260K-f16.gguf");
  LARDER_REQUIRE_MODEL(q8_path, "stories260K-q8_0.gguf");
  auto a = Model::load(f32_path);
  auto b = Model::load(f32_path);
  auto c = Model::load(f16_path);
  auto d = Model::load(q8_path);
  REQUIRE(a.is_ok());
  REQUIRE(b.is_ok());
  REQUIRE(c.is_ok());
  REQUIRE(d.is_ok());
  CHECK((*a)->fingerprint() == (*b)->fingerprint());
  CHECK((*a)->fingerprint() != (*c)->fingerprint());
  CHECK((*a)->fingerprint() != (*d)->fingerprint());
  CHECK((*c)->fingerprint() != (*d)->fingerprint());
  const std::array<uint8_t, 16> zero{};
  CHECK((*a)->fingerprint() != zero);
  CHECK((*d)->layers()[0].wq.type == GgmlType::kQ8_0);
  CHECK((*d)->layers()[0].wq.row_bytes == 2 * 34);  // 64 values = 2 blocks of 34 bytes
  CHECK((*d)->layers()[0].ffn_down.type == GgmlType::kF16);
}
