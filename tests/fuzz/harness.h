// Fuzz harnesses: one function per parser that takes bytes from outside
// (HTTP requests, JSON request bodies, chat template sources, GGUF files,
// page and answer records from the disk tier, tool calls in model output).
//
// Each takes any bytes and must return 0 without crashing, hanging or
// tripping a sanitizer: bad input is an error value, never a crash. They are
// driven by libFuzzer (tests/fuzz/fuzz_main.cc, built with clang when
// LARDER_FUZZ=ON; bench/fuzz.sh runs them) and replayed by the Catch2
// binary test_fuzz over the committed seed corpus and every input a fuzzer
// ever crashed on (tests/fuzz/regressions/<target>/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

// An invariant of the code under test that a harness checks on every input:
// breaking it stops the process like a crash (libFuzzer records the input).
#define LARDER_FUZZ_ASSERT(cond) \
  do {                           \
    if (!(cond)) __builtin_trap(); \
  } while (0)

namespace larder::fuzz {

// Bytes a client sends on a connection (HttpRequestParser), fed whole and in
// pieces of 1 + data[0] % 16 bytes: both must give the same requests.
int http_request(const uint8_t* data, size_t size);
// Body of POST /v1/chat/completions and /v1/completions; the first byte
// picks which (and, for a third of the inputs, parses the rest as model
// output containing tool calls in one of the syntaxes).
int request_body(const uint8_t* data, size_t size);
// A chat template: the source is parsed, and rendered with a small chat.
int chat_template(const uint8_t* data, size_t size);
// A GGUF file: header, metadata and tensor infos; when that parses, the
// tokenizer and the chat format are built from it as at model load.
int gguf_file(const uint8_t* data, size_t size);
// A page record (and, with the first byte odd, an answer record) read back
// from the disk tier, checked against fixed expectations.
int disk_record(const uint8_t* data, size_t size);

struct Target {
  std::string_view name;
  int (*run)(const uint8_t*, size_t);
};
inline constexpr Target kTargets[] = {
    {"http_request", http_request},
    {"request_body", request_body},
    {"chat_template", chat_template},
    {"gguf_file", gguf_file},
    {"disk_record", disk_record},
};

}  // namespace larder::fuzz
