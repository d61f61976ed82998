// JSON Schema -> GBNF (engine/grammar/grammar.h): a grammar whose sentences
// are JSON documents valid under the schema, for response_format
// {"type": "json_schema"} and llama.cpp's "json_schema" field.
//
// Supported: "type" (object, array, string, number, integer, boolean, null,
// or a list of them), "properties" with "required" (the others optional;
// properties come in the order the schema lists them), "additionalProperties"
// false or absent (only the listed properties), "items", "minItems" /
// "maxItems", "enum", "const", "anyOf" / "oneOf" (both as a choice; oneOf
// only where no value fits two branches: json_schema_combine.h), "allOf"
// of one schema, "$ref" to "#/$defs/..." or "#/definitions/..." (recursion
// allowed), "nullable" (OpenAPI 3.0: the schema or null), integer and number
// "minimum" / "maximum" / "exclusiveMinimum" / "exclusiveMaximum" (numeric,
// or draft 4's boolean forms; number_range.h: a bounded number is written
// without an exponent, and a number's bounds must be whole numbers),
// string "minLength" / "maxLength", "pattern" (an ECMAScript regular
// expression, string_dfa.h lists the syntax) and the formats "date",
// "time", "date-time", "uuid" and "email" (a pattern, a format and the
// lengths are met together), and the empty schema (any JSON value). Without
// a "type", the keywords say which is meant (properties: an object, pattern:
// a string, minimum: a number, ...).
// The output is compact JSON: at most one space between tokens. A string
// with minLength / maxLength or a pattern holds no character past U+FFFF
// (JSON Schema counts one, JavaScript's length two; string_dfa.h).
// Annotations ("title", "description", "default", "examples", "$schema",
// "$id", "$comment", "deprecated", "readOnly", "writeOnly") are ignored.
//
// Refused (kInvalidArgument naming the keyword and where): every other
// keyword, notably "multipleOf", "additionalProperties" true or a schema,
// "patternProperties", "prefixItems", "uniqueItems" true ("uniqueItems":
// false asks nothing and is accepted), "not", "if", other
// formats, what string_dfa.h refuses in a pattern (lookbehind,
// backreferences, \b, ...), a fractional bound for a number, a range that
// holds no value, refs outside the document, schemas nested over 64 deep,
// more than 10000 properties in all its objects, a grammar over 4 MiB (a
// huge enum). An object's properties take O(n) rules and a top-down
// expansion through O(log n) of them (any number of optional ones is fine).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "engine/grammar/string_dfa.h"
#include "storage/status.h"

namespace larder {

// `schema` keeps its keys' order (ordered_json): properties come out in
// the order the client listed them, as OpenAI's strict mode does. The
// schema's patterns and formats spend `budget` (string_dfa.h; a fresh one
// of 128M units, under a second of a core, when null): conversions that
// share one are bounded together (a forced call of one of many tools).
Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema, DfaBudget* budget = nullptr);

// The budget json_schema_to_gbnf starts from when given none.
inline constexpr size_t kSchemaDfaBudget = size_t(128) << 20;

}  // namespace larder
