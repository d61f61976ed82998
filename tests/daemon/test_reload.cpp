// ConfigReloader (daemon/reload.h): the file read again with the same
// flags on top, what is applied live, what is reported as needing a
// restart, and that a bad file or a refused cache change applies nothing.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>

#include <catch2/catch.hpp>
#include <spdlog/spdlog.h>

#include "daemon/command_line.h"
#include "daemon/reload.h"
#include "tests/daemon/config_test_util.h"
#include "tests/support/test_models.h"

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

// Found by the hostile pass of the draft model: a reload that set
// draft_tokens to 0 beside a draft model was taken (as needing a restart),
// and the restart then failed. Keys that only work together are checked on
// every load, so the reload is refused.
TEST_CASE("reload: a draft model without draft tokens is refused", "[daemon][reload]") {
  ScopedEnv key("LARDER_API_KEY", nullptr);
  Fixture f;
  write(f.file.path(), std::string(kV1) + "\n[engine]\ndraft_tokens = 0\ndraft_model = \"d.gguf\"\n");
  Result<ReloadReport> r = f.reloader->reload();
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("engine.draft_model is set but engine.draft_tokens is 0"));
  CHECK(f.reloader->in_force().engine.draft_model.empty());
  // Found by the new-user pass: a reload naming a draft model (or model)
  // file that does not exist was taken too; a restart would fail on it.
  write(f.file.path(), std::string(kV1) + "\n[engine]\ndraft_tokens = 4\ndraft_model = \"/nope/d.gguf\"\n");
  r = f.reloader->reload();
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("engine.draft_model = \"/nope/d.gguf\": No such file"));
  write(f.file.path(), std::string(kV1) + "\n[engine]\ndraft_tokens = 4\ndraft_model = \"/tmp\"\n");
  r = f.reloader->reload();
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("engine.draft_model = \"/tmp\": not a regular file"));
  {
    // A FIFO is refused without waiting for a writer.
    const std::string fifo = f.file.path() + ".fifo.gguf";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    write(f.file.path(), std::string(kV1) + "\n[engine]\ndraft_tokens = 4\ndraft_model = \"" + fifo + "\"\n");
    auto pending = std::async(std::launch::async, [&] { return f.reloader->reload(); });
    const bool done = pending.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
    if (!done) {
      const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (w >= 0) ::close(w);
    }
    r = pending.get();
    std::filesystem::remove(fifo);
    REQUIRE(done);
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), Catch::Contains("not a regular file"));
  }
  TempFile junk("junk.gguf", "not a model");
  write(f.file.path(), std::string(kV1) + "\n[engine]\ndraft_tokens = 4\ndraft_model = \"" + junk.path() + "\"\n");
  r = f.reloader->reload();
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("not a GGUF file"));
  TempFile draft("d.gguf", "GGUF and then anything");
  write(f.file.path(), std::string(kV1) + "\n[engine]\ndraft_tokens = 4\ndraft_model = \"" + draft.path() + "\"\n");
  r = f.reloader->reload();
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("a restart would fail"));
}

// Found in hostile testing: a reload took a draft model cut in half, or
// one whose vocabulary differs from the model's, by its GGUF magic alone;
// the restart it asked for then failed. The reload now reads what a
// restart reads first: the GGUF tables and the tokenizer.
TEST_CASE("reload: a draft model cut short or with another vocabulary is refused; a good one needs a restart",
          "[daemon][reload]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  LARDER_REQUIRE_MODEL(q8, "stories260K-q8_0.gguf");
  ScopedEnv key("LARDER_API_KEY", nullptr);
  TempFile file{"reload.toml", kV1};
  const std::vector<std::string> args{"larderd", "--config", file.path(), "--model", model, "--cache-dir", "",
                                      "--port", "0"};
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  auto start = parse_command_line(int(argv.size()), argv.data(), default_config());
  REQUIRE(start.is_ok());
  ConfigReloader reloader(args, start->config, [](const CacheOptions&) { return Status::ok(); });
  auto reload_with_draft = [&](const std::string& path) {
    write(file.path(), std::string(kV1) + "\n[engine]\ndraft_tokens = 4\ndraft_model = \"" + path + "\"\n");
    return reloader.reload();
  };
  std::ifstream in(q8, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(bytes.size() > 100000);
  // Cut in half: a tensor lies outside the file.
  TempFile cut("cut.gguf", bytes.substr(0, bytes.size() / 2));
  Result<ReloadReport> r = reload_with_draft(cut.path());
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("engine.draft_model") && Catch::Contains("outside the file") &&
                                       Catch::Contains("a restart would fail"));
  // One token's text changed (the same length): another vocabulary.
  std::string other = bytes;
  const size_t at = other.find("\xE2\x96\x81Lily");  // "▁Lily"
  REQUIRE(at != std::string::npos);
  other[at + 3] = 'M';
  TempFile renamed("renamed.gguf", other);
  r = reload_with_draft(renamed.path());
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("is '\xE2\x96\x81Mily' there and '\xE2\x96\x81Lily' in the served model") &&
                                       Catch::Contains("a restart would fail"));
  CHECK(reloader.in_force().engine.draft_model.empty());
  // Another architecture, and a tensor missing (renamed): found by the
  // re-verification, the restart refused both.
  std::string gemma = bytes;
  const size_t arch = gemma.find("general.architecture");
  REQUIRE(arch != std::string::npos);
  const size_t value = gemma.find("llama", arch);
  REQUIRE(value != std::string::npos);
  gemma.replace(value, 5, "gemma");
  TempFile other_arch("gemma.gguf", gemma);
  r = reload_with_draft(other_arch.path());
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("gemma") && Catch::Contains("a restart would fail"));
  std::string no_norm = bytes;
  const size_t norm = no_norm.find("output_norm.weight");
  REQUIRE(norm != std::string::npos);
  no_norm[norm + 10] = 'X';
  TempFile missing("missing.gguf", no_norm);
  r = reload_with_draft(missing.path());
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("output_norm.weight") && Catch::Contains("a restart would fail"));
  // The real file: taken, and both engine keys need a restart.
  r = reload_with_draft(q8);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  CHECK(r->restart_needed.size() == 2);
}

// Seen in hostile testing: the config file swapped for a FIFO made every
// reload block in open() or read() for ever (and, on libuv's pool, four of
// them stopped every chat request). Files that are not regular files are
// refused at once, and so is one too large to be a config file.
TEST_CASE("reload: a config path that is a FIFO, a device or a huge file is refused without blocking",
          "[daemon][reload]") {
  ScopedEnv key("LARDER_API_KEY", nullptr);
  Fixture f;
  const std::string path = f.file.path();
  REQUIRE(std::filesystem::remove(path));
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  auto pending = std::async(std::launch::async, [&] { return f.reloader->reload(); });
  if (pending.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    // Unblock the reader (a writer that closes at once gives it EOF) so that
    // the test fails instead of hanging.
    const int w = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) ::close(w);
    FAIL("reloading a FIFO config blocked");
  }
  Result<ReloadReport> r = pending.get();
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(r.status().message(), Catch::Contains(path + " is not a regular file"));

  // /dev/zero never ends.
  REQUIRE(std::filesystem::remove(path));
  std::filesystem::create_symlink("/dev/zero", path);
  r = f.reloader->reload();
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("is not a regular file"));

  // 1 MiB + 1 byte of comments: too large; exactly 1 MiB is read.
  REQUIRE(std::filesystem::remove(path));
  std::string big = std::string(kV1) + "#";
  big.resize(size_t(1) << 20, 'x');
  write(path, big + "x");
  r = f.reloader->reload();
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains(path + " is larger than 1 MiB"));
  write(path, big);
  r = f.reloader->reload();
  REQUIRE(r.is_ok());
  CHECK(r->changed.empty());
  // The configuration in force never changed.
  CHECK(f.reloader->in_force().engine.cache.device.budget_bytes == int64_t(512) << 20);
}

// Seen in hostile testing: a changed cache.trace_file was reported as
// applied ("changed") while the engine kept writing the trace it opened at
// start.
TEST_CASE("reload: cache.trace_file needs a restart and keeps its value", "[daemon][reload]") {
  ScopedEnv key("LARDER_API_KEY", nullptr);
  Fixture f;
  write(f.file.path(), std::string(kV1) + "\n[cache]\ntrace_file = \"/tmp/larder-new-trace.txt\"\n");
  Result<ReloadReport> r = f.reloader->reload();
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  CHECK(r->changed.empty());
  CHECK(r->restart_needed == std::vector<std::string>{"cache.trace_file: \"\" -> \"/tmp/larder-new-trace.txt\""});
  CHECK(f.applied.empty());  // nothing for the engine to apply
  CHECK(f.reloader->in_force().engine.cache.trace_file.empty());

  // With a live change beside it, the engine gets the trace file in force.
  write(f.file.path(), std::string(kV1) + "\n[cache]\ntrace_file = \"/tmp/larder-new-trace.txt\"\n" +
                           "[cache.disk]\nttl = \"1d\"\n");
  r = f.reloader->reload();
  REQUIRE(r.is_ok());
  REQUIRE(f.applied.size() == 1);
  CHECK(f.applied[0].trace_file.empty());
  CHECK(f.applied[0].disk.ttl_seconds == 86400);
  CHECK(r->restart_needed.size() == 1);  // reported again until a restart
  CHECK(f.reloader->in_force().engine.cache.trace_file.empty());
}
