// Speculative decoding with a draft model (engine/draft_model.h,
// [engine] draft_model): its drafts against llama.cpp's greedy continuations
// (reference.json), the engine's output with a draft model equal to its
// output without, token for token (greedy and seeded sampling), and the
// start-up errors of a draft model that does not fit.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "engine/draft_model.h"
#include "tests/engine/engine_test_util.h"
#include "tests/support/random_llama.h"

using namespace larder;
using namespace larder::testing;

namespace {

using Ids = std::vector<int32_t>;

struct Run {
  Generated g;
  Engine::Stats stats;
};

EngineOptions with_draft(const std::string& model, const std::string& draft, int draft_tokens) {
  EngineOptions o = options_for(model, "");
  o.draft_model = draft;
  o.draft_tokens = draft_tokens;
  return o;
}

Run run(const EngineOptions& o, const GenerationRequest& req) {
  auto engine = make_engine(o);
  Run r{generate(*engine, req), {}};
  r.stats = engine->stats();
  return r;
}

std::unique_ptr<Tokenizer> tokenizer_of(const std::string& path) {
  auto model = Model::load(path);
  REQUIRE(model.is_ok());
  auto tok = Tokenizer::from_gguf(model.value()->gguf());
  REQUIRE(tok.is_ok());
  return std::move(tok).value();
}

bool is_prefix_of(const Ids& a, const Ids& b, size_t from) {
  return from + a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin() + std::ptrdiff_t(from));
}

}  // namespace

TEST_CASE("a draft model's drafts are its greedy continuation, kept across calls", "[engine][speculative][draft]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto tok = tokenizer_of(model);
  auto d = DraftModel::load(model, *tok, KvDtype::kF32, 16, 64, 1);
  INFO(d.status().to_string());
  REQUIRE(d.is_ok());
  DraftModel& draft = *d.value();
  const int all_pages = draft.n_free_pages();
  const nlohmann::json ref = load_reference();
  for (const auto& c : ref["cases"]) {
    const Ids prompt = c["prompt_tokens"].get<Ids>();
    const Ids greedy = c["greedy_tokens"].get<Ids>();  // llama.cpp agrees (reference.json)
    INFO("case " << c["name"].get<std::string>());
    // The draft model here is the reference model itself: whatever it
    // proposes is the start of the reference continuation.
    Ids seq = prompt;
    size_t at = 0;
    int proposed = 0;
    for (int step = 0; step < 6 && at < greedy.size(); ++step) {
      const Ids p = draft.propose(7, seq, 8);
      CHECK(p.size() <= 8);
      CHECK(is_prefix_of(p, greedy, at));
      proposed += int(p.size());
      // The served model accepted 2 of them and emitted its own next token:
      // the next call reuses the K/V of what matches and feeds the rest.
      const size_t take = std::min<size_t>(3, greedy.size() - at);
      seq.insert(seq.end(), greedy.begin() + std::ptrdiff_t(at), greedy.begin() + std::ptrdiff_t(at + take));
      at += take;
    }
    CHECK(proposed >= 6);  // the first token of a draft is always proposed
    // A different sequence id starts from nothing and drafts the same.
    const Ids again = draft.propose(8, prompt, 4);
    CHECK(!again.empty());
    CHECK(is_prefix_of(again, greedy, 0));
  }
  CHECK(draft.n_sequences() == 2);
  CHECK(draft.n_free_pages() < all_pages);
  const uint64_t keep[] = {8};
  draft.retain_only(keep);
  CHECK(draft.n_sequences() == 1);
  draft.retain_only({});
  CHECK(draft.n_sequences() == 0);
  CHECK(draft.n_free_pages() == all_pages);
}

TEST_CASE("a draft model sees the last 256 to 512 tokens of a long sequence", "[engine][speculative][draft]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto tok = tokenizer_of(model);
  auto d = DraftModel::load(model, *tok, KvDtype::kF16, 16, 256, 1);
  REQUIRE(d.is_ok());
  DraftModel& draft = *d.value();
  auto alone = DraftModel::load(model, *tok, KvDtype::kF16, 16, 256, 1);
  REQUIRE(alone.is_ok());
  static_assert(DraftModel::kWindow == 256);
  // 1,100 tokens: the long reference prompt repeated (a returning
  // conversation the served model found in its cache).
  const Ids p = reference_prompt("long");
  Ids seq;
  while (seq.size() < 1100) seq.insert(seq.end(), p.begin(), p.end());
  seq.resize(1100);
  // It drafts at once, from the last 256 tokens: as a new sequence of just
  // those does.
  auto last = [&](size_t n) { return Ids(seq.end() - std::ptrdiff_t(n), seq.end()); };
  Ids got = draft.propose(1, seq, 4);
  CHECK(!got.empty());
  CHECK(got == alone.value()->propose(100, last(256), 4));
  // The window grows with the sequence up to 512 tokens, then starts again
  // from the last 256.
  for (int step = 1; step <= 300; ++step) {
    seq.push_back(got.empty() ? 13 : got.front());
    got = draft.propose(1, seq, 4);
    const size_t window = step <= 256 ? size_t(256 + step) : size_t(256 + (step - 257));
    if (step % 50 == 0 || step == 256 || step == 257) {
      INFO("step " << step << ", window " << window);
      CHECK(got == alone.value()->propose(1000 + uint64_t(step), last(window), 4));
    }
  }
  // Pages: 256 of 16 positions. Sequence 1's window reached 512 tokens and
  // 3 draft positions (33 pages); a new sequence's window is 256 tokens and
  // 3 (17 pages): 7 more leave 256 - 33 - 7 x 17 = 104, 6 after them 2, and
  // then a sequence gets no draft (its 2 pages do not hold its window).
  for (uint64_t id = 2; id <= 8; ++id) CHECK(!draft.propose(id, seq, 4).empty());
  CHECK(draft.n_free_pages() == 104);
  Ids other = seq;
  other.back() = 7;
  for (uint64_t id = 9; id <= 14; ++id) CHECK(!draft.propose(id, other, 4).empty());
  CHECK(draft.n_free_pages() == 2);
  CHECK(draft.propose(15, other, 4).empty());
  CHECK(draft.n_free_pages() == 0);
  draft.retain_only(std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(draft.n_sequences() == 8);
  CHECK(draft.n_free_pages() == 256 - 33 - 7 * 17);
  CHECK(!draft.propose(21, other, 4).empty());
  draft.retain_only({});
  CHECK(draft.n_free_pages() == 256);
}

TEST_CASE("a draft model drafts for several sequences in shared passes as for each alone",
          "[engine][speculative][draft]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  LARDER_REQUIRE_MODEL(q8, "stories260K-q8_0.gguf");
  auto tok = tokenizer_of(model);
  auto together = DraftModel::load(q8, *tok, KvDtype::kF16, 16, 256, 1);
  auto alone = DraftModel::load(q8, *tok, KvDtype::kF16, 16, 256, 1);
  REQUIRE(together.is_ok());
  REQUIRE(alone.is_ok());
  const nlohmann::json ref = load_reference();
  std::vector<Ids> seqs;
  for (const auto& c : ref["cases"]) seqs.push_back(c["prompt_tokens"].get<Ids>());
  REQUIRE(seqs.size() >= 3);
  const Ids long_prompt = reference_prompt("long");  // 299 tokens
  seqs.push_back(Ids(long_prompt.begin(), long_prompt.begin() + 260));
  const int lens[] = {1, 3, 8, 2};
  for (int round = 0; round < 4; ++round) {
    INFO("round " << round);
    std::vector<DraftModel::Request> reqs;
    for (size_t i = 0; i < seqs.size(); ++i) {
      reqs.push_back(DraftModel::Request{100 + i, seqs[i], lens[(i + size_t(round)) % 4]});
    }
    const std::vector<Ids> got = together.value()->propose(reqs);
    REQUIRE(got.size() == seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
      INFO("sequence " << i);
      if (round == 0 && i + 1 == seqs.size()) {
        // The reference prompts take 414 of the 512 positions a call feeds
        // before drafting; the last one, 260 more, catches up meanwhile.
        CHECK(got[i].empty());
        continue;
      }
      const Ids want = alone.value()->propose(100 + i, seqs[i], reqs[i].max_draft);
      CHECK(got[i] == want);
      CHECK(!got[i].empty());
      // The sequence goes on with one token of its own: the first drafted
      // when there is one.
      seqs[i].push_back(got[i].empty() ? 5 : got[i].front());
    }
  }
  // The catch-up budget is shared: two new sequences of 300 positions each
  // can't both be fed in one call; the second drafts one call later.
  Ids a(long_prompt.begin(), long_prompt.begin() + 290), b(long_prompt.begin() + 1, long_prompt.begin() + 299);
  std::vector<DraftModel::Request> two = {{1, a, 4}, {2, b, 4}};
  std::vector<Ids> got = together.value()->propose(two);
  CHECK(!got[0].empty());
  CHECK(got[1].empty());
  got = together.value()->propose(two);
  CHECK(!got[0].empty());
  CHECK(!got[1].empty());
}

TEST_CASE("the model as its own draft: every greedy draft token is accepted, output unchanged",
          "[engine][speculative][draft]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const nlohmann::json ref = load_reference();
  for (const auto& c : ref["cases"]) {
    for (int max_tokens : {1, 2, 9, 48}) {
      INFO("case " << c["name"].get<std::string>() << ", max_tokens " << max_tokens);
      GenerationRequest req = greedy_request(c["prompt_tokens"].get<Ids>(), max_tokens);
      req.logprobs = 2;
      const Run off = run(options_for(model, ""), req);
      const Run on = run(with_draft(model, model, 8), req);
      REQUIRE(off.g.final.finish == FinishReason::kLength);
      CHECK(on.g.tokens == off.g.tokens);
      CHECK(on.g.text == off.g.text);
      // reference.json: llama.cpp's greedy tokens.
      const Ids greedy = c["greedy_tokens"].get<Ids>();
      CHECK(on.g.tokens == Ids(greedy.begin(), greedy.begin() + max_tokens));
      CHECK(on.stats.draft_model_tokens_accepted == on.stats.draft_model_tokens);
      CHECK(on.stats.draft_model_tokens <= on.stats.draft_tokens);
      if (max_tokens == 48) {
        INFO("draft model: drafted " << on.stats.draft_model_tokens);
        CHECK(on.stats.draft_model_tokens >= 10);
      }
    }
  }
}

TEST_CASE("a Q8_0 draft model changes no greedy or seeded sampled token", "[engine][speculative][draft]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  LARDER_REQUIRE_MODEL(q8, "stories260K-q8_0.gguf");
  auto on = make_engine(with_draft(model, q8, 8)), off = make_engine(options_for(model, ""));
  const nlohmann::json ref = load_reference();
  for (const auto& c : ref["cases"]) {
    INFO("case " << c["name"].get<std::string>());
    const GenerationRequest req = greedy_request(c["prompt_tokens"].get<Ids>(), 48);
    const Generated a = generate(*on, req), b = generate(*off, req);
    CHECK(a.tokens == b.tokens);
    CHECK(a.text == b.text);
  }
  const Engine::Stats greedy = on->stats();
  INFO("greedy: drafted " << greedy.draft_model_tokens << ", accepted " << greedy.draft_model_tokens_accepted);
  CHECK(greedy.draft_model_tokens_accepted > 0);
  CHECK(greedy.draft_model_tokens_accepted <= greedy.draft_model_tokens);
  const int64_t differing = check_same_seeded_samples(*on, *off, reference_prompt("once_upon"), 40, 16);
  CHECK(differing >= 12);  // the seed matters, so the equality above says something
  CHECK(on->stats().draft_model_tokens > greedy.draft_model_tokens);
}

TEST_CASE("a draft model of another shape and weights: drafts rejected and asked less often, output unchanged",
          "[engine][speculative][draft]") {
  TempDir dir;
  RandomLlamaSpec target_spec;
  target_spec.seed = 1;
  RandomLlamaSpec draft_spec;  // same synthetic vocabulary, another model
  draft_spec.seed = 2;
  draft_spec.n_embd = 32;
  draft_spec.n_layer = 1;
  draft_spec.n_head = 2;
  draft_spec.n_head_kv = 1;
  draft_spec.weight_type = GgmlType::kQ8_0;
  // Untied output matrices: with tied ones both random models mostly
  // predict the token they were fed, and agree.
  target_spec.tied_output = draft_spec.tied_output = false;
  const std::string target = dir.str() + "/target.gguf", draft = dir.str() + "/draft.gguf";
  REQUIRE(write_random_llama_gguf(target, target_spec).is_ok());
  REQUIRE(write_random_llama_gguf(draft, draft_spec).is_ok());
  Ids prompt = {1};
  for (int i = 0; i < 40; ++i) prompt.push_back(3 + (i * 37) % 500);
  for (int max_running : {1, 3}) {
    EngineOptions on_opt = with_draft(target, draft, 4), off_opt = options_for(target, "");
    on_opt.max_running = off_opt.max_running = max_running;
    // q8_0 K/V for the served model (K/V width 32); the draft's width of 16
    // does not suit q8_0, so its pages fall back to f16.
    if (max_running == 3) on_opt.cache.kv_dtype = off_opt.cache.kv_dtype = "q8_0";
    auto on = make_engine(on_opt), off = make_engine(off_opt);
    // Several at once: each sequence drafts from its own K/V.
    std::vector<std::shared_ptr<CollectSink>> sinks_on, sinks_off;
    for (int i = 0; i < 4; ++i) {
      GenerationRequest req = greedy_request(Ids(prompt.begin(), prompt.begin() + 10 + 7 * i), 30);
      sinks_on.push_back(std::make_shared<CollectSink>());
      sinks_off.push_back(std::make_shared<CollectSink>());
      on->submit(req, sinks_on.back());
      off->submit(req, sinks_off.back());
    }
    for (int i = 0; i < 4; ++i) {
      INFO("max_running " << max_running << ", request " << i);
      REQUIRE(sinks_on[size_t(i)]->wait());
      REQUIRE(sinks_off[size_t(i)]->wait());
      CHECK(sinks_on[size_t(i)]->final_.output_tokens == sinks_off[size_t(i)]->final_.output_tokens);
      CHECK(sinks_on[size_t(i)]->final_.output_tokens.size() == 30);
    }
    INFO("drafted " << on->stats().draft_model_tokens << ", accepted " << on->stats().draft_model_tokens_accepted);
    CHECK(on->stats().draft_model_tokens > 0);
    CHECK(on->stats().draft_model_tokens_accepted == 0);
    // The back-off: a request's 29 decode steps ask the draft model at
    // steps 1, 3, 7 and 15 only, for 2 tokens at first and 1 after a miss
    // (without it: every step, 76 tokens in all).
    CHECK(on->stats().draft_model_tokens <= 4 * 5);
  }
}

TEST_CASE("a draft model that does not fit is refused at start-up with the reason", "[engine][speculative][draft]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  TempDir dir;
  auto refused = [&](const std::string& draft, int draft_tokens) {
    auto e = Engine::create(with_draft(model, draft, draft_tokens));
    REQUIRE(!e.is_ok());
    return e.status().to_string();
  };
  // Another vocabulary of the same size: the synthetic SPM one.
  RandomLlamaSpec spec;
  const std::string other = dir.str() + "/other.gguf";
  REQUIRE(write_random_llama_gguf(other, spec).is_ok());
  std::string msg = refused(other, 4);
  CHECK_THAT(msg, Catch::Contains("must share the served model's vocabulary"));
  CHECK_THAT(msg, Catch::Contains("engine.draft_model: "));
  CHECK_THAT(msg, Catch::Contains("other.gguf: token "));
  // Another vocabulary size.
  spec.n_vocab = 600;
  REQUIRE(write_random_llama_gguf(other, spec).is_ok());
  msg = refused(other, 4);
  CHECK_THAT(msg, Catch::Contains("other.gguf: its vocabulary has 600 tokens, the served model's 512"));
  // Missing, not a GGUF file, and no draft tokens to draft.
  CHECK_THAT(refused(dir.str() + "/missing.gguf", 4), Catch::Contains("missing.gguf"));
  {
    std::ofstream f(dir.str() + "/junk.gguf");
    f << "not a gguf file at all, just text";
  }
  CHECK_THAT(refused(dir.str() + "/junk.gguf", 4), Catch::Contains("junk.gguf"));
  CHECK_THAT(refused(model, 0), Catch::Contains("draft_tokens is 0"));
}

// Found by the hostile pass: a model file truncated in place while the
// daemon served killed it with SIGBUS (the forward pass read through the
// file mapping). Both files, served and draft, now are read only at load.
TEST_CASE("the served and the draft model files truncated while serving: the same output, no fault",
          "[engine][speculative][draft]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  LARDER_REQUIRE_MODEL(q8, "stories260K-q8_0.gguf");
  TempDir dir;
  const std::string served = dir.str() + "/served.gguf", drafting = dir.str() + "/draft.gguf";
  std::filesystem::copy_file(model, served);
  std::filesystem::copy_file(q8, drafting);
  auto engine = make_engine(with_draft(served, drafting, 8));
  const GenerationRequest req = greedy_request(reference_prompt("once_upon"), 48);
  const Generated before = generate(*engine, req);
  REQUIRE(before.final.finish == FinishReason::kLength);
  std::filesystem::resize_file(served, 0);
  std::filesystem::resize_file(drafting, 100);
  const Generated after = generate(*engine, req);
  CHECK(after.tokens == before.tokens);
  // A prompt it has not seen: its pages are computed, not found in memory.
  const Generated other = generate(*engine, greedy_request(reference_prompt("long"), 8));
  CHECK(other.final.finish == FinishReason::kLength);
  CHECK(engine->stats().draft_model_tokens > 0);
}
