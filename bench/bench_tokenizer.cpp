// Tokenizer throughput: encodes a text file with the vocabulary of a GGUF file
// (a full model or a vocab-only file) and prints MB/s (10^6 bytes of UTF-8
// input per second, best of --runs) and the token count. bench/tokenizer.sh
// runs it beside @huggingface/transformers on the same text and vocabulary.
//
// usage: bench_tokenizer [--runs N] [--parse-special] [--ids-out FILE] [--json-only] VOCAB.gguf TEXT
//   --parse-special  control-token text in the input ("<|im_start|>") becomes
//              the control token, as in chat prompts and as transformers'
//              encode does; without it, such text is tokenized as plain text
//   --ids-out  writes the token ids as a JSON array (to compare with another
//              tokenizer's ids)
// Output: one JSON line {"tool":"larder","vocab":...,"bytes":...,"tokens":...,
// "load_s":...,"best_s":...,"median_s":...,"mb_per_s":...}.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_cli.h"
#include "bench/bench_util.h"
#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  int runs = 5;
  bool json_only = false;
  bool parse_special = false;
  std::string ids_out;
  std::string vocab_path, text_path;
  CLI::App app("bench_tokenizer: tokenizer throughput on a text file");
  app.add_option("--runs", runs, "timed runs (best and median printed)")->check(larder::bench::kPositive);
  app.add_option("--ids-out", ids_out, "write the token ids as a JSON array to this file");
  app.add_flag("--json-only", json_only, "print only the JSON line");
  app.add_flag("--parse-special", parse_special, "control-token text in the input becomes the control token");
  app.add_option("vocab", vocab_path, "GGUF file with the vocabulary")->required()->check(CLI::ExistingFile);
  app.add_option("text", text_path, "UTF-8 text file")->required()->check(CLI::ExistingFile);
  larder::bench::parse_or_exit(app, argc, argv);

  auto gguf = larder::GgufFile::open(vocab_path);
  if (!gguf.is_ok()) {
    std::fprintf(stderr, "bench_tokenizer: %s\n", gguf.status().message().c_str());
    return 1;
  }
  const auto t_load = larder::bench::Clock::now();
  auto tok = larder::Tokenizer::from_gguf(**gguf);
  if (!tok.is_ok()) {
    std::fprintf(stderr, "bench_tokenizer: %s\n", tok.status().message().c_str());
    return 1;
  }
  const double load_s = larder::bench::ms_since(t_load) / 1e3;

  std::ifstream in(text_path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "bench_tokenizer: cannot read %s\n", text_path.c_str());
    return 1;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  std::vector<int32_t> ids;
  std::vector<double> seconds;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = larder::bench::Clock::now();
    ids = (*tok)->encode(text, /*add_bos=*/false, parse_special);
    seconds.push_back(larder::bench::ms_since(t0) / 1e3);
  }
  const double best = larder::bench::min_of(seconds);
  nlohmann::json j = {{"tool", "larder"},
                      {"vocab", larder::bench::file_name(vocab_path)},
                      {"bytes", text.size()},
                      {"tokens", ids.size()},
                      {"parse_special", parse_special},
                      {"load_s", load_s},
                      {"best_s", best},
                      {"median_s", larder::bench::median(seconds)},
                      {"mb_per_s", static_cast<double>(text.size()) / best / 1e6}};
  if (!json_only) {
    std::fprintf(stderr, "larder: %s: %zu bytes -> %zu tokens, best %.3f s = %.2f MB/s (load %.2f s)\n",
                 larder::bench::file_name(vocab_path).c_str(), text.size(), ids.size(), best,
                 static_cast<double>(text.size()) / best / 1e6, load_s);
  }
  larder::bench::print_json_line(j);
  if (!ids_out.empty()) {
    std::ofstream out(ids_out);
    out << nlohmann::json(ids).dump() << "\n";
    if (!out) {
      std::fprintf(stderr, "bench_tokenizer: cannot write %s\n", ids_out.c_str());
      return 1;
    }
  }
  return 0;
}
