// The [cache] tables: the ways TOML lets a tier's keys be written, the new
// keys' types as flag text, and the old key names (aliases) with their
// warnings. Expected values are computed by hand from the units (GiB =
// 2^30, d = 86400 s), not taken from the code.
#include <catch2/catch.hpp>

#include <string>

#include "daemon/config.h"
#include "tests/daemon/config_test_util.h"
#include "tests/support/log_capture.h"

using namespace larder;
using larder::testing::ScopedEnv;
using larder::testing::TempFile;

namespace {

std::string error_of(std::string_view toml) {
  auto r = load_config_string(toml, DaemonConfig{});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  return r.status().message();
}

}  // namespace

TEST_CASE("a tier's keys may be written as a nested table, dotted keys or an inline table", "[daemon][config]") {
  // All four say [cache.disk] budget = 2GiB, ttl = 30 days (TOML makes them
  // the same document).
  const char* forms[] = {
      "[cache.disk]\nbudget = \"2GiB\"\nttl = \"30d\"\n",
      "[cache]\ndisk.budget = \"2GiB\"\ndisk.ttl = \"30d\"\n",
      "[cache]\ndisk = { budget = \"2GiB\", ttl = \"30d\" }\n",
      "cache.disk.budget = \"2GiB\"\ncache.disk.ttl = 2592000\n",  // a bare integer: seconds
  };
  for (const char* toml : forms) {
    INFO(toml);
    auto r = load_config_string(toml, DaemonConfig{});
    INFO(r.status().message());
    REQUIRE(r.is_ok());
    CHECK(r->engine.cache.disk.budget_bytes == 2147483648);  // 2 * 2^30
    CHECK(r->engine.cache.disk.ttl_seconds == 2592000);      // 30 * 86400
  }
  // "0" and 0 both mean never; the limit, 100 years of 365.25 days, is allowed.
  for (const char* ttl : {"\"0\"", "0", "\"0s\""}) {
    auto r = load_config_string(std::string("[cache.disk]\nttl = ") + ttl, DaemonConfig{});
    REQUIRE(r.is_ok());
    CHECK(r->engine.cache.disk.ttl_seconds == 0);
  }
  auto max = load_config_string("[cache.disk]\nttl = \"36525d\"", DaemonConfig{});
  REQUIRE(max.is_ok());
  CHECK(max->engine.cache.disk.ttl_seconds == 3155760000);
  // host.budget 0 turns the host tier off; 1MiB is the smallest tier.
  auto host = load_config_string("[cache.host]\nbudget = 0\n[cache.device]\nbudget = \"1MiB\"", DaemonConfig{});
  REQUIRE(host.is_ok());
  CHECK(host->engine.cache.host.budget_bytes == 0);
  CHECK(host->engine.cache.device.budget_bytes == 1048576);
}

TEST_CASE("flags and set_config_value take the new keys' types as text", "[daemon][config]") {
  DaemonConfig c;
  REQUIRE(set_config_value("cache.disk.ttl", "1d12h", c, "--ttl").is_ok());
  CHECK(c.engine.cache.disk.ttl_seconds == 129600);
  REQUIRE(set_config_value("cache.disk.sync", "true", c, "--sync").is_ok());
  CHECK(c.engine.cache.disk.sync);
  REQUIRE(set_config_value("cache.host.budget", "2GiB", c, "--host-budget").is_ok());
  CHECK(c.engine.cache.host.budget_bytes == 2147483648);
  REQUIRE(set_config_value("cache.device.policy", "priority_lru", c, "--policy").is_ok());
  CHECK(c.engine.cache.device.policy == "priority_lru");
  Status st = set_config_value("cache.disk.ttl", "3y", c, "--ttl");
  CHECK_THAT(st.message(), Catch::StartsWith("--ttl 3y: must be a duration like \"30d\""));
  st = set_config_value("cache.disk.sync", "maybe", c, "--sync");
  CHECK(st.message() == "--sync maybe: must be true or false (not true or false)");
  CHECK_THAT(set_config_value("cache.disk.colour", "x", c, "--x").message(),
             Catch::Contains("unknown config key cache.disk.colour"));
}

TEST_CASE("old cache key names still work, with one warning naming the new key", "[daemon][config]") {
  struct Row {
    const char* toml;
    const char* warning;  // the whole logged line
  };
  const Row rows[] = {
      {"[cache]\ndir = \"/srv/old\"\n",
       "config: cache.dir is an old name, use cache.disk.dir instead ([cache.disk] dir); the old name still "
       "works in this release but will be removed in the next (line 2)"},
      {"[cache]\n\nmemory_capacity = \"512MiB\"\n",
       "config: cache.memory_capacity is an old name, use cache.device.budget instead ([cache.device] budget); "
       "the old name still works in this release but will be removed in the next (line 3)"},
      {"[cache]\ndisk_capacity = \"2GiB\"\n",
       "config: cache.disk_capacity is an old name, use cache.disk.budget instead ([cache.disk] budget); the old "
       "name still works in this release but will be removed in the next (line 2)"},
  };
  for (const Row& row : rows) {
    INFO(row.toml);
    larder::testing::LogCapture log;
    auto r = load_config_string(row.toml, default_config());
    INFO(r.status().message());
    REQUIRE(r.is_ok());
    CHECK(log.count("is an old name") == 1);
    CHECK(log.count(row.warning) == 1);
    // dump_config prints only the new names.
    const std::string dump = dump_config(*r);
    CHECK(dump.find("memory_capacity") == std::string::npos);
    CHECK(dump.find("disk_capacity") == std::string::npos);
    CHECK_THAT(dump, Catch::Contains("[cache]\npage_size = 16\n"));
  }
  // The value lands in the new key's field.
  auto dir = load_config_string(rows[0].toml, DaemonConfig{});
  REQUIRE(dir.is_ok());
  CHECK(dir->engine.cache.disk.dir == "/srv/old");
  auto mem = load_config_string(rows[1].toml, DaemonConfig{});
  REQUIRE(mem.is_ok());
  CHECK(mem->engine.cache.device.budget_bytes == 536870912);  // 512 * 2^20
  auto disk = load_config_string(rows[2].toml, DaemonConfig{});
  REQUIRE(disk.is_ok());
  CHECK(disk->engine.cache.disk.budget_bytes == 2147483648);  // 2 * 2^30
  {
    // All three in one file: one warning each; "~/" expanded as for the new key.
    ScopedEnv home("HOME", "/home/dan");
    larder::testing::LogCapture log;
    auto all = load_config_string("[cache]\ndir = \"~/c\"\nmemory_capacity = \"2MiB\"\ndisk_capacity = \"3MiB\"\n",
                                  DaemonConfig{});
    REQUIRE(all.is_ok());
    CHECK(log.count("is an old name") == 3);
    CHECK(all->engine.cache.disk.dir == "/home/dan/c");
    CHECK(all->engine.cache.device.budget_bytes == 2097152);
    CHECK(all->engine.cache.disk.budget_bytes == 3145728);
  }
  // A bad value names the key as written, with the new key's range.
  CHECK(error_of("[cache]\nmemory_capacity = \"512KiB\"") ==
        "config error: cache.memory_capacity = \"512KiB\": must be a size of at least 1MiB (line 2)");
  // As a flag value too (no file, so no line).
  larder::testing::LogCapture log;
  DaemonConfig c;
  REQUIRE(set_config_value("cache.dir", "/srv/flag", c, "--x").is_ok());
  CHECK(c.engine.cache.disk.dir == "/srv/flag");
  CHECK(log.count("config: cache.dir is an old name, use cache.disk.dir instead") == 1);
}

TEST_CASE("an old key name and its new one in the same file is an error naming both", "[daemon][config]") {
  // Whatever order they come in, the message names the old key first.
  CHECK(error_of("[cache]\ndir = \"/a\"\n[cache.disk]\ndir = \"/b\"\n") ==
        "config error: cache.dir (line 2) and cache.disk.dir (line 4) are the same setting (cache.dir is the old "
        "name of cache.disk.dir): keep only cache.disk.dir");
  CHECK(error_of("[cache]\nmemory_capacity = \"2GiB\"\ndevice.budget = \"2GiB\"\n") ==
        "config error: cache.memory_capacity (line 2) and cache.device.budget (line 3) are the same setting "
        "(cache.memory_capacity is the old name of cache.device.budget): keep only cache.device.budget");
  CHECK_THAT(error_of("[cache.disk]\nbudget = \"3GiB\"\n[cache]\ndisk_capacity = \"3GiB\"\n"),
             Catch::Contains("cache.disk_capacity (line 4) and cache.disk.budget (line 2) are the same setting"));
  // In a file, the positions name it.
  TempFile both("both.toml", "[cache]\ndir = \"/a\"\ndisk.dir = \"/b\"\n");
  auto r = load_config_file(both.path(), DaemonConfig{});
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("cache.dir (" + both.path() + " line 2) and cache.disk.dir (" +
                                                   both.path() + " line 3) are the same setting"));
}
