// The test binaries' main: Catch2's session, then the skip summary
// (tests/support/skip.h) so that a run says what it did not test.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "tests/support/skip.h"

int main(int argc, char* argv[]) {
  const int result = Catch::Session().run(argc, argv);
  const std::string summary = larder::testing::skip_summary();
  if (!summary.empty()) std::fputs(summary.c_str(), stdout);
  return result;
}
