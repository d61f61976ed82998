// OpenAI's developer role and assistant prefill through ChatFormat, on the
// real templates of tests/template/fixtures and the fixed formats.
// Expected Jinja strings come from Python's Jinja2 with the environment of
// scripts/template/render_reference.py: developer cases are Jinja2's
// rendering of the same conversation with role "system"; prefill cases are
// transformers' continue_final_message (render without the generation
// prompt, cut after the rindex of the final content, or of its strip()).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/tokenizer/chat_format.h"
#include "tests/support/chat_fixture_format.h"

namespace larder {
namespace {

using testing::fixture_chat_format;
using testing::render_ok;

const std::vector<ChatMessage> kDeveloper = {{"developer", "Be brief."}, {"user", "Hi"}};
const std::vector<ChatMessage> kPrefill = {{"user", "Hi"}, {"assistant", "Once upon "}};

}  // namespace

TEST_CASE("developer messages render as system where the template has no developer role", "[chat][prefill]") {
  // Jinja2 renders Qwen 2.5 with a developer message as if there were no
  // system message (its default system prompt), and Llama 3.2 with a
  // "developer" header; with "system" they render as below.
  CHECK(render_ok(fixture_chat_format("qwen2_5"), kDeveloper) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  CHECK(render_ok(fixture_chat_format("llama3_2"), kDeveloper) ==
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
        "Today Date: 26 Jul 2024\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
  CHECK(render_ok(fixture_chat_format("qwen3"), kDeveloper) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // The fixed formats.
  CHECK(render_ok(ChatFormat::of_kind(ChatFormatKind::kPlain), kDeveloper) == "Be brief.\n\nUser: Hi\nAssistant:");
  CHECK(render_ok(ChatFormat::of_kind(ChatFormatKind::kChatML), kDeveloper) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // A template with a developer role of its own gets it as is.
  auto own = ChatFormat::from_jinja(
      "{% for m in messages %}{% if m.role == 'developer' %}D:{% else %}{{ m.role }}:{% endif %}{{ m.content }}\n"
      "{% endfor %}",
      "", "");
  REQUIRE(own.is_ok());
  CHECK(render_ok(*own, kDeveloper) == "D:Be brief.\nuser:Hi\n");
}

TEST_CASE("assistant prefill continues the last assistant message on real templates", "[chat][prefill]") {
  CHECK(render_ok(fixture_chat_format("qwen2_5"), kPrefill) ==
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nOnce upon ");
  // Llama 3 trims message contents: the cut falls after "upon".
  CHECK(render_ok(fixture_chat_format("llama3_2"), kPrefill) ==
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
        "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nOnce upon");
  // Qwen 3 opens an answer with an empty think block.
  CHECK(render_ok(fixture_chat_format("qwen3"), kPrefill) ==
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nOnce upon ");
  CHECK(render_ok(fixture_chat_format("gemma2"), kPrefill) ==
        "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nOnce upon");
  CHECK(render_ok(fixture_chat_format("mistral_nemo"), kPrefill) == "<s>[INST]Hi[/INST]Once upon ");

  // The rendering's client spans end with the prefill's content (its tokens
  // are encoded as text, never as control tokens).
  ChatRequest request;
  request.messages = kPrefill;
  auto r = fixture_chat_format("qwen2_5").render_text(request);
  REQUIRE(r.is_ok());
  REQUIRE_FALSE(r->spans.empty());
  CHECK(r->spans.back().end == r->text.size());
  CHECK(r->text.substr(r->spans.back().begin) == "Once upon ");
  CHECK(r->spans.back().origin == 1);
}

TEST_CASE("assistant prefill on the fixed formats and where a template drops the answer", "[chat][prefill]") {
  CHECK(render_ok(ChatFormat::of_kind(ChatFormatKind::kPlain), kPrefill) == "User: Hi\nAssistant: Once upon ");
  CHECK(render_ok(ChatFormat::of_kind(ChatFormatKind::kPlain), {{"user", "Hi"}, {"assistant", "\"Yes"}}) ==
        "User: Hi\nAssistant:\"Yes");
  CHECK(render_ok(ChatFormat::of_kind(ChatFormatKind::kChatML), kPrefill) ==
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nOnce upon ");
  CHECK(render_ok(ChatFormat::of_kind(ChatFormatKind::kLlama3), kPrefill) ==
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nOnce upon");
  // An empty prefill is the ordinary generation prompt.
  CHECK(render_ok(ChatFormat::of_kind(ChatFormatKind::kPlain), {{"user", "Hi"}, {"assistant", ""}}) ==
        "User: Hi\nAssistant:");

  // A template that never prints assistant turns: llama.cpp's way, the
  // turns before with the generation prompt, then the content.
  auto drops = ChatFormat::from_jinja(
      "{% for m in messages %}{% if m.role == 'user' %}U:{{ m.content }}\n{% endif %}{% endfor %}"
      "{% if add_generation_prompt %}A:{% endif %}",
      "", "");
  REQUIRE(drops.is_ok());
  CHECK(render_ok(*drops, kPrefill) == "U:Hi\nA:Once upon ");
  // An assistant message with tool calls is not continued.
  ChatMessage call{"assistant", ""};
  call.content_null = true;
  call.tool_calls.push_back({"c1", "f", "{}"});
  CHECK(render_ok(*drops, {{"user", "Hi"}, call}) == "U:Hi\nA:");
}

}  // namespace larder
