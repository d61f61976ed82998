// Random-weight chat models "from the wild": the real byte-level BPE
// vocabulary ids and control tokens of Llama 3.2 and Qwen 2.5 (from the
// reduced vocabularies of tests/tokenizer/fixtures/bpe_*.json, placed at
// their real ids in a full-size vocabulary) and their real Jinja chat
// templates (tests/template/fixtures/templates/), written by
// write_random_llama_gguf. The whole pipeline runs on them as on a
// downloaded model: the template renders control-token text, the BPE
// tokenizer parses it, the model answers, an end-of-turn token ends it.
// tests/engine/fixtures/chat_<name>.json hold llama.cpp's ids for the same
// files (scripts/chat/llama_cpp_chat_reference.mjs).
#pragma once

#include <string>
#include <vector>

#include "storage/status.h"
#include "tests/support/random_llama.h"

namespace larder::testing {

struct ChatModel {
  std::string name;        // "llama3_2", "qwen2_5": fixture and file names
  std::string shaped_as;   // the real model whose vocabulary and template it has
  RandomLlamaSpec spec;    // spec.bpe and spec.chat_template set
  std::string bos_token;   // the template's bos_token / eos_token (as transformers passes them)
  std::string eos_token;
  std::string end_of_turn; // the control token that ends an assistant turn
};

// The models, in a fixed order. Reads the fixtures from the source tree;
// a missing or unreadable fixture is a test failure (REQUIREd).
const std::vector<ChatModel>& chat_models();
const ChatModel& chat_model(const std::string& name);

// The vocabulary of tests/tokenizer/fixtures/bpe_<fixture>.json at its full
// size: ids the fixture does not list become unused tokens ("\x01unused<id>",
// type 5) that no text reaches. Errors: kIOError (missing file),
// kInvalidArgument (malformed).
Result<BpeVocabSpec> bpe_vocab_from_fixture(const std::string& fixture);

// The chat template tests/template/fixtures/templates/<name>.jinja.
Result<std::string> chat_template_fixture(const std::string& name);

// tests/engine/fixtures (chat_<name>.json).
std::string chat_fixture_dir();

}  // namespace larder::testing
