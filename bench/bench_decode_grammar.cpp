// bench_decode_grammar: decode speed with and without a JSON-schema grammar
// (constrained decoding, engine/engine_grammar.cpp), on the same prompt and
// the same engine in the same run, runs alternating (plain, schema, plain,
// ...) after one warm-up of each. Greedy, EOS ignored; the grammar stops a
// request early when its document is complete, so tok/s is over the tokens
// each request really decoded: (completion_tokens - 1) / decode_ms, the
// first token coming out of the prefill (as in bench_decode). The schema is
// a list of at least four typical records (api/json_schema_grammar.h), so
// that a request rarely completes it before --decode-tokens.
//
// On make_synthetic's files the vocabulary is synthetic (byte tokens,
// printable ASCII and made-up words, Llama 3's size of 128,256 on the 1B
// preset) and the weights random: the mask work per token is that of a
// 128k vocabulary, not of Llama 3's real token strings (bench_grammar
// measures masks on those).
//
// Prints one JSON line per model and a markdown table with the ratio
// plain / schema.
//
// usage: bench_decode_grammar [--threads 2] [--runs 3] [--decode-tokens 128]
//                             [--prompt TEXT] [--json-only] MODEL.gguf...
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "api/json_schema_grammar.h"
#include "bench/bench_cli.h"
#include "bench/bench_util.h"
#include "engine/grammar/grammar.h"

namespace lb = larder::bench;
using namespace larder;

namespace {

struct Args {
  int threads = 2;
  int runs = 3;
  int decode_tokens = 128;
  std::string prompt = "Here are the records as JSON:";
  bool json_only = false;
  std::vector<std::string> models;
};

Args parse_args(int argc, char** argv) {
  Args a;
  CLI::App app("bench_decode_grammar: decode tok/s with and without a JSON-schema grammar");
  app.add_option("--threads", a.threads, "engine threads")->check(larder::bench::kPositive);
  app.add_option("--runs", a.runs, "timed runs per row")->check(larder::bench::kPositive);
  app.add_option("--decode-tokens", a.decode_tokens, "tokens per decode run")->check(CLI::Range(2, 1 << 20));
  app.add_option("--prompt", a.prompt, "prompt text");
  app.add_flag("--json-only", a.json_only, "print only the JSON lines");
  app.add_option("models", a.models, "GGUF files")->required()->check(CLI::ExistingFile);
  lb::parse_or_exit(app, argc, argv);
  return a;
}

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "records": {"type": "array", "minItems": 4, "items": {
      "type": "object",
      "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "email": {"type": "string"},
        "role": {"enum": ["admin", "editor", "viewer"]},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
        "active": {"type": "boolean"}
      },
      "required": ["name", "age", "email", "role", "tags", "active"]}}
  },
  "required": ["records"]
})";

std::shared_ptr<const CompiledGrammar> schema_grammar() {
  Result<std::string> gbnf = json_schema_to_gbnf(nlohmann::ordered_json::parse(kSchema));
  Result<Grammar> g = gbnf.is_ok() ? parse_gbnf(*gbnf) : Result<Grammar>(gbnf.status());
  if (!g.is_ok()) {
    std::fprintf(stderr, "bench_decode_grammar: the schema: %s\n", g.status().to_string().c_str());
    std::exit(1);
  }
  return std::make_shared<const CompiledGrammar>(*g);
}

double decode_tps(const lb::Timed& t) {
  const int n = t.final.completion_tokens - 1;
  return t.final.decode_ms > 0 && n > 0 ? n * 1000.0 / t.final.decode_ms : 0;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  const Args args = parse_args(argc, argv);
  const auto grammar = schema_grammar();
  struct Row {
    std::string model;
    double plain = 0, schema = 0, schema_tokens = 0;
  };
  std::vector<Row> rows;
  for (const std::string& model : args.models) {
    EngineOptions o;
    o.model_path = model;
    o.n_threads = args.threads;
    o.n_ctx = 512;
    o.cache.device.budget_bytes = int64_t(256) << 20;
    auto engine = lb::make_engine(o);
    const std::vector<int32_t> prompt = engine->tokenize(args.prompt, false);
    auto request = [&](bool constrained, int max_tokens) {
      GenerationRequest r = lb::greedy(prompt, max_tokens);
      if (constrained) r.grammar = grammar;
      return lb::run_request(*engine, std::move(r));
    };
    (void)request(false, 8);
    (void)request(true, 8);
    std::vector<double> plain, schema, schema_tokens;
    for (int r = 0; r < args.runs; ++r) {
      plain.push_back(decode_tps(request(false, args.decode_tokens)));
      lb::Timed t = request(true, args.decode_tokens);
      schema.push_back(decode_tps(t));
      schema_tokens.push_back(t.final.completion_tokens);
    }
    Row row{lb::file_name(model), lb::median(plain), lb::median(schema), lb::median(schema_tokens)};
    lb::print_json_line({{"bench", "decode_grammar"}, {"model", row.model}, {"threads", args.threads},
                         {"max_tokens", args.decode_tokens}, {"plain_tok_per_s", row.plain},
                         {"schema_tok_per_s", row.schema}, {"plain_runs", plain}, {"schema_runs", schema},
                         {"schema_completion_tokens", schema_tokens}});
    rows.push_back(row);
  }
  if (!args.json_only) {
    std::printf("\n| model | threads | decode tok/s, no grammar | with the JSON schema | plain / schema | "
                "schema tokens/request |\n| --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (const Row& r : rows) {
      std::printf("| %s | %d | %.1f | %.1f | %.2fx | %.0f |\n", r.model.c_str(), args.threads, r.plain, r.schema,
                  r.schema > 0 ? r.plain / r.schema : 0, r.schema_tokens);
    }
  }
  return 0;
}
