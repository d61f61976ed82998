// Replays every committed fuzz input through its harness: the seed corpus
// (tests/fuzz/corpus/<target>/) and each input a fuzzer crashed on
// (tests/fuzz/regressions/<target>/, named after what it broke). A crash
// found by bench/fuzz.sh is fixed, and its input lands in regressions/ so
// that this test keeps it fixed in every build, with or without clang.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <spdlog/spdlog.h>

#include "tests/fuzz/harness.h"

namespace fs = std::filesystem;
using namespace larder::fuzz;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("every committed fuzz input passes its harness", "[fuzz]") {
  spdlog::set_level(spdlog::level::off);
  const fs::path root = fs::path(LARDER_SOURCE_DIR) / "tests" / "fuzz";
  for (const Target& t : kTargets) {
    int n_inputs = 0;
    for (const char* kind : {"corpus", "regressions"}) {
      const fs::path dir = root / kind / std::string(t.name);
      std::error_code ec;
      if (!fs::is_directory(dir, ec)) continue;
      for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
        if (!e.is_regular_file()) continue;
        const std::string bytes = read_file(e.path());
        INFO(t.name << ": " << e.path().filename().string());
        CHECK(t.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) == 0);
        ++n_inputs;
      }
    }
    INFO(t.name);
    // Every target has a seed corpus.
    CHECK(n_inputs > 0);
  }
}
