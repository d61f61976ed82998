// API keys from a key file and the environment, added at start to the keys
// of the config file ([server] api_keys). The keys themselves never appear
// in a message or a log line.
#pragma once

#include <string>
#include <vector>

#include "daemon/config.h"
#include "storage/status.h"

namespace larder {

// The environment variable holding one more key.
inline constexpr const char* kApiKeyEnv = "LARDER_API_KEY";

// Reads a key file: one key per line; surrounding spaces and tabs are
// trimmed; empty lines and lines starting with '#' are skipped. Errors:
// kNotFound / kIOError naming the path; kInvalidArgument naming the line of
// a key that is not 1 to 4096 printable ASCII characters without spaces, or
// when the file holds no key at all (an empty key file must not turn the
// keys off) or is larger than 1 MiB (/dev/zero must not fill memory).
Result<std::vector<std::string>> read_api_key_file(const std::string& path);

// Appends the keys of config.api_key_file (when set) and of $LARDER_API_KEY
// (when set and not empty) to config.server.api_keys, dropping duplicates.
// Errors: those of read_api_key_file; kInvalidArgument when LARDER_API_KEY
// is not a valid key.
Status add_api_keys_from_file_and_env(DaemonConfig& config);

}  // namespace larder
