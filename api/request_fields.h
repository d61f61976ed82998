// The top-level fields a request body may carry, per endpoint, in one table
// (request_fields.cpp, kKnownFields). A field not in it is refused with a
// 400 naming it, as OpenAI does ("Unrecognized request argument supplied:
// X"), so a misspelt or unimplemented option never passes unnoticed.
//
// Each entry is one of:
//   read     parsed by api/openai_request.cpp or api/request_constraints.cpp
//            (which refuse the values they cannot honour, e.g. the
//            kUnsupportedFields below);
//   ignored  accepted on purpose and without effect, because the field asks
//            for nothing that changes the answer here (`user`, `metadata`,
//            `store`, ...). Their value's JSON type is still checked. The
//            README lists them with the reason.
// Adding a field: one line in kKnownFields (and its parsing elsewhere).
#pragma once

#include <optional>
#include <string_view>

#include "api/api_error.h"
#include "api/request_json.h"

namespace larder {

enum class RequestEndpoint { kChat, kCompletion };

// The first top-level key of `obj` (a JSON object) that `endpoint` does not
// know: a 400 invalid_request_error "Unrecognized request argument
// supplied: <key>" with param = the key. For an ignored field whose value has
// the wrong JSON type (null always passes): a 400 naming it. nullopt when
// every key is known.
std::optional<ApiError> check_known_fields(const request_json::json& obj, RequestEndpoint endpoint);

// Whether `name` is a known top-level field of `endpoint` (read or ignored).
bool is_known_field(std::string_view name, RequestEndpoint endpoint);

// The fields of OpenAI's API or llama.cpp's server that larder does not
// implement (request_fields.cpp, kUnsupportedFields: suffix, best_of > 1,
// functions, n_probs, mirostat, ...): a 400 "'<name>' is not supported: ..."
// naming the first one that holds a value other than its "off" value;
// nullopt when none does.
std::optional<ApiError> refuse_unsupported(const request_json::json& obj);

}  // namespace larder
