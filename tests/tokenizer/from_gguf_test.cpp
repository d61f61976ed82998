// Tokenizer::from_gguf and ChatFormat::detect on small synthetic GGUF files
// written here byte by byte (layout from ggml's docs/gguf.md: magic, u32
// version, u64 n_tensors, u64 n_kv, then key/type/value triples).
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/chat_format.h"
#include "engine/tokenizer/tokenizer.h"

namespace larder {
namespace {

class GgufBytes {
 public:
  void str_kv(const std::string& key, const std::string& value) {
    key_(key, 8);
    str_(value);
  }
  void u32_kv(const std::string& key, uint32_t value) {
    key_(key, 4);
    pod_(value);
  }
  void bool_kv(const std::string& key, bool value) {
    key_(key, 7);
    pod_(static_cast<uint8_t>(value));
  }
  void str_array_kv(const std::string& key, const std::vector<std::string>& values) {
    key_(key, 9);
    pod_(uint32_t{8});
    pod_(static_cast<uint64_t>(values.size()));
    for (const auto& v : values) str_(v);
  }
  void f32_array_kv(const std::string& key, const std::vector<float>& values) {
    key_(key, 9);
    pod_(uint32_t{6});
    pod_(static_cast<uint64_t>(values.size()));
    for (float v : values) pod_(v);
  }
  void i32_array_kv(const std::string& key, const std::vector<int32_t>& values) {
    key_(key, 9);
    pod_(uint32_t{5});
    pod_(static_cast<uint64_t>(values.size()));
    for (int32_t v : values) pod_(v);
  }
  // Writes the file and returns its path (in the system temp directory).
  std::string write(const std::string& name) const {
    std::string out = "GGUF";
    auto put = [&out](const auto& v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
    put(uint32_t{3});
    put(uint64_t{0});  // tensors
    put(n_kv_);
    out += body_;
    while (out.size() % 32 != 0) out.push_back('\0');
    const auto path = (std::filesystem::temp_directory_path() / ("larder_tok_" + name + ".gguf")).string();
    std::ofstream(path, std::ios::binary).write(out.data(), static_cast<std::streamsize>(out.size()));
    return path;
  }

 private:
  template <typename T>
  void pod_(T v) { body_.append(reinterpret_cast<const char*>(&v), sizeof(v)); }
  void str_(const std::string& s) {
    pod_(static_cast<uint64_t>(s.size()));
    body_ += s;
  }
  void key_(const std::string& key, uint32_t type) {
    ++n_kv_;
    str_(key);
    pod_(type);
  }
  std::string body_;
  uint64_t n_kv_ = 0;
};

// A valid 6-token SPM vocab: <unk> <s> </s> ▁ a ▁a.
GgufBytes base_file(const std::string& model = "llama") {
  GgufBytes g;
  g.str_kv("general.architecture", "llama");
  g.str_kv("tokenizer.ggml.model", model);
  g.str_array_kv("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "\xE2\x96\x81" "a"});
  return g;
}

Result<std::unique_ptr<Tokenizer>> load(const GgufBytes& g, const std::string& name) {
  const std::string path = g.write(name);
  auto gguf = GgufFile::open(path);
  INFO(gguf.status().to_string());
  REQUIRE(gguf.is_ok());
  auto tok = Tokenizer::from_gguf(**gguf);
  std::filesystem::remove(path);
  return tok;
}

}  // namespace

TEST_CASE("from_gguf reads a minimal vocab with llama.cpp defaults", "[tokenizer][gguf]") {
  GgufBytes g = base_file();
  g.f32_array_kv("tokenizer.ggml.scores", {0, 0, 0, -3, -2, -1});
  g.i32_array_kv("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1});
  auto tok = load(g, "ok");
  INFO(tok.status().to_string());
  REQUIRE(tok.is_ok());
  // No id keys: SPM defaults bos 1, eos 2, unk 0; add_bos true.
  CHECK((*tok)->bos_id() == 1);
  CHECK((*tok)->eos_id() == 2);
  CHECK((*tok)->unk_id() == 0);
  // "a a" -> "▁a▁a": ▁a (-1) merges twice -> 5, 5; no byte tokens, 'b' -> unk 0.
  CHECK((*tok)->encode("a a", true, false) == std::vector<int32_t>{1, 5, 5});
  CHECK((*tok)->encode("ab", false, false) == std::vector<int32_t>{5, 0});
  CHECK((*tok)->encode("<s>", false, true) == std::vector<int32_t>{1});
}

TEST_CASE("from_gguf rejects other tokenizer models and bad metadata", "[tokenizer][gguf]") {
  {
    auto tok = load(base_file("gpt2"), "gpt2");
    REQUIRE_FALSE(tok.is_ok());
    CHECK(tok.status().code() == StatusCode::kUnsupported);
    CHECK(tok.status().message().find("gpt2") != std::string::npos);
  }
  {
    GgufBytes g;
    g.str_kv("general.architecture", "llama");
    auto tok = load(g, "nomodel");
    REQUIRE_FALSE(tok.is_ok());
    CHECK(tok.status().code() == StatusCode::kNotFound);
  }
  {
    GgufBytes g;
    g.str_kv("tokenizer.ggml.model", "llama");
    auto tok = load(g, "notokens");
    REQUIRE_FALSE(tok.is_ok());
    CHECK(tok.status().code() == StatusCode::kCorruption);
  }
  {
    GgufBytes g = base_file();
    g.f32_array_kv("tokenizer.ggml.scores", {0, 0, 0});  // 3 scores for 6 tokens
    auto tok = load(g, "scores");
    REQUIRE_FALSE(tok.is_ok());
    CHECK(tok.status().code() == StatusCode::kCorruption);
    CHECK(tok.status().message().find("tokenizer.ggml.scores") != std::string::npos);
  }
  {
    GgufBytes g = base_file();
    g.u32_kv("tokenizer.ggml.bos_token_id", 6);  // one past the end
    auto tok = load(g, "bos");
    REQUIRE_FALSE(tok.is_ok());
    CHECK(tok.status().code() == StatusCode::kCorruption);
    CHECK(tok.status().message().find("bos_token_id") != std::string::npos);
  }
  {
    GgufBytes g = base_file();
    g.i32_array_kv("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 42});
    auto tok = load(g, "types");
    REQUIRE_FALSE(tok.is_ok());
    CHECK(tok.status().code() == StatusCode::kCorruption);
  }
  {
    GgufBytes g = base_file();
    g.str_kv("tokenizer.ggml.add_bos_token", "yes");  // wrong type
    auto tok = load(g, "flag");
    REQUIRE_FALSE(tok.is_ok());
    CHECK(tok.status().code() == StatusCode::kCorruption);
  }
}

TEST_CASE("ChatFormat::detect reads tokenizer.chat_template", "[chat][gguf]") {
  GgufBytes g = base_file();
  g.str_kv("tokenizer.chat_template", "{{ '<|im_start|>' + message['role'] }}");
  const std::string path = g.write("template");
  auto gguf = GgufFile::open(path);
  REQUIRE(gguf.is_ok());
  CHECK(ChatFormat::detect(**gguf).kind() == ChatFormatKind::kJinja);
  std::filesystem::remove(path);

  GgufBytes h = base_file();
  h.u32_kv("tokenizer.chat_template", 7);  // not a string
  const std::string path2 = h.write("template2");
  auto gguf2 = GgufFile::open(path2);
  REQUIRE(gguf2.is_ok());
  const ChatFormat f = ChatFormat::detect(**gguf2);
  CHECK(f.kind() == ChatFormatKind::kPlain);
  CHECK(f.detect_reason().find("not a string") != std::string::npos);
  std::filesystem::remove(path2);
}

TEST_CASE("ChatFormat::load renders a GGUF's Jinja template and refuses one it cannot run", "[chat][gguf]") {
  // A ChatML template as HF ships it; the expected text is written out by
  // hand from the template (no block tag is followed by a newline, so
  // trim_blocks changes nothing).
  GgufBytes g = base_file();
  g.str_kv("tokenizer.chat_template",
           "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
           "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
  const std::string path = g.write("jinja");
  auto gguf = GgufFile::open(path);
  REQUIRE(gguf.is_ok());
  auto chat = ChatFormat::load(**gguf);
  REQUIRE(chat.is_ok());
  auto text = chat->render({{"system", "S"}, {"user", "U"}});
  REQUIRE(text.is_ok());
  CHECK(*text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
  std::filesystem::remove(path);

  GgufBytes h = base_file();
  h.str_kv("tokenizer.chat_template", "{% include 'other.jinja' %}");
  const std::string bad = h.write("jinja-bad");
  auto gguf2 = GgufFile::open(bad);
  REQUIRE(gguf2.is_ok());
  auto refused = ChatFormat::load(**gguf2);
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().message().find("include") != std::string::npos);
  std::filesystem::remove(bad);
}

TEST_CASE("plain format: an answer sent back with its leading space renders like the prompt did", "[chat]") {
  ChatFormat plain = ChatFormat::of_kind(ChatFormatKind::kPlain);
  auto with_space = plain.render({{"user", "hi"}, {"assistant", " Anna was here."}, {"user", "more"}});
  auto without = plain.render({{"user", "hi"}, {"assistant", "Anna was here."}, {"user", "more"}});
  REQUIRE(with_space.is_ok());
  REQUIRE(without.is_ok());
  // By hand: "User: hi\n" + "Assistant:" + " Anna was here." + "\n" + "User: more\n" + "Assistant:"
  CHECK(*with_space == "User: hi\nAssistant: Anna was here.\nUser: more\nAssistant:");
  CHECK(*without == *with_space);
  // The first turn's prompt is a text prefix of the second turn's prompt.
  auto turn1 = plain.render({{"user", "hi"}});
  CHECK(with_space->rfind(*turn1 + " Anna was here.", 0) == 0);
}

}  // namespace larder
