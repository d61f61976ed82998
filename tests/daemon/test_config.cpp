// Config file loading: defaults, every key overridden, bad values, and the
// shipped config/larder.toml. Expected values come from the brief and the
// documentation (the numbers an admin reads), not from the code.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "daemon/config.h"
#include "tests/daemon/config_test_util.h"

using namespace larder;
using larder::testing::check_same_config;
using larder::testing::ScopedEnv;
using larder::testing::TempFile;

namespace {

// The repository's config/larder.toml, found from this source file's path
// (CMake compiles it with an absolute path), or $LARDER_SOURCE_DIR.
std::filesystem::path shipped_config_path() {
  if (const char* dir = std::getenv("LARDER_SOURCE_DIR")) {
    return std::filesystem::path(dir) / "config" / "larder.toml";
  }
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "config" /
         "larder.toml";
}

std::string error_of(std::string_view toml) {
  auto r = load_config_string(toml, DaemonConfig{});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  return r.status().message();
}

}  // namespace

TEST_CASE("built-in defaults are the documented ones", "[daemon][config]") {
  ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
  ScopedEnv home("HOME", "/home/alice");
  const DaemonConfig c = default_config();
  CHECK(c.engine.model_path.empty());
  CHECK(c.engine.model_id.empty());
  CHECK(c.engine.n_ctx == 0);
  CHECK(c.server.host == "127.0.0.1");
  CHECK(c.server.port == 8080);
  CHECK(c.server.max_body_bytes == 8u * 1024 * 1024);
  CHECK(c.server.shutdown_grace_s == 10.0);
  CHECK(c.server.allowed_hosts.empty());
  CHECK(c.server.cors_origins.empty());  // no web page may call the API
  CHECK(c.server.api_keys.empty());
  CHECK(c.api_key_file.empty());
  CHECK(c.server.max_connections == 1024);
  CHECK(c.server.request_timeout_s == 30.0);
  CHECK(c.server.idle_timeout_s == 60.0);
  CHECK(c.server.admin_enabled);         // /admin/* and /metrics answer
  CHECK(c.server.admin_token.empty());   // under the API keys rule
  CHECK(c.engine.cache.disk.dir == "/home/alice/.cache/larder");
  CHECK(c.engine.cache.page_size == 16);
  CHECK(c.engine.cache.device.budget_bytes == 1073741824);   // 1 GiB
  CHECK(c.engine.cache.disk.budget_bytes == 21474836480);    // 20 GiB
  CHECK(c.engine.cache.disk.min_free_bytes == 1073741824);   // 1 GiB left free on the disk
  CHECK(c.engine.cache.device.policy == "lru");
  CHECK(c.engine.cache.host.budget_bytes == 0);              // no host tier
  CHECK(c.engine.cache.host.policy == "lru");
  CHECK(c.engine.cache.disk.policy == "lru");
  CHECK(c.engine.cache.disk.ttl_seconds == 0);               // pages never expire
  CHECK_FALSE(c.engine.cache.disk.sync);
  CHECK(c.engine.cache.disk.on_error == DiskOnError::kMemoryOnly);
  CHECK(c.engine.cache.write_through);
  CHECK(c.engine.cache.kv_dtype == "f16");
  CHECK(c.engine.cache.salt.empty());
  CHECK(c.engine.cache.n_storage_threads == 2);
  CHECK(c.engine.n_threads == 0);
  CHECK(c.engine.max_running == 8);
  CHECK(c.engine.draft_tokens == 0);
  CHECK(c.engine.draft_model.empty());
  CHECK(c.engine.device == "auto");
  CHECK(c.engine.device_check);
  CHECK(c.server.default_sampling.temperature == 0.8f);
  CHECK(c.server.default_sampling.top_k == 40);
  CHECK(c.server.default_sampling.top_p == 0.95f);
  CHECK(c.server.default_sampling.min_p == 0.05f);
  CHECK(c.server.default_sampling.repeat_penalty == 1.0f);
  CHECK(c.server.default_sampling.repeat_last_n == 64);
  CHECK(c.server.default_sampling.presence_penalty == 0.0f);
  CHECK(c.server.default_sampling.frequency_penalty == 0.0f);
  CHECK(c.server.default_max_tokens == -1);
  CHECK(c.log_level == "info");
}

TEST_CASE("default cache dir follows XDG_CACHE_HOME, then HOME", "[daemon][config]") {
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/var/cache/someone");
    CHECK(default_cache_dir() == "/var/cache/someone/larder");
  }
  {
    // A relative XDG_CACHE_HOME is invalid per the XDG spec and ignored.
    ScopedEnv xdg("XDG_CACHE_HOME", "relative/dir");
    ScopedEnv home("HOME", "/home/bob");
    CHECK(default_cache_dir() == "/home/bob/.cache/larder");
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
    ScopedEnv home("HOME", nullptr);
    CHECK(default_cache_dir().empty());  // no home: no disk tier
  }
}

TEST_CASE("a file overriding every key", "[daemon][config]") {
  ScopedEnv home("HOME", "/home/carol");
  const char* kToml = R"(
[model]
path = "~/models/tiny.gguf"
id = "tiny"
context_length = 2048

[server]
host = "0.0.0.0"
port = 9090
max_body = "16MiB"
shutdown_grace_s = 2.5
allowed_hosts = ["My-Box.lan", "::1", ".corp.example"]
cors_origins = ["http://localhost:3000/", "HTTPS://Chat.Example:443"]
api_keys = ["sk-one", "sk-two"]
api_key_file = "~/.config/larder/keys"
max_connections = 50
request_timeout_s = 5
idle_timeout_s = 0.5
admin = "off"
admin_token = "adm-token-1"

[cache]
page_size = 32
write_policy = "write_back"
kv_dtype = "f32"
salt = "tenant-a"
storage_threads = 4
host.budget = "3GiB"       # dotted keys inside [cache] ...
host.policy = "priority_lfu"

[cache.device]             # ... and a nested table: the same to TOML
budget = "512MiB"
policy = "lfu"

[cache.disk]
dir = "~/larder-cache"
budget = "1.5GB"
min_free = "256MiB"
policy = "priority_lru"
ttl = "1d12h"
sync = true
on_error = "fail"

[engine]
threads = 6
device = "cpu"
device_check = false
max_running = 3
draft_tokens = 8
draft_model = "/models/draft.gguf"

[sampling]
temperature = 0      # an integer is accepted for a float key
top_k = 0
top_p = 0.5
min_p = 0.0
repeat_penalty = 1.1
repeat_last_n = -1
presence_penalty = 0.25
frequency_penalty = -0.5
max_tokens = 256

[log]
level = "debug"
)";
  auto r = load_config_string(kToml, default_config());
  INFO(r.status().message());
  REQUIRE(r.is_ok());
  const DaemonConfig& c = *r;
  CHECK(c.engine.model_path == "/home/carol/models/tiny.gguf");  // "~/" expanded
  CHECK(c.engine.model_id == "tiny");
  CHECK(c.engine.n_ctx == 2048);
  CHECK(c.server.host == "0.0.0.0");
  CHECK(c.server.port == 9090);
  CHECK(c.server.max_body_bytes == 16777216u);  // 16 * 2^20
  CHECK(c.server.shutdown_grace_s == 2.5);
  // Lists are stored normalized: lower case, IPv6 in brackets, no trailing
  // slash or default port.
  CHECK(c.server.allowed_hosts == std::vector<std::string>{"my-box.lan", "[::1]", ".corp.example"});
  CHECK(c.server.cors_origins == std::vector<std::string>{"http://localhost:3000", "https://chat.example"});
  CHECK(c.server.api_keys == std::vector<std::string>{"sk-one", "sk-two"});
  CHECK(c.api_key_file == "/home/carol/.config/larder/keys");
  CHECK(c.server.max_connections == 50);
  CHECK(c.server.request_timeout_s == 5.0);
  CHECK(c.server.idle_timeout_s == 0.5);
  CHECK_FALSE(c.server.admin_enabled);
  CHECK(c.server.admin_token == "adm-token-1");
  CHECK(c.engine.cache.disk.dir == "/home/carol/larder-cache");  // "~/" expanded
  CHECK(c.engine.cache.page_size == 32);
  CHECK(c.engine.cache.device.budget_bytes == 536870912);  // 512 * 2^20
  CHECK(c.engine.cache.device.policy == "lfu");
  CHECK(c.engine.cache.host.budget_bytes == 3221225472);   // 3 * 2^30
  CHECK(c.engine.cache.host.policy == "priority_lfu");
  CHECK(c.engine.cache.disk.budget_bytes == 1500000000);   // 1.5 * 10^9
  CHECK(c.engine.cache.disk.min_free_bytes == 268435456);  // 256 * 2^20
  CHECK(c.engine.cache.disk.policy == "priority_lru");
  CHECK(c.engine.cache.disk.ttl_seconds == 129600);        // 86400 + 12 * 3600
  CHECK(c.engine.cache.disk.sync);
  CHECK(c.engine.cache.disk.on_error == DiskOnError::kFail);
  CHECK_FALSE(c.engine.cache.write_through);
  CHECK(c.engine.cache.kv_dtype == "f32");
  CHECK(c.engine.cache.salt == "tenant-a");
  CHECK(c.engine.cache.n_storage_threads == 4);
  CHECK(c.engine.n_threads == 6);
  CHECK(c.engine.max_running == 3);
  CHECK(c.engine.draft_tokens == 8);
  CHECK(c.engine.draft_model == "/models/draft.gguf");
  CHECK(c.engine.device == "cpu");
  CHECK_FALSE(c.engine.device_check);
  const SamplingParams& s = c.server.default_sampling;
  CHECK(s.temperature == 0.0f);
  CHECK(s.top_k == 0);
  CHECK(s.top_p == 0.5f);
  CHECK(s.min_p == 0.0f);
  CHECK(s.repeat_penalty == 1.1f);
  CHECK(s.repeat_last_n == -1);
  CHECK(s.presence_penalty == 0.25f);
  CHECK(s.frequency_penalty == -0.5f);
  CHECK(c.server.default_max_tokens == 256);
  CHECK(c.log_level == "debug");

  // dump_config writes every key back; loading the unredacted dump over the
  // defaults gives the same config.
  auto again = load_config_string(dump_config(c, /*redact_secrets=*/false), default_config());
  INFO(dump_config(c, false));
  REQUIRE(again.is_ok());
  check_same_config(*again, c);
  CHECK_THAT(dump_config(c, false),
             Catch::Contains("allowed_hosts = [\"my-box.lan\", \"[::1]\", \".corp.example\"]\n"));
  CHECK_THAT(dump_config(c, false), Catch::Contains("api_keys = [\"sk-one\", \"sk-two\"]\n"));
  // The tiers print as nested tables with units.
  CHECK_THAT(dump_config(c, false), Catch::Contains("\n[cache.device]\nbudget = \"512MiB\"\npolicy = \"lfu\"\n"));
  CHECK_THAT(dump_config(c, false), Catch::Contains("\n[cache.host]\nbudget = \"3GiB\"\npolicy = \"priority_lfu\"\n"));
  CHECK_THAT(dump_config(c, false),
             Catch::Contains("\n[cache.disk]\ndir = \"/home/carol/larder-cache\"\nbudget = \"1500000000B\"\n"
                             "min_free = \"256MiB\"\npolicy = \"priority_lru\"\nttl = \"1d12h\"\nsync = true\non_error = \"fail\"\n"));
}

TEST_CASE("API keys never show in --print-config's dump or in error messages", "[daemon][config]") {
  DaemonConfig c = default_config();
  c.server.api_keys = {"sk-secret-1", "sk-secret-2"};
  const std::string dump = dump_config(c);
  CHECK(dump.find("sk-secret") == std::string::npos);
  CHECK_THAT(dump, Catch::Contains("api_keys = [\"<redacted>\", \"<redacted>\"]\n"));
  // The redacted dump is refused rather than run with keys "<redacted>".
  auto reloaded = load_config_string(dump, default_config());
  REQUIRE_FALSE(reloaded.is_ok());
  CHECK_THAT(reloaded.status().message(), Catch::Contains("--print-config hides the keys"));
  // An invalid key in a file: the message names its position, not the keys.
  auto bad = load_config_string("[server]\napi_keys = [\"sk-good-secret\", \"two words\"]\n", DaemonConfig{});
  REQUIRE_FALSE(bad.is_ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("server.api_keys = [<redacted>]: must be a list of API keys"));
  CHECK_THAT(bad.status().message(), Catch::Contains("key 2 is not"));
  CHECK(bad.status().message().find("secret") == std::string::npos);
  CHECK(bad.status().message().find("two words") == std::string::npos);
  // The admin token is a secret too; an empty one prints as "".
  c.server.admin_token = "adm-secret-3";
  CHECK(dump_config(c).find("adm-secret") == std::string::npos);
  CHECK_THAT(dump_config(c), Catch::Contains("admin_token = \"<redacted>\"\n"));
  CHECK_THAT(dump_config(default_config()), Catch::Contains("admin_token = \"\"\n"));
  auto bad_token = load_config_string("[server]\nadmin_token = \"adm secret\"\n", DaemonConfig{});
  REQUIRE_FALSE(bad_token.is_ok());
  CHECK_THAT(bad_token.status().message(), Catch::Contains("server.admin_token = \"<redacted>\": must be a token"));
  CHECK(bad_token.status().message().find("adm secret") == std::string::npos);
  auto redacted_token = load_config_string("[server]\nadmin_token = \"<redacted>\"\n", DaemonConfig{});
  CHECK_THAT(redacted_token.status().message(), Catch::Contains("--print-config hides the token"));
  // Flags give lists comma-separated.
  DaemonConfig f;
  REQUIRE(set_config_value("server.cors_origins", "http://a.example, http://b.example:81", f, "--cors").is_ok());
  CHECK(f.server.cors_origins == std::vector<std::string>{"http://a.example", "http://b.example:81"});
  REQUIRE(set_config_value("server.cors_origins", "", f, "--cors").is_ok());
  CHECK(f.server.cors_origins.empty());
}

TEST_CASE("keys a file leaves out keep the base values", "[daemon][config]") {
  DaemonConfig base;
  base.server.port = 1234;
  base.engine.cache.page_size = 64;
  auto r = load_config_string("[cache]\npage_size = 8\n", base);
  REQUIRE(r.is_ok());
  CHECK(r->engine.cache.page_size == 8);
  CHECK(r->server.port == 1234);
  // An empty file changes nothing.
  auto empty = load_config_string("", base);
  REQUIRE(empty.is_ok());
  check_same_config(*empty, base);
}

TEST_CASE("bad values give an error naming the key and the allowed range", "[daemon][config]") {
  struct Row {
    const char* toml;
    const char* expected;  // a substring of the message
  };
  const Row rows[] = {
      {"[cache]\npage_size = 12",
       "config error: cache.page_size = 12: must be a power of two between 1 and 1024 (line 2)"},
      {"[cache]\npage_size = 2048", "cache.page_size = 2048: must be a power of two between 1 and 1024"},
      {"[cache]\npage_size = 0", "cache.page_size = 0: must be a power of two"},
      {"[server]\nport = 70000", "server.port = 70000: must be an integer between 0 and 65535"},
      {"[server]\nport = -1", "server.port = -1: must be an integer between 0 and 65535"},
      {"[sampling]\ntemperature = -1", "sampling.temperature = -1: must be a number between 0 and 2 (0: greedy; the range requests accept)"},
      {"[sampling]\ntemperature = nan", "sampling.temperature = nan: must be a number"},
      {"[sampling]\ntop_p = 1.5", "sampling.top_p = 1.5: must be a number above 0 and at most 1"},
      {"[sampling]\ntop_p = 0.0", "sampling.top_p = 0.0: must be a number above 0 and at most 1"},
      {"[sampling]\nrepeat_penalty = 0", "sampling.repeat_penalty = 0: must be a number above 0"},
      // Found in hostile testing: 1e-50 is 0 as the float the sampler uses,
      // and every request without its own penalty sampled garbage.
      {"[sampling]\nrepeat_penalty = 1e-50",
       "sampling.repeat_penalty = 1e-50: must be a number above 0 and at most 10 (1: off) (it is 0 as a 32-bit float)"},
      {"[sampling]\ntop_p = 1e-46", "(it is 0 as a 32-bit float)"},
      {"[sampling]\nmax_tokens = 0", "sampling.max_tokens = 0: must be -1"},
      {"[cache]\nwrite_policy = \"sometimes\"",
       "cache.write_policy = \"sometimes\": must be \"write_through\" or \"write_back\""},
      {"[cache]\nkv_dtype = \"q8\"", "cache.kv_dtype = \"q8\": must be \"f16\", \"f32\" or \"q8_0\""},
      {"[log]\nlevel = \"verbose\"", "log.level = \"verbose\": must be one of trace, debug"},
      {"[engine]\nmax_running = 0", "engine.max_running = 0: must be an integer between 1 and 1024"},
      {"[engine]\ndraft_tokens = 33", "engine.draft_tokens = 33: must be an integer between 0 and 32"},
      {"[engine]\ndevice = \"gpu\"", "engine.device = \"gpu\": must be \"auto\", \"cuda\" or \"cpu\""},
      {"[engine]\ndevice_check = \"yes\"", "engine.device_check = \"yes\": must be true or false"},
      {"[cache]\nstorage_threads = 0", "cache.storage_threads = 0: must be an integer between 1 and 64"},
      {"[server]\nhost = \"\"", "server.host = \"\": must be a non-empty host name"},
      {"[server]\ncors_origins = [\"localhost:3000\"]",
       "server.cors_origins = [\"localhost:3000\"]: must be a list of web origins like \"http://localhost:3000\" "
       "(\"*\": any) (\"localhost:3000\" is not \"*\", \"null\" or an origin"},
      {"[server]\ncors_origins = [\"http://localhost:3000/app\"]", "(scheme://host[:port], no path)"},
      {"[server]\ncors_origins = \"*\"", "server.cors_origins = \"*\": must be a list of web origins"},
      {"[server]\ncors_origins = [1]", "(got an array holding an integer)"},
      {"[server]\nallowed_hosts = [\"box.lan:8080\"]",
       "server.allowed_hosts = [\"box.lan:8080\"]: must be a list of host names or IP addresses without a port"},
      {"[server]\nmax_connections = 0", "server.max_connections = 0: must be an integer between 1 and 1000000"},
      {"[server]\nadmin = \"yes\"", "server.admin = \"yes\": must be \"on\" or \"off\""},
      {"[server]\nadmin = true", "server.admin = true: must be \"on\" or \"off\" (got a boolean)"},
      {"[server]\nrequest_timeout_s = 0", "server.request_timeout_s = 0: must be a number of seconds above 0"},
      {"[server]\nidle_timeout_s = -1", "server.idle_timeout_s = -1: must be a number of seconds above 0"},
      // Wrong types.
      {"[server]\nport = \"8080\"", "server.port = \"8080\": must be an integer between 0 and 65535 (0: any free port) (got a string)"},
      {"[server]\nport = 80.5", "server.port = 80.5: must be an integer between 0 and 65535 (0: any free port) (got a float)"},
      {"[model]\npath = 3", "model.path = 3: must be a path to a GGUF file (got an integer)"},
      {"[sampling]\ntop_k = true", "sampling.top_k = true: must be an integer"},
      {"[cache.device]\nbudget = 1.5", "cache.device.budget = 1.5: must be a size of at least 1MiB (got a float)"},
      {"[cache.disk]\nsync = 1", "config error: cache.disk.sync = 1: must be true or false (got an integer) (line 2)"},
      {"[cache.disk]\nttl = true", "cache.disk.ttl = true: must be a duration like \"30d\", \"12h\"" },
      // Sizes.
      {"[cache.device]\nbudget = \"12XB\"",
       "cache.device.budget = \"12XB\": must be a size of at least 1MiB (unknown unit \"XB\""},
      {"[cache.disk]\nbudget = -5", "cache.disk.budget = -5: must be a size of at least 1MiB (negative)"},
      {"[cache.disk]\nmin_free = -1", "cache.disk.min_free = -1: must be a size (0: no reserve) (negative)"},
      // Found in hostile testing: an integer past the string form's limit
      // passed, and --print-config's "9223372036854775807B" did not read back.
      {"[cache.disk]\nbudget = 9223372036854775807",
       "cache.disk.budget = 9223372036854775807: must be a size of at least 1MiB (too large (the limit is 2^62 bytes))"},
      {"[cache.disk]\nmin_free = \"2ZB\"", "cache.disk.min_free = \"2ZB\": must be a size (0: no reserve)"},
      {"[cache]\ndevice.budget = \"512KiB\"",  // dotted keys name the same key
       "config error: cache.device.budget = \"512KiB\": must be a size of at least 1MiB (line 2)"},
      {"[cache.device]\nbudget = \"1048575\"", "cache.device.budget = \"1048575\": must be a size of at least 1MiB"},
      {"[cache.disk]\nbudget = \"1023KiB\"", "cache.disk.budget = \"1023KiB\": must be a size of at least 1MiB"},
      {"[cache.host]\nbudget = \"512KiB\"",
       "cache.host.budget = \"512KiB\": must be 0 (no host tier) or a size of at least 1MiB"},
      {"[cache.host]\nbudget = 1", "cache.host.budget = 1: must be 0 (no host tier) or a size of at least 1MiB"},
      {"[server]\nmax_body = \"2GiB\"", "server.max_body = \"2GiB\": must be a size between 1KiB and 1GiB"},
      // Durations: 100 years = 36525 days = 3155760000 s.
      {"[cache.disk]\nttl = \"3y\"",
       "config error: cache.disk.ttl = \"3y\": must be a duration like \"30d\", \"12h\", \"90m\", \"45s\" or "
       "\"1d12h\" (an integer: seconds; 0: never expire), at most 100 years (36525d) (unknown unit \"y\"; units: "
       "d (days), h (hours), m (minutes), s (seconds)) (line 2)"},
      {"[cache.disk]\nttl = \"36526d\"", "cache.disk.ttl = \"36526d\": must be a duration like"},
      {"[cache.disk]\nttl = 3155760001", "cache.disk.ttl = 3155760001: must be a duration like"},
      {"[cache.disk]\nttl = -1", "cache.disk.ttl = -1: must be a duration like \"30d\""},
      {"[cache.disk]\nttl = \"-1h\"", "(must not be negative)"},
      {"[cache.disk]\nttl = \"\"", "cache.disk.ttl = \"\": must be a duration like \"30d\""},
      {"[cache.disk]\nttl = \"1h30\"", "(\"30\" has no unit; units: d, h, m, s)"},
      {"[cache.disk]\nttl = \"99999999999999999999d\"", "(too large)"},
      // Policies and enums.
      {"[cache.device]\npolicy = \"fifo\"",
       "config error: cache.device.policy = \"fifo\": must be one of \"lru\", \"lfu\", \"priority_lru\", "
       "\"priority_lfu\" (line 2)"},
      {"[cache.host]\npolicy = \"LRU\"", "cache.host.policy = \"LRU\": must be one of \"lru\""},
      {"[cache.disk]\npolicy = \"\"", "cache.disk.policy = \"\": must be one of \"lru\""},
      {"[cache.disk]\non_error = \"ignore\"", "cache.disk.on_error = \"ignore\": must be \"memory_only\" or \"fail\""},
      // Unknown keys and sections (typos).
      {"[cache]\npagesize = 16", "config error: unknown key cache.pagesize (did you mean page_size?)"},
      {"[cache]\ncolour = 1",
       "config error: unknown key cache.colour (known keys in [cache]: page_size, write_policy, kv_dtype, salt, "
       "storage_threads, trace_file; tables: [cache.device], [cache.host], [cache.disk]) (line 2)"},
      {"[cache.device]\nbudgett = \"1GiB\"",
       "config error: unknown key cache.device.budgett (did you mean budget?) (known keys in [cache.device]: "
       "budget, policy) (line 2)"},
      {"[cache.disk]\nttls = 1", "unknown key cache.disk.ttls (did you mean ttl?) (known keys in [cache.disk]: "
                                  "dir, budget, min_free, policy, ttl, sync, on_error)"},
      // A tier's key one level up.
      {"[cache]\nttl = \"1d\"", "unknown key cache.ttl (did you mean disk.ttl?)"},
      {"[cache]\nbudget = \"1GiB\"", "unknown key cache.budget (did you mean device.budget, host.budget or disk.budget?)"},
      {"[cache.disc]\nttl = 1",
       "config error: unknown table [cache.disc] (did you mean [cache.disk]?) (known tables in [cache]: "
       "[cache.device], [cache.host], [cache.disk]) (line 1)"},
      {"[cache]\ndisk = \"/srv\"",
       "config error: cache.disk = \"/srv\": must be a table (a [cache.disk] section, or keys like disk.dir = ... "
       "in [cache]) (line 2)"},
      {"[cache.device.more]\nx = 1", "unknown key cache.device.more (known keys in [cache.device]: budget, policy)"},
      {"[caches]\npage_size = 16", "config error: unknown section [caches]"},
      {"port = 8080", "config error: unknown key port (keys belong in a section: [model], [server],"},
      {"model = \"x.gguf\"", "config error: model = \"x.gguf\": must be a table (a [model] section)"},
      {"[cache.tiers]\nx = 1",
       "config error: unknown table [cache.tiers] (known tables in [cache]: [cache.device], [cache.host], "
       "[cache.disk]) (line 1)"},
      // Malformed TOML.
      {"[server]\nport = ", "config error: line 2"},
      {"[server\nport = 1", "malformed TOML"},
      {"[server]\nport = 1\nport = 2", "config error: line 3"},  // duplicate key
  };
  for (const Row& row : rows) {
    INFO(row.toml);
    CHECK_THAT(error_of(row.toml), Catch::Contains(row.expected));
  }
}

TEST_CASE("the first bad key stops loading; nothing is applied silently", "[daemon][config]") {
  auto r = load_config_string("[server]\nport = 9000\n[cache]\npage_size = 3\n", DaemonConfig{});
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("cache.page_size = 3"));
}

TEST_CASE("load_config_file names the file in errors", "[daemon][config]") {
  TempFile bad("bad.toml", "[cache]\n\n\npage_size = 12\n");
  auto r = load_config_file(bad.path(), DaemonConfig{});
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(),
             Catch::Contains("cache.page_size = 12: must be a power of two between 1 and 1024 (" + bad.path() +
                             " line 4)"));

  TempFile malformed("malformed.toml", "[server]\nport = = 3\n");
  r = load_config_file(malformed.path(), DaemonConfig{});
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains(malformed.path() + " line 2"));

  const std::string missing = (std::filesystem::temp_directory_path() / "larder-no-such-config.toml").string();
  r = load_config_file(missing, DaemonConfig{});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kNotFound);
  CHECK_THAT(r.status().message(), Catch::Contains("cannot read config file " + missing));

  TempFile good("good.toml", "[server]\nport = 1\n");
  r = load_config_file(good.path(), DaemonConfig{});
  REQUIRE(r.is_ok());
  CHECK(r->server.port == 1);
}

TEST_CASE("config/larder.toml parses and yields exactly the built-in defaults", "[daemon][config]") {
  const auto path = shipped_config_path();
  INFO(path.string());
  REQUIRE(std::filesystem::exists(path));
  const DaemonConfig defaults = default_config();
  auto r = load_config_file(path.string(), defaults);
  INFO(r.status().message());
  REQUIRE(r.is_ok());
  check_same_config(*r, defaults);

  // Also over a base where every key differs from the defaults: every
  // uncommented key must then reset it to the documented default. Only the
  // three keys with computed defaults (model.path, model.id, cache.disk.dir) are
  // commented out in the file and keep the base's value.
  const char* kAllDifferent = R"(
[model]
path = "m.gguf"
id = "m"
context_length = 7
[server]
host = "::1"
port = 1
max_body = "1KiB"
shutdown_grace_s = 1
allowed_hosts = ["a.lan"]
cors_origins = ["http://a.example"]
api_keys = ["k"]
api_key_file = "keys.txt"
max_connections = 2
request_timeout_s = 1
idle_timeout_s = 1
[cache]
page_size = 1
write_policy = "write_back"
kv_dtype = "f32"
salt = "s"
storage_threads = 1
[cache.device]
budget = "2MiB"
policy = "lfu"
[cache.host]
budget = "2MiB"
policy = "priority_lru"
[cache.disk]
dir = "d"
budget = "2MiB"
policy = "priority_lfu"
ttl = "1s"
sync = true
on_error = "fail"
[engine]
threads = 1
device = "cuda"
max_running = 1
[sampling]
temperature = 1
top_k = 1
top_p = 0.1
min_p = 0.1
repeat_penalty = 2
repeat_last_n = 1
presence_penalty = 1
frequency_penalty = 1
max_tokens = 1
[log]
level = "off"
)";
  auto different = load_config_string(kAllDifferent, defaults);
  REQUIRE(different.is_ok());
  auto reset = load_config_file(path.string(), *different);
  REQUIRE(reset.is_ok());
  DaemonConfig expected = defaults;
  expected.engine.model_path = "m.gguf";
  expected.engine.model_id = "m";
  expected.engine.cache.disk.dir = "d";
  check_same_config(*reset, expected);

  // And every key of the schema is documented in the file (as a line
  // "key = ..." or "# key = ..."), section by section.
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  std::string section;
  std::istringstream dump(dump_config(defaults));
  for (std::string line; std::getline(dump, line);) {
    if (line.empty()) continue;
    if (line[0] == '[') {
      section = line;
      CHECK_THAT(doc, Catch::Contains("\n" + section + "\n"));
      continue;
    }
    const std::string key = line.substr(0, line.find(' '));
    const size_t at = doc.find("\n" + section + "\n");
    const size_t next = doc.find("\n[", at + 1);
    const std::string body = doc.substr(at, next == std::string::npos ? std::string::npos : next - at);
    INFO(section << " " << key);
    CHECK((body.find("\n" + key + " = ") != std::string::npos ||
           body.find("\n# " + key + " = ") != std::string::npos));
  }
}

// Found in hostile testing: "\u0000" in a TOML path cut the path short at
// the NUL, and the daemon used /tmp/x for "/tmp/x\u0000/etc".
TEST_CASE("config: a string holding a NUL is refused, naming the key", "[daemon][config]") {
  auto dir = load_config_string("[cache.disk]\ndir = \"/tmp/x\\u0000/etc\"\n", DaemonConfig{});
  REQUIRE_FALSE(dir.is_ok());
  CHECK_THAT(dir.status().message(), Catch::Contains("cache.disk.dir") && Catch::Contains("NUL"));
  auto list = load_config_string("[server]\ncors_origins = [\"http://a\\u0000b\"]\n", DaemonConfig{});
  REQUIRE_FALSE(list.is_ok());
  CHECK_THAT(list.status().message(), Catch::Contains("NUL"));
  CHECK(load_config_string("[cache.disk]\ndir = \"/tmp/x\"\n", DaemonConfig{}).is_ok());
}
