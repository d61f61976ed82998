// Helpers for the JSON Schema tests: a schema's compiled grammar (or fail
// the test), and the message of a refused one.
#pragma once

#include <memory>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "api/json_schema_grammar.h"
#include "tests/grammar/grammar_test_util.h"

namespace larder::testing {

inline std::shared_ptr<CompiledGrammar> from_schema(const std::string& schema) {
  Result<std::string> gbnf = json_schema_to_gbnf(nlohmann::ordered_json::parse(schema));
  INFO(gbnf.status().to_string());
  REQUIRE(gbnf.is_ok());
  INFO(*gbnf);
  return compile(*gbnf);
}

// The message the schema is refused with: kInvalidArgument, or kOutOfRange
// for a schema that allows nothing.
inline std::string refusal(const std::string& schema) {
  Result<std::string> gbnf = json_schema_to_gbnf(nlohmann::ordered_json::parse(schema));
  REQUIRE_FALSE(gbnf.is_ok());
  CHECK((gbnf.status().code() == StatusCode::kInvalidArgument || gbnf.status().code() == StatusCode::kOutOfRange));
  return gbnf.status().message();
}

}  // namespace larder::testing
