// Token log-probability fields of a request body (api/openai_request.h):
//   chat:        "logprobs": bool, "top_logprobs": integer 0..20 (needs
//                "logprobs": true, as OpenAI checks)
//   completions: "logprobs": integer 0..20 (OpenAI caps it at 5; llama.cpp
//                allows more), "echo": bool (the prompt comes back before the
//                completion, with its tokens' logprobs when "logprobs" is set)
// -> GenerationOptions::logprobs (-1: off; else the number of alternatives)
// and GenerationOptions::echo.
#pragma once

#include <optional>

#include "api/api_error.h"
#include "api/openai_request.h"
#include "api/request_json.h"

namespace larder {

std::optional<ApiError> read_chat_logprobs(const request_json::json& obj, GenerationOptions* out);
std::optional<ApiError> read_completion_logprobs(const request_json::json& obj, GenerationOptions* out);

// True when the body asks for echo ("echo": true): max_tokens may then be 0.
bool asks_for_echo(const request_json::json& obj);

}  // namespace larder
