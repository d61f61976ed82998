// A chat of 100,000 messages through the real Llama 3.2 template and its
// vocabulary (tests/support/chat_models.h): the rendering and the prompt
// ids are exactly what string concatenation and the plain tokenizer give,
// and the work is linear. The interpreter's work is bounded
// deterministically (a steps budget linear in the number of messages,
// which a render that copies the messages per message would exhaust);
// the whole path also has a wall-clock guard far above its linear time
// (about a second) and far below the minutes the quadratic one took.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/chat_format.h"
#include "engine/tokenizer/chat_prompt.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/chat_models.h"
#include "tests/support/fixed_clock.h"
#include "tests/support/random_llama.h"

namespace larder {
namespace {

std::unique_ptr<Tokenizer> chat_model_tokenizer(const std::string& name) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("larder_long_" + std::to_string(::getpid()) + "_" + name + ".gguf"))
          .string();
  REQUIRE(testing::write_random_llama_gguf(path, testing::chat_model(name).spec).is_ok());
  auto gguf = GgufFile::open(path);
  REQUIRE(gguf.is_ok());
  auto tok = Tokenizer::from_gguf(**gguf);
  REQUIRE(tok.is_ok());
  std::filesystem::remove(path);
  return std::move(*tok);
}

}  // namespace

TEST_CASE("100,001 one-letter messages through Llama 3.2's template: exact output, linear work", "[chat][long]") {
  const testing::ChatModel& cm = testing::chat_model("llama3_2");
  auto tok = chat_model_tokenizer("llama3_2");
  auto format = ChatFormat::from_jinja(cm.spec.chat_template, cm.bos_token, cm.eos_token);
  REQUIRE(format.is_ok());
  const size_t n = 100001;  // odd: the last message is a user's (an assistant's would be continued)
  tmpl::RenderOptions options;
  options.strftime_now = testing::fixed_strftime;
  // Linear in n (about 35 steps a message are used; 100 allowed).
  options.max_steps = int64_t(100 * n);
  format->set_render_options(options);

  ChatRequest req;
  std::string want = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                     "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>";
  for (size_t i = 0; i < n; ++i) {
    const std::string role = i % 2 ? "assistant" : "user";
    const std::string letter(1, char('a' + i % 26));
    req.messages.emplace_back(role, letter);
    want += "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + letter + "<|eot_id|>";
  }
  want += "<|start_header_id|>assistant<|end_header_id|>\n\n";

  const auto t0 = std::chrono::steady_clock::now();
  Result<tmpl::Rendered> r = format->render_text(req);
  REQUIRE(r.is_ok());
  CHECK(r->text == want);
  // One marked range per content, at its place.
  REQUIRE(r->spans.size() == n);
  CHECK(r->spans[0].origin == 0);
  CHECK(r->spans[n - 1].origin == int32_t(n - 1));
  CHECK(r->text.substr(r->spans[n - 1].begin, 1) == req.messages[n - 1].content);

  const ChatPromptIds ids = tokenize_chat(*tok, r->text, r->spans, {}, tok->add_bos(), true, false);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The plain tokenizer on the whole text (one-letter contents hold no
  // control-token text, so parsing it all gives the same ids).
  CHECK(ids.ids == tok->encode(want, false, true));
  // Structure: <|eot_id|> (128009) closes the system turn and each message.
  CHECK(std::count(ids.ids.begin(), ids.ids.end(), 128009) == int64_t(n + 1));
  CHECK(seconds < 60);

  // A budget below the linear need fails cleanly.
  options.max_steps = int64_t(5 * n);
  format->set_render_options(options);
  Result<tmpl::Rendered> starved = format->render_text(req);
  REQUIRE_FALSE(starved.is_ok());
  CHECK(starved.status().message().find("budget") != std::string::npos);
}

}  // namespace larder
