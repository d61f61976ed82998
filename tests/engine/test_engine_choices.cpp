// n > 1 choices of one prompt in the real engine (stories260K): the prompt
// is prefilled once and its pages shared (the counters say so, numbers
// worked out by hand from the prompt length and the 16-token pages), each
// choice gives what an n = 1 request with its seed gives, alone or
// preempted, and cancelling the request ends every choice.
#include <map>

#include <catch2/catch.hpp>

#include "engine/engine.h"
#include "tests/engine/engine_test_util.h"
#include "tests/support/skip.h"

using namespace larder;
using namespace larder::testing;

namespace {

// Collects the events of every choice of one request.
class ChoiceSink : public GenerationSink {
 public:
  explicit ChoiceSink(int n_choices) : n_choices_(n_choices) {}
  void on_event(GenerationEvent ev) override {
    std::lock_guard<std::mutex> lk(mu_);
    const int c = ev.choice;
    text[c] += ev.text;
    if (ev.echo) {
      ++n_echo[c];
      echo_logprobs[c] = ev.logprobs;
    }
    if (!ev.done) {
      ++n_text_events_;
      if (cancel_after_ > 0 && n_text_events_ >= cancel_after_) cancel();
      return;
    }
    ++n_done[c];
    finals[c] = std::move(ev);
    cv_.notify_all();
  }
  // Waits until every choice ended (fails after 60 s).
  bool wait() {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, std::chrono::seconds(60), [&] { return int(finals.size()) >= n_choices_; });
  }
  void cancel_after(int n_events) { cancel_after_ = n_events; }
  std::map<int, std::string> text;
  std::map<int, GenerationEvent> finals;
  std::map<int, int> n_done;
  std::map<int, int> n_echo;
  std::map<int, std::vector<TokenLogprob>> echo_logprobs;

 private:
  int n_choices_;
  std::mutex mu_;
  std::condition_variable cv_;
  int n_text_events_ = 0;
  int cancel_after_ = 0;
};

// Sampled (not greedy), so that the choices differ by their seeds.
GenerationRequest sampled_request(std::vector<int32_t> prompt, int max_tokens, uint64_t seed, int n) {
  GenerationRequest r;
  r.prompt_tokens = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 1.0f;
  r.sampling.top_k = 0;
  r.sampling.top_p = 1;
  r.sampling.min_p = 0;
  r.sampling.seed = seed;
  r.ignore_eos = true;
  r.n = n;
  return r;
}

std::vector<int32_t> first_tokens(const std::vector<int32_t>& all, size_t n) {
  return std::vector<int32_t>(all.begin(), all.begin() + long(n));
}

// What four n = 1 requests with seeds seed .. seed + 3 give (a fresh engine
// with the whole pool).
std::vector<std::vector<int32_t>> solo_outputs(const std::string& model, const std::vector<int32_t>& prompt,
                                               int max_tokens, uint64_t seed, int n) {
  auto engine = make_engine(options_for(model, ""));
  std::vector<std::vector<int32_t>> out;
  for (int j = 0; j < n; ++j) {
    Generated g = generate(*engine, sampled_request(prompt, max_tokens, seed + uint64_t(j), 1));
    REQUIRE(g.final.finish == FinishReason::kLength);
    out.push_back(g.tokens);
  }
  return out;
}

}  // namespace

TEST_CASE("n = 4 prefills the prompt once and shares its full pages", "[engine][choices]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> prompt = reference_prompt("long");
  REQUIRE(prompt.size() == 299);
  constexpr int kMaxTokens = 12;
  const std::vector<std::vector<int32_t>> solo = solo_outputs(model, prompt, kMaxTokens, 42, 4);

  auto engine = make_engine(options_for(model, ""));
  auto sink = std::make_shared<ChoiceSink>(4);
  engine->submit(sampled_request(prompt, kMaxTokens, 42, 4), sink);
  REQUIRE(sink->wait());
  for (int j = 0; j < 4; ++j) {
    INFO("choice " << j);
    CHECK(sink->n_done[j] == 1);
    CHECK(sink->finals[j].finish == FinishReason::kLength);
    CHECK(sink->finals[j].prompt_tokens == 299);
    CHECK(sink->finals[j].completion_tokens == kMaxTokens);
    // Choice j draws with seed 42 + j: what an n = 1 request with that seed draws.
    CHECK(sink->finals[j].output_tokens == solo[size_t(j)]);
  }
  // The seeds differ, so (at temperature 1 over 512 tokens) the choices do.
  CHECK(solo[0] != solo[1]);
  const Engine::Stats st = engine->stats();
  // 299 prompt positions computed once (not 4 x 299 = 1196).
  CHECK(st.prefill_tokens == 299);
  // 299 = 18 x 16 + 11: 18 full pages shared by each of the 3 forked
  // choices, and the partial page of 11 tokens copied for each.
  CHECK(st.choice_pages_shared == 3 * 18);
  CHECK(st.choice_pages_copied == 3);
  CHECK(st.requests_total == 1);
  Result<CacheReport> rep = engine->cache_report();
  REQUIRE(rep.is_ok());
  CHECK(rep->prefill_tokens == 299);
  CHECK(rep->choice_pages_shared == 54);
  CHECK(rep->choice_pages_copied == 3);
}

TEST_CASE("a prompt that ends on a page boundary shares every page and copies none", "[engine][choices]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> prompt = first_tokens(reference_prompt("long"), 48);  // 3 full pages
  auto engine = make_engine(options_for(model, ""));
  GenerationRequest greedy = greedy_request(prompt, 20);
  greedy.return_prompt_logits = false;
  const Generated one = generate(*engine, greedy);
  REQUIRE(one.final.finish == FinishReason::kLength);

  auto fresh = make_engine(options_for(model, ""));
  auto sink = std::make_shared<ChoiceSink>(3);
  greedy.n = 3;
  fresh->submit(greedy, sink);
  REQUIRE(sink->wait());
  for (int j = 0; j < 3; ++j) {
    INFO("choice " << j);
    // Greedy: every choice is the n = 1 answer.
    CHECK(sink->finals[j].output_tokens == one.tokens);
    CHECK(sink->text[j] == one.text);
  }
  CHECK(fresh->stats().prefill_tokens == 48);
  CHECK(fresh->stats().choice_pages_shared == 2 * 3);
  CHECK(fresh->stats().choice_pages_copied == 0);
}

TEST_CASE("preempted choices resume with the output of their seed", "[engine][choices]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> all = reference_prompt("long");
  const std::vector<int32_t> prompt = first_tokens(all, 40);  // 2 full pages + 8 tokens
  constexpr int kMaxTokens = 250;
  const std::vector<std::vector<int32_t>> solo = solo_outputs(model, prompt, kMaxTokens, 7, 4);

  // A pool of one context (512 / 16 + 1 = 33 pages of 20480 bytes): each
  // choice ends holding pages_for(290) = 19 pages, 2 of them shared, so the
  // four need 2 + 4 x 17 = 70: the youngest are preempted as they decode.
  EngineOptions small = options_for(model, "");
  small.cache.device.budget_bytes = 33 * 20480;
  small.max_running = 4;
  auto engine = make_engine(small);
  auto sink = std::make_shared<ChoiceSink>(4);
  engine->submit(sampled_request(prompt, kMaxTokens, 7, 4), sink);
  REQUIRE(sink->wait());
  for (int j = 0; j < 4; ++j) {
    INFO("choice " << j);
    CHECK(sink->n_done[j] == 1);
    CHECK(sink->finals[j].finish == FinishReason::kLength);
    CHECK(sink->finals[j].error.empty());
    CHECK(sink->finals[j].output_tokens == solo[size_t(j)]);
  }
  CHECK(engine->stats().preemptions > 0);
  CHECK(engine->stats().choice_pages_copied == 3);
}

TEST_CASE("a choice with no page for its copy runs as a request of its own", "[engine][choices]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> all = reference_prompt("long");
  std::vector<int32_t> prompt = all;
  prompt.insert(prompt.end(), all.begin() + 1, all.begin() + 202);
  REQUIRE(prompt.size() == 500);  // 31 full pages + 4 tokens
  constexpr int kMaxTokens = 12;  // the context's room: 512 - 500
  const std::vector<std::vector<int32_t>> solo = solo_outputs(model, prompt, kMaxTokens, 3, 4);

  // 33 pages: the prompt holds 32, so choice 1 gets the last free page for
  // its copy and choices 2 and 3 wait in the queue, then find the 31 full
  // pages cached.
  EngineOptions small = options_for(model, "");
  small.cache.device.budget_bytes = 33 * 20480;
  auto engine = make_engine(small);
  auto sink = std::make_shared<ChoiceSink>(4);
  engine->submit(sampled_request(prompt, kMaxTokens, 3, 4), sink);
  REQUIRE(sink->wait());
  for (int j = 0; j < 4; ++j) {
    INFO("choice " << j);
    CHECK(sink->finals[j].finish == FinishReason::kLength);
    CHECK(sink->finals[j].output_tokens == solo[size_t(j)]);
  }
  CHECK(engine->stats().choice_pages_shared == 31);
  CHECK(engine->stats().choice_pages_copied == 1);
  // The two queued choices prefill little: the full pages and most of the
  // last one come from the cache.
  CHECK(engine->stats().prefill_tokens < 500 + 2 * 16);
}

// Found in hostile testing: with echo and logprobs, a choice that could not
// fork (max_running) ran as a request of its own that prefilled the whole
// prompt again with every row's logits (8 prompts of 2048 tokens, n = 8:
// 20 s in which no other request got a step). It takes the prompt's echo
// from the choice that prefilled it.
TEST_CASE("choices that cannot fork take the echo and prompt logprobs of the one that prefilled",
          "[engine][choices]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> prompt = reference_prompt("long");
  REQUIRE(prompt.size() == 299);
  EngineOptions o = options_for(model, "");
  o.max_running = 2;  // choice 1 forks; choices 2 and 3 cannot
  for (int max_tokens : {0, 3}) {
    INFO("max_tokens " << max_tokens);
    auto engine = make_engine(o);
    GenerationRequest r = sampled_request(prompt, max_tokens, 7, 4);
    r.echo = true;
    r.logprobs = 2;
    auto sink = std::make_shared<ChoiceSink>(4);
    engine->submit(std::move(r), sink);
    REQUIRE(sink->wait());
    for (int j = 0; j < 4; ++j) {
      INFO("choice " << j);
      CHECK(sink->finals[j].finish == FinishReason::kLength);
      CHECK(sink->finals[j].completion_tokens == max_tokens);
      CHECK(sink->n_echo[j] == 1);
      REQUIRE(sink->echo_logprobs[j].size() == 299);
      for (size_t k = 1; k < 299; ++k) {
        CHECK(sink->echo_logprobs[j][k].logprob == sink->echo_logprobs[0][k].logprob);
        CHECK(sink->echo_logprobs[j][k].top.size() == 2);
      }
    }
    CHECK(engine->stats().choice_pages_shared == 18);  // choice 1 only: 299 = 18 x 16 + 11
    if (max_tokens == 0) {
      CHECK(engine->stats().prefill_tokens == 299);  // once, not 3 x 299 = 897
    } else {
      // The queued two recompute at most their partial last page each.
      CHECK(engine->stats().prefill_tokens <= 299 + 2 * 16);
    }
  }
}

TEST_CASE("cancelling an n = 4 request ends all four choices", "[engine][choices]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> prompt = first_tokens(reference_prompt("long"), 40);
  auto engine = make_engine(options_for(model, ""));
  auto sink = std::make_shared<ChoiceSink>(4);
  sink->cancel_after(6);
  engine->submit(sampled_request(prompt, 400, 1, 4), sink);
  REQUIRE(sink->wait());
  for (int j = 0; j < 4; ++j) {
    INFO("choice " << j);
    CHECK(sink->n_done[j] == 1);
    CHECK(sink->finals[j].finish == FinishReason::kCancelled);
    CHECK(sink->finals[j].completion_tokens < 400);
  }
  // The engine serves on, with every page back.
  Generated after = generate(*engine, greedy_request(prompt, 5));
  CHECK(after.final.finish == FinishReason::kLength);
}

TEST_CASE("choices of a batch carry first_choice + j", "[engine][choices]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<int32_t> all = reference_prompt("long");
  auto engine = make_engine(options_for(model, ""));
  auto sink = std::make_shared<ChoiceSink>(4);
  std::vector<std::pair<GenerationRequest, std::shared_ptr<GenerationSink>>> batch;
  batch.emplace_back(sampled_request(first_tokens(all, 20), 5, 9, 2), sink);
  batch.emplace_back(sampled_request(first_tokens(all, 30), 5, 9, 2), sink);
  batch.back().first.first_choice = 2;
  engine->submit_batch(std::move(batch));
  REQUIRE(sink->wait());
  REQUIRE(sink->finals.size() == 4);
  CHECK(sink->finals[0].prompt_tokens == 20);
  CHECK(sink->finals[1].prompt_tokens == 20);
  CHECK(sink->finals[2].prompt_tokens == 30);
  CHECK(sink->finals[3].prompt_tokens == 30);
  for (int c = 0; c < 4; ++c) CHECK(sink->n_done[c] == 1);
  // Two prompts, each prefilled once.
  CHECK(engine->stats().prefill_tokens == 20 + 30);
  CHECK(engine->stats().requests_total == 2);
}
