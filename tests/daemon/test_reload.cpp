// ConfigReloader (daemon/reload.h): the file read again with the same
// flags on top, what is applied live, what is reported as needing a
// restart, and that a bad file or a refused cache change applies nothing.
#include <fstream>

#include <catch2/catch.hpp>
#include <spdlog/spdlog.h>

#include "daemon/command_line.h"
#include "daemon/reload.h"
#include "tests/daemon/config_test_util.h"

using namespace larder;
using namespace larder::testing;

namespace {

const char* kV1 = R"([server]
port = 9000

[cache.device]
budget = "512MiB"

[sampling]
temperature = 0.5
)";

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::trunc) << text; }

struct Fixture {
  TempFile file{"reload.toml", kV1};
  std::vector<std::string> args{"larderd", "--config", file.path(), "--model", "m.gguf", "--cache-dir", "", "--port",
                                "0"};
  std::vector<CacheOptions> applied;  // what reconfigure got
  Status refuse;                      // what reconfigure answers
  std::unique_ptr<ConfigReloader> reloader;

  Fixture() {
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    auto start = parse_command_line(int(argv.size()), argv.data(), default_config());
    REQUIRE(start.is_ok());
    reloader = std::make_unique<ConfigReloader>(args, start->config, [this](const CacheOptions& c) {
      if (!refuse.is_ok()) return refuse;
      applied.push_back(c);
      return Status::ok();
    });
  }
};

}  // namespace

TEST_CASE("reload: live keys are applied, others reported as needing a restart", "[daemon][reload]") {
  ScopedEnv key("LARDER_API_KEY", nullptr);
  Fixture f;
  // The flag --port 0 wins over the file's 9000, as at start.
  CHECK(f.reloader->in_force().server.port == 0);
  Result<ReloadReport> same = f.reloader->reload();
  REQUIRE(same.is_ok());
  CHECK(same->config_path == f.file.path());
  CHECK(same->changed.empty());
  CHECK(same->restart_needed.empty());
  CHECK(f.applied.empty());

  write(f.file.path(), R"([server]
port = 9001
max_connections = 10
admin_token = "adm-secret"

[cache.device]
budget = "256MiB"

[sampling]
temperature = 0.25
max_tokens = 100

[log]
level = "warn"
)");
  Result<ReloadReport> r = f.reloader->reload();
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  REQUIRE(f.applied.size() == 1);
  CHECK(f.applied[0].device.budget_bytes == 268435456);  // 256 * 2^20
  CHECK(f.applied[0].disk.dir.empty());                  // --cache-dir "" again
  CHECK(r->changed == std::vector<std::string>{"cache.device.budget: \"512MiB\" -> \"256MiB\"",
                                               "sampling.temperature: 0.5 -> 0.25",
                                               "sampling.max_tokens: -1 -> 100", "log.level: \"info\" -> \"warn\""});
  // --port 0 still wins over the file; these two did change.
  CHECK(r->restart_needed ==
        std::vector<std::string>{"server.max_connections: 1024 -> 10", "server.admin_token changed"});
  CHECK(r->default_sampling.temperature == 0.25f);
  CHECK(r->default_max_tokens == 100);
  CHECK(spdlog::get_level() == spdlog::level::warn);
  spdlog::set_level(spdlog::level::info);

  const DaemonConfig now = f.reloader->in_force();
  CHECK(now.engine.cache.device.budget_bytes == 268435456);
  CHECK(now.server.default_sampling.temperature == 0.25f);
  CHECK(now.server.max_connections == 1024);  // not applied
  CHECK(now.server.admin_token.empty());

  // Reported again until a restart; nothing else changed.
  Result<ReloadReport> again = f.reloader->reload();
  REQUIRE(again.is_ok());
  CHECK(again->changed.empty());
  CHECK(again->restart_needed.size() == 2);
  CHECK(f.applied.size() == 1);
}

TEST_CASE("reload: a bad file or a refused cache change applies nothing", "[daemon][reload]") {
  ScopedEnv key("LARDER_API_KEY", nullptr);
  Fixture f;
  write(f.file.path(), "[cache.device]\nbudget = \"12XB\"\n[sampling]\ntemperature = 0.1\n");
  Result<ReloadReport> bad = f.reloader->reload();
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad.status().message(), Catch::Contains("cache.device.budget = \"12XB\""));
  CHECK(f.applied.empty());
  CHECK(f.reloader->in_force().server.default_sampling.temperature == 0.5f);

  write(f.file.path(), "[cache]\npage_size = 32\n[sampling]\ntemperature = 0.1\n");
  f.refuse = Status::invalid_argument("cache.page_size changed (16 -> 32): this needs a restart");
  Result<ReloadReport> refused = f.reloader->reload();
  REQUIRE_FALSE(refused.is_ok());
  CHECK_THAT(refused.status().message(), Catch::Contains("cache.page_size"));
  const DaemonConfig now = f.reloader->in_force();
  CHECK(now.engine.cache.page_size == 16);
  CHECK(now.server.default_sampling.temperature == 0.5f);  // the sampling change waited for the cache's

  std::filesystem::remove(f.file.path());
  Result<ReloadReport> gone = f.reloader->reload();
  CHECK(gone.status().code() == StatusCode::kNotFound);
  CHECK_THAT(gone.status().message(), Catch::Contains(f.file.path()));
}
