// Reasoning templates through the engine: stories260K with the real Qwen 3
// and DeepSeek R1 distill templates (tests/template/fixtures/templates) put
// into a copy of the GGUF. What is checked:
//   - the engine says the model thinks in <think> tags, and which prompts
//     leave the block open (R1's generation prompt does, Qwen 3's does not);
//   - chat_template_kwargs reach the template ({"enable_thinking": false}
//     makes Qwen 3 close an empty block in the generation prompt);
//   - a two-turn chat whose template drops the earlier turn's thinking (Qwen
//     3 renders an answer before the last user message without it) still
//     hits the cache for everything up to the answer: the renderings are
//     written out by hand from the template, and the expected cached_tokens
//     is the length of the prompt ids both turns share.
#include <catch2/catch.hpp>

#include <filesystem>

#include "engine/grammar/grammar.h"
#include "tests/engine/engine_test_util.h"
#include "tests/support/chat_models.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/test_models.h"

using namespace larder;
using namespace larder::testing;

namespace {

std::unique_ptr<Engine> engine_with_template(const std::string& stories, const TempDir& dir, const std::string& name) {
  Result<std::string> tmpl = chat_template_fixture(name);
  INFO(tmpl.status().to_string());
  REQUIRE(tmpl.is_ok());
  const std::string model = dir.str() + "/stories260K-" + name + ".gguf";
  REQUIRE(copy_gguf_with_chat_template(stories, model, *tmpl).is_ok());
  EngineOptions o = options_for(model, "");
  o.n_ctx = 512;
  return make_engine(o);
}

ChatRequest chat(std::vector<ChatMessage> messages, std::string kwargs = "") {
  ChatRequest r;
  r.messages = std::move(messages);
  r.template_kwargs_json = std::move(kwargs);
  return r;
}

}  // namespace

TEST_CASE("reasoning templates: detection, open blocks and template kwargs", "[engine][reasoning]") {
  LARDER_REQUIRE_MODEL(stories, "stories260K.gguf");
  TempDir dir("reasoning");
  const std::vector<ChatMessage> hi = {{"user", "Hi"}};

  auto qwen = engine_with_template(stories, dir, "qwen3");
  CHECK(qwen->reasoning_syntax() == ReasoningSyntax::kThinkTags);
  ChatPromptInfo info;
  REQUIRE(qwen->chat_prompt(chat(hi), &info).is_ok());
  CHECK_FALSE(info.opens_reasoning);
  CHECK(qwen->render_chat(chat(hi)).value() == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // enable_thinking false: the template writes an empty, closed block.
  const ChatRequest off = chat(hi, R"({"enable_thinking": false})");
  CHECK(qwen->render_chat(off).value() ==
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  REQUIRE(qwen->chat_prompt(off, &info).is_ok());
  CHECK_FALSE(info.opens_reasoning);
  // enable_thinking true is not `false`: as without it.
  CHECK(qwen->render_chat(chat(hi, R"({"enable_thinking": true})")).value() ==
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // Not an object: refused.
  CHECK(qwen->chat_prompt(chat(hi, "[1]"), &info).status().code() == StatusCode::kInvalidArgument);

  auto r1 = engine_with_template(stories, dir, "deepseek_r1_distill_qwen");
  CHECK(r1->reasoning_syntax() == ReasoningSyntax::kThinkTags);
  const std::string rendered = r1->render_chat(chat(hi)).value();
  CHECK(rendered.ends_with("<｜User｜>Hi<｜Assistant｜><think>\n"));
  REQUIRE(r1->chat_prompt(chat(hi), &info).is_ok());
  CHECK(info.opens_reasoning);

  // A template without <think>, and a vocabulary without it: no reasoning.
  auto plain = make_engine(options_for(stories, ""));
  CHECK(plain->reasoning_syntax() == ReasoningSyntax::kNone);
  auto qwen25 = engine_with_template(stories, dir, "qwen2_5");
  CHECK(qwen25->reasoning_syntax() == ReasoningSyntax::kNone);
}

TEST_CASE("reasoning: a template that drops earlier thinking still hits the cache up to the change",
          "[engine][reasoning]") {
  LARDER_REQUIRE_MODEL(stories, "stories260K.gguf");
  TempDir dir("reasoning-cache");
  auto engine = engine_with_template(stories, dir, "qwen3");

  // Turn 1, with the answer forced into "<think>\n...\n</think>\n\n..." (this
  // model never thinks by itself); greedy, so it is the same every run.
  const std::vector<ChatMessage> turn1 = {{"user", "Tell me a story."}};
  const std::string rendered1 = engine->render_chat(chat(turn1)).value();
  CHECK(rendered1 == "<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<int32_t> prompt1 = engine->chat_prompt(chat(turn1)).value();
  GenerationRequest req = greedy_request(prompt1, 64);
  req.ignore_eos = false;
  req.remember_answer = true;
  Result<Grammar> g = parse_gbnf(R"(root ::= "<think>\n" [a-z ]{4,16} "\n</think>\n\n" [a-z] [a-z ]{4,16})");
  REQUIRE(g.is_ok());
  req.grammar = std::make_shared<const CompiledGrammar>(*g);
  Generated a1 = generate(*engine, req);
  REQUIRE(a1.final.finish == FinishReason::kStop);
  const size_t close = a1.text.find("\n</think>\n\n");
  REQUIRE(a1.text.rfind("<think>\n", 0) == 0);
  REQUIRE(close != std::string::npos);
  const std::string content = a1.text.substr(close + 11);  // what reasoning_content leaves as the answer
  REQUIRE(!content.empty());

  // Turn 2: the answer comes back without its thinking (as clients send it).
  const std::vector<ChatMessage> turn2 = {turn1[0], {"assistant", content}, {"user", "And then?"}};
  const std::string rendered2 = engine->render_chat(chat(turn2)).value();
  CHECK(rendered2 == rendered1 + content + "<|im_end|>\n<|im_start|>user\nAnd then?<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<int32_t> prompt2 = engine->chat_prompt(chat(turn2)).value();
  // Turn 1's KV holds prompt1 and then "<think>..." (the sampled ids); turn
  // 2 has prompt1's text and then the answer. The ids of the shared text are
  // turn 1's prompt ids, after which the two part: the first id of "<think>"
  // is not the first id of the answer (a letter).
  REQUIRE(prompt2.size() > prompt1.size());
  CHECK(std::vector<int32_t>(prompt2.begin(), prompt2.begin() + long(prompt1.size())) == prompt1);
  REQUIRE(!a1.tokens.empty());
  CHECK(a1.tokens[0] != prompt2[prompt1.size()]);
  CHECK(engine->tokenize(rendered1, true) == prompt1);  // the chat ids are plain tokenization here
  Generated a2 = generate(*engine, greedy_request(prompt2, 4));
  CHECK(a2.final.prompt_tokens == int(prompt2.size()));
  CHECK(a2.final.cached_tokens == int(prompt1.size()));

  // Turn 2 again, unchanged: now all of it is cached but its last token.
  Generated again = generate(*engine, greedy_request(prompt2, 4));
  CHECK(again.final.cached_tokens == int(prompt2.size()) - 1);
}

TEST_CASE("reasoning: thinking sent back with an answer reaches the template", "[engine][reasoning]") {
  LARDER_REQUIRE_MODEL(stories, "stories260K.gguf");
  TempDir dir("reasoning-back");
  auto engine = engine_with_template(stories, dir, "qwen3");
  // A tool round: the call's thinking comes back as reasoning_content. Qwen 3
  // shows it for turns after the last user message, and drops it before.
  ChatMessage call{"assistant", ""};
  call.content_null = true;
  call.reasoning_content = "Need the weather.";
  call.tool_calls.push_back({"call_1", "get_weather", R"({"city":"Paris"})"});
  ChatMessage result{"tool", "21 C"};
  result.tool_call_id = "call_1";
  const std::vector<ChatMessage> round = {{"user", "Weather?"}, call, result};
  const std::string shown = engine->render_chat(chat(round)).value();
  CHECK(shown ==
        "<|im_start|>user\nWeather?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nNeed the weather.\n</think>\n\n"
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n21 C\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
  std::vector<ChatMessage> later = round;
  later.push_back({"assistant", "It is 21 C."});
  later.push_back({"user", "Thanks."});
  const std::string dropped = engine->render_chat(chat(later)).value();
  CHECK(dropped.find("Need the weather.") == std::string::npos);
}
