// Token ids of a rendered chat prompt that know where the message contents
// are: control-token text a user writes into a message stays text, and the
// model's earlier answers become the ids it sampled for them (answer_memo.h).
//
// The chat template is run twice (engine/engine.cpp Engine::chat_prompt):
// once normally (`rendered`) and once with each message content k replaced
// by marked_content(text, k) (`marked`): the content's leading whitespace, a
// marker, its trailing whitespace. The marker locates the content in the
// rendering without guessing how the template quotes it. Where the template
// kept the whitespace edges around the marker, the content spans them; where
// it trimmed them (Llama 3 and Gemma templates trim content), only the kept
// part is content. The result is used only when putting each content's kept
// text back in place of its marker gives `rendered` exactly; a template that
// rewrites a content (escapes it, cuts reasoning out of it, tests its text)
// fails that check and the caller tokenizes `rendered` the usual way.
//
// Tokenization: the text between spliced answers is tokenized as one piece
// (Tokenizer::encode_chat, the first piece at the input start and the rest
// with encode_continuation semantics), with the content ranges passed as
// plain ranges unless control-token text in content is allowed. Outside those
// ranges, and whenever no answer is spliced, the ids are exactly those of
// tokenizing `rendered` whole. A content with stored ids is spliced when the
// template kept it whole (both edges) and its ids decode to its text right
// after the ids before them (Tokenizer::decode_text).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace larder {

class Tokenizer;

// The marker for content k: printable ASCII that no template changes and no
// conversation contains by accident (it carries a per-process random tag).
std::string content_marker(size_t k);

// What stands for content `text` (number k) in the marked rendering: its
// leading whitespace, content_marker(k), its trailing whitespace
// (whitespace as Python's str.isspace(), which Jinja's trim uses). Nullopt
// for text that is empty or only whitespace (such a content is not marked).
std::optional<std::string> marked_content(std::string_view text, size_t k);

// One marked message content: its text, and the ids to splice in for it
// (a remembered answer), if any.
struct ChatContent {
  std::string text;
  std::optional<std::vector<int32_t>> ids;
};

struct ChatPromptIds {
  std::vector<int32_t> ids;
  int n_spliced = 0;  // contents whose stored ids were used
};

// Prompt ids for `rendered` (see the top of this file). contents[k] is the
// content that `marked` holds as marked_content(contents[k].text, k), each
// marker exactly once and in order. add_bos: prepend BOS unless the ids start
// with it (as Engine::tokenize). parse_special: the format has control-token
// text (false for the plain format: nothing is parsed anywhere);
// special_in_content: control-token text inside contents is parsed too
// (llama.cpp's behaviour). Nullopt when a marker is missing or repeated or
// the kept contents do not give back `rendered`.
std::optional<ChatPromptIds> tokenize_marked_chat(const Tokenizer& tok, std::string_view rendered,
                                                  std::string_view marked, std::span<const ChatContent> contents,
                                                  bool add_bos, bool parse_special, bool special_in_content);

}  // namespace larder
