// bench_restore: time to first token (TTFT) for one ~400-token prompt, three
// ways, on each GGUF given on the command line and on synthetic random-weight
// llama models big enough for prefill to cost something:
//   cold    : fresh cache directory, nothing cached, the whole prompt is prefilled
//   memory  : the same engine, the same prompt again: full pages come from the
//             in-memory prefix cache
//   disk    : the engine is stopped (pending page writes flushed) and a new one
//             is created on the same cache directory; its first request
//             restores the pages from RocksDB
// TTFT = wall time from Engine::submit to the final event of a max_tokens = 1
// request (the engine's prefill_ms, measured from admission, is printed too).
// Engine creation is not in any TTFT. Each run uses a fresh cache directory.
// Only full pages are shared and the last prompt token is always prefilled,
// so a restore still computes the partial tail (400 tokens, page 16: 384
// cached, 16 prefilled).
//
// usage: bench_restore [--runs 7] [--synthetic-runs 5] [--threads 2]
//                      [--prompt-tokens 400] [--synthetic q8_0,f16 | --synthetic none]
//                      [--reference FILE] [--json-only] MODEL.gguf...
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "bench/bench_cli.h"
#include "bench/bench_util.h"
#include "storage/open_tiers.h"
#include "tests/support/random_llama.h"

namespace lb = larder::bench;
using larder::EngineOptions;
using larder::GgmlType;

namespace {

struct Args {
  int runs = 7;
  int synthetic_runs = 5;
  int threads = 2;
  int prompt_tokens = 400;
  std::vector<std::string> synthetic{"q8_0", "f16"};
  std::string reference;
  bool json_only = false;
  std::vector<std::string> models;
};

Args parse_args(int argc, char** argv) {
  Args a;
  CLI::App app("bench_restore: restoring a prompt's pages from the tiers against a cold prefill");
  app.add_option("--runs", a.runs, "timed runs per model")->check(larder::bench::kPositive);
  app.add_option("--synthetic-runs", a.synthetic_runs, "timed runs per synthetic file")->check(larder::bench::kPositive);
  app.add_option("--threads", a.threads, "engine threads")->check(larder::bench::kPositive);
  app.add_option("--prompt-tokens", a.prompt_tokens, "prompt length in tokens (BOS included)")->check(CLI::Range(17, 1 << 20));
  app.add_option("--synthetic", a.synthetic, "synthetic weight types, comma-separated, or none")
      ->delimiter(',')
      ->check(CLI::IsMember({"q8_0", "f16", "f32", "none"}));
  app.add_option("--reference", a.reference, "reference.json (default: beside the first model)");
  app.add_flag("--json-only", a.json_only, "print only the JSON lines");
  app.add_option("models", a.models, "GGUF files")->check(CLI::ExistingFile);
  lb::parse_or_exit(app, argc, argv);
  std::erase(a.synthetic, "none");
  if (a.models.empty() && a.synthetic.empty()) {
    std::fprintf(stderr, "bench_restore: nothing to run (no model and --synthetic none)\n%s", app.help().c_str());
    std::exit(2);
  }
  return a;
}

// The story text repeated until it tokenizes to at least n tokens, cut to n
// (BOS included).
std::vector<int32_t> build_prompt(const larder::Engine& engine, const std::string& text, int n) {
  std::string s = text;
  std::vector<int32_t> ids = engine.tokenize(s, false);
  while (int(ids.size()) < n) {
    s += " " + text;
    ids = engine.tokenize(s, false);
  }
  ids.resize(size_t(n));
  return ids;
}

struct Sample {
  double ttft_ms = 0, prefill_ms = 0;
  int cached_tokens = 0;
  int32_t first_token = -1;
};

struct Row {
  std::string model;
  int runs = 0;
  int prompt_tokens = 0;
  std::vector<Sample> cold, memory, disk;
  int token_mismatches = 0;  // runs where a restored first token differed from the cold one
};

std::vector<double> ttfts(const std::vector<Sample>& v) {
  std::vector<double> out;
  for (const Sample& s : v) out.push_back(s.ttft_ms);
  return out;
}
std::vector<double> prefills(const std::vector<Sample>& v) {
  std::vector<double> out;
  for (const Sample& s : v) out.push_back(s.prefill_ms);
  return out;
}

Sample measure(larder::Engine& engine, const std::vector<int32_t>& prompt) {
  lb::Timed t = lb::run_request(engine, lb::greedy(prompt, 1));
  Sample s;
  s.ttft_ms = t.total_ms;
  s.prefill_ms = t.final.prefill_ms;
  s.cached_tokens = t.final.cached_tokens;
  s.first_token = t.final.output_tokens.empty() ? -1 : t.final.output_tokens[0];
  return s;
}

Row bench_model(const std::string& model_path, const std::string& label, const Args& args,
                const std::string& text, int runs) {
  Row row;
  row.model = label;
  row.runs = runs;
  for (int r = 0; r < runs; ++r) {
    lb::TempDir dir("larder-bench-cache");
    EngineOptions opt;
    opt.model_path = model_path;
    opt.cache.disk.dir = dir.str();
    opt.open_tiers = larder::tier_factory();
    opt.n_threads = args.threads;
    opt.cache.device.budget_bytes = int64_t(512) << 20;
    std::vector<int32_t> prompt;
    {
      auto engine = lb::make_engine(opt);
      prompt = build_prompt(*engine, text, args.prompt_tokens);
      row.prompt_tokens = int(prompt.size());
      // Warm-up on a prompt shorter than one page: nothing sealed or written;
      // its partial page (kept in memory) is evicted, so nothing is shared.
      (void)lb::run_request(*engine, lb::greedy(std::vector<int32_t>(prompt.begin(), prompt.begin() + 4), 2));
      (void)engine->evict(nullptr, "");
      row.cold.push_back(measure(*engine, prompt));
      row.memory.push_back(measure(*engine, prompt));
      engine->flush_storage();
      engine->stop();
    }
    auto engine = lb::make_engine(opt);
    row.disk.push_back(measure(*engine, prompt));
    const int32_t cold_tok = row.cold.back().first_token;
    if (row.memory.back().first_token != cold_tok || row.disk.back().first_token != cold_tok) {
      ++row.token_mismatches;
    }
  }
  return row;
}

GgmlType parse_type(const std::string& s) {
  if (s == "q8_0") return GgmlType::kQ8_0;
  if (s == "f16") return GgmlType::kF16;
  if (s == "f32") return GgmlType::kF32;
  std::fprintf(stderr, "--synthetic: unknown type %s (q8_0, f16, f32)\n", s.c_str());
  std::exit(2);
}

void print_row_json(const Row& r, int threads) {
  auto part = [](const std::vector<Sample>& v) {
    nlohmann::json j;
    j["ttft_ms"] = lb::median(ttfts(v));
    j["prefill_ms"] = lb::median(prefills(v));
    j["cached_tokens"] = v.empty() ? 0 : v.back().cached_tokens;
    j["runs_ttft_ms"] = ttfts(v);
    return j;
  };
  lb::print_json_line({{"bench", "ttft"}, {"impl", "larder"}, {"model", r.model}, {"threads", threads},
                       {"prompt_tokens", r.prompt_tokens}, {"runs", r.runs},
                       {"cold", part(r.cold)}, {"memory", part(r.memory)}, {"disk", part(r.disk)},
                       {"first_token_mismatches", r.token_mismatches}});
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  Args args = parse_args(argc, argv);
  std::string ref = args.reference;
  if (ref.empty()) {
    ref = args.models.empty() ? lb::reference_path("./x") : lb::reference_path(args.models[0]);
  }
  const std::string text = lb::reference_prompt(ref, "long");

  std::vector<Row> rows;
  for (const std::string& m : args.models) {
    rows.push_back(bench_model(m, lb::file_name(m), args, text, args.runs));
    print_row_json(rows.back(), args.threads);
  }
  for (const std::string& type : args.synthetic) {
    lb::TempDir dir("larder-bench-model");
    larder::testing::RandomLlamaSpec spec;
    spec.n_vocab = 32000;
    spec.n_embd = 1024;
    spec.n_layer = 8;
    spec.n_head = 16;
    spec.n_head_kv = 4;
    spec.n_ff = 2816;
    spec.n_ctx = 1024;
    spec.weight_type = parse_type(type);
    const std::string path = (dir.path() / ("synthetic-" + type + ".gguf")).string();
    auto t0 = lb::Clock::now();
    larder::Status st = larder::testing::write_random_llama_gguf(path, spec);
    if (!st.is_ok()) {
      std::fprintf(stderr, "write_random_llama_gguf: %s\n", st.to_string().c_str());
      return 1;
    }
    std::fprintf(stderr, "wrote %s in %.1f s\n", path.c_str(), lb::ms_since(t0) / 1000);
    const std::string label = "synthetic 1024x8L " + type;
    rows.push_back(bench_model(path, label, args, text, args.synthetic_runs));
    print_row_json(rows.back(), args.threads);
  }

  if (!args.json_only) {
    std::printf("\nTTFT, %d-token prompt, %d threads, median of N runs (each on a fresh cache dir); "
                "cached = prompt tokens restored\n\n",
                args.prompt_tokens, args.threads);
    std::printf("| model | N | cold ms | memory ms (cached) | disk ms (cached) | cold/memory | cold/disk |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (const Row& r : rows) {
      const double c = lb::median(ttfts(r.cold));
      const double m = lb::median(ttfts(r.memory));
      const double d = lb::median(ttfts(r.disk));
      std::printf("| %s | %d | %.2f | %.2f (%d) | %.2f (%d) | %.1fx | %.1fx |\n", r.model.c_str(), r.runs,
                  c, m, r.memory.back().cached_tokens, d, r.disk.back().cached_tokens, m > 0 ? c / m : 0,
                  d > 0 ? c / d : 0);
    }
    for (const Row& r : rows) {
      if (r.token_mismatches > 0) {
        std::printf("\nWARNING: %s: the first token after a restore differed from the cold one in %d run(s)\n",
                    r.model.c_str(), r.token_mismatches);
      }
    }
  }
  return 0;
}
