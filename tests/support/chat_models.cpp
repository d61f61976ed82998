#include "tests/support/chat_models.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace larder::testing {

namespace {

std::filesystem::path tests_dir() { return std::filesystem::path(__FILE__).parent_path().parent_path(); }

Result<std::string> read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io_error(path.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Llama 3.1 / 3.2 renamed some of Llama 3's reserved control tokens (same
// ids, same BPE tokens otherwise): tokenizer.json of Llama-3.2-1B-Instruct.
void rename_llama3_1_specials(BpeVocabSpec& v) {
  v.tokens[128004] = "<|finetune_right_pad_id|>";
  v.tokens[128005] = "<|reserved_special_token_2|>";
  v.tokens[128008] = "<|eom_id|>";
  v.tokens[128010] = "<|python_tag|>";
  for (int id = 128011; id < 128256; ++id) v.tokens[size_t(id)] = "<|reserved_special_token_" + std::to_string(id - 128008) + "|>";
}

std::vector<ChatModel> make_chat_models() {
  std::vector<ChatModel> v;
  RandomLlamaSpec base;
  base.n_embd = 32;
  base.n_layer = 2;
  base.n_head = 4;
  base.n_head_kv = 2;
  base.n_ff = 64;
  base.n_ctx = 4096;
  base.weight_stddev = 0.06f;  // as tests/arch: clear argmaxes
  // Separate output head: a random model with tied embeddings repeats its
  // input token forever (the residual stream keeps pointing at its row).
  base.tied_output = false;
  // The end-of-turn token's output row is drawn like any other and then
  // scaled, so its logit varies more and a greedy answer can end within
  // max_steps. Seeds were chosen (llama 1..34, qwen 1..24, by running
  // scripts/chat/llama_cpp_chat_reference.mjs) so that llama.cpp's greedy
  // answer to the fixture conversation ends with the end-of-turn token after
  // several tokens, with no near-tie (top-2 gap >= 0.007 nats):
  //   llama3_2 seed 19: 8 tokens, 3 of them reserved control tokens that
  //     write no text, then <|eot_id|>; valid UTF-8, so the next turn reuses
  //     the sampled ids;
  //   qwen2_5 seed 20: 7 tokens, two of them bytes that are not UTF-8
  //     (streamed as U+FFFD, as llama.cpp writes them), then <|im_end|>.
  {
    ChatModel m{"llama3_2", "Llama-3.2-1B-Instruct", base, "<|begin_of_text|>", "<|eot_id|>", "<|eot_id|>"};
    Result<BpeVocabSpec> vocab = bpe_vocab_from_fixture("llama3");
    INFO(vocab.status().to_string());
    REQUIRE(vocab.is_ok());
    m.spec.bpe = std::move(vocab).value();
    rename_llama3_1_specials(*m.spec.bpe);
    m.spec.bpe->pre = "llama-bpe";
    m.spec.bpe->bos_id = 128000;
    m.spec.bpe->eos_id = 128009;  // Llama-3.2-*-Instruct GGUFs: eos is <|eot_id|>
    m.spec.bpe->add_bos = true;
    m.spec.n_vocab = int(m.spec.bpe->tokens.size());
    m.spec.architecture = "llama";
    m.spec.rope_freq_base = 500000.0f;
    m.spec.rope_freq_factors = llama3_rope_freq_factors(8, 500000.0f, 32.0f, 1.0f, 4.0f, 64);
    m.spec.embd_row_scales = {{128009, 2.0f}};
    m.spec.seed = 19;
    Result<std::string> tmpl = chat_template_fixture("llama3_2");
    REQUIRE(tmpl.is_ok());
    m.spec.chat_template = std::move(tmpl).value();
    v.push_back(std::move(m));
  }
  {
    ChatModel m{"qwen2_5", "Qwen2.5-0.5B-Instruct", base, "", "<|im_end|>", "<|im_end|>"};
    Result<BpeVocabSpec> vocab = bpe_vocab_from_fixture("qwen3");
    INFO(vocab.status().to_string());
    REQUIRE(vocab.is_ok());
    m.spec.bpe = std::move(vocab).value();
    // Qwen 2.5 has the ids of Qwen 3 up to </tool_call> etc.; Qwen 3 added
    // <tool_response>, </tool_response>, <think>, </think> after them.
    m.spec.bpe->tokens.resize(151665);
    m.spec.bpe->types.resize(151665);
    m.spec.bpe->pre = "qwen2";
    m.spec.bpe->bos_id = 151643;  // <|endoftext|>, not added (Qwen2.5 GGUFs)
    m.spec.bpe->eos_id = 151645;  // <|im_end|>
    m.spec.bpe->padding_id = 151643;
    m.spec.bpe->add_bos = false;
    m.spec.n_vocab = int(m.spec.bpe->tokens.size());
    m.spec.architecture = "qwen2";
    m.spec.qkv_bias = true;
    m.spec.bias_stddev = 0.1f;
    m.spec.rope_freq_base = 1000000.0f;
    m.spec.rms_eps = 1e-6f;
    m.spec.embd_row_scales = {{151645, 2.5f}};
    m.spec.seed = 20;
    Result<std::string> tmpl = chat_template_fixture("qwen2_5");
    REQUIRE(tmpl.is_ok());
    m.spec.chat_template = std::move(tmpl).value();
    v.push_back(std::move(m));
  }
  return v;
}

}  // namespace

Result<BpeVocabSpec> bpe_vocab_from_fixture(const std::string& fixture) {
  const auto path = tests_dir() / "tokenizer" / "fixtures" / ("bpe_" + fixture + ".json");
  LARDER_ASSIGN_OR_RETURN(std::string text, read_text(path));
  try {
    const nlohmann::json f = nlohmann::json::parse(text);
    BpeVocabSpec v;
    const int n = f.at("n_vocab").get<int>();
    v.tokens.resize(size_t(n));
    v.types.assign(size_t(n), 5);
    for (int i = 0; i < n; ++i) v.tokens[size_t(i)] = "\x01unused" + std::to_string(i);
    for (const auto& t : f.at("tokens")) {
      const int id = t.at(0).get<int>();
      if (id < 0 || id >= n) return Status::invalid_argument(path.string() + ": token id out of range");
      v.tokens[size_t(id)] = t.at(1).get<std::string>();
      v.types[size_t(id)] = t.at(2).get<int32_t>();
    }
    v.merges = f.at("merges").get<std::vector<std::string>>();
    v.pre = f.at("pre").get<std::string>();
    v.bos_id = f.at("bos_id").get<int32_t>();
    v.eos_id = f.at("eos_id").get<int32_t>();
    v.add_bos = f.at("add_bos").get<bool>();
    return v;
  } catch (const nlohmann::json::exception& e) {
    return Status::invalid_argument(path.string() + ": " + e.what());
  }
}

Result<std::string> chat_template_fixture(const std::string& name) {
  return read_text(tests_dir() / "template" / "fixtures" / "templates" / (name + ".jinja"));
}

std::string chat_fixture_dir() { return (tests_dir() / "engine" / "fixtures").string(); }

const std::vector<ChatModel>& chat_models() {
  static const std::vector<ChatModel> models = make_chat_models();
  return models;
}

const ChatModel& chat_model(const std::string& name) {
  for (const ChatModel& m : chat_models()) {
    if (m.name == name) return m;
  }
  FAIL("no chat model " << name);
  return chat_models().front();
}

}  // namespace larder::testing
