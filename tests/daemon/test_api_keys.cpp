// API keys from a key file and LARDER_API_KEY (daemon/api_keys.h).
#include <catch2/catch.hpp>

#include "daemon/api_keys.h"
#include "tests/daemon/config_test_util.h"

using namespace larder;
using larder::testing::ScopedEnv;
using larder::testing::TempFile;

TEST_CASE("read_api_key_file: one key per line, comments and blanks skipped", "[daemon][keys]") {
  TempFile f("keys.txt", "# team keys\n\nsk-alpha\n  sk-beta\t\r\n# sk-not-a-key\nsk-alpha\nsk-gamma");
  auto keys = read_api_key_file(f.path());
  INFO(keys.status().message());
  REQUIRE(keys.is_ok());
  CHECK(*keys == std::vector<std::string>{"sk-alpha", "sk-beta", "sk-gamma"});  // duplicates once
}

TEST_CASE("read_api_key_file errors name the file and line, never a key", "[daemon][keys]") {
  TempFile spaced("spaced.txt", "sk-good\nsk secret with spaces\n");
  auto r = read_api_key_file(spaced.path());
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(r.status().message(), Catch::Contains(spaced.path() + " line 2: not a key"));
  CHECK(r.status().message().find("secret") == std::string::npos);

  TempFile empty("empty.txt", "# nothing here\n\n");
  r = read_api_key_file(empty.path());
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("holds no key"));

  r = read_api_key_file("/nonexistent-larder-dir/keys");
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kNotFound);

  // Found in hostile testing: /dev/zero (an endless line) grew memory
  // without bound at start. A file past 1 MiB is refused after 1 MiB read.
  r = read_api_key_file("/dev/zero");
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("larger than 1 MiB"));
  TempFile big("big.txt", std::string(size_t(1) << 20, 'k') + "\n");
  r = read_api_key_file(big.path());
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("larger than 1 MiB"));
  // A key on a last line without a newline still counts.
  TempFile no_newline("last.txt", "# keys\nsk-last");
  r = read_api_key_file(no_newline.path());
  REQUIRE(r.is_ok());
  CHECK(*r == std::vector<std::string>{"sk-last"});
}

TEST_CASE("add_api_keys_from_file_and_env joins config, file and LARDER_API_KEY", "[daemon][keys]") {
  TempFile f("more-keys.txt", "sk-file\nsk-config\n");
  DaemonConfig c;
  c.server.api_keys = {"sk-config"};
  c.api_key_file = f.path();
  {
    ScopedEnv env(kApiKeyEnv, " sk-env ");
    REQUIRE(add_api_keys_from_file_and_env(c).is_ok());
  }
  CHECK(c.server.api_keys == std::vector<std::string>{"sk-config", "sk-file", "sk-env"});

  DaemonConfig none;
  {
    ScopedEnv env(kApiKeyEnv, "");
    REQUIRE(add_api_keys_from_file_and_env(none).is_ok());
  }
  CHECK(none.server.api_keys.empty());

  DaemonConfig bad;
  ScopedEnv env(kApiKeyEnv, "two words");
  Status st = add_api_keys_from_file_and_env(bad);
  REQUIRE_FALSE(st.is_ok());
  CHECK_THAT(st.message(), Catch::Contains("LARDER_API_KEY is not a key"));
  CHECK(st.message().find("words") == std::string::npos);
}

// Found in hostile testing: "<redacted>" (what --print-config shows for a
// key) was refused in the config file but taken from LARDER_API_KEY.
TEST_CASE("the redacted placeholder is not a key in LARDER_API_KEY or a key file", "[daemon][keys]") {
  {
    DaemonConfig c;
    ScopedEnv env(kApiKeyEnv, "<redacted>");
    Status st = add_api_keys_from_file_and_env(c);
    REQUIRE_FALSE(st.is_ok());
    CHECK_THAT(st.message(), Catch::Contains("--print-config hides the keys"));
  }
  TempFile f("redacted-keys.txt", "sk-real\n<redacted>\n");
  DaemonConfig c;
  c.api_key_file = f.path();
  ScopedEnv env(kApiKeyEnv, "");
  Status st = add_api_keys_from_file_and_env(c);
  REQUIRE_FALSE(st.is_ok());
  CHECK_THAT(st.message(), Catch::Contains("line 2"));
}
