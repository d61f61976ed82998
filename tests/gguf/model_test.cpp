// Model::load on synthetic files: architecture refusal, missing / misshapen /
// wrongly typed tensors named in the error, and random llama models written by
// write_random_llama_gguf.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/model/model.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/random_llama.h"

using namespace larder;
using namespace larder::testing;

namespace {

std::string temp_file(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("larder_model_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// A tiny llama (n_embd 32, 1 layer, 4 heads, 2 kv heads, n_ff 64, vocab 8,
// no tokenizer keys) built tensor by tensor so that a test can drop one
// tensor, change one shape or one type.
struct TinyOptions {
  std::string arch = "llama";
  std::string skip;                 // tensor left out
  std::string reshape;              // tensor given shape [32, 7]
  std::string retype;               // tensor stored as F16
  std::string raw_q4k;              // tensor stored with type id Q4_K
  bool with_output = false;
};

Status load_tiny(const TinyOptions& o, std::unique_ptr<Model>* out = nullptr) {
  GgufWriter w;
  w.add("general.architecture", gguf_str(o.arch));
  w.add(o.arch + ".context_length", gguf_u32(128));
  w.add(o.arch + ".embedding_length", gguf_u32(32));
  w.add(o.arch + ".block_count", gguf_u32(1));
  w.add(o.arch + ".feed_forward_length", gguf_u32(64));
  w.add(o.arch + ".attention.head_count", gguf_u32(4));
  w.add(o.arch + ".attention.head_count_kv", gguf_u32(2));
  struct T { std::string name; int64_t ne0, ne1; };
  std::vector<T> ts = {{"token_embd.weight", 32, 8}, {"output_norm.weight", 32, 0}};
  if (o.with_output) ts.push_back({"output.weight", 32, 8});
  for (const char* n : {"attn_norm", "ffn_norm"}) ts.push_back({std::string("blk.0.") + n + ".weight", 32, 0});
  // head_dim 8: q [32, 32], k/v [32, 16], o [32, 32], gate/up [32, 64], down [64, 32].
  ts.push_back({"blk.0.attn_q.weight", 32, 32});
  ts.push_back({"blk.0.attn_k.weight", 32, 16});
  ts.push_back({"blk.0.attn_v.weight", 32, 16});
  ts.push_back({"blk.0.attn_output.weight", 32, 32});
  ts.push_back({"blk.0.ffn_gate.weight", 32, 64});
  ts.push_back({"blk.0.ffn_up.weight", 32, 64});
  ts.push_back({"blk.0.ffn_down.weight", 64, 32});
  for (T t : ts) {
    if (t.name == o.skip) continue;
    if (t.name == o.reshape) t.ne1 = 7;
    std::vector<int64_t> ne = t.ne1 ? std::vector<int64_t>{t.ne0, t.ne1} : std::vector<int64_t>{t.ne0};
    const int64_t n = t.ne0 * (t.ne1 ? t.ne1 : 1);
    if (t.name == o.raw_q4k) {
      // Q4_K: 256 values per 144-byte block; pad ne0 to 256 so the row is valid.
      ne[0] = 256;
      w.add_tensor_raw(t.name, ne, uint32_t(GgmlType::kQ4_K), std::vector<uint8_t>(size_t(144 * (t.ne1 ? t.ne1 : 1))));
      continue;
    }
    const GgmlType type = t.name == o.retype ? GgmlType::kF16 : GgmlType::kF32;
    REQUIRE(w.add_tensor(t.name, ne, type, std::vector<float>(size_t(n), 0.5f)).is_ok());
  }
  const std::string path = temp_file("tiny.gguf");
  REQUIRE(w.write(path).is_ok());
  auto r = Model::load(path);
  std::filesystem::remove(path);
  if (r.is_ok() && out) *out = std::move(r).value();
  return r.status();
}

bool has(const Status& s, const std::string& needle) {
  return s.message().find(needle) != std::string::npos;
}

double stddev_of(const GgufTensorInfo& t) {
  std::vector<float> v(size_t(t.n_elements()));
  const int64_t rows = t.n_elements() / t.ne[0];
  const size_t rb = ggml_row_size(t.type, t.ne[0]);
  for (int64_t r = 0; r < rows; ++r) dequantize_row(t.type, t.data + size_t(r) * rb, v.data() + r * t.ne[0], t.ne[0]);
  double s = 0, s2 = 0;
  for (float x : v) { s += x; s2 += double(x) * x; }
  const double mean = s / double(v.size());
  return std::sqrt(s2 / double(v.size()) - mean * mean);
}

}  // namespace

TEST_CASE("the tiny llama loads", "[gguf][model]") {
  std::unique_ptr<Model> m;
  REQUIRE(load_tiny({}, &m).is_ok());
  CHECK(m->hparams().n_vocab == 8);   // from token_embd ne[1]: no vocab_size, no tokens
  CHECK(m->hparams().head_dim == 8);  // 32 / 4 heads
  CHECK(m->hparams().n_rot == 8);     // default head_dim
  CHECK(m->hparams().rms_eps == 1e-5f);
  CHECK(m->hparams().rope_freq_base == 10000.0f);
  CHECK(m->output().data == m->token_embd().data);
  TinyOptions o;
  o.with_output = true;
  REQUIRE(load_tiny(o, &m).is_ok());
  CHECK(m->output().data == m->gguf().find_tensor("output.weight")->data);
  CHECK(m->output().data != m->token_embd().data);
}

TEST_CASE("Model::load refuses other architectures by name", "[gguf][model]") {
  TinyOptions o;
  o.arch = "gemma2";
  Status s = load_tiny(o);
  CHECK(s.code() == StatusCode::kUnsupported);
  CHECK(has(s, "'gemma2'"));
}

TEST_CASE("Model::load names a missing, misshapen or wrongly typed tensor", "[gguf][model]") {
  TinyOptions o;
  o.skip = "blk.0.attn_k.weight";
  Status s = load_tiny(o);
  CHECK(s.code() == StatusCode::kCorruption);
  CHECK(has(s, "'blk.0.attn_k.weight' is missing"));

  o = {};
  o.skip = "output_norm.weight";
  CHECK(has(load_tiny(o), "'output_norm.weight'"));

  o = {};
  o.reshape = "blk.0.ffn_up.weight";
  s = load_tiny(o);
  CHECK(s.code() == StatusCode::kCorruption);
  CHECK(has(s, "'blk.0.ffn_up.weight' has shape [32, 7], expected [32, 64]"));

  o = {};
  o.retype = "blk.0.ffn_norm.weight";  // norms must be F32
  s = load_tiny(o);
  CHECK(s.code() == StatusCode::kUnsupported);
  CHECK(has(s, "'blk.0.ffn_norm.weight'"));
  CHECK(has(s, "F16"));

  o = {};
  o.retype = "blk.0.ffn_up.weight";  // an F16 matrix is fine
  CHECK(load_tiny(o).is_ok());

  o = {};
  o.raw_q4k = "blk.0.attn_v.weight";  // shape is checked first: [256, 16] != [32, 16]
  s = load_tiny(o);
  CHECK(has(s, "'blk.0.attn_v.weight'"));
}

TEST_CASE("Model::load names an i-quant larder does not compute with", "[gguf][model]") {
  // An IQ4_XS model (which loads), then the same file with one matrix's type
  // id changed to IQ3_S (21): the file still parses (IQ3_S's 110 bytes per
  // 256 values fit in IQ4_XS's 136), and the load names the tensor and type.
  RandomLlamaSpec spec;
  spec.n_vocab = 300;
  spec.n_embd = 256;
  spec.n_layer = 1;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.n_ff = 512;
  spec.n_ctx = 128;
  spec.weight_type = GgmlType::kIQ4_XS;
  const std::string path = temp_file("iq4xs.gguf");
  REQUIRE(write_random_llama_gguf(path, spec).is_ok());
  REQUIRE(Model::load(path).is_ok());
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  // Tensor info: u64 name length, name, u32 n_dims, u64 ne[n_dims], u32 type.
  const std::string name = "blk.0.ffn_up.weight";
  const auto at = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  REQUIRE(at != bytes.end());
  size_t p = size_t(at - bytes.begin()) + name.size();
  uint32_t n_dims = 0, type = 0;
  std::memcpy(&n_dims, &bytes[p], 4);
  p += 4 + 8 * size_t(n_dims);
  std::memcpy(&type, &bytes[p], 4);
  REQUIRE(type == uint32_t(GgmlType::kIQ4_XS));
  type = 21;
  std::memcpy(&bytes[p], &type, 4);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
  }
  const Status s = Model::load(path).status();
  std::filesystem::remove(path);
  CHECK(s.code() == StatusCode::kUnsupported);
  CHECK(has(s, "'blk.0.ffn_up.weight' has type IQ3_S"));
  CHECK(has(s, "does not compute with"));
}

TEST_CASE("a random llama GGUF loads with the requested hparams", "[gguf][model]") {
  RandomLlamaSpec spec;
  spec.n_vocab = 300;
  spec.n_embd = 64;
  spec.n_layer = 3;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.n_ff = 96;
  spec.n_ctx = 256;
  spec.weight_type = GgmlType::kQ8_0;
  spec.seed = 7;
  spec.tied_output = false;
  const std::string path = temp_file("random.gguf");
  REQUIRE(write_random_llama_gguf(path, spec).is_ok());
  auto r = Model::load(path);
  REQUIRE(r.is_ok());
  const Model& m = **r;
  const LlamaHparams& hp = m.hparams();
  CHECK(hp.n_vocab == 300);
  CHECK(hp.n_embd == 64);
  CHECK(hp.n_layer == 3);
  CHECK(hp.n_head == 4);
  CHECK(hp.n_head_kv == 2);
  CHECK(hp.head_dim == 16);
  CHECK(hp.n_ff == 96);
  CHECK(hp.n_ctx_train == 256);
  CHECK(hp.n_rot == 16);
  CHECK(m.layers().size() == 3);
  CHECK(m.output().data != m.token_embd().data);  // not tied
  CHECK(m.layers()[0].wq.type == GgmlType::kQ8_0);
  CHECK(m.layers()[2].ffn_down.type == GgmlType::kQ8_0);  // 96 = 3 blocks
  CHECK(m.gguf().get_int("general.file_type").value() == 7);

  // Vocabulary: 3 specials, 256 bytes, then "▁", then printable ASCII from '!'.
  const auto& toks = *m.gguf().find("tokenizer.ggml.tokens")->as_array();
  REQUIRE(toks.size() == 300);
  CHECK(toks[0].as_string().value() == "<unk>");
  CHECK(toks[2].as_string().value() == "</s>");
  CHECK(toks[3 + 0x41].as_string().value() == "<0x41>");
  CHECK(toks[259].as_string().value() == "\xE2\x96\x81");
  CHECK(toks[260].as_string().value() == "!");
  const auto& types = *m.gguf().find("tokenizer.ggml.token_type")->as_array();
  CHECK(types[0].as_int().value() == 2);
  CHECK(types[1].as_int().value() == 3);
  CHECK(types[258].as_int().value() == 6);
  CHECK(types[259].as_int().value() == 1);
  const auto& scores = *m.gguf().find("tokenizer.ggml.scores")->as_array();
  CHECK(scores[299].as_float().value() == -40.0);  // -(299 - 259)
  CHECK(m.gguf().get_bool("tokenizer.ggml.add_bos_token").value());
  CHECK(m.gguf().get_int("tokenizer.ggml.bos_token_id").value() == 1);
  CHECK(m.gguf().get_int("tokenizer.ggml.eos_token_id").value() == 2);

  // Weights ~ N(0, 0.02^2): the sample std of 64*300 values lies within 5%.
  const double sd = stddev_of(*m.gguf().find_tensor("token_embd.weight"));
  CHECK(sd == Approx(0.02).epsilon(0.05));
  // Norms are ones.
  float norm0;
  std::memcpy(&norm0, m.layers()[1].attn_norm.data, 4);
  CHECK(norm0 == 1.0f);

  // Deterministic in the seed: same seed, same fingerprint; other seed differs.
  const std::string path2 = temp_file("random2.gguf");
  REQUIRE(write_random_llama_gguf(path2, spec).is_ok());
  auto r2 = Model::load(path2);
  REQUIRE(r2.is_ok());
  CHECK((*r2)->fingerprint() == m.fingerprint());
  spec.seed = 8;
  REQUIRE(write_random_llama_gguf(path2, spec).is_ok());
  auto r3 = Model::load(path2);
  REQUIRE(r3.is_ok());
  CHECK((*r3)->fingerprint() != m.fingerprint());
  std::filesystem::remove(path);
  std::filesystem::remove(path2);
}

TEST_CASE("random llama: Q8_0 falls back to F16 for rows not a multiple of 32; bad specs", "[gguf][model]") {
  RandomLlamaSpec spec;
  spec.n_ff = 72;  // ffn_down rows are 72 long
  spec.weight_type = GgmlType::kQ8_0;
  const std::string path = temp_file("fallback.gguf");
  REQUIRE(write_random_llama_gguf(path, spec).is_ok());
  auto r = Model::load(path);
  REQUIRE(r.is_ok());
  CHECK((*r)->layers()[0].ffn_down.type == GgmlType::kF16);
  CHECK((*r)->layers()[0].ffn_gate.type == GgmlType::kQ8_0);
  std::filesystem::remove(path);

  RandomLlamaSpec bad;
  bad.n_vocab = 100;
  CHECK(write_random_llama_gguf(path, bad).code() == StatusCode::kInvalidArgument);
  bad = {};
  bad.n_head_kv = 3;
  CHECK(write_random_llama_gguf(path, bad).code() == StatusCode::kInvalidArgument);
}

// Benchmarks write a Llama-3.2-1B-shaped Q8_0 model; this checks it is fast.
TEST_CASE("random llama: Llama-3.2-1B shape in Q8_0 writes quickly", "[.][slow][gguf]") {
  RandomLlamaSpec spec;
  spec.n_vocab = 128256;
  spec.n_embd = 2048;
  spec.n_layer = 16;
  spec.n_head = 32;
  spec.n_head_kv = 8;
  spec.n_ff = 8192;
  spec.n_ctx = 4096;
  spec.weight_type = GgmlType::kQ8_0;
  const std::string path = temp_file("llama1b.gguf");
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(write_random_llama_gguf(path, spec).is_ok());
  const double write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto t1 = std::chrono::steady_clock::now();
  auto r = Model::load(path);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  REQUIRE(r.is_ok());
  WARN("wrote " << std::filesystem::file_size(path) << " bytes in " << write_s << " s; loaded in " << load_s << " s");
  CHECK(write_s < 60.0);
  CHECK((*r)->hparams().n_vocab == 128256);
  std::filesystem::remove(path);
}
