#include "storage/status.h"

namespace larder {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "Invalid argument";
    case StatusCode::kNotFound: return "Not found";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kUnsupported: return "Unsupported";
    case StatusCode::kOutOfRange: return "Out of range";
    case StatusCode::kResourceExhausted: return "Resource exhausted";
    case StatusCode::kIOError: return "IO error";
    case StatusCode::kCancelled: return "Cancelled";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "OK";
  return std::string(status_code_name(code_)) + ": " + message_;
}

}  // namespace larder
