// libFuzzer entry point for one harness (tests/fuzz/harness.h), chosen at
// compile time: -DLARDER_FUZZ_HARNESS=request_body builds fuzz_request_body.
#include <cstddef>
#include <cstdint>

#include <spdlog/spdlog.h>

#include "tests/fuzz/harness.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // parsers log what they reject
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return larder::fuzz::LARDER_FUZZ_HARNESS(data, size);
}
