// Skipped test cases that say so. Catch2 v2 has no SKIP: a case that cannot
// run here (no test model, no CUDA device) WARNs, records why with
// note_skip(), and returns. The test binaries print how many cases were
// skipped and why when they end, and append one line per skipped case to the
// file named by $LARDER_SKIP_LOG (scripts/test.sh sums them up).
//
// A missing test model is a failure, not a skip, when skipping it is not
// allowed: in CI ($CI = "true") and whenever $LARDER_TEST_MODELS was set by
// hand (scripts/test.sh marks its own default with
// $LARDER_TEST_MODELS_DEFAULTED=1). Fixtures committed to the repository are
// never skipped: a missing one fails.
#pragma once

#include <string>

#include <catch2/catch.hpp>

namespace larder::testing {

// Records that the running test case is skipped for `reason`.
void note_skip(const std::string& reason);
// How many distinct test cases called note_skip(), and a summary line per
// reason ("3 test cases: <reason>"); printed by the test main at exit.
std::string skip_summary();
// False in CI or when $LARDER_TEST_MODELS was set explicitly (see above).
bool model_skips_allowed();

}  // namespace larder::testing

// Skips the rest of the running TEST_CASE (use at its top level).
#define LARDER_SKIP(reason_expr)                                        \
  do {                                                                  \
    const std::string larder_skip_reason_ = (reason_expr);              \
    WARN("skipped: " << larder_skip_reason_);                           \
    ::larder::testing::note_skip(larder_skip_reason_);                  \
    return;                                                             \
  } while (0)

// A missing test model: a skip where that is allowed, else a failure.
#define LARDER_MISSING_MODEL(file_expr)                                                       \
  do {                                                                                        \
    const std::string larder_missing_ = std::string("test model ") + (file_expr) +            \
                                        " not found (set LARDER_TEST_MODELS)";                \
    if (!::larder::testing::model_skips_allowed()) {                                         \
      FAIL(larder_missing_ << "; in CI, or with LARDER_TEST_MODELS set, it must be present"); \
    }                                                                                         \
    LARDER_SKIP(larder_missing_);                                                             \
  } while (0)
