// The cost of verifying draft tokens (speculative decoding): one CPU forward
// pass of a sequence's last token plus k drafts, every row with its logits,
// against a plain decode step (k = 0), after a prompt of --context tokens.
// If verifying k tokens costs about one decode step, each accepted draft is
// nearly free (engine/engine_decode.cpp).
//
// usage: bench_verify [--threads N] [--context N] [--reps N] [--drafts 1,2,4,8] [--json-only] MODEL.gguf
// Prints, per k: ms per step (median of the reps) and the ratio to k = 0.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_cli.h"
#include "engine/cpu/forward.h"

using namespace larder;

int main(int argc, char** argv) {
  std::string path;
  int threads = 2, context = 256, reps = 7;
  std::vector<int> drafts = {1, 2, 4, 8};
  bool json_only = false;
  CLI::App app("bench_verify: the cost of verifying k draft tokens in one forward pass");
  app.add_option("model", path, "GGUF file")->required()->check(CLI::ExistingFile);
  app.add_option("--threads", threads, "CPU threads")->check(bench::kPositive);
  app.add_option("--context", context, "prompt tokens before the step")->check(bench::kPositive);
  app.add_option("--reps", reps, "steps timed per k")->check(bench::kPositive);
  app.add_option("--drafts", drafts, "draft counts k")->delimiter(',');
  app.add_flag("--json-only", json_only, "only the JSON lines");
  bench::parse_or_exit(app, argc, argv);

  auto model = Model::load(path);
  if (!model.is_ok()) {
    std::fprintf(stderr, "bench_verify: %s\n", model.status().to_string().c_str());
    return 1;
  }
  const LlamaHparams& hp = (*model)->hparams();
  const int max_k = *std::max_element(drafts.begin(), drafts.end());
  const int n_pos = context + max_k + 1;
  const KvLayout lay{hp.n_layer, hp.kv_dim(), 16, KvDtype::kF16};
  auto pool = PagePool::create(lay, n_pos / 16 + 2).value();
  std::vector<int32_t> pages;
  for (int i = 0; i < n_pos / 16 + 1; ++i) pages.push_back(*pool->allocate());
  auto fwd = CpuForward::create(**model, *pool, CpuForwardOptions{threads});
  if (!fwd.is_ok()) {
    std::fprintf(stderr, "bench_verify: %s\n", fwd.status().to_string().c_str());
    return 1;
  }
  std::mt19937 rng(1);
  auto token = [&] { return int32_t(3 + rng() % uint32_t(std::max(4, hp.n_vocab - 3))); };
  const SeqBlockTable table{pages};
  std::vector<float> logits(size_t(max_k + 1) * hp.n_vocab);
  {
    std::vector<BatchToken> prompt;
    for (int p = 0; p < context; ++p) prompt.push_back({token(), p, 0, p + 1 == context});
    (void)(*fwd)->forward(prompt, {&table, 1}, true, logits.data());
  }
  std::vector<int> ks = {0};
  ks.insert(ks.end(), drafts.begin(), drafts.end());
  double base = 0;
  for (int k : ks) {
    std::vector<double> ms;
    for (int r = 0; r < reps + 1; ++r) {
      std::vector<BatchToken> batch;
      for (int i = 0; i <= k; ++i) batch.push_back({token(), context + i, 0, true});
      const auto t0 = std::chrono::steady_clock::now();
      const Status st = (*fwd)->forward(batch, {&table, 1}, k > 0, logits.data());
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (!st.is_ok()) {
        std::fprintf(stderr, "bench_verify: %s\n", st.to_string().c_str());
        return 1;
      }
      if (r > 0) ms.push_back(t);  // the first step warms up
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    if (k == 0) base = med;
    nlohmann::json j = {{"bench", "verify"}, {"model", path.substr(path.find_last_of('/') + 1)},
                        {"threads", threads}, {"context", context}, {"drafts", k}, {"ms", med},
                        {"ratio_to_decode", med / base}};
    std::printf("%s\n", j.dump().c_str());
    if (!json_only) {
      std::fprintf(stderr, "  k = %d: %.1f ms per step, %.2fx a decode step (%d tokens per step if all agree)\n", k,
                   med, med / base, k + 1);
    }
  }
  return 0;
}
