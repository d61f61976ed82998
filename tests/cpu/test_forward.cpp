// The CPU forward pass on the real stories260K model against reference.json
// (golden tokens and logits from a float64 numpy re-implementation of
// llama2.c run.c, see the models README), plus the determinism contract of
// engine/cpu/forward.h.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/cpu/forward_harness.h"
#include "tests/support/test_models.h"

namespace larder {
namespace {

using testing::argmax;
using testing::ForwardHarness;

struct RefCase {
  std::string name;
  std::vector<int32_t> prompt;
  std::vector<int32_t> greedy;
  std::vector<std::pair<int32_t, double>> top5;
  int min_margin_step = 0;
  double min_margin = 0;
};

std::vector<RefCase> load_reference() {
  auto dir = ::larder::testing::test_models_dir();
  REQUIRE(dir.has_value());
  std::ifstream in(*dir + "/reference.json");
  REQUIRE(in.good());
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<RefCase> out;
  for (const auto& c : j.at("cases")) {
    RefCase r;
    r.name = c.at("name").get<std::string>();
    r.prompt = c.at("prompt_tokens").get<std::vector<int32_t>>();
    r.greedy = c.at("greedy_tokens").get<std::vector<int32_t>>();
    for (const auto& t : c.at("top5_last_prompt_position"))
      r.top5.emplace_back(t.at(0).get<int32_t>(), t.at(1).get<double>());
    r.min_margin_step = c.at("greedy_min_top1_top2_logit_margin").at("step").get<int>();
    r.min_margin = c.at("greedy_min_top1_top2_logit_margin").at("margin").get<double>();
    out.push_back(std::move(r));
  }
  REQUIRE(out.size() == 6);
  return out;
}

// Prefills the prompt (top-5 check optional), then greedy-decodes
// greedy.size() tokens one decode step at a time. Returns the tokens.
std::vector<int32_t> run_greedy(ForwardHarness& h, const RefCase& c, bool check_top5,
                                double top5_rel_tol) {
  const int n_total = int(c.prompt.size() + c.greedy.size());
  const int seq = h.new_seq(n_total);
  std::vector<float> logits = h.prefill(seq, c.prompt);
  if (check_top5) {
    for (size_t i = 0; i < c.top5.size(); ++i) {
      const auto [id, ref] = c.top5[i];
      INFO(c.name << " top-5 #" << i << " id " << id << ": ours " << logits[id] << ", reference "
                  << ref);
      CHECK(std::fabs(logits[id] - ref) <= top5_rel_tol * std::fabs(ref));
    }
    // Our own best 5 ids are the reference's, in the same order.
    std::vector<int> ids(h.n_vocab());
    for (int i = 0; i < h.n_vocab(); ++i) ids[i] = i;
    std::partial_sort(ids.begin(), ids.begin() + 5, ids.end(),
                      [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    for (int i = 0; i < 5; ++i) CHECK(ids[i] == c.top5[i].first);
  }
  std::vector<int32_t> out;
  int pos = int(c.prompt.size());
  for (size_t step = 0; step < c.greedy.size(); ++step) {
    const int32_t tok = argmax(logits.data(), h.n_vocab());
    out.push_back(tok);
    if (step + 1 == c.greedy.size()) break;
    logits = h.decode({{tok, pos++, seq, true}});
  }
  return out;
}

}  // namespace

TEST_CASE("F32 model matches reference.json: top-5 logits and 48 greedy tokens", "[cpu][model]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  for (int n_threads : {1, 2}) {
    ForwardHarness h(path, KvDtype::kF32, n_threads);
    for (const RefCase& c : load_reference()) {
      INFO("case " << c.name << ", threads " << n_threads);
      // Tolerance 1e-4 relative on the raw float64 reference logits.
      const auto tokens = run_greedy(h, c, /*check_top5=*/true, 1e-4);
      CHECK(tokens == c.greedy);
    }
  }
}

TEST_CASE("F16 model and F16 KV pages give the reference greedy tokens", "[cpu][model]") {
  {
    LARDER_REQUIRE_MODEL(path, "stories260K-f16.gguf");
    ForwardHarness h(path, KvDtype::kF32, 1);
    for (const RefCase& c : load_reference()) {
      INFO("F16 weights, case " << c.name);
      CHECK(run_greedy(h, c, false, 0) == c.greedy);
    }
  }
  {
    // F32 weights with an F16 KV cache (as llama.cpp's default, which also
    // matched every reference case).
    LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
    ForwardHarness h(path, KvDtype::kF16, 1);
    for (const RefCase& c : load_reference()) {
      INFO("F16 KV pages, case " << c.name);
      CHECK(run_greedy(h, c, true, 2e-3) == c.greedy);
    }
  }
}

TEST_CASE("Q8_0 model follows the reference greedy tokens up to its near-ties", "[cpu][model]") {
  LARDER_REQUIRE_MODEL(path, "stories260K-q8_0.gguf");
  ForwardHarness h(path, KvDtype::kF32, 1);
  for (const RefCase& c : load_reference()) {
    // Rule: 8-bit weights may flip a choice whose float64 top-1/top-2 logit
    // gap is tiny. When reference.json's smallest gap along the greedy path
    // is below 0.02 (punct_digits: 0.0057 at step 31, non_ascii: 0.0038 at
    // step 21 -- where llama.cpp's Q8_0 diverges too), the tokens must match
    // before that step; otherwise all 48 must match.
    const auto tokens = run_greedy(h, c, false, 0);
    const size_t n_equal = c.min_margin < 0.02 ? size_t(c.min_margin_step) : c.greedy.size();
    INFO("Q8_0 case " << c.name << ", must match " << n_equal << " tokens");
    CHECK(std::vector<int32_t>(tokens.begin(), tokens.begin() + n_equal) ==
          std::vector<int32_t>(c.greedy.begin(), c.greedy.begin() + n_equal));
  }
}

TEST_CASE("cached decode equals recomputing the whole sequence each step", "[cpu][model]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  ForwardHarness h(path, KvDtype::kF32, 1);
  const RefCase c = load_reference()[1];  // "newline": 29 prompt tokens
  constexpr int kSteps = 24;
  const int cached = h.new_seq(int(c.prompt.size()) + kSteps);
  const int naive = h.new_seq(int(c.prompt.size()) + kSteps);

  std::vector<int32_t> seq_tokens = c.prompt;
  std::vector<float> logits = h.prefill(cached, c.prompt);
  int n_bit_equal = 0;
  for (int step = 0; step < kSteps; ++step) {
    // Naive: prefill every token so far from position 0 into fresh K/V.
    const std::vector<float> ref = h.prefill(naive, seq_tokens);
    float max_diff = 0;
    for (int i = 0; i < h.n_vocab(); ++i) max_diff = std::max(max_diff, std::fabs(ref[i] - logits[i]));
    INFO("step " << step);
    REQUIRE(max_diff <= 1e-4f);
    n_bit_equal += std::memcmp(ref.data(), logits.data(), ref.size() * sizeof(float)) == 0;
    const int32_t tok = argmax(logits.data(), h.n_vocab());
    REQUIRE(tok == argmax(ref.data(), h.n_vocab()));
    seq_tokens.push_back(tok);
    logits = h.decode({{tok, int(seq_tokens.size()) - 1, cached, true}});
  }
  // Decode and prefill share the tile kernels, so they agree bit for bit.
  CHECK(n_bit_equal == kSteps);
}

TEST_CASE("prefill split does not change the logits (bit-identical)", "[cpu][model]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  for (int n_threads : {1, 2}) {
    ForwardHarness h(path, KvDtype::kF32, n_threads);
    const RefCase c = load_reference()[5];  // "long": 299 tokens; use the first 40
    const std::vector<int32_t> prompt(c.prompt.begin(), c.prompt.begin() + 40);
    const int a = h.new_seq(40), b = h.new_seq(40);
    const std::vector<float> whole = h.prefill(a, prompt);
    h.prefill(b, std::vector<int32_t>(prompt.begin(), prompt.begin() + 32));
    const std::vector<float> split = h.prefill(b, std::vector<int32_t>(prompt.begin() + 32, prompt.end()), 32);
    INFO("threads " << n_threads);
    CHECK(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)) == 0);
    // The K/V pages written by both are the same bytes too.
    CHECK(h.page_record(a, 1) == h.page_record(b, 1));
  }
}

TEST_CASE("two sequences in one decode batch give the logits of each alone", "[cpu][model]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  ForwardHarness h(path, KvDtype::kF32, 1);
  const auto ref = load_reference();
  const RefCase& c0 = ref[0];
  const RefCase& c1 = ref[3];
  const int s0 = h.new_seq(64), s1 = h.new_seq(64);
  const int32_t t0 = argmax(h.prefill(s0, c0.prompt).data(), h.n_vocab());
  const int32_t t1 = argmax(h.prefill(s1, c1.prompt).data(), h.n_vocab());
  const BatchToken b0{t0, int(c0.prompt.size()), s0, true};
  const BatchToken b1{t1, int(c1.prompt.size()), s1, true};
  const std::vector<float> alone0 = h.decode({b0});
  const std::vector<float> alone1 = h.decode({b1});
  const std::vector<float> both = h.decode({b1, b0});  // order in the batch is free
  const size_t nv = h.n_vocab();
  CHECK(std::memcmp(both.data(), alone1.data(), nv * sizeof(float)) == 0);
  CHECK(std::memcmp(both.data() + nv, alone0.data(), nv * sizeof(float)) == 0);
}

TEST_CASE("forward rejects malformed batches", "[cpu][model]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  ForwardHarness h(path, KvDtype::kF32, 1);
  const int s = h.new_seq(16);
  auto tabs = h.tables();
  std::vector<float> logits(h.n_vocab());
  auto run = [&](BatchToken t) {
    const std::vector<BatchToken> b{t};
    return h.fwd->forward(b, tabs, false, logits.data()).code();
  };
  CHECK(run({512, 0, s, true}) == StatusCode::kInvalidArgument);  // n_vocab is 512
  CHECK(run({-1, 0, s, true}) == StatusCode::kInvalidArgument);
  CHECK(run({1, 16, s, true}) == StatusCode::kInvalidArgument);   // one page covers 0..15
  CHECK(run({1, 0, 1, true}) == StatusCode::kInvalidArgument);    // only seq 0 exists
  CHECK(run({1, 15, s, true}) == StatusCode::kOk);
}

TEST_CASE("forward rejects a page pool it cannot attend over", "[cpu][model]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto m = Model::load(path);
  REQUIRE(m.is_ok());
  const LlamaHparams& hp = m.value()->hparams();
  // Pages longer than an attention chunk (kAttentionChunk, 1024 positions),
  // and a layout other than the model's.
  for (const KvLayout lay : {KvLayout{hp.n_layer, hp.kv_dim(), 2048, KvDtype::kF16},
                             KvLayout{hp.n_layer + 1, hp.kv_dim(), 16, KvDtype::kF16}}) {
    auto pool = PagePool::create(lay, 2);
    REQUIRE(pool.is_ok());
    auto f = CpuForward::create(*m.value(), *pool.value(), CpuForwardOptions{});
    CHECK(f.status().code() == StatusCode::kInvalidArgument);
  }
  auto pool = PagePool::create(KvLayout{hp.n_layer, hp.kv_dim(), 1024, KvDtype::kF16}, 2);
  REQUIRE(pool.is_ok());
  CHECK(CpuForward::create(*m.value(), *pool.value(), CpuForwardOptions{}).is_ok());
}

TEST_CASE("decode speed on stories260K (printed, not asserted)", "[cpu][model][speed]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  for (int n_threads : {1, 2}) {
    ForwardHarness h(path, KvDtype::kF32, n_threads);
    constexpr int kTokens = 256;
    double best_tps = 0;
    for (int rep = 0; rep < 3; ++rep) {
      const int seq = h.new_seq(kTokens + 1);
      std::vector<float> logits = h.prefill(seq, {1});
      const auto t0 = std::chrono::steady_clock::now();
      for (int pos = 1; pos <= kTokens; ++pos)
        logits = h.decode({{argmax(logits.data(), h.n_vocab()), pos, seq, true}});
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best_tps = std::max(best_tps, kTokens / s);
    }
    // Prefill of the 299-token "long" prompt.
    const RefCase c = load_reference()[5];
    double best_prefill = 0;
    for (int rep = 0; rep < 3; ++rep) {
      const int seq = h.new_seq(int(c.prompt.size()));
      const auto t0 = std::chrono::steady_clock::now();
      h.prefill(seq, c.prompt);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best_prefill = std::max(best_prefill, c.prompt.size() / s);
    }
    std::printf("stories260K F32, %d thread(s): decode %.0f tok/s (%d tokens from BOS), prefill %.0f tok/s (%zu tokens)\n",
                n_threads, best_tps, kTokens, best_prefill, c.prompt.size());
  }
}

}  // namespace larder
