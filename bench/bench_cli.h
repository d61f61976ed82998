// The command line of the bench programs: CLI11, as the daemon's (so every
// bench has --help, typed options, comma-separated lists and clear errors).
#pragma once

#include <cstdlib>
#include <limits>

#include <CLI/CLI.hpp>

namespace larder::bench {

// Checks for counts (CLI11's PositiveNumber prints its range up to DBL_MAX).
inline const CLI::Range kPositive(1, std::numeric_limits<int>::max());
inline const CLI::Range kNonNegative(0, std::numeric_limits<int>::max());

// Parses argv into the options registered on `app`. --help prints the usage
// and exits 0; a parse or validation error prints CLI11's message and the
// usage and exits non-zero (CLI11's exit code for that error).
inline void parse_or_exit(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
}

}  // namespace larder::bench
