// Token ids of a rendered chat prompt that know which text came from the
// client: control-token text a client writes into any field (a message
// content, a name, a tool call, the tools) stays text, and the model's
// earlier answers become the ids it sampled for them (answer_memo.h).
//
// The chat template runs once (ChatFormat::render_text), and its output
// says which byte ranges hold the client's strings (tmpl::Rendered::spans;
// the template interpreter carries the marks through every operation, so
// a template that trims, slices, escapes or rewrites a string still yields
// marked text, and no fallback is needed). Those ranges are tokenized
// without control tokens unless the request allows control tokens in its
// text (special_in_content, llama.cpp's behaviour); the template's own
// text (and bos_token, eos_token, the roles) is tokenized with them.
//
// Splicing: the text between spliced answers is tokenized as one piece
// (Tokenizer::encode_chat, the first piece at the input start and the rest
// with encode_continuation semantics). Whenever no answer is spliced, the
// ids are exactly those of tokenizing the rendering whole with the client's
// ranges as plain text. A splice (a byte range holding a whole assistant
// content, with the ids the model sampled for it) is used when those ids
// decode to exactly that text right after the ids before them
// (Tokenizer::decode_text). The work is linear in the rendering's size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "engine/template/value.h"

namespace larder {

class Tokenizer;

// Ids to try in place of the text rendered[begin, end) (an earlier answer,
// kept whole by the template).
struct ChatSplice {
  size_t begin = 0, end = 0;
  const std::vector<int32_t>* ids = nullptr;
};

struct ChatPromptIds {
  std::vector<int32_t> ids;
  int n_spliced = 0;  // splices whose ids were used
};

// Prompt ids for `rendered` (see the top of this file). untrusted: the
// client's byte ranges (sorted, disjoint); splices: sorted, disjoint, each
// within the rendering. add_bos: prepend BOS unless the ids start with it
// (as Engine::tokenize). parse_special: the format has control-token text
// (false for the plain format: nothing is parsed anywhere);
// special_in_content: control-token text in the client's ranges is parsed
// too.
ChatPromptIds tokenize_chat(const Tokenizer& tok, std::string_view rendered, std::span<const tmpl::TextSpan> untrusted,
                            std::span<const ChatSplice> splices, bool add_bos, bool parse_special,
                            bool special_in_content);

}  // namespace larder
