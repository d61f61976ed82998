// A ready GBNF grammar for JSON (RFC 8259), for response_format
// {"type": "json_object"} and as the base of schema grammars. Whitespace
// between tokens is one space, or one newline and up to 20 spaces or tabs
// of indentation (as llama.cpp's grammars/json.gbnf: pretty-printed JSON
// fits, runs of blank lines do not), and numbers
// have at most 16 digits before and after the point and 2 in the exponent,
// so that a model cannot run on forever inside one of them and every
// number fits a double (below 1e116).
#pragma once

#include <string_view>

namespace larder {

// Rules: root (an object), value, object, array, string, char, hex,
// number, ws.
extern const std::string_view kJsonObjectGbnf;
// The same rules with `root ::= value` (any JSON value).
extern const std::string_view kJsonValueGbnf;

}  // namespace larder
