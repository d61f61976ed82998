// Pre-tokenizers of byte-level BPE vocabularies: the regex splits that HF
// tokenizers (tokenizer.json "pre_tokenizer") and llama.cpp
// (src/llama-vocab.cpp, llm_tokenizer_bpe) apply before the BPE merges,
// chosen by GGUF tokenizer.ggml.pre. Hand-written matchers over Unicode
// classes (engine/tokenizer/unicode.h), not a regex engine; each function
// names the regex it implements and follows its leftmost-first, greedy,
// backtracking semantics.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "engine/tokenizer/unicode.h"
#include "storage/status.h"

namespace larder {

enum class BpePre {
  kGpt2,         // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kLlama3,       // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
                 //   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kQwen2,        // as kLlama3 with \p{N} instead of \p{N}{1,3}
  kSmollm,       // \p{N} isolated, then kGpt2 (HF: Digits(individual) + ByteLevel)
  kDeepseekLlm,  // six isolated splits, see bpe_pretokenize.cpp
  kTekken,       // Mistral tekken: case-aware words, \p{N}, ...
};

struct BpePreInfo {
  BpePre pre;
  bool ignore_merges;  // a word that is a whole vocab token is not merged (llama.cpp)
  bool add_bos;        // llama.cpp's default when the GGUF has no add_bos_token
};

// The pre-tokenizer for a tokenizer.ggml.pre value, with llama.cpp's aliases
// ("llama-bpe", "llama3", "llama-v3", "falcon3", "pixtral" -> kLlama3;
// "qwen2", "deepseek-r1-qwen", "stablelm2" -> kQwen2; "gpt-2", "mpt", "olmo",
// "phi-2" -> kGpt2; "smollm", "starcoder", "refact", "command-r", "codeshell"
// -> kSmollm; "deepseek-llm"; "tekken"). Unknown or empty name ->
// Status::unsupported naming it.
Result<BpePreInfo> bpe_pre_from_name(std::string_view name);

// A word: chars [begin, end) of the decoded text.
struct CharSpan {
  uint32_t begin;
  uint32_t end;
};

// Splits `chars` (the decoded text, see unicode::decode_utf8) into words,
// appended to `out` in order; together they cover every char exactly once.
void bpe_pretokenize(BpePre pre, std::span<const unicode::Char> chars, std::vector<CharSpan>& out);

}  // namespace larder
