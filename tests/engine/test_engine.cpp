// Engine end to end without HTTP: greedy output against reference.json, the
// prefix cache in memory and on disk (restored logits bit-identical to a cold
// prefill), restart, corrupt records, a deleted cache directory, bad GGUF.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/backend.h"
#include "engine/cpu/forward.h"
#include "engine/kv/prefix_hash.h"
#include "engine/model/model.h"
#include "storage/rocksdb_store.h"
#include "tests/engine/engine_test_util.h"
#include "tests/support/log_capture.h"

using namespace larder;
using namespace larder::testing;

namespace {

std::vector<int32_t> json_ids(const nlohmann::json& a) { return a.get<std::vector<int32_t>>(); }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && !a.empty() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Keys of the full pages of `tokens`, as the engine computes them.
std::vector<PageKey> page_keys(const std::string& model_path, std::span<const int32_t> tokens, int n_pages) {
  auto model = Model::load(model_path).value();
  const auto& hp = model->hparams();
  KvLayout layout{hp.n_layer, hp.kv_dim(), 16, KvDtype::kF32};
  return prefix_chain(prefix_root(model->fingerprint(), layout, cpu_numerics_id(), ""), tokens, 16, n_pages);
}

}  // namespace

TEST_CASE("engine reproduces reference.json greedy tokens and top-5 logits (F32)", "[engine]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto engine = make_engine(options_for(model, ""));
  auto ref = load_reference();
  for (const auto& c : ref["cases"]) {
    INFO("case " << c["name"].get<std::string>());
    Generated g = generate(*engine, greedy_request(json_ids(c["prompt_tokens"]), 48));
    REQUIRE(g.final.finish == FinishReason::kLength);
    CHECK(g.tokens == json_ids(c["greedy_tokens"]));
    REQUIRE(g.final.prompt_logits.size() == 512);
    for (const auto& pair : c["top5_last_prompt_position"]) {
      int id = pair[0].get<int>();
      double want = pair[1].get<double>();
      CHECK(std::abs(g.final.prompt_logits[size_t(id)] - want) <= 1e-4 * std::abs(want));
    }
  }
}

TEST_CASE("a prompt restored from memory or RocksDB gives bit-identical logits", "[engine]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  std::vector<int32_t> prompt = reference_prompt("long");
  REQUIRE(prompt.size() == 299);
  // (299 - 1) / 16 = 18 full pages may come from the cache: 288 tokens.
  // The cold run computes 299 + 7 fed tokens = 306 positions, so page 18
  // (tokens 288..303) fills up and is sealed too: from memory, its first 10
  // tokens (288..297) are reused as well, leaving only the last prompt token
  // (298) to prefill. From disk only the 18 pages whose keys the prompt
  // determines are looked up (page 18's key needs its generated tokens).
  const int want_cached = 288;
  const int want_cached_memory = 298;
  // Every K/V dtype: the default f16 and q8_0 as well as f32.
  for (const char* dtype : {"f32", "f16", "q8_0"}) {
    INFO("kv_dtype " << dtype);
    EngineOptions o = options_for(model, "");
    o.cache.kv_dtype = dtype;
    TempDir dir;
    o.cache.disk.dir = dir.str();
    Generated cold, warm_memory;
    {
      auto engine = make_engine(o);
      cold = generate(*engine, greedy_request(prompt, 8));
      CHECK(cold.final.cached_tokens == 0);
      warm_memory = generate(*engine, greedy_request(prompt, 8));
      CHECK(warm_memory.final.cached_tokens == want_cached_memory);
      CHECK(engine->stats().pages_reused_memory == 18);
    }  // destructor: stop() flushes the page writes
    auto engine = make_engine(o);
    Generated warm_disk = generate(*engine, greedy_request(prompt, 8));
    CHECK(warm_disk.final.cached_tokens == want_cached);
    CHECK(engine->stats().pages_restored_disk == 18);
    CHECK(same_bits(cold.final.prompt_logits, warm_memory.final.prompt_logits));
    CHECK(same_bits(cold.final.prompt_logits, warm_disk.final.prompt_logits));
    CHECK(cold.tokens == warm_disk.tokens);
    CHECK(cold.text == warm_disk.text);
  }
}

TEST_CASE("K/V pages are f16 by default, half the bytes of f32, and q8_0 is 17/32 of f16", "[engine]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  // stories260K: 5 layers, kv_dim 32 (4 kv heads x 8); a page of 16 tokens
  // holds K and V of every layer: 5 x 2 x 16 rows.
  EngineOptions o = options_for(model, "");
  o.cache.kv_dtype = EngineOptions{}.cache.kv_dtype;
  CHECK(o.cache.kv_dtype == "f16");
  for (const auto& [dtype, row_bytes] : {std::pair<const char*, int>{"f32", 32 * 4}, {"f16", 32 * 2}, {"q8_0", 34}}) {
    INFO("kv_dtype " << dtype);
    o.cache.kv_dtype = dtype;
    auto engine = make_engine(o);
    CHECK(engine->cache_report().value().page_bytes == int64_t(5) * 2 * 16 * row_bytes);
  }
  for (const char* bad : {"F16", "q4_0", "", "f16 "}) {  // names are exact
    INFO("kv_dtype '" << bad << "'");
    o.cache.kv_dtype = bad;
    auto refused = Engine::create(o);
    REQUIRE(!refused.is_ok());
    CHECK(refused.status().message() == std::string("cache.kv_dtype = '") + bad + "': must be f32, f16 or q8_0");
  }
}

TEST_CASE("restart: a returning chat restores every full page of its earlier turns", "[engine]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  TempDir dir;
  std::vector<ChatMessage> chat = {{"user", "Once upon a time there was a cat named Tom. Tell me what he did."}};
  std::vector<int32_t> turn1_prompt, turn1_seq;
  std::string answer;
  {
    auto engine = make_engine(options_for(model, dir.str()));
    turn1_prompt = engine->tokenize(engine->render_chat(ChatRequest{chat, ""}).value(), engine->chat_uses_special_tokens());
    Generated g = generate(*engine, greedy_request(turn1_prompt, 40));
    answer = g.text;
    turn1_seq = turn1_prompt;
    turn1_seq.insert(turn1_seq.end(), g.tokens.begin(), g.tokens.end());
  }
  chat.push_back({"assistant", answer});
  chat.push_back({"user", "What happened next?"});

  auto engine = make_engine(options_for(model, dir.str()));
  std::vector<int32_t> turn2_prompt =
      engine->tokenize(engine->render_chat(ChatRequest{chat, ""}).value(), engine->chat_uses_special_tokens());
  Generated warm = generate(*engine, greedy_request(turn2_prompt, 24));

  // Pages sealed in turn 1 cover the positions whose K/V was computed: the
  // prompt and every generated token but the last (sampled, never fed back).
  const size_t n_computed1 = turn1_seq.size() - 1;
  size_t common = 0;
  while (common < n_computed1 && common < turn2_prompt.size() && turn1_seq[common] == turn2_prompt[common]) ++common;
  const int want = int(std::min(common / 16, (turn2_prompt.size() - 1) / 16) * 16);
  CHECK(warm.final.cached_tokens == want);
  CHECK(warm.final.cached_tokens >= int(turn1_prompt.size() / 16 * 16));
  CHECK(warm.final.cached_tokens > 0);

  auto cold_engine = make_engine(options_for(model, ""));
  Generated cold = generate(*cold_engine, greedy_request(turn2_prompt, 24));
  CHECK(cold.final.cached_tokens == 0);
  CHECK(cold.tokens == warm.tokens);
  CHECK(cold.text == warm.text);
  CHECK(same_bits(cold.final.prompt_logits, warm.final.prompt_logits));
}

TEST_CASE("control-token text in chat contents stays text unless the request allows it", "[engine]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto engine = make_engine(options_for(model, ""));
  ChatRequest req{{{"user", "a </s> b"}}, ""};
  const auto count_eos = [](const std::vector<int32_t>& ids) { return std::count(ids.begin(), ids.end(), 2); };
  // stories260K: plain format, EOS = 2 (</s>).
  CHECK(count_eos(engine->chat_prompt(req).value()) == 0);
  req.special_in_content = true;
  const std::vector<int32_t> parsed = engine->chat_prompt(req).value();
  CHECK(count_eos(parsed) == 1);
  CHECK(parsed == engine->tokenize(engine->render_chat(req).value(), true));
}

// The model samples ids that tokenizing its answer's text would not give
// back (at temperature 1.5 stories260K sometimes samples pieces the
// tokenizer would merge differently). The next turn's prompt must still
// start with the ids the KV pages hold: turn 1's prompt, then the sampled
// answer ids (engine/tokenizer/answer_memo.h), also after a restart, when
// the ids come from the answer record in RocksDB. Exception: the plain
// format renders "Assistant: " + an answer that starts with a letter or digit
// (a client-written answer, chat_format.h), so if the model's answer starts
// that way the history is not the text the model saw and cannot match past
// turn 1's prompt.
TEST_CASE("a returning chat reuses the ids the model sampled for its answer, also after a restart", "[engine]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  const std::vector<ChatMessage> turn1 = {{"user", "Once upon a time there was a cat named Tom. Tell me what he did."}};
  int seeds_spliced_over_other_ids = 0, seeds_spliced_without_space = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    INFO("seed " << seed);
    TempDir dir;
    std::vector<int32_t> turn1_seq, spliced;
    std::vector<ChatMessage> chat = turn1;
    bool spliceable = false, text_differs = false;
    {
      auto engine = make_engine(options_for(model, dir.str()));
      const auto canonical = [&](const std::vector<ChatMessage>& c) {
        return engine->tokenize(engine->render_chat(ChatRequest{c, ""}).value(), engine->chat_uses_special_tokens());
      };
      const std::vector<int32_t> prompt1 = engine->chat_prompt(ChatRequest{chat, ""}).value();
      CHECK(prompt1 == canonical(chat));  // nothing to splice yet
      GenerationRequest req = greedy_request(prompt1, 40);
      req.sampling.temperature = 1.5f;
      req.sampling.seed = seed;
      req.remember_answer = true;
      Generated g = generate(*engine, req);
      REQUIRE(g.final.finish == FinishReason::kLength);
      turn1_seq = prompt1;
      turn1_seq.insert(turn1_seq.end(), g.tokens.begin(), g.tokens.end());
      chat.push_back({"assistant", g.text});
      chat.push_back({"user", "What happened next?"});

      spliced = engine->chat_prompt(ChatRequest{chat, ""}).value();
      const std::vector<int32_t> retokenized = canonical(chat);
      REQUIRE(spliced.size() > turn1_seq.size());
      const unsigned char c0 = static_cast<unsigned char>(g.text[0]);
      spliceable = !(c0 < 0x80 && std::isalnum(c0));
      text_differs = !std::equal(turn1_seq.begin(), turn1_seq.end(), retokenized.begin());
      if (spliceable) {
        CHECK(std::vector<int32_t>(spliced.begin(), spliced.begin() + long(turn1_seq.size())) == turn1_seq);
        if (text_differs) ++seeds_spliced_over_other_ids;
        if (!g.text.starts_with(" ")) ++seeds_spliced_without_space;
      } else {
        CHECK_FALSE(std::equal(turn1_seq.begin(), turn1_seq.end(), spliced.begin()));
      }
    }  // stop() flushes the page and answer writes
    auto engine = make_engine(options_for(model, dir.str()));
    CHECK(engine->chat_prompt(ChatRequest{chat, ""}).value() == spliced);
    if (spliceable) {
      // Every full page of turn 1's computed positions (all but the last
      // sampled id) is restored from disk.
      Generated warm = generate(*engine, greedy_request(spliced, 4));
      CHECK(warm.final.cached_tokens == int((turn1_seq.size() - 1) / 16 * 16));
    }
  }
  // Exercised: an answer whose text tokenizes to other ids, and one that
  // does not start with a space (seed 2: "'m ..."), both spliced.
  CHECK(seeds_spliced_over_other_ids > 0);
  CHECK(seeds_spliced_without_space > 0);
}

TEST_CASE("answers of requests that do not ask for it, and changed answers, are not spliced", "[engine]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto engine = make_engine(options_for(model, ""));
  std::vector<ChatMessage> chat = {{"user", "Tell me a story."}};
  const std::vector<int32_t> prompt1 = engine->chat_prompt(ChatRequest{chat, ""}).value();
  GenerationRequest req = greedy_request(prompt1, 30);
  req.sampling.temperature = 1.5f;
  req.sampling.seed = 3;
  Generated g = generate(*engine, req);  // remember_answer = false (a /v1/completions request)
  chat.push_back({"assistant", g.text});
  chat.push_back({"user", "More."});
  const auto canonical = [&](const std::vector<ChatMessage>& c) {
    return engine->tokenize(engine->render_chat(ChatRequest{c, ""}).value(), engine->chat_uses_special_tokens());
  };
  CHECK(engine->chat_prompt(ChatRequest{chat, ""}).value() == canonical(chat));

  req.remember_answer = true;
  g = generate(*engine, req);
  chat[1].content = g.text + " (edited)";  // the client changed the answer: its text is tokenized
  CHECK(engine->chat_prompt(ChatRequest{chat, ""}).value() == canonical(chat));
}

TEST_CASE("corrupt and truncated records in RocksDB are dropped and recomputed", "[engine]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  std::vector<int32_t> prompt = reference_prompt("long");
  auto keys = page_keys(model, prompt, 18);
  for (int damage = 0; damage < 3; ++damage) {
    INFO("damage kind " << damage);
    TempDir dir;
    Generated cold;
    {
      auto engine = make_engine(options_for(model, dir.str()));
      cold = generate(*engine, greedy_request(prompt, 4));
    }
    {
      auto store = RocksDbPageStore::open(RocksDbStoreOptions{dir.str()}).value();
      auto rec = store->get(keys[2]).value();
      REQUIRE(rec.has_value());
      std::string bad = *rec;
      if (damage == 0) bad[bad.size() / 2] ^= 0x40;            // one payload bit flipped
      if (damage == 1) bad.resize(bad.size() / 3);             // torn write
      if (damage == 2) bad = "not a page record at all";       // garbage
      REQUIRE(store->put(keys[2], bad).is_ok());
      REQUIRE(store->flush().is_ok());
    }
    auto engine = make_engine(options_for(model, dir.str()));
    Generated again = generate(*engine, greedy_request(prompt, 4));
    CHECK(again.final.finish == FinishReason::kLength);
    CHECK(again.final.cached_tokens == 2 * 16);   // pages 0 and 1 verified, page 2 dropped
    CHECK(engine->stats().records_rejected == 1);
    Result<CacheReport> report = engine->cache_report();
    REQUIRE(report.is_ok());
    REQUIRE(report->tiers.back().name == "disk");
    CHECK(report->tiers.back().evictions[size_t(EvictReason::kCorrupt)] == 1);
    CHECK(same_bits(cold.final.prompt_logits, again.final.prompt_logits));
    CHECK(cold.tokens == again.tokens);
    engine->flush_storage();
    engine.reset();
    // The recomputed page was written again, so the record is whole once more.
    auto store = RocksDbPageStore::open(RocksDbStoreOptions{dir.str()}).value();
    auto fixed = store->get(keys[2]).value();
    REQUIRE(fixed.has_value());
    CHECK(fixed->size() > 1000);
  }
}

TEST_CASE("deleting the cache directory while running loses cache hits, not requests", "[engine]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  std::vector<int32_t> prompt = reference_prompt("long");
  TempDir dir;
  auto engine = make_engine(options_for(model, dir.str()));
  Generated first = generate(*engine, greedy_request(prompt, 4));
  engine->flush_storage();
  std::filesystem::remove_all(dir.path());
  std::vector<int32_t> other(prompt.begin(), prompt.begin() + 100);
  for (int i = 0; i < 3; ++i) {
    Generated g = generate(*engine, greedy_request(other, 4));
    CHECK(g.final.finish == FinishReason::kLength);
    CHECK(g.tokens.size() == 4);
  }
  Generated again = generate(*engine, greedy_request(prompt, 4));
  CHECK(again.tokens == first.tokens);
  engine->flush_storage();
  engine.reset();
  // A restart on the same (re-created) directory works.
  auto engine2 = make_engine(options_for(model, dir.str()));
  Generated after = generate(*engine2, greedy_request(prompt, 4));
  CHECK(after.tokens == first.tokens);
}

TEST_CASE("stop strings, max_tokens, context length and cancellation", "[engine]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto opts = options_for(model, "");
  opts.n_ctx = 64;
  auto engine = make_engine(opts);
  auto ref = load_reference();
  const auto& once = ref["cases"][0];
  REQUIRE(once["name"] == "once_upon");
  std::vector<int32_t> prompt = json_ids(once["prompt_tokens"]);
  std::string ref_text = once["greedy_text"].get<std::string>();  // ", there was a little girl named Lily. ..."

  SECTION("stop string: none of its text is sent") {
    auto req = greedy_request(prompt, 48);
    req.stop = {"Lily"};
    Generated g = generate(*engine, req);
    CHECK(g.final.finish == FinishReason::kStop);
    CHECK(g.final.stopped_by_string);
    CHECK(g.text == ", there was a little girl named ");
  }
  SECTION("max_tokens") {
    Generated g = generate(*engine, greedy_request(prompt, 3));
    CHECK(g.final.finish == FinishReason::kLength);
    CHECK_FALSE(g.final.stopped_by_string);
    CHECK(g.final.completion_tokens == 3);
    CHECK(g.tokens == std::vector<int32_t>{432, 383, 286});  // reference.json greedy_tokens[0:3]
  }
  SECTION("context length ends generation with finish length") {
    Generated g = generate(*engine, greedy_request(prompt, -1));
    CHECK(g.final.finish == FinishReason::kLength);
    CHECK(g.final.prompt_tokens + g.final.completion_tokens == 64);
  }
  SECTION("a prompt as long as the context is refused") {
    std::vector<int32_t> longp(64, 300);
    longp[0] = 1;
    Generated g = generate(*engine, greedy_request(longp, 4));
    CHECK(g.final.finish == FinishReason::kError);
  }
}

// Found in hostile testing: after a stop string, the detokenizer's held
// bytes (an unfinished character after the stop) were flushed into the
// answer at its end.
TEST_CASE("nothing after a stop string is sent, not even a held unfinished character", "[engine]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto engine = make_engine(options_for(model, ""));
  // The byte token 0xC3 (a UTF-8 lead byte), forced: each one after the
  // first makes the one before it ill-formed (U+FFFD), and the last is held
  // (then dropped: max_tokens cut it unfinished).
  const int32_t lead = 3 + 0xC3;  // stories260K's byte tokens are ids 3..258 (SentencePiece byte fallback)
  const std::vector<int32_t> prompt = engine->tokenize("Once upon a time", true);
  GenerationRequest req = greedy_request(prompt, 6);
  req.logit_bias = {{lead, 100.0f}};
  Generated all = generate(*engine, req);
  CHECK(all.final.finish == FinishReason::kLength);
  CHECK(all.text == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // five
  req.stop = {"\xEF\xBF\xBD"};
  Generated cut = generate(*engine, req);
  CHECK(cut.final.finish == FinishReason::kStop);
  CHECK(cut.text.empty());
  req.stop = {"\xEF\xBF\xBD\xEF\xBF\xBD"};
  cut = generate(*engine, req);
  CHECK(cut.final.finish == FinishReason::kStop);
  CHECK(cut.text.empty());
}

TEST_CASE("a cancelled request keeps the pages it made", "[engine]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto engine = make_engine(options_for(model, ""));
  auto ref = load_reference();
  std::vector<int32_t> prompt = json_ids(ref["cases"][0]["prompt_tokens"]);
  auto sink = std::make_shared<CollectSink>();
  sink->cancel_after(40);
  auto req = greedy_request(prompt, 200);
  engine->submit(req, sink);
  REQUIRE(sink->wait());
  CHECK(sink->final_.finish == FinishReason::kCancelled);
  const auto& gen = sink->final_.output_tokens;
  REQUIRE(gen.size() >= 40);
  // The prompt plus what was generated, resent: every position computed is
  // reused (whole pages, then the kept partial tail page).
  std::vector<int32_t> resend = prompt;
  resend.insert(resend.end(), gen.begin(), gen.end());
  Generated g = generate(*engine, greedy_request(resend, 2));
  const int n_computed = int(resend.size()) - 1;  // the last token was never fed
  CHECK(g.final.cached_tokens == n_computed);
  CHECK(g.final.cached_tokens > 0);
}

TEST_CASE("a malformed GGUF is refused with the file named", "[engine]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  TempDir dir;
  std::string bad = dir.str() + "/truncated.gguf";
  {
    std::ifstream in(model, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(bad, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size() / 2));
  }
  auto e = Engine::create(options_for(bad, ""));
  REQUIRE(!e.is_ok());
  CHECK(e.status().message().find("truncated.gguf") != std::string::npos);
  auto missing = Engine::create(options_for(dir.str() + "/nope.gguf", ""));
  REQUIRE(!missing.is_ok());
  CHECK(missing.status().message().find("nope.gguf") != std::string::npos);
}

TEST_CASE("concurrent requests decode together and each equals its solo run", "[engine]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto ref = load_reference();
  for (int max_running : {1, 8}) {
    INFO("max_running " << max_running);
    auto opts = options_for(model, "");
    opts.max_running = max_running;
    auto engine = make_engine(opts);
    std::vector<std::shared_ptr<CollectSink>> sinks;
    for (const auto& c : ref["cases"]) {
      auto sink = std::make_shared<CollectSink>();
      engine->submit(greedy_request(json_ids(c["prompt_tokens"]), 48), sink);
      sinks.push_back(sink);
    }
    size_t i = 0;
    for (const auto& c : ref["cases"]) {
      INFO("case " << c["name"].get<std::string>());
      REQUIRE(sinks[i]->wait());
      // reference.json's greedy tokens: batching must not change any of them.
      CHECK(sinks[i]->final_.output_tokens == json_ids(c["greedy_tokens"]));
      ++i;
    }
  }
}

TEST_CASE("write_back: pages reach disk at shutdown (or on eviction) and restore after a restart", "[engine]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  std::vector<int32_t> prompt = reference_prompt("long");
  auto keys = page_keys(model, prompt, 18);
  TempDir dir;
  auto opts = options_for(model, dir.str());
  opts.cache.write_through = false;
  Generated cold;
  {
    auto engine = make_engine(opts);
    cold = generate(*engine, greedy_request(prompt, 4));
    engine->flush_storage();
    CHECK(engine->stats().pages_written == 0);  // nothing evicted yet: all in memory
    engine->stop();                             // shutdown writes them back
    // 299 prompt tokens + 3 fed generated tokens = 302 computed: 18 full pages.
    CHECK(engine->stats().pages_written == 18);
  }
  {
    auto store = RocksDbPageStore::open(RocksDbStoreOptions{dir.str()}).value();
    CHECK(store->get(keys[0]).value().has_value());
    CHECK(store->get(keys[17]).value().has_value());
  }
  auto engine = make_engine(opts);
  Generated warm = generate(*engine, greedy_request(prompt, 4));
  CHECK(warm.final.cached_tokens == 288);
  CHECK(same_bits(cold.final.prompt_logits, warm.final.prompt_logits));

  // Eviction writes back too: a pool of exactly one context's worth of pages
  // (512 / 16 + 1 = 33) forces the first prompt's cached pages out.
  TempDir dir2;
  auto small = options_for(model, dir2.str());
  small.cache.write_through = false;
  small.cache.device.budget_bytes = 33 * 20480;  // page bytes: 5 layers * 2 * 16 * 32 * 4 = 20480
  auto e2 = make_engine(small);
  generate(*e2, greedy_request(prompt, 4));
  std::vector<int32_t> other(prompt.rbegin(), prompt.rend());  // different tokens, 299 long
  generate(*e2, greedy_request(other, 4));
  e2->flush_storage();
  CHECK(e2->stats().pages_written >= 4);  // some of the first prompt's pages were evicted and written
}

TEST_CASE("the CUDA backend refuses model features it does not compute", "[engine]") {
  LlamaHparams hp;
  hp.architecture = "llama";
  CHECK(cuda_supports_model(hp).is_ok());
  hp.architecture = "qwen2";
  hp.has_qkv_bias = true;
  Status st = cuda_supports_model(hp);
  CHECK(st.code() == StatusCode::kUnsupported);
  CHECK(st.message().find("Q/K/V biases") != std::string::npos);
  CHECK(st.message().find("qwen2") != std::string::npos);
  hp = LlamaHparams{};
  hp.has_qk_norm = true;
  hp.rope_freq_scale = 0.25f;
  st = cuda_supports_model(hp);
  CHECK(st.message().find("Q/K RMSNorm, RoPE scaling") != std::string::npos);
}

TEST_CASE("a cache miss part-way names the first token that differs from the earlier request", "[engine]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto engine = make_engine(options_for(model, ""));
  std::vector<int32_t> prompt = reference_prompt("long");
  Generated first = generate(*engine, greedy_request(prompt, 2));
  CHECK(first.final.cache_divergence_pos == -1);  // nothing earlier to compare with
  std::vector<int32_t> edited = prompt;
  edited[100] = edited[100] == 300 ? 301 : 300;  // token 100 lies in page 6 (tokens 96..111)
  {
    LogCapture cap;  // a per-request diagnostic: debug level, not info
    Generated second = generate(*engine, greedy_request(edited, 2));
    CHECK(second.final.cached_tokens == 100);       // pages 0..5, and tokens 96..99 of page 6
    CHECK(second.final.cache_divergence_pos == 100);
    CHECK(cap.count("differs from an earlier request") == 0);
  }
  Generated third = generate(*engine, greedy_request(edited, 2));
  CHECK(third.final.cached_tokens == 298);        // a full hit (18 pages + 10 of the kept tail): nothing to explain
  CHECK(third.final.cache_divergence_pos == -1);
  LogCapture cap;
  spdlog::default_logger()->set_level(spdlog::level::debug);
  edited[150] = edited[150] == 300 ? 301 : 300;    // page 9 (tokens 144..159)
  Generated fourth = generate(*engine, greedy_request(edited, 2));
  CHECK(fourth.final.cache_divergence_pos == 150);
  CHECK(cap.count("differs from an earlier request with the same start at token 150") == 1);
}

// Seen in hostile testing: a second user sending "cache_salt": "B" got 336
// of 352 tokens from the first user's "cache_salt": "A" prefix, so
// cached_tokens confirmed a guess of what someone else sent. Pages are now
// keyed under a root salted by the request (vLLM's semantics), in memory and
// on disk.
TEST_CASE("requests with different cache_salt never share pages, also after a restart", "[engine]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  TempDir dir;
  std::vector<int32_t> prompt;
  std::mt19937 rng(7);
  prompt.push_back(1);  // BOS
  for (int i = 0; i < 100; ++i) prompt.push_back(int32_t(3 + rng() % 500));
  // Full pages a hit may cover: (101 - 1) / 16 = 6 pages = 96 tokens. In
  // memory the first run's partial tail page (101 + 1 fed = 102 positions:
  // 6 pages + 6) gives 4 more: all but the last prompt token.
  const int full = 96;
  const int in_memory = 100;
  auto salted = [&](const std::string& salt) {
    GenerationRequest r = greedy_request(prompt, 2);
    r.cache_salt = salt;
    return r;
  };
  std::vector<int32_t> tokens_a;
  {
    auto engine = make_engine(options_for(model, dir.str()));
    Generated a = generate(*engine, salted("A"));
    CHECK(a.final.cached_tokens == 0);
    tokens_a = a.tokens;
    CHECK(generate(*engine, salted("B")).final.cached_tokens == 0);
    CHECK(generate(*engine, salted("")).final.cached_tokens == 0);
    Generated again = generate(*engine, salted("A"));
    CHECK(again.final.cached_tokens == in_memory);
    CHECK(again.tokens == tokens_a);
    CHECK(generate(*engine, salted("B")).final.cached_tokens == in_memory);
    CHECK(generate(*engine, salted("")).final.cached_tokens == in_memory);
    engine->flush_storage();
  }
  // From disk: each salt finds its own pages (whole ones: partial tails are
  // never written); a new salt finds none.
  auto engine = make_engine(options_for(model, dir.str()));
  CHECK(generate(*engine, salted("C")).final.cached_tokens == 0);
  Generated disk_a = generate(*engine, salted("A"));
  CHECK(disk_a.final.cached_tokens == full);
  CHECK(disk_a.tokens == tokens_a);
  CHECK(engine->stats().pages_restored_disk == 6);
}
