// Chat formats: expected strings written out by hand from the format
// descriptions in the task (ChatML, Llama-3, plain fallback).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/chat_format.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/chat_fixture_format.h"
#include "tests/support/test_models.h"

namespace larder {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "You are a helpful assistant."},
    {"user", "  What is 2+2?\n"},
    {"assistant", "4"},
    {"user", "And 3+3?"},  // (a last assistant message would be continued: chat_prefill_test.cpp)
};

using testing::render_ok;

}  // namespace

TEST_CASE("ChatML rendering", "[chat]") {
  const ChatFormat f = ChatFormat::of_kind(ChatFormatKind::kChatML);
  CHECK(std::string(f.name()) == "chatml");
  CHECK(f.uses_special_tokens());
  CHECK_FALSE(f.adds_bos_itself());
  CHECK(render_ok(f, kConversation) ==
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\n  What is 2+2?\n<|im_end|>\n"
        "<|im_start|>assistant\n4<|im_end|>\n"
        "<|im_start|>user\nAnd 3+3?<|im_end|>\n"
        "<|im_start|>assistant\n");
  CHECK(render_ok(f, {{"tool", "{\"x\":1}"}}) ==
        "<|im_start|>tool\n{\"x\":1}<|im_end|>\n<|im_start|>assistant\n");
}

TEST_CASE("Llama-3 rendering trims content and adds BOS text", "[chat]") {
  const ChatFormat f = ChatFormat::of_kind(ChatFormatKind::kLlama3);
  CHECK(std::string(f.name()) == "llama3");
  CHECK(f.uses_special_tokens());
  CHECK(f.adds_bos_itself());
  CHECK(render_ok(f, kConversation) ==
        "<|begin_of_text|>"
        "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n4<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nAnd 3+3?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
  auto tool = f.render({{"tool", "x"}});
  REQUIRE_FALSE(tool.is_ok());
  CHECK(tool.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("plain fallback rendering", "[chat]") {
  const ChatFormat f;  // default: plain
  CHECK(f.kind() == ChatFormatKind::kPlain);
  CHECK(std::string(f.name()) == "plain");
  CHECK_FALSE(f.uses_special_tokens());
  CHECK_FALSE(f.adds_bos_itself());
  CHECK(render_ok(f, kConversation) ==
        "You are a helpful assistant.\n\n"
        "User:   What is 2+2?\n\n"
        "Assistant: 4\n"
        "User: And 3+3?\n"
        "Assistant:");
  CHECK(render_ok(f, {{"user", "Hi"}}) == "User: Hi\nAssistant:");
  // Answers as the model writes them follow "Assistant:" directly.
  CHECK(render_ok(f, {{"user", "Hi"}, {"assistant", " Hello"}, {"user", "Bye"}}) ==
        "User: Hi\nAssistant: Hello\nUser: Bye\nAssistant:");
  CHECK(render_ok(f, {{"user", "Hi"}, {"assistant", "\"Hey\" he said"}, {"user", "Bye"}}) ==
        "User: Hi\nAssistant:\"Hey\" he said\nUser: Bye\nAssistant:");
  CHECK(render_ok(f, {{"user", "Hi"}, {"assistant", "\u201dhe said"}, {"user", "Bye"}}) ==
        "User: Hi\nAssistant:\u201dhe said\nUser: Bye\nAssistant:");
  CHECK(render_ok(f, {{"user", "Hi"}, {"assistant", "7 cats"}, {"user", "Bye"}}) ==
        "User: Hi\nAssistant: 7 cats\nUser: Bye\nAssistant:");
}

TEST_CASE("unknown roles and empty lists are errors", "[chat]") {
  for (auto kind : {ChatFormatKind::kPlain, ChatFormatKind::kChatML, ChatFormatKind::kLlama3}) {
    const ChatFormat f = ChatFormat::of_kind(kind);
    INFO(f.name());
    auto bad = f.render({{"user", "hi"}, {"wizard", "boo"}});
    REQUIRE_FALSE(bad.is_ok());
    CHECK(bad.status().code() == StatusCode::kInvalidArgument);
    CHECK(bad.status().message().find("'wizard'") != std::string::npos);
    auto empty = f.render({});
    REQUIRE_FALSE(empty.is_ok());
    CHECK(empty.status().code() == StatusCode::kInvalidArgument);
  }
  // tool is ChatML only.
  CHECK_FALSE(ChatFormat().render({{"tool", "x"}}).is_ok());
}

TEST_CASE("format detection from template strings", "[chat]") {
  // Shortened versions of the Qwen2 (ChatML) and Meta Llama-3 Jinja templates.
  const char* chatml =
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
      "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  const char* llama3 =
      "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
      "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
      "'<|eot_id|>' %}{{ content }}{% endfor %}";
  const char* mistral = "{{ bos_token }}{% for message in messages %}[INST] {{ message['content'] }} [/INST]{% endfor %}";
  CHECK(ChatFormat::from_template(chatml).kind() == ChatFormatKind::kChatML);
  CHECK(ChatFormat::from_template(llama3).kind() == ChatFormatKind::kLlama3);
  const ChatFormat other = ChatFormat::from_template(mistral);
  CHECK(other.kind() == ChatFormatKind::kPlain);
  CHECK(other.detect_reason().find("not recognised") != std::string::npos);
  CHECK(ChatFormat::from_template("").kind() == ChatFormatKind::kPlain);
}

TEST_CASE("stories260K has no template: plain format, prefix-stable tokens", "[chat][model]") {
  LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto gguf = GgufFile::open(path);
  REQUIRE(gguf.is_ok());
  const ChatFormat f = ChatFormat::detect(**gguf);
  CHECK(f.kind() == ChatFormatKind::kPlain);
  CHECK(f.detect_reason().find("no tokenizer.chat_template") != std::string::npos);
  auto tok_result = Tokenizer::from_gguf(**gguf);
  REQUIRE(tok_result.is_ok());
  const Tokenizer& tok = **tok_result;

  // Ids from llama.cpp (node-llama-cpp 3.21.1 model.tokenize, no BOS) for the
  // two renderings: turn 1 with the prompt, and turns 1..3.
  const std::string short_text = render_ok(f, {{"user", "Hi"}});
  const std::string long_text =
      render_ok(f, {{"user", "Hi"}, {"assistant", "Hello there!"}, {"user", "How are you?"}});
  REQUIRE(short_text == "User: Hi\nAssistant:");
  REQUIRE(long_text == "User: Hi\nAssistant: Hello there!\nUser: How are you?\nAssistant:");
  const std::vector<int32_t> short_llama_cpp = {410, 471, 419, 285, 467, 320, 417, 13,
                                                447, 419, 419, 293, 413, 303, 413, 467};
  const std::vector<int32_t> long_llama_cpp = {
      410, 471, 419, 285, 467, 320, 417, 13,  447, 419, 419, 293, 413, 303, 413, 467, 346, 306, 414, 383, 443,
      13,  471, 419, 285, 467, 320, 327, 261, 276, 364, 450, 13,  447, 419, 419, 293, 413, 303, 413, 467};
  CHECK(tok.encode(short_text, false, false) == short_llama_cpp);
  CHECK(tok.encode(long_text, false, false) == long_llama_cpp);

  // The prefix property over a few conversations: text prefix always; token
  // prefix for all but possibly the last token. In stories260K ':' (467) is
  // the only piece containing ':' (vocab dump), so the closing "Assistant:"
  // can never merge with the answer and the whole token list is a prefix.
  const std::vector<std::vector<ChatMessage>> turns = {
      {{"system", "Tell short stories."}, {"user", "Tell me about a cat."}},
      {{"user", "Once upon a time"}},
      {{"user", "Zo\xC3\xAB?"}},
  };
  const std::vector<std::string> answers = {"The cat sat.", "there was a dog", "\xF0\x9F\x99\x82 ok", ":)"};
  for (const auto& base : turns) {
    for (const std::string& answer : answers) {
      auto extended = base;
      extended.push_back({"assistant", answer});
      extended.push_back({"user", "And then?"});
      const std::string a = render_ok(f, base);
      const std::string b = render_ok(f, extended);
      INFO("prompt: " << a << " | answer: " << answer);
      REQUIRE(b.compare(0, a.size(), a) == 0);
      const auto ta = tok.encode(a, true, false);
      const auto tb = tok.encode(b, true, false);
      REQUIRE(ta.size() <= tb.size());
      CHECK(std::equal(ta.begin(), ta.end() - 1, tb.begin()));
      CHECK(ta.back() == tb[ta.size() - 1]);
    }
  }
}

}  // namespace larder
