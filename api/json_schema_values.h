// The value keywords of a JSON Schema, for json_schema_grammar: the bounds
// of numbers (minimum / maximum and their exclusive forms) as a grammar,
// and the formats of strings as automata.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "engine/grammar/string_dfa.h"
#include "storage/status.h"

namespace larder {

// "json schema at <where>: <what>": kInvalidArgument, for a keyword the
// grammar cannot enforce or a malformed one, and kOutOfRange, for a schema
// that allows no value (an anyOf leaves such a branch out).
Status schema_error(const std::string& where, const std::string& what);
Status schema_allows_nothing(const std::string& where, const std::string& what);

// A JSON number's value; long double holds every int64 and uint64 exactly.
long double json_number(const nlohmann::ordered_json& v);

// The bound of one side of `s`: "minimum" / "maximum" (made exclusive by a
// draft-4 boolean exclusiveMinimum / exclusiveMaximum) and the draft-6
// numeric exclusive form, the tighter of them; nullopt when there is none.
// long double holds every int64 exactly (x86's 80-bit and the 128-bit
// formats both). kInvalidArgument ("json schema at <where>/<keyword>: ...")
// for a bound that is not a number.
struct SchemaBound {
  long double value;
  bool exclusive;
};
Result<std::optional<SchemaBound>> schema_bound(const nlohmann::ordered_json& s, const std::string& where, bool lower);

// A GBNF expression for the integers (integer) or numbers of `s`'s type
// within its bounds (number_range.h): "integer" / "number" (the converter's
// rules) when there are none. kOutOfRange for a range that holds nothing
// the grammar writes, kInvalidArgument for a number's fractional bound.
Result<std::string> number_gbnf(const nlohmann::ordered_json& s, const std::string& where, bool integer);

// The automaton of a supported "format" (date, time, date-time, uuid,
// email), built once per process; null for any other.
const StringDfa* format_automaton(const std::string& fmt);

// A string schema's minLength / maxLength (non-negative integers; 2.0
// counts as 2): (min, max), max -1 when there is none. kInvalidArgument for
// another value or one above 10000, kOutOfRange for max < min.
Result<std::pair<int64_t, int64_t>> string_lengths(const nlohmann::ordered_json& s, const std::string& where);

// The automaton of a string's format, pattern and lengths together
// (string_dfa.h), or nullopt when it has none of them; its states count
// against `budget`. A format and a pattern that have no string in common
// (zod 4's z.iso.time() pattern has no offset, the "time" format requires
// one): the pattern alone, the format taken as the annotation JSON Schema
// 2020-12 makes it by default. kInvalidArgument for an unsupported format,
// a pattern StringDfa cannot compile, or an automaton over the budget.
Result<std::optional<StringDfa>> string_automaton(const nlohmann::ordered_json& s, const std::string& where,
                                                  DfaBudget* budget);

}  // namespace larder
