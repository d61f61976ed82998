// parse_command_line: flags, precedence (defaults < file < flags), the
// LARDER_CONFIG variable, --help / --version, and flag errors.
#include <catch2/catch.hpp>

#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "daemon/command_line.h"
#include "tests/daemon/config_test_util.h"
#include "tests/support/log_capture.h"

using namespace larder;
using larder::testing::ScopedEnv;
using larder::testing::TempFile;

namespace {

Result<CommandLine> parse(std::initializer_list<const char*> args, const DaemonConfig& defaults = DaemonConfig{}) {
  std::vector<const char*> argv = {"larderd"};
  argv.insert(argv.end(), args.begin(), args.end());
  return parse_command_line(int(argv.size()), argv.data(), defaults);
}

std::string error_of(std::initializer_list<const char*> args) {
  auto r = parse(args);
  REQUIRE_FALSE(r.is_ok());
  return r.status().message();
}

}  // namespace

TEST_CASE("no flags: the defaults, no config file", "[daemon][cli]") {
  ScopedEnv env("LARDER_CONFIG", nullptr);
  DaemonConfig defaults;
  defaults.engine.cache.disk.dir = "/var/cache/x";
  auto r = parse({}, defaults);
  REQUIRE(r.is_ok());
  CHECK_FALSE(r->exit_now);
  CHECK(r->config_path.empty());
  larder::testing::check_same_config(r->config, defaults);
}

TEST_CASE("every flag sets its key", "[daemon][cli]") {
  ScopedEnv env("LARDER_CONFIG", nullptr);
  auto r = parse({"--model", "/models/a.gguf", "--host", "0.0.0.0", "--port", "9001", "--cache-dir", "/srv/c",
                  "--threads", "3", "--ctx", "512", "--log-level", "warn", "--api-key-file", "/etc/larder/keys"});
  INFO(r.status().message());
  REQUIRE(r.is_ok());
  const DaemonConfig& c = r->config;
  CHECK(c.engine.model_path == "/models/a.gguf");
  CHECK(c.server.host == "0.0.0.0");
  CHECK(c.server.port == 9001);
  CHECK(c.engine.cache.disk.dir == "/srv/c");
  CHECK(c.engine.n_threads == 3);
  CHECK(c.engine.n_ctx == 512);
  CHECK(c.log_level == "warn");
  CHECK(c.api_key_file == "/etc/larder/keys");

  // --cache-dir sets [cache.disk] dir, the new name: no old-name warning.
  {
    larder::testing::LogCapture log;
    REQUIRE(parse({"--cache-dir", "/srv/d"}).is_ok());
    CHECK(log.count("old name") == 0);
  }

  // --flag=value works too; --cache-dir "" disables the disk tier.
  r = parse({"--port=7000", "--cache-dir", ""});
  INFO(r.status().message());
  REQUIRE(r.is_ok());
  CHECK(r->config.server.port == 7000);
  CHECK(r->config.engine.cache.disk.dir.empty());
}

TEST_CASE("flags override the config file, the file overrides the defaults", "[daemon][cli]") {
  ScopedEnv env("LARDER_CONFIG", nullptr);
  TempFile file("cli.toml", "[server]\nport = 9100\nhost = \"::1\"\n[cache]\npage_size = 64\n");
  auto r = parse({"--config", file.path().c_str(), "--port", "9200"});
  INFO(r.status().message());
  REQUIRE(r.is_ok());
  CHECK(r->config_path == file.path());
  CHECK(r->config.server.port == 9200);         // flag beats file
  CHECK(r->config.server.host == "::1");        // file beats default
  CHECK(r->config.engine.cache.page_size == 64);      // file beats default
  CHECK(r->config.engine.max_running == 8);     // untouched default
  // Order on the command line does not matter: the file is read first.
  r = parse({"--port", "9200", "--config", file.path().c_str()});
  REQUIRE(r.is_ok());
  CHECK(r->config.server.port == 9200);
}

TEST_CASE("LARDER_CONFIG names a config file; --config wins over it", "[daemon][cli]") {
  TempFile env_file("env.toml", "[server]\nport = 9300\n");
  TempFile flag_file("flag.toml", "[server]\nport = 9400\n");
  ScopedEnv env("LARDER_CONFIG", env_file.path().c_str());
  auto r = parse({});
  REQUIRE(r.is_ok());
  CHECK(r->config.server.port == 9300);
  CHECK(r->config_path == env_file.path());
  r = parse({"--config", flag_file.path().c_str()});
  REQUIRE(r.is_ok());
  CHECK(r->config.server.port == 9400);
  // --config "" reads no file at all, even with LARDER_CONFIG set.
  r = parse({"--config", ""});
  REQUIRE(r.is_ok());
  CHECK(r->config.server.port == 8080);
  CHECK(r->config_path.empty());
}

TEST_CASE("a missing --config file is an error naming it", "[daemon][cli]") {
  ScopedEnv env("LARDER_CONFIG", nullptr);
  const std::string missing = (std::filesystem::temp_directory_path() / "larder-missing-cli.toml").string();
  auto r = parse({"--config", missing.c_str()});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kNotFound);
  CHECK_THAT(r.status().message(), Catch::Contains(missing));
}

TEST_CASE("--config naming a directory is an error, not the defaults", "[daemon][cli]") {
  ScopedEnv env("LARDER_CONFIG", nullptr);
  const std::string dir = std::filesystem::temp_directory_path().string();
  CHECK_THAT(error_of({"--config", dir.c_str()}), Catch::Contains(dir + " is a directory"));
}

TEST_CASE("bad flag values are errors naming the flag and the range", "[daemon][cli]") {
  ScopedEnv env("LARDER_CONFIG", nullptr);
  CHECK(error_of({"--port", "70000"}) == "--port 70000: must be an integer between 0 and 65535 (0: any free port)");
  CHECK_THAT(error_of({"--port", "80x"}), Catch::Contains("--port 80x: must be an integer between 0 and 65535"));
  CHECK_THAT(error_of({"--threads", "-2"}), Catch::Contains("--threads -2: must be an integer between 0 and 1024"));
  CHECK_THAT(error_of({"--ctx", "2000000"}), Catch::Contains("--ctx 2000000: must be an integer between 0 and 1048576"));
  CHECK_THAT(error_of({"--log-level", "loud"}), Catch::Contains("--log-level loud: must be one of trace"));
  CHECK_THAT(error_of({"--host", ""}), Catch::Contains("--host : must be a non-empty host name"));
  CHECK_THAT(error_of({"--frobnicate"}), Catch::Contains("--frobnicate") && Catch::Contains("see larderd --help"));
  CHECK_THAT(error_of({"--port"}), Catch::Contains("--port") && Catch::Contains("see larderd --help"));
  CHECK_THAT(error_of({"stray"}), Catch::Contains("stray"));
}

TEST_CASE("--draft-model needs draft tokens, from --draft-tokens or the file", "[daemon][cli]") {
  ScopedEnv env("LARDER_CONFIG", nullptr);
  CHECK_THAT(error_of({"--model", "m.gguf", "--draft-model", "d.gguf"}),
             Catch::Contains("engine.draft_model is set but engine.draft_tokens is 0") &&
                 Catch::Contains("--draft-tokens"));
  auto r = parse({"--model", "m.gguf", "--draft-model", "d.gguf", "--draft-tokens", "6"});
  REQUIRE(r.is_ok());
  CHECK(r->config.engine.draft_model == "d.gguf");
  CHECK(r->config.engine.draft_tokens == 6);
  CHECK_THAT(error_of({"--draft-tokens", "33"}), Catch::Contains("between 0 and 32"));
  TempFile file("draft.toml", "[engine]\ndraft_tokens = 3\n");
  r = parse({"--config", file.path().c_str(), "--draft-model", "d.gguf"});
  REQUIRE(r.is_ok());
  CHECK(r->config.engine.draft_tokens == 3);
  // A flag of "" takes back the file's draft model.
  TempFile with_model("draft2.toml", "[engine]\ndraft_model = \"d.gguf\"\n");
  CHECK_THAT(error_of({"--config", with_model.path().c_str()}), Catch::Contains("draft_tokens is 0"));
  r = parse({"--config", with_model.path().c_str(), "--draft-model", ""});
  REQUIRE(r.is_ok());
  CHECK(r->config.engine.draft_model.empty());
}

TEST_CASE("--help, --version and --print-config ask to exit", "[daemon][cli]") {
  ScopedEnv env("LARDER_CONFIG", nullptr);
  auto r = parse({"--help"});
  REQUIRE(r.is_ok());
  CHECK(r->exit_now);
  for (const char* flag : {"--model", "--host", "--port", "--cache-dir", "--config", "--threads", "--ctx",
                           "--log-level", "--version", "--help"}) {
    CHECK_THAT(r->output, Catch::Contains(flag));
  }
  CHECK_THAT(r->output, Catch::Contains("is NOT") && Catch::Contains("LARDER_CONFIG"));
  // The cache's keys by their new names.
  for (const char* key : {"[cache.disk] dir", "[cache.device] budget", "[cache.host] budget", "ttl"}) {
    CHECK_THAT(r->output, Catch::Contains(key));
  }

  r = parse({"--version"});
  REQUIRE(r.is_ok());
  CHECK(r->exit_now);
  CHECK_THAT(r->output, Catch::StartsWith("larderd "));

  r = parse({"--port", "1234", "--print-config"});
  REQUIRE(r.is_ok());
  CHECK(r->exit_now);
  CHECK_THAT(r->output, Catch::Contains("[server]\nhost = \"127.0.0.1\"\nport = 1234\n"));

  // The cache's tables, from a file using an old name, print with the new ones.
  TempFile old("old-names.toml", "[cache]\nmemory_capacity = \"2GiB\"\n");
  r = parse({"--config", old.path().c_str(), "--cache-dir", "/srv/k", "--print-config"});
  INFO(r.status().message());
  REQUIRE(r.is_ok());
  CHECK_THAT(r->output, Catch::Contains("\n[cache.device]\nbudget = \"2GiB\"\npolicy = \"lru\"\n"));
  CHECK_THAT(r->output, Catch::Contains("\n[cache.disk]\ndir = \"/srv/k\"\n"));
  CHECK(r->output.find("memory_capacity") == std::string::npos);
}

// Found in hostile testing: `--cache-dir --print-config` started serving
// with a store in ./--print-config, and `--cache-dir --port 18863` took
// --port for the directory.
TEST_CASE("a value flag given no value is an error, not the next flag as its value", "[daemon][cli]") {
  ScopedEnv env("LARDER_CONFIG", nullptr);
  CHECK_THAT(error_of({"--cache-dir", "--print-config"}),
             Catch::Contains("--cache-dir needs a value (got the flag --print-config)"));
  CHECK_THAT(error_of({"--model", "--version"}), Catch::Contains("--model needs a value"));
  CHECK_THAT(error_of({"--config", "--print-config"}), Catch::Contains("--config needs a value"));
  auto dotted = parse({"--cache-dir", "./--odd"});  // such a path, spelled so
  REQUIRE(dotted.is_ok());
  CHECK(dotted->config.engine.cache.disk.dir == "./--odd");
}
