// Whether two JSON Schemas share no valid value, for json_schema_grammar's
// oneOf: the grammar writes a value of some branch, which is valid under
// oneOf only where no value fits two branches (JSON Schema 2020-12, core
// 10.2.1.3: "valid against exactly one").
#pragma once

#include <functional>

#include <nlohmann/json.hpp>

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

}  // namespace larder
