#include "daemon/command_line.h"

#include <cstdlib>
#include <optional>
#include <vector>

#include <CLI/CLI.hpp>

#include "daemon/version.h"

namespace larder {
namespace {

// A flag that sets one config key; the value is checked like the config
// file's (same ranges, same units).
struct KeyFlag {
  const char* flag;
  const char* key;       // dotted config key
  const char* value_name;
  const char* help;
};

constexpr KeyFlag kKeyFlags[] = {
    {"--model", "model.path", "PATH", "GGUF model file to serve ([model] path)"},
    {"--draft-model", "engine.draft_model", "PATH",
     "GGUF file sharing the model's vocabulary that drafts tokens for speculative decoding ([engine] "
     "draft_model; needs --draft-tokens)"},
    {"--draft-tokens", "engine.draft_tokens", "N",
     "draft tokens verified per sequence and step, from prompt lookup and the draft model; 0: off ([engine] "
     "draft_tokens)"},
    {"--host", "server.host", "H", "address to listen on ([server] host; default 127.0.0.1)"},
    {"--port", "server.port", "N", "TCP port to listen on ([server] port; default 8080)"},
    {"--cache-dir", "cache.disk.dir", "DIR",
     "KV page store directory (the disk tier); \"\" disables it ([cache.disk] dir; default "
     "$XDG_CACHE_HOME/larder or ~/.cache/larder)"},
    {"--threads", "engine.threads", "N", "CPU threads for the forward pass; 0: all cores ([engine] threads)"},
    {"--ctx", "model.context_length", "N",
     "context length served, in tokens; 0: the model's ([model] context_length)"},
    {"--log-level", "log.level", "L", "trace, debug, info, warn, error, critical or off ([log] level)"},
    {"--api-key-file", "server.api_key_file", "FILE",
     "API keys clients must send, one per line ([server] api_key_file; also $LARDER_API_KEY)"},
};

constexpr const char* kFooter =
    "Configuration: built-in defaults < config file < flags.\n"
    "The config file is the one given with --config, else the one named by the\n"
    "LARDER_CONFIG environment variable, else none: ./config/larder.toml is NOT\n"
    "read implicitly. config/larder.toml in the source tree documents every key\n"
    "and its default; copy it and pass --config to use it.\n"
    "The KV cache has three tiers, each with a budget and an eviction policy:\n"
    "[cache.device] budget, policy; [cache.host] budget, policy; [cache.disk] dir,\n"
    "budget, policy, ttl, sync, on_error. The old keys cache.dir,\n"
    "cache.memory_capacity and cache.disk_capacity still work in this release\n"
    "(with a warning); use cache.disk.dir, cache.device.budget, cache.disk.budget.";

}  // namespace

Result<CommandLine> parse_command_line(int argc, const char* const* argv,
                                       const DaemonConfig& defaults) {
  CLI::App app("larderd " + std::string(kLarderVersion) +
                   ": a local OpenAI-compatible LLM server for GGUF models with a persistent KV cache",
               "larderd");
  app.footer(kFooter);
  app.get_formatter()->column_width(28);

  std::string config_path;
  bool show_version = false;
  bool print_config = false;
  app.add_option("--config", config_path, "TOML config file (see config/larder.toml)")->type_name("FILE");
  // Flag values are taken as text and checked by set_config_value, so they
  // get the same ranges and messages as the config file.
  std::vector<std::string> values(std::size(kKeyFlags));
  std::vector<CLI::Option*> options;
  for (size_t i = 0; i < std::size(kKeyFlags); ++i) {
    options.push_back(app.add_option(kKeyFlags[i].flag, values[i], kKeyFlags[i].help)
                          ->type_name(kKeyFlags[i].value_name));
  }
  app.add_flag("--print-config", print_config, "print the effective configuration as TOML and exit");
  app.add_flag("--version", show_version, "print the version and exit");

  CommandLine out;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out.exit_now = true;
    out.output = app.help();
    return out;
  } catch (const CLI::ParseError& e) {
    return Status::invalid_argument(std::string(e.what()) + "; see larderd --help");
  }
  // A value flag given no value took the next flag as its value (found in
  // hostile testing: `--cache-dir --print-config` served, with a store in
  // ./--print-config). A path that starts with "--" can be given as ./--x.
  const auto taken_flag = [](const std::string& value) { return value.rfind("--", 0) == 0; };
  for (size_t i = 0; i < std::size(kKeyFlags); ++i) {
    if (options[i]->count() > 0 && taken_flag(values[i])) {
      return Status::invalid_argument(std::string(kKeyFlags[i].flag) + " needs a value (got the flag " + values[i] +
                                      "); see larderd --help");
    }
  }
  if (app.count("--config") > 0 && taken_flag(config_path)) {
    return Status::invalid_argument("--config needs a value (got the flag " + config_path + "); see larderd --help");
  }
  if (show_version) {
    out.exit_now = true;
    out.output = std::string("larderd ") + kLarderVersion + "\n";
    return out;
  }

  out.config = defaults;
  if (app.count("--config") == 0) {
    const char* env = std::getenv("LARDER_CONFIG");
    if (env != nullptr && *env != '\0') config_path = env;
  }
  if (!config_path.empty()) {
    config_path = expand_home(config_path);
    LARDER_ASSIGN_OR_RETURN(out.config, load_config_file(config_path, out.config));
    out.config_path = config_path;
  }
  for (size_t i = 0; i < std::size(kKeyFlags); ++i) {
    if (options[i]->count() == 0) continue;
    LARDER_RETURN_IF_ERROR(set_config_value(kKeyFlags[i].key, values[i], out.config, kKeyFlags[i].flag));
  }
  // Keys that only make sense together, checked once file and flags are in
  // (so that a reload refuses what a restart would).
  if (!out.config.engine.draft_model.empty() && out.config.engine.draft_tokens == 0) {
    return Status::invalid_argument(
        "config error: engine.draft_model is set but engine.draft_tokens is 0: set [engine] draft_tokens "
        "or --draft-tokens (1-32) to draft with it");
  }
  if (print_config) {
    out.exit_now = true;
    out.output = dump_config(out.config);
  }
  return out;
}

}  // namespace larder
