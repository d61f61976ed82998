// Where tests find ../shared/models (stories260K GGUF files, reference.json).
#pragma once

#include <optional>
#include <string>

#include "tests/support/skip.h"

namespace larder::testing {

// The test model directory: $LARDER_TEST_MODELS if set, else the repository's
// ../shared/models. Returns nullopt (and the caller should SKIP/WARN) when the
// directory or the requested file does not exist.
std::optional<std::string> test_model_path(const std::string& file_name);

// Same directory, for reference.json etc.
std::optional<std::string> test_models_dir();

}  // namespace larder::testing

// Use at the top of a TEST_CASE that needs a real model file:
//   LARDER_REQUIRE_MODEL(path, "stories260K.gguf");
// Declares `std::string path`; when the file is absent the case is skipped
// (or fails in CI / with LARDER_TEST_MODELS set: tests/support/skip.h).
#define LARDER_REQUIRE_MODEL(var, file)                                           \
  auto var##_opt = ::larder::testing::test_model_path(file);                      \
  if (!var##_opt) LARDER_MISSING_MODEL(file);                                     \
  const std::string var = *var##_opt
