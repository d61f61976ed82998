// A chat "from the wild" through the engine: random-weight models with the
// real byte-level BPE vocabulary ids, control tokens and Jinja chat templates
// of Llama 3.2 and Qwen 2.5 (tests/support/chat_models.h), against what
// Python's Jinja2 and llama.cpp make of the same GGUF files
// (tests/engine/fixtures/chat_<name>.json):
//   - the rendered prompt equals Jinja2's byte for byte, and chat_prompt's
//     ids equal llama.cpp's tokenization of that text (control tokens parsed,
//     BOS once);
//   - the greedy answer (F32 weights and KV on both sides) has llama.cpp's
//     ids, ends where llama.cpp's ends (an end-of-generation token, finish
//     stop) and streams llama.cpp's detokenized text;
//   - every id llama.cpp treats as end of generation is one here, and no other;
//   - the second turn (the answer sent back as text, one more user message)
//     renders as Jinja2 renders it, its prompt starts with turn 1's prompt and
//     the answer's sampled ids, and its cached_tokens covers turn 1's full pages.
//
// Regenerating the fixtures (needs node-llama-cpp 3.21.1, e.g. bench/node_modules,
// and python3-jinja2): scripts/chat/make_chat_reference.sh build-dir
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/engine_test_util.h"
#include "tests/support/chat_models.h"
#include "tests/support/fixed_clock.h"
#include "tests/support/random_llama.h"

using namespace larder;
using namespace larder::testing;



// Hidden: writes every chat model and a manifest into $LARDER_CHAT_MODEL_OUT
// (for scripts/chat/llama_cpp_chat_reference.mjs and tests/e2e).
// $LARDER_CHAT_SEED, when set, replaces every model's seed (seed search).
TEST_CASE("write the chat models", "[.chat-model-write]") {
  const char* out = std::getenv("LARDER_CHAT_MODEL_OUT");
  REQUIRE(out != nullptr);
  std::filesystem::create_directories(out);
  const char* seed = std::getenv("LARDER_CHAT_SEED");
  nlohmann::json models = nlohmann::json::array();
  for (ChatModel m : chat_models()) {
    if (seed != nullptr) m.spec.seed = std::strtoull(seed, nullptr, 10);
    const std::string file = m.name + ".gguf";
    const Status st = write_random_llama_gguf(std::string(out) + "/" + file, m.spec);
    INFO(st.to_string());
    REQUIRE(st.is_ok());
    const std::string tmpl = (std::filesystem::path(__FILE__).parent_path().parent_path() / "template" /
                              "fixtures" / "templates" / (m.name + ".jinja"))
                                 .string();
    models.push_back({{"name", m.name}, {"shaped_as", m.shaped_as}, {"file", file}, {"seed", m.spec.seed},
                      {"n_vocab", m.spec.n_vocab}, {"template", tmpl}, {"bos_token", m.bos_token},
                      {"eos_token", m.eos_token}});
  }
  std::ofstream(std::string(out) + "/manifest.json") << nlohmann::json{{"models", models}}.dump(2) << "\n";
}



namespace {

nlohmann::json read_chat_fixture(const std::string& name) {
  std::ifstream in(chat_fixture_dir() + "/chat_" + name + ".json");
  REQUIRE(in.good());  // committed next to this test
  return nlohmann::json::parse(in);
}

std::vector<ChatMessage> messages_of(const nlohmann::json& a) {
  std::vector<ChatMessage> out;
  for (const auto& m : a) out.emplace_back(m.at("role").get<std::string>(), m.at("content").get<std::string>());
  return out;
}

std::vector<int32_t> ids_of(const nlohmann::json& a) { return a.get<std::vector<int32_t>>(); }

std::string temp_model_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("larder_chat_" + std::to_string(::getpid()) + "_" + name + ".gguf"))
      .string();
}

EngineOptions chat_options(const std::string& model, const std::string& cache_dir) {
  EngineOptions o = options_for(model, cache_dir);
  o.n_ctx = 1024;
  o.strftime_now = fixed_strftime;
  return o;
}

// expect_splice: whether the model's answer is valid UTF-8 (so the next
// turn reuses its ids), as the fixture's seed makes it.
void check_chat_model(const std::string& name, bool expect_splice) {
  INFO("model " << name);
  const ChatModel& cm = chat_model(name);
  const nlohmann::json fx = read_chat_fixture(name);
  REQUIRE(fx.at("seed").get<uint64_t>() == cm.spec.seed);
  const std::string path = temp_model_path(name);
  REQUIRE(write_random_llama_gguf(path, cm.spec).is_ok());
  TempDir dir;
  {
    auto created = Engine::create(chat_options(path, dir.str()));
    INFO(created.status().to_string());
    REQUIRE(created.is_ok());
    std::unique_ptr<Engine> engine = std::move(created).value();

    // The end-of-generation set over the whole vocabulary.
    auto gguf = GgufFile::open(path);
    REQUIRE(gguf);
    auto tok = Tokenizer::from_gguf(**gguf);
    REQUIRE(tok);
    std::vector<int32_t> eog;
    for (int32_t id = 0; id < (*tok)->n_vocab(); ++id) {
      if ((*tok)->is_end_of_generation(id)) eog.push_back(id);
    }
    CHECK(eog == ids_of(fx.at("eog_ids")));

    // Turn 1: the prompt.
    const std::vector<ChatMessage> turn1 = messages_of(fx.at("turn1").at("messages"));
    CHECK(engine->render_chat(ChatRequest{turn1, ""}).value() == fx.at("turn1").at("rendered").get<std::string>());
    const std::vector<int32_t> prompt1 = engine->chat_prompt(ChatRequest{turn1, ""}).value();
    CHECK(prompt1 == ids_of(fx.at("turn1").at("prompt_ids")));

    // Turn 1: the greedy answer, streamed, ending as llama.cpp's ends.
    const nlohmann::json& steps = fx.at("steps");
    const nlohmann::json& answer = fx.at("answer");
    const std::vector<int32_t> ref_ids = ids_of(answer.at("ids"));
    const bool ref_eog = answer.at("ends_with_eog").get<bool>();
    double min_gap = 1e9;
    for (const auto& st : steps) min_gap = std::min(min_gap, st.at("gap").get<double>());
    // The seed was chosen so that llama.cpp's answer has no near-tie (F32
    // on both sides agrees to ~1e-5 in log p), so the ids must be equal.
    REQUIRE(min_gap > 1e-3);
    GenerationRequest req = greedy_request(prompt1, fx.at("max_steps").get<int>());
    req.ignore_eos = false;
    req.remember_answer = true;
    auto sink = std::make_shared<CollectSink>();
    engine->submit(std::move(req), sink);
    REQUIRE(sink->wait());
    const GenerationEvent& fin = sink->final_;
    CHECK(fin.output_tokens == ref_ids);
    CHECK(fin.finish == (ref_eog ? FinishReason::kStop : FinishReason::kLength));
    CHECK(sink->text_ == answer.at("text").get<std::string>());
    if (ref_eog) {
      CHECK((*tok)->is_end_of_generation(fin.output_tokens.back()));
      CHECK((*tok)->find_token(cm.end_of_turn) == ref_ids.back());
    }
    // Each streamed delta names the ids it covers: together, the answer's ids
    // without its end-of-generation token and without the control tokens
    // (reserved ones, here), which write no text and so send no delta.
    const std::vector<int32_t> content_ids(ref_ids.begin(), ref_ids.end() - (ref_eog ? 1 : 0));
    std::vector<int32_t> text_ids;
    for (int32_t id : content_ids) {
      if (!(*tok)->decode(std::vector<int32_t>{id}).empty()) text_ids.push_back(id);
    }
    CHECK(sink->tokens_ == text_ids);

    // Turn 2: the answer comes back as text, with one more user message.
    const std::vector<ChatMessage> turn2 = messages_of(fx.at("turn2").at("messages"));
    REQUIRE(turn2.size() == turn1.size() + 2);
    CHECK(turn2[turn1.size()].content == sink->text_);
    const std::string rendered2 = engine->render_chat(ChatRequest{turn2, ""}).value();
    CHECK(rendered2 == fx.at("turn2").at("rendered").get<std::string>());
    const std::vector<int32_t> prompt2 = engine->chat_prompt(ChatRequest{turn2, ""}).value();
    const std::vector<int32_t> ref_prompt2 = ids_of(fx.at("turn2").at("prompt_ids"));
    CHECK(engine->tokenize(rendered2, true) == ref_prompt2);
    std::vector<int32_t> turn1_seq = prompt1;  // what turn 1's KV pages hold
    turn1_seq.insert(turn1_seq.end(), content_ids.begin(), content_ids.end());
    // An answer whose ids spell exactly the text the client got comes back as
    // those ids (engine/tokenizer/answer_memo.h): the prompt starts with turn
    // 1's prompt and the sampled ids, and says the same text as llama.cpp's
    // tokenization of Jinja2's rendering. An answer with bytes that are not
    // UTF-8 reached the client with U+FFFD in their place (as llama.cpp's
    // detokenizer writes it); that text is tokenized as llama.cpp does.
    const bool text_is_ids = (*tok)->decode_text(content_ids, prompt1.back()) == sink->text_;
    CHECK(text_is_ids == expect_splice);
    if (text_is_ids) {
      REQUIRE(prompt2.size() > turn1_seq.size());
      CHECK(std::vector<int32_t>(prompt2.begin(), prompt2.begin() + long(turn1_seq.size())) == turn1_seq);
      CHECK((*tok)->decode(prompt2) == (*tok)->decode(ref_prompt2));
    } else {
      CHECK(prompt2 == ref_prompt2);
    }

    // Every position of turn 1 (the prompt and the answer; the
    // end-of-generation token was sampled, never fed back) that the new
    // prompt shares is a cache hit: whole pages, then the partial tail page
    // turn 1 left (or the part of a sealed page before a divergence).
    size_t common = 0;
    while (common < turn1_seq.size() && common < prompt2.size() && turn1_seq[common] == prompt2[common]) ++common;
    Generated g2 = generate(*engine, greedy_request(prompt2, 4));
    CHECK(g2.final.finish == FinishReason::kLength);
    CHECK(g2.final.cached_tokens == int(std::min(common, prompt2.size() - 1)));
    CHECK(g2.final.cached_tokens >= int(prompt1.size() / 16 * 16));
    if (text_is_ids) CHECK(g2.final.cached_tokens == int(turn1_seq.size()));
  }
  std::filesystem::remove(path);
}

}  // namespace

TEST_CASE("Llama 3.2 vocabulary and template: a two-turn chat agrees with Jinja2 and llama.cpp", "[engine][chat]") {
  check_chat_model("llama3_2", /*expect_splice=*/true);
}

TEST_CASE("Qwen 2.5 vocabulary and template: a two-turn chat agrees with Jinja2 and llama.cpp", "[engine][chat]") {
  check_chat_model("qwen2_5", /*expect_splice=*/false);
}
