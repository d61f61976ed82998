// What constrains a generated answer, read from a request body:
// llama.cpp's "grammar" (GBNF) and "json_schema", OpenAI's
// "response_format" (json_object, json_schema) compiled into
// GenerationOptions::grammar, and "logit_bias" into
// GenerationOptions::logit_bias. Runs on the pool thread with the rest of
// the request parsing (api/openai_request.h), so a bad grammar or an
// unsupported schema is a 400 before anything is queued.
#pragma once

#include <optional>

#include "api/api_error.h"
#include "api/openai_request.h"
#include "api/request_json.h"

namespace larder {

// One of "grammar", "json_schema", "response_format" (not several) ->
// out->grammar. Errors name the field: a grammar that does not parse, a
// schema keyword the grammar cannot enforce, an unknown response_format type.
std::optional<ApiError> read_grammar(const request_json::json& obj, GenerationOptions* out);

// "logit_bias": {"<token id>": bias in [-100, 100]} or [[id, bias|false], ...]
// (at most 1024 entries) -> out->logit_bias; false and -100 ban the token.
// Token ids are checked against the vocabulary by the router.
std::optional<ApiError> read_logit_bias(const request_json::json& obj, GenerationOptions* out);

}  // namespace larder
