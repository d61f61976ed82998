// Tokenizer construction (from plain vectors or GGUF metadata), lookups and
// decoding. The SentencePiece merge itself is in spm_encode.cpp.
#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <climits>
#include <cstdio>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/bpe.h"

namespace larder {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 "▁"
constexpr std::string_view kUnknownPiece = "\xE2\x96\x85";  // U+2585 "▅" (llama.cpp)

// Tokens llama.cpp finds by their text when it loads a vocabulary
// (src/llama-vocab.cpp, llama_vocab::impl::load, "auto-detect special tokens
// by text"; llama.cpp of node-llama-cpp 3.21.1). Each becomes a control token
// whatever type the file gives it (it is not rendered as text and is parsed
// only with parse_special), and those of kEndOfGenerationTexts and the FIM
// pad / repo / file-separator tokens end generation (special_eog_ids).
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",  // <｜end▁of▁sentence｜> (DeepSeek)
    "[e~[",
};
// FIM pad, repo and file-separator tokens: control and end of generation.
constexpr std::string_view kFimEndTexts[] = {
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]",                    // FIM_PAD
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>",        // FIM_REP
    "<|file_sep|>",                                                               // FIM_SEP
};
// FIM prefix, suffix and middle tokens: control only. (The end-of-turn and
// end-of-message texts llama.cpp looks for are all in kEndOfGenerationTexts.)
constexpr std::string_view kControlTexts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>",
};

template <size_t N>
bool is_one_of(std::string_view text, const std::string_view (&list)[N]) {
  for (std::string_view t : list) {
    if (text == t) return true;
  }
  return false;
}

// "<0xXX>" -> XX (either hex case), or -1.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    int digit;
    if (c >= '0' && c <= '9') digit = c - '0';
    else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    else return -1;
    value = value * 16 + digit;
  }
  return value;
}

std::string unescape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, kSpaceMarker.size(), kSpaceMarker) == 0) {
      out.push_back(' ');
      i += kSpaceMarker.size();
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

}  // namespace

Tokenizer::Tokenizer(PrivateKey) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_vocab(VocabData vocab) {
  auto tok = std::make_unique<Tokenizer>(PrivateKey());
  LARDER_RETURN_IF_ERROR(tok->init(std::move(vocab)));
  return tok;
}

Status Tokenizer::init(VocabData vocab) {
  const size_t n = vocab.tokens.size();
  if (n == 0) return Status::invalid_argument("tokenizer: the vocabulary has no tokens");
  if (n > static_cast<size_t>(INT32_MAX)) {
    return Status::invalid_argument("tokenizer: " + std::to_string(n) + " tokens exceed INT32_MAX");
  }
  if (!vocab.scores.empty() && vocab.scores.size() != n) {
    return Status::invalid_argument("tokenizer: " + std::to_string(vocab.scores.size()) + " scores for " +
                                    std::to_string(n) + " tokens");
  }
  if (!vocab.types.empty() && vocab.types.size() != n) {
    return Status::invalid_argument("tokenizer: " + std::to_string(vocab.types.size()) + " token types for " +
                                    std::to_string(n) + " tokens");
  }
  for (const std::string& t : vocab.tokens) max_token_bytes_ = std::max(max_token_bytes_, t.size());
  if (vocab.scores.empty()) vocab.scores.assign(n, 0.0f);
  if (vocab.types.empty()) vocab.types.assign(n, TokenType::kNormal);
  const std::pair<const char*, int32_t> ids[] = {
      {"bos", vocab.bos_id}, {"eos", vocab.eos_id}, {"unk", vocab.unk_id}, {"eot", vocab.eot_id}};
  for (const auto& [name, id] : ids) {
    if (id < -1 || id >= static_cast<int64_t>(n)) {
      return Status::invalid_argument(std::string("tokenizer: ") + name + " id " + std::to_string(id) +
                                      " outside the vocabulary of " + std::to_string(n));
    }
  }
  if (vocab.add_bos && vocab.bos_id < 0) return Status::invalid_argument("tokenizer: add_bos without a bos id");
  if (vocab.add_eos && vocab.eos_id < 0) return Status::invalid_argument("tokenizer: add_eos without an eos id");

  const bool is_bpe = vocab.model == TokenizerModel::kBpe;
  BpePreInfo pre_info{};
  if (is_bpe) {
    auto info = bpe_pre_from_name(vocab.pre);
    if (!info) return info.status();
    pre_info = *info;
    vocab.add_space_prefix = false;
  }

  // llama.cpp's overrides by text (see kEndOfGenerationTexts): control type,
  // and the end-of-generation set. gpt-oss / solar-open vocabularies, which
  // have "<|return|>" and "<|call|>" (or "<|calls|>" and "<|flush|>"), keep
  // "<|end|>" as a user-defined token that does not end generation.
  std::vector<bool> end_by_text(n, false);
  {
    bool has_return = false, has_call = false, has_flush = false;
    int32_t end_id = -1;
    for (size_t i = 0; i < n; ++i) {
      const std::string_view text = vocab.tokens[i];
      const bool eog = is_one_of(text, kEndOfGenerationTexts) || is_one_of(text, kFimEndTexts);
      if (eog || is_one_of(text, kControlTexts)) vocab.types[i] = TokenType::kControl;
      end_by_text[i] = eog;
      if (!eog) continue;
      has_return |= text == "<|return|>";
      has_call |= text == "<|call|>" || text == "<|calls|>";
      has_flush |= text == "<|flush|>";
      if (text == "<|end|>") end_id = static_cast<int32_t>(i);
    }
    if (end_id >= 0 && has_call && (has_return || has_flush)) {
      end_by_text[size_t(end_id)] = false;
      vocab.types[size_t(end_id)] = TokenType::kUserDefined;
    }
  }

  vocab_ = std::move(vocab);
  if (is_bpe) {
    auto bpe = BpeModel::create(vocab_.tokens, vocab_.merges, pre_info);
    if (!bpe) return bpe.status();
    bpe_ = std::move(*bpe);
    vocab_.merges.clear();
    vocab_.merges.shrink_to_fit();
  }
  byte_to_id_.fill(-1);
  pieces_.resize(n);
  end_of_generation_.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    const std::string& text = vocab_.tokens[i];
    const TokenType type = vocab_.types[i];
    text_to_id_.insert_or_assign(std::string_view(text), id);  // last wins, as in llama.cpp
    switch (type) {
      case TokenType::kNormal:
        pieces_[i] = is_bpe ? BpeModel::decode_token_text(text) : unescape_spaces(text);
        if (!text.empty()) piece_to_id_.insert_or_assign(std::string_view(text), id);
        break;
      case TokenType::kUserDefined:
        pieces_[i] = text;
        if (!text.empty()) {
          piece_to_id_.insert_or_assign(std::string_view(text), id);
          special_ids_.push_back(id);
        }
        break;
      case TokenType::kByte: {
        if (is_bpe) {  // not used by byte-level vocabs; decoded like a normal token
          pieces_[i] = BpeModel::decode_token_text(text);
          break;
        }
        const int byte = parse_byte_token(text);
        if (byte < 0) {
          return Status::invalid_argument("tokenizer: byte token " + std::to_string(id) + " has text '" + text +
                                          "', expected <0xXX>");
        }
        if (byte_to_id_[byte] < 0) byte_to_id_[byte] = id;
        pieces_[i] = std::string(1, static_cast<char>(byte));
        break;
      }
      case TokenType::kUnknown:
        pieces_[i] = std::string(kUnknownPiece);
        if (!text.empty()) special_ids_.push_back(id);
        break;
      case TokenType::kControl:
        if (!text.empty()) special_ids_.push_back(id);
        break;
      case TokenType::kUnused:
        break;
      default:
        return Status::invalid_argument("tokenizer: token " + std::to_string(id) + " has unknown type " +
                                        std::to_string(static_cast<int32_t>(type)));
    }
    if (end_by_text[i]) end_of_generation_[i] = true;
  }
  if (vocab_.eos_id >= 0) end_of_generation_[vocab_.eos_id] = true;
  if (vocab_.eot_id >= 0) end_of_generation_[vocab_.eot_id] = true;
  // Longest special text first (tokenizer_st_partition order); ids break ties
  // so the order is deterministic.
  std::sort(special_ids_.begin(), special_ids_.end(), [this](int32_t a, int32_t b) {
    const size_t la = vocab_.tokens[a].size(), lb = vocab_.tokens[b].size();
    return la != lb ? la > lb : a < b;
  });
  return Status::ok();
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& gguf) {
  const std::string where = gguf.path() + ": ";
  const GgufValue* model = gguf.find("tokenizer.ggml.model");
  if (model == nullptr) return Status::not_found(where + "no tokenizer.ggml.model in the metadata");
  auto model_name = model->as_string();
  if (!model_name) return Status::corruption(where + "tokenizer.ggml.model is not a string");
  if (*model_name != "llama" && *model_name != "gpt2") {
    return Status::unsupported(where + "tokenizer model '" + *model_name +
                               "' is not supported (only 'llama' = SentencePiece BPE and 'gpt2' = byte-level BPE)");
  }
  const bool is_bpe = *model_name == "gpt2";

  VocabData vocab;
  BpePreInfo pre_info{};
  if (is_bpe) {
    vocab.model = TokenizerModel::kBpe;
    const GgufValue* pre = gguf.find("tokenizer.ggml.pre");
    Result<std::string> pre_name = pre ? pre->as_string() : Result<std::string>(std::string());
    if (!pre_name) return Status::corruption(where + "tokenizer.ggml.pre is not a string");
    auto info = bpe_pre_from_name(*pre_name);
    if (!info) return Status::unsupported(where + info.status().message());
    pre_info = *info;
    vocab.pre = *pre_name;
    const GgufValue* merges = gguf.find("tokenizer.ggml.merges");
    const std::vector<GgufValue>* merge_array = merges ? merges->as_array() : nullptr;
    if (merge_array == nullptr) return Status::corruption(where + "tokenizer.ggml.merges missing or not an array");
    vocab.merges.reserve(merge_array->size());
    for (const GgufValue& v : *merge_array) {
      auto m = v.as_string();
      if (!m) return Status::corruption(where + "tokenizer.ggml.merges holds a non-string");
      vocab.merges.push_back(std::move(*m));
    }
  }
  const GgufValue* tokens = gguf.find("tokenizer.ggml.tokens");
  const std::vector<GgufValue>* token_array = tokens ? tokens->as_array() : nullptr;
  if (token_array == nullptr) return Status::corruption(where + "tokenizer.ggml.tokens missing or not an array");
  vocab.tokens.reserve(token_array->size());
  for (const GgufValue& v : *token_array) {
    auto s = v.as_string();
    if (!s) return Status::corruption(where + "tokenizer.ggml.tokens holds a non-string");
    vocab.tokens.push_back(std::move(*s));
  }
  const size_t n = vocab.tokens.size();

  if (const GgufValue* scores = gguf.find("tokenizer.ggml.scores")) {
    const auto* arr = scores->as_array();
    if (arr == nullptr || arr->size() != n) {
      return Status::corruption(where + "tokenizer.ggml.scores is not an array of " + std::to_string(n));
    }
    vocab.scores.reserve(n);
    for (const GgufValue& v : *arr) {
      auto f = v.as_float();
      if (!f) return Status::corruption(where + "tokenizer.ggml.scores holds a non-number");
      vocab.scores.push_back(static_cast<float>(*f));
    }
  }
  if (const GgufValue* types = gguf.find("tokenizer.ggml.token_type")) {
    const auto* arr = types->as_array();
    if (arr == nullptr || arr->size() != n) {
      return Status::corruption(where + "tokenizer.ggml.token_type is not an array of " + std::to_string(n));
    }
    vocab.types.reserve(n);
    for (const GgufValue& v : *arr) {
      auto t = v.as_int();
      if (!t || *t < 0 || *t > 6) return Status::corruption(where + "tokenizer.ggml.token_type holds a bad type");
      vocab.types.push_back(*t == 0 ? TokenType::kNormal : static_cast<TokenType>(*t));
    }
  }

  // Optional ids (llama.cpp SPM defaults) and flags.
  auto read_id = [&](const char* key, int32_t fallback, int32_t& out) -> Status {
    out = fallback;
    if (const GgufValue* v = gguf.find(key)) {
      auto id = v->as_int();
      if (!id || *id < 0 || *id >= static_cast<int64_t>(n)) {
        return Status::corruption(where + key + " is not a token id below " + std::to_string(n));
      }
      out = static_cast<int32_t>(*id);
    }
    return Status::ok();
  };
  auto read_flag = [&](const char* key, bool fallback, bool& out) -> Status {
    out = fallback;
    if (const GgufValue* v = gguf.find(key)) {
      auto b = v->as_bool();
      if (!b) return Status::corruption(where + key + " is not a bool");
      out = *b;
    }
    return Status::ok();
  };
  // Byte-level BPE: no default ids (llama.cpp's GPT-NeoX defaults of 11 would
  // name arbitrary tokens of other vocabs).
  LARDER_RETURN_IF_ERROR(read_id("tokenizer.ggml.bos_token_id", is_bpe ? -1 : n > 1 ? 1 : -1, vocab.bos_id));
  LARDER_RETURN_IF_ERROR(read_id("tokenizer.ggml.eos_token_id", is_bpe ? -1 : n > 2 ? 2 : -1, vocab.eos_id));
  LARDER_RETURN_IF_ERROR(read_id("tokenizer.ggml.unknown_token_id", is_bpe ? -1 : 0, vocab.unk_id));
  LARDER_RETURN_IF_ERROR(read_id("tokenizer.ggml.eot_token_id", -1, vocab.eot_id));
  LARDER_RETURN_IF_ERROR(read_flag("tokenizer.ggml.add_bos_token", is_bpe ? pre_info.add_bos : true, vocab.add_bos));
  LARDER_RETURN_IF_ERROR(read_flag("tokenizer.ggml.add_eos_token", false, vocab.add_eos));
  LARDER_RETURN_IF_ERROR(read_flag("tokenizer.ggml.add_space_prefix", !is_bpe, vocab.add_space_prefix));
  if (is_bpe) {
    vocab.add_bos = vocab.add_bos && vocab.bos_id >= 0;
    vocab.add_eos = vocab.add_eos && vocab.eos_id >= 0;
  }

  auto tok = from_vocab(std::move(vocab));
  if (!tok) return Status::corruption(where + tok.status().message());
  return tok;
}

const std::string& Tokenizer::token_text(int32_t id) const {
  static const std::string kEmpty;
  return id >= 0 && id < n_vocab() ? vocab_.tokens[id] : kEmpty;
}

TokenType Tokenizer::token_type(int32_t id) const {
  return id >= 0 && id < n_vocab() ? vocab_.types[id] : TokenType::kUnused;
}

int32_t Tokenizer::find_token(std::string_view text) const {
  auto it = text_to_id_.find(text);
  return it == text_to_id_.end() ? -1 : it->second;
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return id >= 0 && id < n_vocab() && end_of_generation_[id];
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  return id >= 0 && id < n_vocab() ? pieces_[id] : std::string();
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id >= 0 && id < n_vocab()) out += pieces_[id];
  }
  return out;
}

std::string Tokenizer::decode_text(std::span<const int32_t> ids, int32_t prev_id) const {
  std::string out;
  for (int32_t id : ids) {
    if (id >= 0 && id < n_vocab()) {
      std::string_view piece = pieces_[id];
      if (model() == TokenizerModel::kSpm && prev_id >= 0 && prev_id == vocab_.bos_id && !piece.empty() &&
          piece[0] == ' ') {
        piece.remove_prefix(1);  // SentencePiece only; see IncrementalDetokenizer::push
      }
      out += piece;
    }
    prev_id = id;
  }
  return out;
}

}  // namespace larder
