// GPU benchmark (docs/gpu.md, issue "The GPU engine"): prefill and decode
// tokens/s at batch 1 and 8, and restore of a 2,048-token prefix from host
// memory vs recomputing it, on a synthetic model with Llama-3.2-1B's shapes
// (random weights, written by tests/support/gguf_writer.h) in F16 and Q8_0.
// Each number is set against its roofline from measured ceilings:
//   decode:  device weight bytes / measured copy bandwidth
//   prefill: matmul FLOPs / measured cuBLAS GEMM rate
//   restore: page bytes / measured pinned host-to-device bandwidth
// Prints ratios, not pass/fail. Step times: host clock around forward()
// (which returns after the device finished), median of repeats after a
// warm-up step; the ceilings use CUDA events.
//
//   bench_gpu --dir DIR_FOR_MODELS --out results.md
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_cli.h"
#include "engine/backend.h"
#include "engine/cuda/plan/weight_plan.h"
#include "tests/support/random_llama.h"

using namespace larder;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Seq {
  std::vector<int32_t> pages;
};

struct Bench {
  Backend& be;
  int n_vocab;
  std::mt19937 rng{7};
  std::vector<float> logits;

  std::vector<int32_t> alloc(int n_pos) {
    std::vector<int32_t> t;
    for (int i = 0; i < (n_pos + 15) / 16; ++i) t.push_back(*be.pages().allocate());
    return t;
  }
  // Seconds of one forward of `tokens` positions [start, start + n) of each seq.
  double step(std::vector<Seq>& seqs, int start, int n) {
    std::vector<BatchToken> batch;
    std::vector<SeqBlockTable> tables;
    for (size_t s = 0; s < seqs.size(); ++s) {
      tables.push_back(SeqBlockTable{seqs[s].pages});
      for (int i = 0; i < n; ++i)
        batch.push_back({int32_t(rng() % uint32_t(n_vocab)), start + i, int32_t(s), i + 1 == n});
    }
    logits.resize(seqs.size() * size_t(n_vocab));
    const double t0 = now_s();
    Status st = be.forward(batch, tables, n > 1, logits.data());
    const double t = now_s() - t0;
    if (!st.is_ok()) {
      std::fprintf(stderr, "forward: %s\n", st.to_string().c_str());
      std::exit(1);
    }
    return t;
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string dir = std::filesystem::temp_directory_path().string(), out_path;
  CLI::App app("bench_gpu: decode, prefill and restore on the CUDA device against its ceilings");
  app.add_option("--dir", dir, "folder for the synthetic model files");
  app.add_option("--out", out_path, "also write the markdown table to this file");
  larder::bench::parse_or_exit(app, argc, argv);
  auto ceil_r = measure_cuda_ceilings();
  if (!ceil_r.is_ok()) {
    std::printf("bench_gpu: skipped: %s\n", ceil_r.status().to_string().c_str());
    return 0;
  }
  const DeviceCeilings c = ceil_r.value();
  std::string md;
  char line[512];
  std::snprintf(line, sizeof line,
                "\n## GPU benchmark: %s\n\nceilings (CUDA events, median of 15): device copy %.0f GB/s (read + write), "
                "pinned H2D %.1f GB/s, cuBLAS F16 GEMM 8192^3 %.0f TFLOP/s\n\n"
                "| model | measurement | value | roofline | ratio |\n|---|---|---|---|---|\n",
                c.device_name.c_str(), c.d2d_gb_s, c.h2d_gb_s, c.gemm_tflop_s);
  md += line;
  std::printf("%s", line);
  std::filesystem::create_directories(dir);

  for (GgmlType type : {GgmlType::kF16, GgmlType::kQ8_0}) {
    const std::string tname = type == GgmlType::kF16 ? "f16" : "q8_0";
    testing::RandomLlamaSpec spec;
    spec.n_vocab = 128256;
    spec.n_embd = 2048;
    spec.n_layer = 16;
    spec.n_head = 32;
    spec.n_head_kv = 8;
    spec.n_ff = 8192;
    spec.n_ctx = 4096;
    spec.weight_type = type;
    const std::string path = dir + "/llama1b-shape-" + tname + ".gguf";
    const double tw = now_s();
    if (Status st = testing::write_random_llama_gguf(path, spec); !st.is_ok()) {
      std::fprintf(stderr, "writing %s: %s\n", path.c_str(), st.to_string().c_str());
      return 1;
    }
    auto model = Model::load(path).value();
    const LlamaHparams& hp = model->hparams();
    std::printf("%s: model written and loaded in %.1f s\n", tname.c_str(), now_s() - tw);
    BackendOptions o;
    o.device = "cuda";
    o.layout = KvLayout{hp.n_layer, hp.kv_dim(), 16, KvDtype::kF16};
    o.n_pages = 1024;
    o.max_batch_tokens = 512;
    // With the start-up check (its numbers go to the log); should it fail,
    // the benchmark still runs, unchecked, and says so.
    auto be_r = create_backend(*model, o);
    if (!be_r.is_ok() && be_r.status().message().find("start-up check") != std::string::npos) {
      std::printf("%s: START-UP CHECK DID NOT PASS (%s); benchmarking unchecked\n", tname.c_str(),
                  be_r.status().to_string().c_str());
      o.device_check = false;
      be_r = create_backend(*model, o);
    }
    if (!be_r.is_ok()) {
      std::fprintf(stderr, "backend: %s\n", be_r.status().to_string().c_str());
      return 1;
    }
    Backend& be = *be_r.value();
    std::printf("%s\n", be.describe().c_str());
    const size_t weight_bytes =
        cuda_plan::plan_weight_upload(*model, cuda_plan::WeightPlanOptions{}).value().device_bytes;
    // Bytes a decode step must read: every matrix except the embedding table.
    const size_t embd_bytes = size_t(hp.n_vocab) * hp.n_embd * 2;
    const double step_bytes = double(weight_bytes - embd_bytes);
    const double layer_params = double(hp.n_embd) * (2.0 * hp.q_dim() + 2.0 * hp.kv_dim()) + 3.0 * hp.n_embd * hp.n_ff;
    Bench b{be, hp.n_vocab, std::mt19937(7), {}};
    auto row = [&](const std::string& what, const std::string& value, double roof, double ratio) {
      std::snprintf(line, sizeof line, "| %s | %s | %s | %.3g | %.2f |\n", tname.c_str(), what.c_str(),
                    value.c_str(), roof, ratio);
      md += line;
      std::printf("%s", line);
    };

    // Prefill: 512 tokens of one sequence.
    {
      std::vector<Seq> seqs{{b.alloc(512)}};
      b.step(seqs, 0, 512);
      std::vector<double> t;
      for (int i = 0; i < 5; ++i) t.push_back(b.step(seqs, 0, 512));
      const double s = median(t);
      const double flops = 2.0 * layer_params * hp.n_layer * 512 + 2.0 * hp.n_embd * hp.n_vocab;
      const double roof = flops / (c.gemm_tflop_s * 1e12);
      row("prefill 512 tok/s", std::to_string(int(512 / s)), 512 / roof, roof / s);
      for (auto& q : seqs) for (int32_t p : q.pages) be.pages().release(p);
    }
    // Decode at batch 1 and 8 after a 512-token prompt each.
    for (int batch : {1, 8}) {
      std::vector<Seq> seqs;
      for (int i = 0; i < batch; ++i) seqs.push_back({b.alloc(512 + 33)});
      for (int i = 0; i < batch; ++i) {
        std::vector<Seq> one{seqs[size_t(i)]};
        b.step(one, 0, 512);
      }
      std::vector<double> t;
      for (int k = 0; k < 32; ++k) t.push_back(b.step(seqs, 512 + k, 1));
      t.erase(t.begin());  // warm-up step
      const double s = median(t);
      const double kv_bytes = double(batch) * 528 * hp.n_layer * 2.0 * hp.kv_dim() * 2;
      const double roof = (step_bytes + kv_bytes) / (c.d2d_gb_s * 1e9);
      row("decode batch " + std::to_string(batch) + " tok/s", std::to_string(int(batch / s)), batch / roof,
          roof / s);
      for (auto& q : seqs) for (int32_t p : q.pages) be.pages().release(p);
    }
    // Restore of a 2,048-token prefix (128 pages) from host memory vs recompute.
    {
      std::vector<Seq> seqs{{b.alloc(2048)}};
      std::vector<double> recompute;
      for (int i = 0; i < 3; ++i) {
        double s = 0;
        for (int p0 = 0; p0 < 2048; p0 += 512) s += b.step(seqs, p0, 512);
        recompute.push_back(s);
      }
      const size_t pb = be.kv_layout().page_bytes();
      std::vector<uint8_t> host(seqs[0].pages.size() * pb);
      (void)be.read_pages(seqs[0].pages, host);
      std::vector<double> t;
      for (int i = 0; i < 6; ++i) {
        const double t0 = now_s();
        if (!be.write_pages(seqs[0].pages, host).is_ok()) return 1;
        t.push_back(now_s() - t0);
      }
      t.erase(t.begin());
      const double s = median(t), rec = median(recompute);
      const double roof = double(host.size()) / (c.h2d_gb_s * 1e9);
      char v[128];
      std::snprintf(v, sizeof v, "%.2f ms (recompute %.1f ms, %.1fx)", s * 1e3, rec * 1e3, rec / s);
      row("restore 2048 tok from host", v, roof * 1e3, roof / s);
      for (auto& q : seqs) for (int32_t p : q.pages) be.pages().release(p);
    }
    std::filesystem::remove(path);
  }
  md += "\nroofline column: tok/s (prefill, decode) or ms (restore) at the ceiling; ratio = roofline time / measured time.\n";
  if (!out_path.empty()) std::ofstream(out_path) << md;
  return 0;
}
