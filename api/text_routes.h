// POST /tokenize and POST /detokenize, as llama.cpp's server has them
// (tools/server/README.md), also under /v1/. The router runs them on
// libuv's thread pool (api/pool_job.h): tokenizing a long text never holds
// up the loop thread. Pure functions of the body and the generator
// (thread-safe).
//
//   /tokenize   {"content": string (<= kMaxTokenizeBytes bytes, required),
//                "add_special": bool (false: BOS/EOS where the vocabulary
//                adds them), "parse_special": bool (true: control-token
//                text such as "<|im_end|>" becomes its token),
//                "with_pieces": bool (false), "model": string}
//               -> {"tokens": [id, ...]} or, with pieces,
//                  {"tokens": [{"id": id, "piece": string | [byte, ...]}]}
//                  (a piece that is not valid UTF-8 on its own, such as one
//                  byte of a character, is the list of its byte values)
//   /detokenize {"tokens": [id, ...] (<= kMaxDetokenizeTokens ids in
//                [0, n_vocab)), "model": string} -> {"content": string}
//                (the pieces concatenated, control tokens as their text;
//                bytes that do not form UTF-8 become U+FFFD)
// Errors: 400 invalid_request_error naming the field (not JSON, not an
// object, a wrong type, an id outside the vocabulary, over the size limits,
// an unknown field); 404 model_not_found when "model" names another model.
#pragma once

#include <cstddef>
#include <string>

#include "api/http_message.h"
#include "engine/generation.h"

namespace larder {

inline constexpr size_t kMaxTokenizeBytes = size_t{1} << 20;   // /tokenize content
inline constexpr size_t kMaxDetokenizeTokens = size_t{1} << 18; // /detokenize tokens

HttpResponse tokenize_response(const Generator& generator, const std::string& body);
HttpResponse detokenize_response(const Generator& generator, const std::string& body);

}  // namespace larder
