// Which tokens end generation and which are control tokens, by their text, as
// llama.cpp's vocabulary loader decides (src/llama-vocab.cpp, "auto-detect
// special tokens by text", llama.cpp of node-llama-cpp 3.21.1). Expected
// values read off that code; tests/engine/test_chat_models.cpp also compares
// the whole end-of-generation set of the Llama 3.2 and Qwen 2.5 vocabularies
// with llama_vocab_is_eog.
//
// Pinned bug: larder knew only <|im_end|> <|eot_id|> <|end_of_text|>
// <end_of_turn> <|endoftext|> <|end|>, and only on control / user-defined
// tokens, so a Llama 3.1 / 3.2 answer ending with <|eom_id|> (after a
// built-in tool call) ran on, and a Qwen model's <|fim_pad|>, <|repo_name|>,
// <|file_sep|> (user-defined in the GGUF) were written out as text and did
// not stop it.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace larder {
namespace {

struct Entry {
  const char* text;
  TokenType type;
  bool eog;         // llama_vocab_is_eog
  bool rendered;    // token_to_piece(special = false) writes its text
};

std::unique_ptr<Tokenizer> make(const std::vector<Entry>& entries) {
  VocabData v;
  v.model = TokenizerModel::kSpm;
  v.add_bos = false;
  for (const Entry& e : entries) {
    v.tokens.emplace_back(e.text);
    v.types.push_back(e.type);
  }
  auto tok = Tokenizer::from_vocab(std::move(v));
  INFO(tok.status().to_string());
  REQUIRE(tok);
  return std::move(tok).value();
}

void check(const std::vector<Entry>& entries) {
  auto tok = make(entries);
  for (size_t i = 0; i < entries.size(); ++i) {
    INFO(entries[i].text);
    const auto id = static_cast<int32_t>(i);
    CHECK(tok->is_end_of_generation(id) == entries[i].eog);
    CHECK(tok->decode(std::vector<int32_t>{id}) == (entries[i].rendered ? entries[i].text : ""));
  }
}

}  // namespace

TEST_CASE("end of generation and control tokens follow llama.cpp's texts", "[tokenizer]") {
  using T = TokenType;
  check({
      {"hello", T::kNormal, false, true},
      {"<|eom_id|>", T::kControl, true, false},          // Llama 3.1 / 3.2 end of message
      {"<|eot_id|>", T::kControl, true, false},
      {"<|python_tag|>", T::kControl, false, false},
      {"<|fim_pad|>", T::kUserDefined, true, false},     // Qwen 2.5: user-defined in the GGUF
      {"<|repo_name|>", T::kUserDefined, true, false},
      {"<|file_sep|>", T::kUserDefined, true, false},
      {"<|fim_prefix|>", T::kUserDefined, false, false}, // control, does not end generation
      {"<|fim_middle|>", T::kUserDefined, false, false},
      {"<tool_call>", T::kUserDefined, false, true},     // not llama.cpp's: stays user-defined text
      {"<|im_end|>", T::kUserDefined, true, false},      // whatever type the file gives
      {"<eos>", T::kNormal, true, false},
      {"<|end|>", T::kControl, true, false},
  });
}

TEST_CASE("gpt-oss vocabularies keep <|end|> as text that does not end generation", "[tokenizer]") {
  using T = TokenType;
  check({
      {"<|return|>", T::kControl, true, false},
      {"<|call|>", T::kControl, true, false},
      {"<|end|>", T::kControl, false, true},  // llama.cpp makes it user-defined
  });
}

}  // namespace larder
