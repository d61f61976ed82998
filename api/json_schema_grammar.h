// JSON Schema -> GBNF (engine/grammar/grammar.h): a grammar whose sentences
// are JSON documents valid under the schema, for response_format
// {"type": "json_schema"} and llama.cpp's "json_schema" field.
//
// Supported: "type" (object, array, string, number, integer, boolean, null,
// or a list of them), "properties" with "required" (the others optional;
// properties come in the order the schema lists them), "additionalProperties"
// false or absent (only the listed properties), "items", "minItems" /
// "maxItems", "enum", "const", "anyOf" / "oneOf" (both as a choice), "allOf"
// of one schema, "$ref" to "#/$defs/..." or "#/definitions/..." (recursion
// allowed), string "minLength" / "maxLength" and the formats "date",
// "time", "date-time" and "uuid", and the empty schema (any JSON value).
// The output is compact JSON: at most one space between tokens.
// Annotations ("title", "description", "default", "examples", "$schema",
// "$id", "$comment", "deprecated", "readOnly", "writeOnly") are ignored.
//
// Refused (kInvalidArgument naming the keyword and where): every other
// keyword, notably "pattern", "minimum" / "maximum" and their exclusive
// forms, "multipleOf", "additionalProperties" true or a schema,
// "patternProperties", "prefixItems", "uniqueItems", "not", "if", other
// formats, refs outside the document, schemas nested over 64 deep, more
// than 10000 properties in all its objects, a grammar over 4 MiB (a huge
// enum). An object's properties take O(n) rules and a top-down expansion
// through O(log n) of them (any number of optional ones is fine).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "storage/status.h"

namespace larder {

// `schema` keeps its keys' order (ordered_json): properties come out in
// the order the client listed them, as OpenAI's strict mode does.
Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema);

}  // namespace larder
