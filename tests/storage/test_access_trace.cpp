// The access-trace writer on a device that refuses writes: one warning,
// then nothing more (the engine keeps pushing lines without harm).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "storage/access_trace.h"
#include "tests/support/log_capture.h"
#include "tests/support/temp_dir.h"

using namespace larder;
using larder::testing::LogCapture;
using larder::testing::TempDir;

TEST_CASE("access trace: a failing write (a full disk) is said once and writing stops", "[storage][trace]") {
  LogCapture cap;
  Result<std::unique_ptr<AccessTrace>> t = AccessTrace::open("/dev/full", 1024, 2048, 16);
  INFO(t.status().to_string());
  REQUIRE(t.is_ok());
  const PageKey k{1, 2};
  for (uint64_t req = 1; req <= 200; ++req) {
    (*t)->sealed(req, k, 0);
    (*t)->finished(req);
    if (req % 50 == 0) (*t)->flush();
  }
  (*t)->flush();
  CHECK(cap.count("writing the access trace failed") == 1);
}

// Found in hostile testing: a trace_file naming the model (or the config
// file) emptied it at start.
TEST_CASE("access trace: an existing file that is not a trace is refused and left as it is", "[storage][trace]") {
  TempDir tmp("trace");
  const std::string other = tmp.sub("model.gguf");
  {
    std::ofstream out(other, std::ios::binary);
    out << "GGUF\x03" << std::string(1000, 'w');
  }
  Result<std::unique_ptr<AccessTrace>> refused = AccessTrace::open(other, 1024, 2048, 16);
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(refused.status().message(), Catch::Contains("not a larder page-access trace"));
  CHECK(std::filesystem::file_size(other) == 1005);
  // A trace from an earlier run, and an empty file, are written over.
  const std::string trace = tmp.sub("trace.txt");
  for (int run = 0; run < 2; ++run) {
    Result<std::unique_ptr<AccessTrace>> t = AccessTrace::open(trace, 1024, 2048, 16);
    REQUIRE(t.is_ok());
  }
  const std::string empty = tmp.sub("empty.txt");
  std::ofstream(empty).close();
  CHECK(AccessTrace::open(empty, 1024, 2048, 16).is_ok());
}
