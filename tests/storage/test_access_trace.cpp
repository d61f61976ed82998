// The access-trace writer on a device that refuses writes: one warning,
// then nothing more (the engine keeps pushing lines without harm).
#include <catch2/catch.hpp>

#include "storage/access_trace.h"
#include "tests/support/log_capture.h"

using namespace larder;
using larder::testing::LogCapture;

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
