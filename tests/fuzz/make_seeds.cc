// Writes the binary seed inputs of the fuzz corpus (tests/fuzz/corpus/):
//   gguf_file/tiny_llama_spm.gguf   a whole tiny llama with an SPM vocabulary
//                                   and a chat template (write_random_llama_gguf)
//   disk_record/page_record.bin     0x00 + a valid page record for the
//                                   expectations of tests/fuzz/disk_record.cpp
//   disk_record/answer_record.bin   0x01 + a valid answer record
// Usage: fuzz_make_seeds CORPUS_DIR (the text seeds are committed as written).
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/tokenizer/answer_memo.h"
#include "storage/page_record.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/random_llama.h"

namespace larder::fuzz {
PageRecordMeta fuzz_record_meta();  // tests/fuzz/disk_record.cpp
}

int main(int argc, char** argv) {
  using namespace larder;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir / "gguf_file");
  std::filesystem::create_directories(dir / "disk_record");

  testing::RandomLlamaSpec spec;
  spec.n_vocab = 300;
  spec.n_embd = 8;
  spec.n_layer = 1;
  spec.n_head = 2;
  spec.n_head_kv = 1;
  spec.n_ff = 8;
  spec.n_ctx = 64;
  spec.chat_template =
      "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] | trim }}</s>{% endfor %}"
      "{% if add_generation_prompt %}<|assistant|>{% endif %}";
  Status st = testing::write_random_llama_gguf((dir / "gguf_file" / "tiny_llama_spm.gguf").string(), spec);
  if (!st.is_ok()) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    return 1;
  }

  const PageRecordMeta meta = fuzz::fuzz_record_meta();
  const PageKey key{0x0123456789abcdefull, 0xfedcba9876543210ull};
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  std::vector<uint8_t> payload(2 * 2 * 4 * 2 * sizeof(float));
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = uint8_t(i * 37 + 11);
  std::vector<uint8_t> page(1, 0x00);
  const std::string rec = encode_page_record(key, meta, tokens, payload);
  page.insert(page.end(), rec.begin(), rec.end());
  std::vector<uint8_t> answer(1, 0x01);
  const std::vector<int32_t> ids = {400, 1, 27};
  const std::string arec = encode_answer_record("Once upon a time", ids);
  answer.insert(answer.end(), arec.begin(), arec.end());
  for (auto& [name, bytes] : {std::pair{"page_record.bin", page}, std::pair{"answer_record.bin", answer}}) {
    st = testing::write_file_bytes((dir / "disk_record" / name).string(), bytes);
    if (!st.is_ok()) {
      std::fprintf(stderr, "%s\n", st.to_string().c_str());
      return 1;
    }
  }
  return 0;
}
