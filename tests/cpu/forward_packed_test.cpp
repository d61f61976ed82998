// The determinism contract of engine/cpu/forward.h on small random models
// shaped like real ones (head_dim 64, every matrix a multiple of 16 rows), so
// that the repacked kernels (Q8_0, Q4_0 .. Q5_1, IQ4_NL, IQ4_XS, Q2_K .. Q6_K, F16) and the 16-position attention (the
// 8-position one in AVX2 builds) run through the whole forward pass, with
// every KV dtype: a prompt prefilled in two chunks (what a restored prefix
// does) gives the logits of one cold prefill bit for bit, on 1 and 2
// threads, and decode steps equal prefills.
// Also measures the logit difference of F16 and Q8_0 K/V against F32 K/V.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/attention.h"
#include "tests/cpu/forward_harness.h"
#include "tests/support/random_llama.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_models.h"

namespace larder {
namespace {

using testing::argmax;
using testing::ForwardHarness;

// 256 wide, 4 heads of 64 (2 kv heads), FFN 512: Q4_K needs rows of 256.
std::string write_model(const testing::TempDir& dir, GgmlType type, testing::WeightMix mix, int n_ctx = 512) {
  testing::RandomLlamaSpec s;
  s.n_ctx = n_ctx;
  s.n_vocab = 640;
  s.n_embd = 256;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 512;
  s.n_layer = 2;
  s.weight_type = type;
  s.mix = mix;
  s.weight_stddev = 0.08f;
  const std::string path = dir.sub(std::string("m-") + ggml_type_name(type) + ".gguf");
  REQUIRE(testing::write_random_llama_gguf(path, s).is_ok());
  return path;
}

// n token ids in [3, 3 + range).
std::vector<int32_t> prompt_of(int n, uint32_t seed, int range = 600) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(n);
  for (int32_t& t : p) t = int32_t(3 + rng() % range);
  return p;
}

const char* dtype_label(KvDtype d) { return kv_dtype_name(d); }

}  // namespace

TEST_CASE("packed kernels and 16-position attention keep prefill chunks and decode bit-identical",
          "[cpu][model][packed]") {
  testing::TempDir dir("fwd-packed");
  struct M { GgmlType type; testing::WeightMix mix; };
  for (const M m : {M{GgmlType::kQ8_0, testing::WeightMix::kUniform}, M{GgmlType::kQ4_K, testing::WeightMix::kUniform},
                    M{GgmlType::kQ4_K, testing::WeightMix::kQ4_K_M}, M{GgmlType::kF16, testing::WeightMix::kUniform},
                    M{GgmlType::kQ4_0, testing::WeightMix::kUniform}, M{GgmlType::kQ5_0, testing::WeightMix::kUniform},
                    M{GgmlType::kQ3_K, testing::WeightMix::kUniform}, M{GgmlType::kQ2_K, testing::WeightMix::kUniform},
                    M{GgmlType::kQ4_1, testing::WeightMix::kUniform}, M{GgmlType::kQ5_1, testing::WeightMix::kUniform},
                    M{GgmlType::kQ5_K, testing::WeightMix::kQ5_K_M}, M{GgmlType::kIQ4_NL, testing::WeightMix::kUniform},
                    M{GgmlType::kIQ4_XS, testing::WeightMix::kUniform}}) {
    const std::string path = write_model(dir, m.type, m.mix);
    for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16, KvDtype::kQ8_0}) {
      for (int n_threads : {1, 2}) {
        INFO(ggml_type_name(m.type) << (m.mix == testing::WeightMix::kQ4_K_M ? " (Q4_K_M mix)" : "") << ", KV "
                                    << dtype_label(dtype) << ", threads " << n_threads);
        ForwardHarness h(path, dtype, n_threads);
        const std::vector<int32_t> prompt = prompt_of(75, 7);
        const int a = h.new_seq(96), b = h.new_seq(96), c = h.new_seq(96);
        const std::vector<float> whole = h.prefill(a, prompt);
        // A restored prefix of 48 tokens (3 pages), then the rest.
        h.prefill(b, std::vector<int32_t>(prompt.begin(), prompt.begin() + 48));
        const std::vector<float> split = h.prefill(b, std::vector<int32_t>(prompt.begin() + 48, prompt.end()), 48);
        REQUIRE(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)) == 0);
        CHECK(h.page_record(a, 2) == h.page_record(b, 2));
        // Decoding the last prompt token as a one-token step equals prefilling it.
        h.prefill(c, std::vector<int32_t>(prompt.begin(), prompt.end() - 1));
        const std::vector<float> step = h.decode({{prompt.back(), int(prompt.size()) - 1, c, true}});
        REQUIRE(std::memcmp(whole.data(), step.data(), whole.size() * sizeof(float)) == 0);
        // Two sequences in one decode batch give the logits of each alone.
        const int32_t t = argmax(whole.data(), h.n_vocab());
        const BatchToken ta{t, int(prompt.size()), a, true}, tc{t, int(prompt.size()), c, true};
        const std::vector<float> alone = h.decode({ta});
        const std::vector<float> both = h.decode({tc, BatchToken{t, int(prompt.size()), b, true}});
        CHECK(std::memcmp(both.data(), alone.data(), alone.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(both.data() + h.n_vocab(), alone.data(), alone.size() * sizeof(float)) == 0);
      }
    }
  }
}

// Past kAttentionChunk positions the 16-position attention (the 8-position
// one in AVX2 builds) folds chunks of positions, and a decode step with fewer sequences than threads splits them
// over the threads (attention.h): at 2,060 positions (three chunks) a decode
// step on 2 threads gives the bits of a one-thread prefill of the same
// token, and a prefill on 2 threads those of one thread; two sequences in
// one batch on 2 threads (not split) and on 4 (split, both at once), and one
// on 4 (runs of one kv head x chunks), give each the bits it gets alone.
TEST_CASE("a context of several attention chunks: split decode steps keep prefill and decode bit-identical",
          "[cpu][model][packed]") {
  testing::TempDir dir("fwd-packed-long");
  // F16 weights: their products take the f32 activations as they are, so a
  // last-bit difference in an attention output reaches the logits (Q8_0
  // products quantize it away).
  const std::string path = write_model(dir, GgmlType::kF16, testing::WeightMix::kUniform, 4096);
  const std::vector<int32_t> prompt = prompt_of(2 * kAttentionChunk + 12, 21);
  const int n = int(prompt.size()), n_pos = n + 1;
  const std::vector<int32_t> head(prompt.begin(), prompt.end() - 1);
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16, KvDtype::kQ8_0}) {
    INFO("KV " << dtype_label(dtype));
    // Whether this build splits (the 16- or 8-position pass: AVX-512 and
    // AVX2 builds).
    const bool splits = attention_splits(AttentionShape{4, 2, 64}, dtype);
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
    CHECK(splits);
#endif
    ForwardHarness one(path, dtype, 1, 2 * (n_pos / 16 + 1));
    ForwardHarness two(path, dtype, 2, 3 * (n_pos / 16 + 1));
    ForwardHarness four(path, dtype, 4, 2 * (n_pos / 16 + 1));
    const int a1 = one.new_seq(n_pos), b1 = one.new_seq(n_pos);
    const std::vector<float> whole = one.prefill(a1, prompt);
    one.prefill(b1, head);
    const std::vector<float> step1 = one.decode({{prompt.back(), n - 1, b1, true}});
    REQUIRE(std::memcmp(whole.data(), step1.data(), whole.size() * sizeof(float)) == 0);
    const int a2 = two.new_seq(n_pos), b2 = two.new_seq(n_pos), c2 = two.new_seq(n_pos);
    const std::vector<float> whole2 = two.prefill(a2, prompt);
    REQUIRE(std::memcmp(whole.data(), whole2.data(), whole.size() * sizeof(float)) == 0);
    CHECK(one.page_record(a1, n / 16 - 1) == two.page_record(a2, n / 16 - 1));
    two.prefill(b2, head);
    REQUIRE(two.fwd->split_attention_calls() == 0);  // prefill does not split
    const std::vector<float> step2 = two.decode({{prompt.back(), n - 1, b2, true}});
    REQUIRE(std::memcmp(whole.data(), step2.data(), whole.size() * sizeof(float)) == 0);
    CHECK(two.fwd->split_attention_calls() == (splits ? 2 : 0));  // one per layer
    // The next token, alone (split) and beside another sequence (not split).
    const int32_t t = argmax(whole.data(), two.n_vocab());
    two.prefill(c2, prompt);
    const std::vector<float> alone = two.decode({{t, n, a2, true}});
    CHECK(two.fwd->split_attention_calls() == (splits ? 4 : 0));
    const std::vector<float> both = two.decode({{t, n, b2, true}, {t, n, c2, true}});
    CHECK(two.fwd->split_attention_calls() == (splits ? 4 : 0));
    const std::vector<float> one_alone = one.decode({{t, n, a1, true}});
    CHECK(one.fwd->split_attention_calls() == 0);
    REQUIRE(std::memcmp(alone.data(), one_alone.data(), alone.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(both.data(), alone.data(), alone.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(both.data() + two.n_vocab(), alone.data(), alone.size() * sizeof(float)) == 0);
    // On 4 threads: one token (two runs of one kv head, three chunks each),
    // then two tokens at once (two tiles split together).
    const int a4 = four.new_seq(n_pos), b4 = four.new_seq(n_pos);
    four.prefill(a4, prompt);
    four.prefill(b4, prompt);
    const std::vector<float> alone4 = four.decode({{t, n, a4, true}});
    CHECK(four.fwd->split_attention_calls() == (splits ? 2 : 0));
    REQUIRE(std::memcmp(alone4.data(), one_alone.data(), alone.size() * sizeof(float)) == 0);
    const std::vector<float> both4 = four.decode({{t, n, b4, true}, {t, n, a4, true}});
    CHECK(four.fwd->split_attention_calls() == (splits ? 4 : 0));
    CHECK(std::memcmp(both4.data(), alone.data(), alone.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(both4.data() + four.n_vocab(), alone.data(), alone.size() * sizeof(float)) == 0);
  }
}

// Attention tiles cover runs of one sequence's consecutive positions (up to
// 16 tokens): a batch holding two sequences' prefill chunks, one of them
// continuing a restored prefix, gives each the logits it gets alone.
TEST_CASE("two sequences' prefill chunks in one batch give the logits of each alone", "[cpu][model][packed]") {
  testing::TempDir dir("fwd-packed-two");
  const std::string path = write_model(dir, GgmlType::kQ8_0, testing::WeightMix::kUniform);
  for (KvDtype dtype : {KvDtype::kF16, KvDtype::kQ8_0}) {
    INFO("KV " << dtype_label(dtype));
    ForwardHarness h(path, dtype, 2);
    const std::vector<int32_t> pa = prompt_of(70, 3), pb = prompt_of(29, 4);
    const int a = h.new_seq(96), b = h.new_seq(96), a2 = h.new_seq(96), b2 = h.new_seq(96);
    // Alone: a's prefix of 48 (3 pages), then its 22-token tail; b whole.
    h.prefill(a, std::vector<int32_t>(pa.begin(), pa.begin() + 48));
    const std::vector<float> tail_a = h.prefill(a, std::vector<int32_t>(pa.begin() + 48, pa.end()), 48);
    const std::vector<float> alone_b = h.prefill(b, pb);
    // Together: a2's same prefix first, then one batch of a2's tail and b2.
    h.prefill(a2, std::vector<int32_t>(pa.begin(), pa.begin() + 48));
    std::vector<BatchToken> batch;
    for (int i = 48; i < int(pa.size()); ++i) batch.push_back({pa[i], i, a2, i + 1 == int(pa.size())});
    for (int i = 0; i < int(pb.size()); ++i) batch.push_back({pb[i], i, b2, i + 1 == int(pb.size())});
    std::vector<float> logits(2 * size_t(h.n_vocab()));
    auto tabs = h.tables();
    REQUIRE(h.fwd->forward(batch, tabs, /*prefill=*/true, logits.data()).is_ok());
    REQUIRE(std::memcmp(logits.data(), tail_a.data(), tail_a.size() * sizeof(float)) == 0);
    REQUIRE(std::memcmp(logits.data() + h.n_vocab(), alone_b.data(), alone_b.size() * sizeof(float)) == 0);
  }
}

namespace {

// Max |logit difference| of F16 and Q8_0 K/V against F32 K/V after prefilling
// `prompt`, printed with `label`; checks the bounds below.
void check_kv_dtype_diff(const std::string& path, const std::vector<int32_t>& prompt, const char* label) {
  std::vector<float> ref;
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16, KvDtype::kQ8_0}) {
    ForwardHarness h(path, dtype, 1);
    const std::vector<float> logits = h.prefill(h.new_seq(int(prompt.size())), prompt);
    if (dtype == KvDtype::kF32) {
      ref = logits;
      continue;
    }
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      max_diff = std::max(max_diff, double(std::fabs(logits[i] - ref[i])));
      max_ref = std::max(max_ref, double(std::fabs(ref[i])));
    }
    std::printf("KV %s vs f32, %s, %zu-token prompt: max |logit diff| %.2e (max |logit| %.2f)\n",
                dtype_label(dtype), label, prompt.size(), max_diff, max_ref);
    INFO("KV " << dtype_label(dtype) << ": max diff " << max_diff << " of max " << max_ref);
    // F16 keeps 11 significant bits of each K/V value, Q8_0 about 8 (a step
    // of max|block| / 127): their logit errors stay well below the spread of
    // the logits, and Q8_0's exceed F16's.
    CHECK(max_diff > 0);
    CHECK(max_diff < (dtype == KvDtype::kF16 ? 5e-3 : 5e-2) * max_ref);
    CHECK(argmax(logits.data(), int(logits.size())) == argmax(ref.data(), int(ref.size())));
  }
}

}  // namespace

TEST_CASE("F16 and Q8_0 K/V change the logits by little against F32 K/V (printed)", "[cpu][model][packed]") {
  testing::TempDir dir("fwd-kvdiff");
  check_kv_dtype_diff(write_model(dir, GgmlType::kF32, testing::WeightMix::kUniform), prompt_of(200, 11),
                      "random 256-wide model");
  LARDER_REQUIRE_MODEL(stories, "stories260K.gguf");
  check_kv_dtype_diff(stories, prompt_of(200, 12, 500), "stories260K");
}

}  // namespace larder
