// bench_decode: larder's decode and prefill speed through the Engine, on the
// GGUF files given on the command line, with the settings bench/llama_cpp.mjs
// uses for llama.cpp (greedy, EOS ignored, context 512):
//   decode  : 256 tokens from BOS; tok/s = (completion_tokens - 1) / decode_ms
//             (the first token comes out of the prefill, as in llama.cpp's
//             "eval" count of 255 for 256 tokens)
//   prefill : the reference.json "long" prompt (299 tokens with BOS);
//             tok/s = prompt_tokens / prefill_ms, on a fresh engine each run so
//             that no page comes from the prefix cache.
// Prints one JSON line per (bench, model, threads) and a markdown table.
//
// usage: bench_decode [--threads 1,2] [--runs 5] [--decode-tokens 256]
//                     [--reference FILE] [--json-only] MODEL.gguf...
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "bench/bench_cli.h"
#include "bench/bench_util.h"

namespace lb = larder::bench;
using larder::EngineOptions;

namespace {

struct Args {
  std::vector<int> threads{1, 2};
  int runs = 5;
  int decode_tokens = 256;
  int n_ctx = 512;
  std::string reference;
  bool json_only = false;
  std::vector<std::string> models;
};

Args parse_args(int argc, char** argv) {
  Args a;
  CLI::App app("bench_decode: larder's decode and prefill tok/s through the Engine");
  app.add_option("--threads", a.threads, "thread counts to run, comma-separated")->delimiter(',')->check(larder::bench::kPositive);
  app.add_option("--runs", a.runs, "timed runs per row")->check(larder::bench::kPositive);
  app.add_option("--decode-tokens", a.decode_tokens, "tokens per decode run")->check(CLI::Range(2, 1 << 20));
  app.add_option("--reference", a.reference, "reference.json (default: beside the first model)");
  app.add_flag("--json-only", a.json_only, "print only the JSON lines");
  app.add_option("models", a.models, "GGUF files")->required()->check(CLI::ExistingFile);
  lb::parse_or_exit(app, argc, argv);
  return a;
}

EngineOptions engine_options(const std::string& model, int threads, int n_ctx) {
  EngineOptions o;
  o.model_path = model;
  o.n_threads = threads;
  o.n_ctx = n_ctx;
  o.cache.device.budget_bytes = int64_t(256) << 20;
  return o;
}

struct Row {
  std::string model;
  int threads = 0;
  double decode_tps = 0, decode_min = 0, decode_max = 0;
  double prefill_tps = 0, prefill_min = 0, prefill_max = 0;
  int prefill_tokens = 0;
};

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  Args args = parse_args(argc, argv);
  const std::string ref = args.reference.empty() ? lb::reference_path(args.models[0]) : args.reference;
  const std::string prompt_text = lb::reference_prompt(ref, "long");

  std::vector<Row> rows;
  for (const std::string& model : args.models) {
    for (int threads : args.threads) {
      Row row;
      row.model = lb::file_name(model);
      row.threads = threads;

      // Load: seconds from the file's name to an engine ready for requests
      // (weights read and repacked), every engine below; the file's bytes sit
      // in the page cache after the first.
      std::vector<double> load_s;
      auto load = [&] {
        const auto t0 = std::chrono::steady_clock::now();
        auto engine = lb::make_engine(engine_options(model, threads, args.n_ctx));
        load_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        return engine;
      };
      // Decode: one engine, a warm-up request, then `runs` generations from BOS.
      std::vector<double> decode_tps;
      {
        auto engine = load();
        const std::vector<int32_t> bos = engine->tokenize("", false);
        (void)lb::run_request(*engine, lb::greedy(bos, 32));
        for (int r = 0; r < args.runs; ++r) {
          lb::Timed t = lb::run_request(*engine, lb::greedy(bos, args.decode_tokens));
          const int n = t.final.completion_tokens - 1;
          decode_tps.push_back(t.final.decode_ms > 0 ? n * 1000.0 / t.final.decode_ms : 0);
        }
      }
      // Prefill: a fresh engine per run (no prefix-cache hits), warmed up on a
      // prompt shorter than one page, whose kept partial page is then evicted.
      std::vector<double> prefill_tps;
      for (int r = 0; r < args.runs; ++r) {
        auto engine = load();
        (void)lb::run_request(*engine, lb::greedy(engine->tokenize("Once upon a time", false), 2));
        (void)engine->evict(nullptr, "");  // the warm-up's partial page would be a hit
        std::vector<int32_t> prompt = engine->tokenize(prompt_text, false);
        row.prefill_tokens = int(prompt.size());
        lb::Timed t = lb::run_request(*engine, lb::greedy(prompt, 1));
        if (t.final.cached_tokens != 0) {
          std::fprintf(stderr, "prefill run had %d cached tokens\n", t.final.cached_tokens);
          return 1;
        }
        prefill_tps.push_back(t.final.prefill_ms > 0 ? t.final.prompt_tokens * 1000.0 / t.final.prefill_ms : 0);
      }
      row.decode_tps = lb::median(decode_tps);
      row.decode_min = lb::min_of(decode_tps);
      row.decode_max = lb::max_of(decode_tps);
      row.prefill_tps = lb::median(prefill_tps);
      row.prefill_min = lb::min_of(prefill_tps);
      row.prefill_max = lb::max_of(prefill_tps);
      lb::print_json_line({{"bench", "decode"}, {"impl", "larder"}, {"model", row.model},
                           {"threads", threads}, {"tokens", args.decode_tokens - 1},
                           {"tok_per_s", row.decode_tps}, {"runs", decode_tps}});
      lb::print_json_line({{"bench", "prefill"}, {"impl", "larder"}, {"model", row.model},
                           {"threads", threads}, {"tokens", row.prefill_tokens},
                           {"tok_per_s", row.prefill_tps}, {"runs", prefill_tps}});
      lb::print_json_line({{"bench", "load"}, {"impl", "larder"}, {"model", row.model}, {"threads", threads},
                           {"seconds", lb::median(load_s)}, {"runs", load_s}});
      rows.push_back(row);
    }
  }

  if (!args.json_only) {
    std::printf("\n| model | threads | decode tok/s (median [min-max]) | prefill tok/s (%d tokens) |\n",
                rows.empty() ? 0 : rows[0].prefill_tokens);
    std::printf("| --- | ---: | ---: | ---: |\n");
    for (const Row& r : rows) {
      std::printf("| %s | %d | %.0f [%.0f-%.0f] | %.0f [%.0f-%.0f] |\n", r.model.c_str(), r.threads,
                  r.decode_tps, r.decode_min, r.decode_max, r.prefill_tps, r.prefill_min,
                  r.prefill_max);
    }
  }
  return 0;
}
