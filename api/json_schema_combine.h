// Combining JSON Schemas, for json_schema_grammar: allOf's merge of its
// branches, and whether two oneOf branches share no value (the grammar
// writes a value of some branch, which is valid under oneOf only where no
// value fits two: JSON Schema 2020-12, core 10.2.1.3, "valid against
// exactly one").
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "storage/status.h"

namespace larder {

// s, or the schema its "$ref" (a chain of them) names; nullptr when a ref
// names nothing the caller knows.
using SchemaResolver = std::function<const nlohmann::ordered_json*(const nlohmann::ordered_json&)>;

// True when no JSON value is valid under both a and b, as far as these
// show: their types ("integer" counted inside "number"; OpenAPI's
// "nullable" adds null), their listed values (const, enum), the numeric
// intervals of two number-only schemas (minimum / maximum and their
// exclusive forms), or, recursively, those of a property both require.
// False when they may overlap or it cannot tell (a $ref resolve() cannot
// follow, a malformed keyword, more than 8 levels of properties): the
// caller then refuses the oneOf, never accepts an overlap.
bool schemas_disjoint(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b,
                      const SchemaResolver& resolve);

// Whether `key` is an annotation (title, description, $defs, ...): it
// constrains no value.
bool schema_annotation(std::string_view key);

// `a` with the keywords of `b` added (allOf's meaning): a keyword only one
// has is taken as it is; two objects' "properties" are joined (a property
// both list must satisfy both: an allOf of its two schemas), their
// "required" lists too, and "additionalProperties": false on either side
// keeps only the properties that side lists. Errors ("json schema at
// <where>: ..."): kOutOfRange when a property one side requires is not
// allowed by the other (nothing fits), kInvalidArgument for a non-object
// side, another keyword both have with different values, or
// "additionalProperties" as a schema beside false.
Result<nlohmann::ordered_json> merge_schemas(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b,
                                             const std::string& where);

}  // namespace larder
