#include "daemon/api_keys.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "api/access_policy.h"
#include "daemon/config_schema.h"

namespace larder {

namespace {

constexpr size_t kMaxKeyFileBytes = size_t(1) << 20;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

void add_unique(std::vector<std::string>& keys, std::string key) {
  if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(std::move(key));
}

}  // namespace

Result<std::vector<std::string>> read_api_key_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::invalid_argument("api_key_file " + path + " is a directory, not a key file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    const std::string what = "cannot read api_key_file " + path + ": " + std::strerror(err);
    return err == ENOENT ? Status::not_found(what) : Status::io_error(what);
  }
  // Read at most kMaxKeyFileBytes (+1 to tell a larger file): /dev/zero or a
  // huge file without newlines must not grow memory without bound.
  std::string text(kMaxKeyFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return Status::io_error("cannot read api_key_file " + path);
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxKeyFileBytes) {
    return Status::invalid_argument("api_key_file " + path + " is larger than " + std::to_string(kMaxKeyFileBytes >> 20) +
                                    " MiB: not a key file");
  }
  std::vector<std::string> keys;
  std::string_view rest(text);
  for (int n = 1; !rest.empty(); ++n) {
    const size_t eol = rest.find('\n');
    const std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    const std::string_view key = trim(line);
    if (key.empty() || key.front() == '#') continue;
    if (!valid_api_key(key)) {
      return Status::invalid_argument("api_key_file " + path + " line " + std::to_string(n) +
                                      ": not a key (1 to 4096 printable ASCII characters without spaces)");
    }
    if (key == config_schema::kRedacted) {
      return Status::invalid_argument("api_key_file " + path + " line " + std::to_string(n) + ": " +
                                      std::string(config_schema::kRedacted) +
                                      " is what --print-config shows for a key; put the real one");
    }
    add_unique(keys, std::string(key));
  }
  if (keys.empty()) return Status::invalid_argument("api_key_file " + path + " holds no key");
  return keys;
}

Status add_api_keys_from_file_and_env(DaemonConfig& config) {
  std::vector<std::string>& keys = config.server.api_keys;
  if (!config.api_key_file.empty()) {
    LARDER_ASSIGN_OR_RETURN(std::vector<std::string> from_file, read_api_key_file(config.api_key_file));
    for (std::string& k : from_file) add_unique(keys, std::move(k));
  }
  const char* env = std::getenv(kApiKeyEnv);
  if (env != nullptr && *env != '\0') {
    const std::string_view key = trim(env);
    if (!valid_api_key(key)) {
      return Status::invalid_argument(std::string(kApiKeyEnv) +
                                      " is not a key (1 to 4096 printable ASCII characters without spaces)");
    }
    // As in the config file (found in hostile testing: accepted here).
    if (key == config_schema::kRedacted) {
      return Status::invalid_argument(std::string(kApiKeyEnv) + " is " + std::string(config_schema::kRedacted) +
                                      ": --print-config hides the keys; set the real one");
    }
    add_unique(keys, std::string(key));
  }
  return Status::ok();
}

}  // namespace larder
