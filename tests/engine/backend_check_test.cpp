// The start-up check of an accelerator backend against the CPU
// (engine/backend_check.h) and the choice create_backend makes from it. No
// GPU here: the candidate is a CPU backend, faithful or deliberately
// perturbed (PerturbedBackend below), standing in for CUDA.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/backend_check.h"
#include "engine/cpu/forward.h"
#include "engine/cpu/matmul.h"
#include "engine/model/model.h"
#include "tests/support/log_capture.h"
#include "tests/support/skip.h"
#include "tests/support/random_llama.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_models.h"

using namespace larder;

namespace {

// A CPU backend made to err the way a broken device backend might.
enum class Fault {
  kNone,
  kLogitsScaled,   // every logit times (1 + s) or (1 - s), alternating: rel. L2 exactly s
  kReadFlipsByte,  // read_pages flips one byte of each page (layer 0's V block)
  kReadNothing,    // read_pages returns OK and writes nothing
  kWriteDropped,   // write_pages copies nothing
  kDecodeFails,    // a decode step (prefill = false) returns an error
};

class PerturbedBackend final : public Backend {
 public:
  PerturbedBackend(std::unique_ptr<Backend> inner, Fault fault, double s = 0)
      : inner_(std::move(inner)), fault_(fault), s_(s) {}
  const char* name() const override { return "perturbed"; }
  std::string describe() const override { return "perturbed " + inner_->describe(); }
  std::string numerics_id() const override { return "perturbed"; }
  PagePool& pages() override { return inner_->pages(); }
  const PagePool& pages() const override { return inner_->pages(); }
  Status forward(std::span<const BatchToken> batch, std::span<const SeqBlockTable> seqs, bool prefill,
                 float* logits_out) override {
    if (fault_ == Fault::kDecodeFails && !prefill) return Status::internal("device lost (a test fault)");
    Status st = inner_->forward(batch, seqs, prefill, logits_out);
    if (st.is_ok() && fault_ == Fault::kLogitsScaled) {
      size_t n = 0;
      for (const BatchToken& t : batch) n += t.want_logits ? 1 : 0;
      n *= size_t(n_vocab_);
      for (size_t i = 0; i < n; ++i) logits_out[i] *= float(i % 2 == 0 ? 1 + s_ : 1 - s_);
    }
    return st;
  }
  Status read_pages(std::span<const int32_t> pages, std::span<uint8_t> out) override {
    if (fault_ == Fault::kReadNothing) return Status::ok();
    Status st = inner_->read_pages(pages, out);
    if (st.is_ok() && fault_ == Fault::kReadFlipsByte) {
      const size_t pb = kv_layout().page_bytes();
      for (size_t p = 0; p < pages.size(); ++p) out[p * pb + kv_layout().block_bytes() + 5] ^= 0x40;
    }
    return st;
  }
  Status write_pages(std::span<const int32_t> pages, std::span<const uint8_t> in) override {
    written_.assign(in.begin(), in.end());
    if (fault_ == Fault::kWriteDropped) return Status::ok();
    return inner_->write_pages(pages, in);
  }
  void set_n_vocab(int n) { n_vocab_ = n; }
  // The bytes of the last write_pages call.
  const std::vector<uint8_t>& written() const { return written_; }

 private:
  std::unique_ptr<Backend> inner_;
  Fault fault_;
  double s_;
  int n_vocab_ = 0;
  std::vector<uint8_t> written_;
};

BackendOptions cpu_options(const Model& model, int n_pages, KvDtype dtype = KvDtype::kF32) {
  const LlamaHparams& hp = model.hparams();
  BackendOptions o;
  o.device = "cpu";
  o.layout = KvLayout{hp.n_layer, hp.kv_dim(), 16, dtype};
  o.n_pages = n_pages;
  o.n_threads = 2;
  return o;
}

std::unique_ptr<Backend> cpu_backend(const Model& model, int n_pages, KvDtype dtype = KvDtype::kF32) {
  auto b = create_backend(model, cpu_options(model, n_pages, dtype));
  INFO(b.status().to_string());
  REQUIRE(b.is_ok());
  return std::move(b).value();
}

std::unique_ptr<PerturbedBackend> perturbed(const Model& model, Fault fault, double s = 0) {
  auto p = std::make_unique<PerturbedBackend>(cpu_backend(model, 16), fault, s);
  p->set_n_vocab(model.hparams().n_vocab);
  return p;
}

// The reference of the direct checks below: the ordinary (packed) CPU
// backend, so that a perturbation's own size is what the check measures.
std::unique_ptr<Backend> reference(const Model& model) { return cpu_backend(model, backend_check_pages(16)); }

// A 2-layer random-weight model of this type (Q4_K: the Q4_K_M mix) in dir,
// heads of 64, weights large enough that its attention looks back; its path.
std::string write_small_random_model(const testing::TempDir& dir, GgmlType type) {
  testing::RandomLlamaSpec s;
  s.n_vocab = 640;
  s.n_embd = 256;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 512;
  s.weight_type = type;
  s.mix = type == GgmlType::kQ4_K ? testing::WeightMix::kQ4_K_M : testing::WeightMix::kUniform;
  s.weight_stddev = 0.08f;
  const std::string path = dir.sub("m" + std::to_string(int(type)) + ".gguf");
  REQUIRE(testing::write_random_llama_gguf(path, s).is_ok());
  return path;
}

// A stand-in accelerator with one device whose backend is `make()`.
Accelerator stand_in(std::function<std::unique_ptr<Backend>()> make, int devices = 1) {
  Accelerator a;
  a.name = "stand-in";
  a.device_count = [devices] { return Result<int>(devices); };
  a.supports = [](const Model&) { return Status::ok(); };
  a.create = [make](const Model&, const BackendOptions&) -> Result<std::unique_ptr<Backend>> { return make(); };
  return a;
}

bool logged(const testing::LogCapture& log, const std::string& text) {
  for (const std::string& l : log.lines())
    if (l.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("compare_logits: rel. L2 per row, argmax differences beyond near-ties", "[engine][backend_check]") {
  // Worked by hand, 4 logits a row:
  //   row 0: d = (0, 0.5, 0, 0), ||ref|| = 5: rel 0.1; same argmax.
  //   row 1: ref (1, 0.9), cand (0.9, 1.0): d = (-0.1, 0.1), rel sqrt(0.02 / 1.81)
  //          = 0.105118; argmax 0 vs 1, but the gap 0.1 <= 2 x rms = 2 x
  //          sqrt(0.02 / 4) = 0.1414: a near-tie, not counted.
  //   row 2: ref (2, 1.9), cand (1.95, 1.96): rel sqrt(0.0061 / 7.61) =
  //          0.028312; gap 0.1 > 2 x sqrt(0.0061 / 4) = 0.0781: counted.
  const std::vector<float> ref = {3, 4, 0, 0, 1, 0.9f, 0, 0, 2, 1.9f, 0, 0};
  std::vector<float> cand = {3, 4.5f, 0, 0, 0.9f, 1.0f, 0, 0, 1.95f, 1.96f, 0, 0};
  LogitsDiff d = compare_logits(ref, cand, 4);
  CHECK(d.n_rows == 3);
  CHECK(d.worst_rel_l2 == Approx(0.105118).epsilon(1e-5));
  CHECK(d.worst_row == 1);
  CHECK(d.argmax_differ == 1);
  SECTION("a non-finite candidate value makes its row infinitely far") {
    cand[8 + 2] = std::numeric_limits<float>::quiet_NaN();
    d = compare_logits(ref, cand, 4);
    CHECK(std::isinf(d.worst_rel_l2));
    CHECK(d.worst_row == 2);
  }
  SECTION("equal rows, zero rows included, differ by 0") {
    const std::vector<float> z = {0, 0, 0, 0, 1, 2, 3, 4};
    d = compare_logits(z, z, 4);
    CHECK(d.worst_rel_l2 == 0.0);
    CHECK(d.argmax_differ == 0);
  }
  SECTION("sizes that differ, or that are not whole rows, are no match") {
    d = compare_logits(ref, std::span<const float>(cand.data(), 8), 4);
    CHECK(std::isinf(d.worst_rel_l2));
    d = compare_logits(std::span<const float>(ref.data(), 10), std::span<const float>(cand.data(), 10), 4);
    CHECK(std::isinf(d.worst_rel_l2));
    d = compare_logits(ref, cand, 0);
    CHECK(std::isinf(d.worst_rel_l2));
  }
  SECTION("a non-finite reference value makes its row infinitely far too") {
    std::vector<float> bad = ref;
    bad[4] = std::numeric_limits<float>::infinity();
    d = compare_logits(bad, cand, 4);
    CHECK(std::isinf(d.worst_rel_l2));
    CHECK(d.worst_row == 1);
  }
}

TEST_CASE("the CPU passes its own check: logits to float tolerance, restored pages bit-exact",
          "[engine][backend_check][model]") {
  for (const char* file : {"stories260K.gguf", "stories260K-f16.gguf", "stories260K-q8_0.gguf"}) {
    LARDER_REQUIRE_MODEL(path, file);
    INFO(file);
    auto model = Model::load(path).value();
    for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16}) {
      auto cand = cpu_backend(*model, 16, dtype);
      BackendOptions ro = cpu_options(*model, backend_check_pages(16), dtype);
      auto ref = cpu_backend(*model, ro.n_pages, dtype);
      auto ref2 = cpu_backend(*model, ro.n_pages, dtype);
      const int free_before = cand->pages().n_free();
      Result<BackendCheck> c = check_backend(*cand, *ref, *ref2, model->hparams().n_vocab);
      REQUIRE(c.is_ok());
      INFO(c.value().summary());
      CHECK(c.value().passed);
      CHECK(c.value().failure.empty());
      CHECK(c.value().n_tokens == 24);
      CHECK(c.value().n_restored == 16);  // one full page
      CHECK(c.value().logits.n_rows == 25);  // the prompt and one decode step
      CHECK(c.value().restore.n_rows == 8);
      CHECK(c.value().spread.worst_rel_l2 == 0.0);   // the same arithmetic everywhere
      CHECK(c.value().tolerance == 0.05);            // then max_rel_l2 alone
      CHECK(c.value().argmax_allowed == 1);  // min_argmax_allowed
      CHECK(c.value().logits.worst_rel_l2 == 0.0);
      CHECK(c.value().restore.worst_rel_l2 == 0.0);  // restore gives a cold prefill's bits (DESIGN.md)
      CHECK(c.value().pages_round_trip);
      CHECK(cand->pages().n_free() == free_before);  // its pages given back
    }
  }
}

TEST_CASE("the check at other page sizes: whole pages restored, or one partly filled",
          "[engine][backend_check][model]") {
  // 16 restored positions: 16 pages of 1, ..., 2 of 8, part of one page of
  // 32, 64 or 1024 (copied whole with its rows past 16 poisoned: the rest of
  // the prompt must write them, or its logits would not be finite).
  LARDER_REQUIRE_MODEL(path, "stories260K-q8_0.gguf");
  auto model = Model::load(path).value();
  const LlamaHparams& hp = model->hparams();
  for (int ps : {1, 2, 4, 8, 32, 64, 1024}) {
    INFO("page_size " << ps);
    BackendOptions o = cpu_options(*model, 16);
    o.layout = KvLayout{hp.n_layer, hp.kv_dim(), ps, KvDtype::kF16};
    o.n_pages = 2 * backend_check_pages(ps);
    CHECK(backend_check_pages(ps) == (25 + ps - 1) / ps);  // 24 positions and the decode step
    PerturbedBackend cand_rec(create_backend(*model, o).value(), Fault::kNone);
    Backend* cand = &cand_rec;
    o.n_pages = backend_check_pages(ps);
    auto ref = create_backend(*model, o).value();
    auto ref2 = create_backend(*model, o).value();
    Result<BackendCheck> c = check_backend(*cand, *ref, *ref2, hp.n_vocab);
    REQUIRE(c.is_ok());
    INFO(c.value().summary());
    CHECK(c.value().passed);
    CHECK(c.value().n_restored == 16);
    CHECK(c.value().restore.n_rows == 8);
    CHECK(c.value().restore.worst_rel_l2 == 0.0);  // finite, and the cold prefill's bits
    CHECK(c.value().pages_round_trip);
    // What the restore wrote: the pages of positions 0..15, the rows past 15
    // of a last page poisoned with 0xFF in every K and V block.
    const KvLayout& lay = cand->kv_layout();
    const int n_pages = (16 + ps - 1) / ps;
    REQUIRE(cand_rec.written().size() == size_t(n_pages) * lay.page_bytes());
    const uint8_t* last = cand_rec.written().data() + size_t(n_pages - 1) * lay.page_bytes();
    const int first = 16 - (n_pages - 1) * ps;  // first row past position 15 in the last page
    int poisoned_past = 0, poisoned_before = 0;
    for (int b = 0; b < 2 * lay.n_layer; ++b)
      for (int row = 0; row < ps; ++row) {
        const uint8_t* r = last + size_t(b) * lay.block_bytes() + size_t(row) * lay.row_bytes();
        const bool all_ff = std::all_of(r, r + lay.row_bytes(), [](uint8_t x) { return x == 0xFF; });
        (row >= first ? poisoned_past : poisoned_before) += all_ff ? 1 : 0;
      }
    CHECK(poisoned_past == 2 * lay.n_layer * (ps - first));  // every row past position 15
    CHECK(poisoned_before == 0);
    // One page fewer on the candidate: the check says what it needs.
    o.n_pages = 2 * backend_check_pages(ps) - 1;
    auto small = create_backend(*model, o).value();
    Result<BackendCheck> no = check_backend(*small, *ref, *ref2, hp.n_vocab);
    REQUIRE_FALSE(no.is_ok());
    CHECK(no.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(no.status().message(), Catch::Contains("free pages"));
    CHECK(small->pages().n_free() == o.n_pages);  // what it took, given back
  }
}

TEST_CASE("the CPU references read the weights in place; the packed CPU passes against them",
          "[engine][backend_check][model]") {
  // The candidate: the serving CPU backend (packed Q8_0 / K-quant / F16
  // tiles). The references create_backend builds: the weights dequantized
  // to f32 rows from the mapping, on activations rounded to int8 as the
  // serving tiles quantize them, and on f32 ones. The packed tiles quantize the
  // activations as the int8 reference does, so the candidate lies about the
  // spread away from the f32 reference (up to a rounding crossing or two:
  // measured 2026-12-06, K/V in f16, the spread and the candidate's worst
  // row: stories260K F32 0 / 0, F16 0 / 9.4e-5, Q8_0 2.2e-2 / 2.2e-2; the
  // random Q8_0, F16 and Q4_K_M models below 2.6e-2 / 2.6e-2, 0 / 3.7e-5 and
  // 4.2e-2 / 4.2e-2).
  testing::TempDir dir("backend-check");
  std::vector<std::string> paths;
  for (const char* file : {"stories260K.gguf", "stories260K-f16.gguf", "stories260K-q8_0.gguf"}) {
    LARDER_REQUIRE_MODEL(path, file);
    paths.push_back(path);
  }
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kF16, GgmlType::kQ4_K}) {
    paths.push_back(write_small_random_model(dir, type));
  }
  for (const std::string& path : paths) {
    auto model = Model::load(path).value();
    INFO(path);
    auto cand = cpu_backend(*model, 16, KvDtype::kF16);
    BackendOptions ro = cpu_options(*model, backend_check_pages(16), KvDtype::kF16);
    auto ref = create_cpu_reference(*model, ro, false).value();
    auto ref_f32 = create_cpu_reference(*model, ro, true).value();
    Result<BackendCheck> c = check_backend(*cand, *ref, *ref_f32, model->hparams().n_vocab);
    REQUIRE(c.is_ok());
    const BackendCheck& r = c.value();
    INFO(r.summary());
    CHECK(r.passed);
    CHECK(r.spread.worst_rel_l2 < 5e-2);
    // The references are not the serving arithmetic, and say so.
    CHECK(ref->numerics_id() == cpu_numerics_id() + "-reference-int8");
    CHECK(ref_f32->numerics_id() == cpu_numerics_id() + "-reference-f32");
    // Where the serving kernels quantize the activations (every vector
    // build), the int8 reference does too: the Q8_0 and K-quant files move.
    const GgmlType wt = model->layers()[0].wq.type;
    if (default_q8_path() == Q8Path::kInt8 && (wt == GgmlType::kQ8_0 || wt == GgmlType::kQ4_K))
      CHECK(r.spread.worst_rel_l2 > 1e-3);
    else if (wt == GgmlType::kF32 || wt == GgmlType::kF16)
      CHECK(r.spread.worst_rel_l2 == 0.0);
    CHECK(std::fabs(r.logits.worst_rel_l2 - r.spread.worst_rel_l2) <= 0.1 * r.spread.worst_rel_l2 + 2e-4);
    CHECK(r.restore.worst_rel_l2 == 0.0);
  }
}

TEST_CASE("a perturbed backend fails the check, with the numbers that show why",
          "[engine][backend_check][model]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto model = Model::load(path).value();
  const int n_vocab = model->hparams().n_vocab;
  auto ref = reference(*model);
  auto ref2 = reference(*model);
  auto run = [&](Fault f, double s = 0) {
    auto cand = perturbed(*model, f, s);
    Result<BackendCheck> c = check_backend(*cand, *ref, *ref2, n_vocab);
    REQUIRE(c.is_ok());
    return c.value();
  };
  SECTION("logits 10% off: rel. L2 0.1 on every row") {
    BackendCheck c = run(Fault::kLogitsScaled, 0.1);
    INFO(c.summary());
    CHECK_FALSE(c.passed);
    CHECK(c.logits.worst_rel_l2 == Approx(0.1).epsilon(1e-4));
    CHECK_THAT(c.failure, Catch::Contains("logits differ from the CPU's by more than 0.05"));
    CHECK(c.restore.worst_rel_l2 == 0.0);  // restored and cold are scaled alike
    CHECK(c.pages_round_trip);
  }
  SECTION("logits 1% off pass: within the stated 5e-2") {
    BackendCheck c = run(Fault::kLogitsScaled, 0.01);
    INFO(c.summary());
    CHECK(c.logits.worst_rel_l2 == Approx(0.01).epsilon(1e-3));
    CHECK(c.passed);
  }
  SECTION("the tolerance follows the CPU's own spread") {
    // An f32 reference 10% off the other (logits x (1 + 0.1), x (1 - 0.1),
    // alternating) stands for a model whose logits move that much between
    // two legitimate arithmetics: the spread is ||0.1 a|| / ||a (1 +- 0.1)||,
    // 0.1 within 1% (the denominator is ||a|| x (1 +- 0.1) where the
    // alternate logits' magnitudes differ), and the tolerance twice that.
    PerturbedBackend loose(reference(*model), Fault::kLogitsScaled, 0.1);
    loose.set_n_vocab(n_vocab);
    auto exact = cpu_backend(*model, 16);
    Result<BackendCheck> c = check_backend(*exact, *ref, loose, n_vocab);
    REQUIRE(c.is_ok());
    INFO(c.value().summary());
    CHECK(c.value().spread.worst_rel_l2 == Approx(0.1).epsilon(0.01));
    CHECK(c.value().tolerance == 2 * c.value().spread.worst_rel_l2);
    // The candidate (the exact CPU, as the int8 reference) is the spread
    // away from the f32 reference: over the fixed 5e-2, within the model's
    // tolerance.
    CHECK(c.value().logits.worst_rel_l2 == c.value().spread.worst_rel_l2);
    CHECK(c.value().passed);
    // A spread over max_spread fails whatever the candidate.
    BackendCheckOptions strict;
    strict.max_spread = 0.05;
    c = check_backend(*exact, *ref, loose, n_vocab, strict);
    REQUIRE(c.is_ok());
    CHECK_FALSE(c.value().passed);
    CHECK_THAT(c.value().failure, Catch::Contains("the CPU's own two arithmetics differ by more than 0.05"));
    // A candidate 30% off the other way round: about 0.4 from the reference.
    auto far = perturbed(*model, Fault::kLogitsScaled, -0.3);
    c = check_backend(*far, *ref, loose, n_vocab);
    REQUIRE(c.is_ok());
    CHECK_FALSE(c.value().passed);
  }
  SECTION("a page copy that changes a byte") {
    BackendCheck c = run(Fault::kReadFlipsByte);
    INFO(c.summary());
    CHECK_FALSE(c.passed);
    CHECK_FALSE(c.pages_round_trip);
    CHECK(c.logits.worst_rel_l2 == 0.0);
    CHECK_THAT(c.failure, Catch::Contains("came back changed"));
  }
  SECTION("a spill that writes nothing") {
    BackendCheck c = run(Fault::kReadNothing);
    INFO(c.summary());
    CHECK_FALSE(c.passed);
    CHECK_FALSE(c.pages_round_trip);  // the buffers start as two different patterns
    CHECK_THAT(c.failure, Catch::Contains("came back changed"));
  }
  SECTION("a restore that writes nothing") {
    BackendCheck c = run(Fault::kWriteDropped);
    INFO(c.summary());
    CHECK_FALSE(c.passed);
    CHECK_FALSE(c.pages_round_trip);
    CHECK_THAT(c.failure, Catch::Contains("came back changed"));
    // stories260K hardly looks back at these ids (the restored rows differ by
    // ~1e-5 over empty pages); the random model below does.
  }
  SECTION("a failing decode step") {
    BackendCheck c = run(Fault::kDecodeFails);
    CHECK_FALSE(c.passed);
    CHECK_THAT(c.failure, Catch::Contains("device lost (a test fault)"));
    CHECK_THAT(c.summary(), Catch::Contains("FAILED"));
  }
}

TEST_CASE("a restore that writes nothing shows in the logits of a model that looks back",
          "[engine][backend_check]") {
  // Random weights attend over the whole context: the 8 rows after the
  // restored 16 positions, computed over empty pages, are far from the cold
  // prefill's.
  testing::TempDir dir("backend-check-restore");
  auto model = Model::load(write_small_random_model(dir, GgmlType::kQ8_0)).value();
  auto ref = reference(*model);
  auto ref2 = reference(*model);
  auto cand = perturbed(*model, Fault::kWriteDropped);
  Result<BackendCheck> c = check_backend(*cand, *ref, *ref2, model->hparams().n_vocab);
  REQUIRE(c.is_ok());
  INFO(c.value().summary());
  CHECK_FALSE(c.value().passed);
  CHECK(c.value().logits.worst_rel_l2 == 0.0);
  CHECK(c.value().restore.worst_rel_l2 > 0.1);
  CHECK_THAT(c.value().failure, Catch::Contains("over restored pages differ from a cold prefill"));
}

TEST_CASE("create_backend: auto falls back to the CPU on a failed check, cuda refuses to start",
          "[engine][backend_check][model]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto model = Model::load(path).value();
  BackendOptions o = cpu_options(*model, 16);
  auto faithful = stand_in([&] { return perturbed(*model, Fault::kNone); });
  auto broken = stand_in([&] { return perturbed(*model, Fault::kLogitsScaled, 0.1); });

  SECTION("a faithful accelerator serves, in both modes") {
    for (const char* d : {"auto", "cuda"}) {
      o.device = d;
      testing::LogCapture log;
      auto b = create_backend(*model, o, faithful);
      REQUIRE(b.is_ok());
      CHECK(std::string(b.value()->name()) == "perturbed");
      CHECK(logged(log, "start-up check of the perturbed backend against the CPU passed"));
    }
  }
  SECTION("auto: a broken one is logged with its numbers and the CPU serves") {
    o.device = "auto";
    testing::LogCapture log;
    auto b = create_backend(*model, o, broken);
    REQUIRE(b.is_ok());
    CHECK(std::string(b.value()->name()) == "cpu");
    CHECK(logged(log, "start-up check of the perturbed backend against the CPU FAILED: 24 prompt tokens"));
    CHECK(logged(log, "tolerance 0.05 rel. L2, 1 argmax differences (0 over restored pages); logits vs the CPU: "
                      "worst rel. L2 0.1 "));
    CHECK(logged(log, "the stand-in backend failed its start-up check; running on the CPU"));
  }
  SECTION("cuda: a broken one is an error naming the numbers and the ways out") {
    o.device = "cuda";
    auto b = create_backend(*model, o, broken);
    REQUIRE_FALSE(b.is_ok());
    CHECK(b.status().code() == StatusCode::kInternal);
    CHECK_THAT(b.status().message(), Catch::Contains("failed its start-up check against the CPU"));
    CHECK_THAT(b.status().message(), Catch::Contains("worst rel. L2 0.1"));
    CHECK_THAT(b.status().message(), Catch::Contains("engine.device_check = false"));
  }
  SECTION("device_check = false: served unchecked, with a warning") {
    o.device = "cuda";
    o.device_check = false;
    testing::LogCapture log;
    auto b = create_backend(*model, o, broken);
    REQUIRE(b.is_ok());
    CHECK(std::string(b.value()->name()) == "perturbed");
    CHECK(logged(log, "serves without its start-up check"));
  }
  SECTION("no device: auto runs on the CPU without a check, cuda says none was found") {
    auto none = stand_in([&] { return perturbed(*model, Fault::kNone); }, 0);
    o.device = "auto";
    auto b = create_backend(*model, o, none);
    REQUIRE(b.is_ok());
    CHECK(std::string(b.value()->name()) == "cpu");
    o.device = "cuda";
    b = create_backend(*model, o, none);
    REQUIRE_FALSE(b.is_ok());
    CHECK(b.status().code() == StatusCode::kNotFound);
  }
  SECTION("a pool too small for the check: auto runs on the CPU, cuda says why") {
    Accelerator tiny = stand_in([&] {
      BackendOptions t = cpu_options(*model, 3);  // the check needs 4
      return std::unique_ptr<Backend>(create_backend(*model, t).value());
    });
    o.device = "auto";
    testing::LogCapture log;
    auto b = create_backend(*model, o, tiny);
    REQUIRE(b.is_ok());
    CHECK(std::string(b.value()->name()) == "cpu");
    CHECK(b.value()->n_pages() == 16);  // the CPU backend of the options, not the stand-in's
    CHECK(logged(log, "could not run"));
    o.device = "cuda";
    auto c = create_backend(*model, o, tiny);
    REQUIRE_FALSE(c.is_ok());
    CHECK_THAT(c.status().message(), Catch::Contains("could not run"));
    CHECK_THAT(c.status().message(), Catch::Contains("free pages"));
    CHECK_THAT(c.status().message(), Catch::Contains("engine.device_check = false"));
  }
  SECTION("an accelerator that cannot be created: auto runs on the CPU, cuda says why") {
    Accelerator a = faithful;
    a.create = [](const Model&, const BackendOptions&) -> Result<std::unique_ptr<Backend>> {
      return Status::resource_exhausted("the weights need 9 GiB, the device has 8");
    };
    o.device = "auto";
    testing::LogCapture log;
    auto b = create_backend(*model, o, a);
    REQUIRE(b.is_ok());
    CHECK(std::string(b.value()->name()) == "cpu");
    CHECK(logged(log, "could not be created (the weights need 9 GiB, the device has 8); running on the CPU"));
    o.device = "cuda";
    auto c = create_backend(*model, o, a);
    REQUIRE_FALSE(c.is_ok());
    CHECK(c.status().code() == StatusCode::kResourceExhausted);
    CHECK_THAT(c.status().message(), Catch::Contains("the weights need 9 GiB"));
  }
  SECTION("a device count that fails: auto runs on the CPU, cuda passes the error on") {
    Accelerator a = faithful;
    a.device_count = [] { return Result<int>(Status::not_found("no driver")); };
    o.device = "auto";
    auto b = create_backend(*model, o, a);
    REQUIRE(b.is_ok());
    CHECK(std::string(b.value()->name()) == "cpu");
    o.device = "cuda";
    auto c = create_backend(*model, o, a);
    REQUIRE_FALSE(c.is_ok());
    CHECK(c.status().code() == StatusCode::kNotFound);
    CHECK_THAT(c.status().message(), Catch::Contains("no driver"));
  }
  SECTION("a model the accelerator cannot compute: auto runs on the CPU") {
    Accelerator a = faithful;
    a.supports = [](const Model&) { return Status::unsupported("no Q/K norm here"); };
    o.device = "auto";
    auto b = create_backend(*model, o, a);
    REQUIRE(b.is_ok());
    CHECK(std::string(b.value()->name()) == "cpu");
    o.device = "cuda";
    CHECK(create_backend(*model, o, a).status().code() == StatusCode::kUnsupported);
  }
}

TEST_CASE("the start-up check's cost at start", "[.bench-backend-check]") {
  // LARDER_BENCH_MODEL=FILE: the check of a CPU candidate (standing in for
  // the GPU) against the in-place reference; prints what the check adds to
  // start-up (create_backend's time less the candidate's own creation).
  const char* file = std::getenv("LARDER_BENCH_MODEL");
  if (file == nullptr) LARDER_SKIP("set LARDER_BENCH_MODEL to a GGUF file");
  auto model = Model::load(file).value();
  const LlamaHparams& hp = model->hparams();
  BackendOptions o;
  o.device = "cuda";
  o.layout = KvLayout{hp.n_layer, hp.kv_dim(), 16, KvDtype::kF16};
  o.n_pages = 64;
  o.n_threads = 0;
  double make_s = 0;
  auto make = [&]() -> std::unique_ptr<Backend> {
    BackendOptions c = o;
    c.device = "cpu";
    const auto t0 = std::chrono::steady_clock::now();
    auto b = create_backend(*model, c);
    make_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    REQUIRE(b.is_ok());
    return std::move(b).value();
  };
  for (int run = 0; run < 3; ++run) {
    testing::LogCapture log;
    const auto t0 = std::chrono::steady_clock::now();
    auto b = create_backend(*model, o, stand_in(make));
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    REQUIRE(b.is_ok());
    std::printf("%s: the check added %.2f s to start-up (%.2f s in all, %.2f s making the candidate)\n", file,
                total - make_s, total, make_s);
  }
}
