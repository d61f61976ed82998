// Byte-level BPE (GGUF tokenizer.ggml.model = "gpt2"): GPT-2's byte-to-unicode
// mapping, merge ranks from tokenizer.ggml.merges, and the pre-tokenizer named
// by tokenizer.ggml.pre (bpe_pretokenize.h). Semantics of HF tokenizers'
// BPE model with a ByteLevel pre-tokenizer and of llama.cpp's
// llm_tokenizer_bpe_session (src/llama-vocab.cpp):
//   1. the text is split into words by the pre-tokenizer;
//   2. each word's bytes become one symbol per byte, the token whose text is
//      the byte's GPT-2 character (bytes_to_unicode in openai/gpt-2
//      encoder.py: printable Latin-1 bytes map to themselves, the other 68 to
//      U+0100.. in byte order);
//   3. with ignore_merges (Llama 3, tekken) a word that is a whole vocab token
//      is that token;
//   4. otherwise adjacent symbols are merged, the pair with the lowest merge
//      rank first, ties to the leftmost pair, until no pair has a rank.
// Ill-formed UTF-8 is kept byte for byte (llama.cpp substitutes U+FFFD, so
// its ids differ there; HF cannot take such input). Deviations for broken
// vocabs only: a merge whose parts or result are not tokens is ignored, and a
// byte without a token is dropped.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/bpe_pretokenize.h"
#include "storage/status.h"

namespace larder {

class BpeModel {
 public:
  // `tokens` must outlive the model (it keeps views into the strings).
  // merges[r] = "left right" has rank r. Errors (Status::invalid_argument):
  // a merge without a separating space.
  static Result<std::unique_ptr<BpeModel>> create(std::span<const std::string> tokens,
                                                  std::span<const std::string> merges, BpePreInfo pre);

  // Appends the ids of one text fragment (no special tokens in it).
  void encode(std::string_view text, std::vector<int32_t>& out) const;

  // Token text (GPT-2 characters) -> the bytes it stands for. A character
  // outside the mapping is copied as its UTF-8.
  static std::string decode_token_text(std::string_view text);
  // Byte -> its GPT-2 character as UTF-8.
  static const std::string& byte_to_text(uint8_t byte);

  BpePreInfo pre() const { return pre_; }
  size_t n_merges() const { return ranks_.size(); }

 private:
  struct Merge {
    int32_t rank;
    int32_t id;  // token of the merged pair
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  void encode_word(std::string_view bytes, std::vector<int32_t>& out) const;

  BpePreInfo pre_{};
  std::unordered_map<std::string_view, int32_t> text_to_id_;
  std::unordered_map<uint64_t, Merge> ranks_;
  std::array<int32_t, 256> byte_id_{};  // token of each byte's character, -1 if none
};

}  // namespace larder
