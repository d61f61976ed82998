// SentencePiece-BPE tokenizer (GGUF tokenizer.ggml.model = "llama"), with the
// semantics of llama.cpp's SPM tokenizer (src/llama-vocab.cpp,
// llm_tokenizer_spm + tokenizer_st_partition + token_to_piece), and an
// incremental detokenizer that streams UTF-8 safely. Byte-level BPE vocabs
// (tokenizer.ggml.model = "gpt2": Llama 3, Qwen, SmolLM, ...) share the
// special-token partition and the decoding below; their text fragments go to
// BpeModel (bpe.h) instead of steps 2-4, with no space prefix, and
// token_to_piece of a normal token maps its GPT-2 characters back to bytes.
//
// encode(text, add_bos, parse_special):
//   1. Special-token partition (llama.cpp tokenizer_st_partition): the texts of
//      user-defined tokens are always cut out of the text first and become that
//      token; with parse_special also the texts of control and unknown tokens
//      ("<s>" -> BOS, "<unk>" -> unk). Longer token texts are cut first.
//      Without parse_special, "<s>" is ordinary text.
//   2. Every remaining text fragment gets a " " prefix when add_space_prefix is
//      set and the fragment starts the input or follows a special token (as in
//      llama.cpp, so "<s>hi" with parse_special gives BOS, "▁hi"). Empty input
//      gives no text tokens at all. Spaces (0x20 only) become U+2581 "▁".
//   3. The fragment is split into UTF-8 characters (on broken UTF-8 a lead
//      byte takes only the continuation bytes that follow it; llama.cpp takes
//      as many bytes as the lead announces, which can swallow the next
//      character and make the round trip lossy), then adjacent
//      symbols are merged greedily: the pair whose concatenation is a vocab
//      piece with the highest score is merged first, ties to the leftmost pair
//      (a priority queue; O(n log n), no quadratic rescans).
//   4. A final symbol that is not a piece is emitted as byte tokens <0xXX>
//      (byte fallback); a byte with no <0xXX> token falls back to a one-byte
//      piece, then to unk_id, and is dropped only if there is no unk_id.
//   Deviation from llama.cpp (pathological vocabs only): merges and lookups in
//   step 3 only ever produce normal and user-defined tokens (llama.cpp looks
//   up every token text, so plain text could merge into a control token;
//   SentencePiece itself never does that).
//
// token_to_piece(id): normal -> its text with "▁" as " "; byte -> that raw
// byte; user-defined -> its text verbatim; control and unused -> "";
// unknown -> "▅" (U+2585, as llama.cpp prints it); invalid id -> "".
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "storage/status.h"

namespace larder {

class GgufFile;
class BpeModel;

enum class TokenizerModel { kSpm, kBpe };

// llama.cpp's llama_token_type values as stored in tokenizer.ggml.token_type
// (0 = "undefined" in a file is read as kNormal).
enum class TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// A vocabulary as plain vectors. tokens[i] is the piece text of id i (spaces
// as U+2581, bytes as "<0xXX>"); scores[i] its merge priority (higher merges
// first; empty vector = all 0); types[i] its type (empty = all kNormal).
// Special ids are -1 when the vocab has none.
struct VocabData {
  TokenizerModel model = TokenizerModel::kSpm;
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<TokenType> types;
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, eot_id = -1;
  bool add_bos = true, add_eos = false, add_space_prefix = true;
  // kBpe only: merges[r] = "left right" (rank r) and the pre-tokenizer name
  // (tokenizer.ggml.pre, see bpe_pretokenize.h). add_space_prefix is ignored.
  std::vector<std::string> merges;
  std::string pre;
};

// Immutable after construction; every method is const and thread-safe.
class Tokenizer {
 public:
  // From GGUF metadata. tokenizer.ggml.model must be "llama" (SentencePiece
  // BPE) or "gpt2" (byte-level BPE); any other model ("bert", ...) ->
  // Status::unsupported naming it; absent -> Status::not_found. For "gpt2":
  // tokenizer.ggml.merges is required, tokenizer.ggml.pre must name a
  // supported pre-tokenizer (else Status::unsupported), special ids default
  // to none, add_bos_token defaults to the pre-tokenizer's llama.cpp default
  // (true for llama-bpe and tekken) and applies only when there is a BOS id;
  // scores are ignored. Reads tokenizer.ggml.tokens (required),
  // .scores and .token_type (optional, same length as tokens), and the
  // optional .bos_token_id / .eos_token_id / .unknown_token_id /
  // .eot_token_id / .add_bos_token / .add_eos_token / .add_space_prefix, with
  // llama.cpp's SPM defaults (bos 1, eos 2, unk 0, add_bos true, add_eos
  // false, add_space_prefix true) where absent. Wrong types, lengths or ids ->
  // Status::corruption naming the file and key.
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& gguf);
  // From plain vectors. kBpe also fails on an unknown pre (Status::unsupported)
  // or a malformed merge. Errors (Status::invalid_argument): no tokens, more
  // than INT32_MAX tokens, scores/types of a different non-zero length, a
  // special id outside [-1, n_vocab), a kByte token whose text is not <0xXX>,
  // add_bos without bos_id, add_eos without eos_id.
  static Result<std::unique_ptr<Tokenizer>> from_vocab(VocabData vocab);

  struct PrivateKey {
   private:
    friend class Tokenizer;
    PrivateKey() = default;
  };
  explicit Tokenizer(PrivateKey);  // use from_gguf / from_vocab
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  int n_vocab() const { return static_cast<int>(vocab_.tokens.size()); }
  TokenizerModel model() const { return vocab_.model; }
  // The byte-level BPE model (nullptr for SPM).
  const BpeModel* bpe() const { return bpe_.get(); }
  int32_t bos_id() const { return vocab_.bos_id; }
  int32_t eos_id() const { return vocab_.eos_id; }
  int32_t eot_id() const { return vocab_.eot_id; }
  int32_t unk_id() const { return vocab_.unk_id; }
  bool add_bos() const { return vocab_.add_bos; }
  // Bytes of the longest token text in the vocabulary. No token covers more
  // bytes of the text it was encoded from (a text piece is at least as long
  // as the bytes it stands for: "▁" is 3 bytes for a space, a GPT-2 byte
  // character 1-2 bytes for a byte, "<0x41>" 6 for one), so a text of more
  // than n * max_token_bytes() bytes encodes to more than n tokens (vocabs
  // with neither byte tokens nor unk drop bytes they cannot encode; those
  // bytes are not counted).
  size_t max_token_bytes() const { return max_token_bytes_; }
  bool add_eos() const { return vocab_.add_eos; }
  bool add_space_prefix() const { return vocab_.add_space_prefix; }

  // The raw vocab entry of `id` ("" / kUnused for an invalid id).
  const std::string& token_text(int32_t id) const;
  TokenType token_type(int32_t id) const;
  // Id of the token whose text is exactly `text` (any type), or -1.
  int32_t find_token(std::string_view text) const;

  // True for EOS, EOT, and the tokens llama.cpp's vocabulary loader marks
  // as end of generation by their text, whatever their type: <|eot_id|>,
  // <|eom_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>,
  // <|end_of_text|>, </s>, <eos>, ... and the FIM pad / repo / file-separator
  // tokens (<|fim_pad|>, <|repo_name|>, <|file_sep|>). Those tokens, and the
  // FIM prefix / suffix / middle ones, are control tokens here as there
  // (kEndOfGenerationTexts in tokenizer.cpp has the lists and the source).
  bool is_end_of_generation(int32_t id) const;

  // Text -> ids (see the top of this file). add_bos (llama.cpp's
  // add_special) prepends bos_id if the vocab has one, and then also appends
  // eos_id when the vocab's add_eos is set. Never fails: every byte is
  // covered by byte fallback or unk (or dropped if the vocab has neither).
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;
  // As encode(text, false, parse_special) for text that continues an input
  // tokenized piece by piece: the start of `text` is not the start of the
  // input, so it gets no space prefix (step 2; a fragment after a special
  // token inside `text` still does). Used to splice stored token ids of
  // earlier answers into a chat prompt (engine/answer_memo.h).
  std::vector<int32_t> encode_continuation(std::string_view text, bool parse_special) const;
  // A byte range [begin, end) of a text.
  struct ByteRange {
    size_t begin = 0, end = 0;
  };
  // Chat prompts: as encode(text, false, true) (at_input_start) or
  // encode_continuation(text, true), except that control-token text lying
  // in (or across the edge of) one of `plain` (byte ranges of text, sorted,
  // disjoint: the client's text, engine/tokenizer/chat_prompt.h) stays
  // plain text, so a user cannot write "<|im_end|>" into a message and
  // close its turn. User-defined tokens are cut everywhere, as in encode.
  std::vector<int32_t> encode_chat(std::string_view text, bool at_input_start,
                                   std::span<const ByteRange> plain) const;

  // Bytes token `id` adds to the output text (see the top of this file).
  // A byte token gives one raw byte, possibly part of a UTF-8 character.
  std::string token_to_piece(int32_t id) const;

  // Concatenated pieces of `ids` (invalid ids add nothing).
  std::string decode(std::span<const int32_t> ids) const;
  // Same, but a piece right after a BOS loses one leading space (the
  // convention of llama2.c's decoder and of reference.json's greedy_text:
  // the space prefix that encode added to the text after BOS is not output).
  // `prev_id` is the token before ids[0] (-1: none).
  std::string decode_text(std::span<const int32_t> ids, int32_t prev_id = -1) const;

 private:
  Status init(VocabData vocab);
  std::vector<int32_t> encode_impl(std::string_view text, bool add_bos, bool parse_special,
                                   bool at_input_start, std::span<const ByteRange> plain = {}) const;
  // SentencePiece merge of one already escaped fragment, appending to `out`.
  void encode_fragment(std::string_view text, std::vector<int32_t>& out) const;
  void emit_bytes(std::string_view bytes, std::vector<int32_t>& out) const;

  VocabData vocab_;
  std::unordered_map<std::string_view, int32_t> piece_to_id_;  // normal + user-defined pieces
  std::unordered_map<std::string_view, int32_t> text_to_id_;   // every token text
  std::array<int32_t, 256> byte_to_id_{};                      // <0xXX> tokens, -1 if absent
  std::vector<int32_t> special_ids_;  // control/unknown/user-defined, longest text first
  std::vector<std::string> pieces_;   // token_to_piece per id
  std::vector<bool> end_of_generation_;
  std::unique_ptr<const BpeModel> bpe_;  // kBpe only
  size_t max_token_bytes_ = 0;
};

// Streams text token by token: never splits a multi-byte UTF-8 character
// across two chunks. Bytes of an incomplete character are held until it
// completes; an invalid sequence becomes U+FFFD, one per maximal ill-formed
// subpart (Unicode 15 ch. 3, "U+FFFD Substitution of Maximal Subparts").
// Like Tokenizer::decode_text, the piece right after a BOS loses one leading
// space; `prev_id` is the last prompt token (e.g. BOS for an empty prompt).
// The text token `id` adds after `prev_id` (-1: none) in a detokenized
// text: its piece, less SentencePiece's space prefix right after BOS.
std::string piece_in_text(const Tokenizer& tok, int32_t prev_id, int32_t id);

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tok, int32_t prev_id = -1);
  std::string push(int32_t id);  // text complete now (may be "")
  std::string flush();           // at the end: whatever is held (incomplete tail -> U+FFFD)
  size_t n_held_bytes() const { return held_.size(); }

 private:
  const Tokenizer* tok_;
  int32_t prev_id_;
  std::string held_;
};

// UTF-8 helpers (also used by the detokenizer).
// Appends to `out` the valid prefix of `bytes` with each maximal ill-formed
// subpart replaced by U+FFFD. If `final` is false, an incomplete but so far
// valid character at the end is not consumed; returns the number of bytes
// consumed.
size_t utf8_sanitize(std::string_view bytes, bool final, std::string& out);
// True if `s` is entirely well-formed UTF-8.
bool utf8_is_valid(std::string_view s);

}  // namespace larder
