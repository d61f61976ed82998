#include "daemon/reload.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "daemon/api_keys.h"
#include "daemon/command_line.h"
#include "daemon/config_schema.h"
#include "engine/draft_model.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"

namespace larder {

namespace {

enum class Apply { kCache, kLive, kRestart };

Apply how_to_apply(std::string_view section, std::string_view name) {
  // The trace is opened once, at start (engine/engine.cpp).
  if (section == "cache" && name == "trace_file") return Apply::kRestart;
  if (section.starts_with("cache")) return Apply::kCache;
  if (section == "sampling" || (section == "log" && name == "level")) return Apply::kLive;
  return Apply::kRestart;
}

}  // namespace

ConfigReloader::ConfigReloader(std::vector<std::string> args, DaemonConfig in_force,
                               std::function<Status(const CacheOptions&)> reconfigure_cache)
    : args_(std::move(args)), reconfigure_cache_(std::move(reconfigure_cache)), in_force_(std::move(in_force)) {}

DaemonConfig ConfigReloader::in_force() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_force_;
}

namespace {

// What a restart checks of a model file before it reads the weights: its
// GGUF tables (every tensor inside the file), its architecture and the
// tensors it needs with their shapes and types (Model::load), and its
// tokenizer.
Result<std::unique_ptr<Tokenizer>> model_tokenizer(const std::string& path) {
  Result<std::unique_ptr<Model>> model = Model::load(path, Model::Fingerprint::kSkip);
  if (!model.is_ok()) return model.status();
  return Tokenizer::from_gguf(model.value()->gguf());
}

Status refuse_model(const char* key, const std::string& path, const std::string& why) {
  return Status::invalid_argument(std::string(key) + " = \"" + path + "\": " + why +
                                  " (a restart would fail; nothing applied)");
}

// A model file a restart would open (model.path, engine.draft_model): a
// reload that names one that is missing, not a regular file, not GGUF, cut
// short, of another architecture, short of a tensor or without a tokenizer
// is refused, since the restart it asks for would fail (found in hostile
// testing: a draft model cut in half was taken, and the restart then
// failed). Its tokenizer when it changed (null when it did not).
Result<std::unique_ptr<Tokenizer>> check_model_file(const char* key, const std::string& was, const std::string& now) {
  if (now == was || now.empty()) return std::unique_ptr<Tokenizer>();
  auto refuse = [&](const std::string& why) { return refuse_model(key, now, why); };
  // O_NONBLOCK: a FIFO must not block the open (it is refused below).
  const int fd = ::open(now.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return refuse(std::strerror(errno));
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  char magic[4] = {};
  const bool gguf = regular && ::pread(fd, magic, 4, 0) == 4 && std::memcmp(magic, "GGUF", 4) == 0;
  ::close(fd);
  if (!regular) return refuse("not a regular file");
  if (!gguf) return refuse("not a GGUF file (it does not start with \"GGUF\")");
  Result<std::unique_ptr<Tokenizer>> tok = model_tokenizer(now);
  if (!tok.is_ok()) return refuse(tok.status().message());
  return tok;
}

// A draft model a restart would refuse for its vocabulary: checked when the
// draft model or the model changes, with the tokenizers check_model_file
// read (null: unchanged, read here). When the model's file cannot be read
// (the fixture of a test, a file removed while served) the restart says.
Status check_draft_vocabulary(const DaemonConfig& now, std::unique_ptr<Tokenizer> target,
                              std::unique_ptr<Tokenizer> mine) {
  const std::string& draft = now.engine.draft_model;
  if (draft.empty() || (!target && !mine)) return Status::ok();
  if (!target) {
    Result<std::unique_ptr<Tokenizer>> read = model_tokenizer(now.engine.model_path);
    if (!read.is_ok()) return Status::ok();
    target = std::move(read).value();
  }
  if (!mine) {
    Result<std::unique_ptr<Tokenizer>> read = model_tokenizer(draft);
    if (!read.is_ok()) return refuse_model("engine.draft_model", draft, read.status().message());
    mine = std::move(read).value();
  }
  Status st = DraftModel::check_vocabulary(draft, *mine, *target);
  if (!st.is_ok()) return Status::invalid_argument(st.message() + " (a restart would fail; nothing applied)");
  return Status::ok();
}

}  // namespace

Result<ReloadReport> ConfigReloader::reload() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const char*> argv;
  for (const std::string& a : args_) argv.push_back(a.c_str());
  Result<CommandLine> parsed = parse_command_line(int(argv.size()), argv.data(), default_config());
  if (!parsed.is_ok()) return parsed.status();
  DaemonConfig next = std::move(parsed->config);
  LARDER_RETURN_IF_ERROR(add_api_keys_from_file_and_env(next));
  Result<std::unique_ptr<Tokenizer>> model_tok =
      check_model_file("model.path", in_force_.engine.model_path, next.engine.model_path);
  if (!model_tok.is_ok()) return model_tok.status();
  Result<std::unique_ptr<Tokenizer>> draft_tok =
      check_model_file("engine.draft_model", in_force_.engine.draft_model, next.engine.draft_model);
  if (!draft_tok.is_ok()) return draft_tok.status();
  LARDER_RETURN_IF_ERROR(check_draft_vocabulary(next, std::move(model_tok).value(), std::move(draft_tok).value()));

  ReloadReport report;
  report.config_path = parsed->config_path;
  bool cache_changed = false;
  std::vector<std::string> live;
  for (const config_schema::KeySpec& spec : config_schema::specs()) {
    const config_schema::Value was = spec.get(in_force_), now = spec.get(next);
    const std::string a = config_schema::format_value(spec, was, /*redact=*/false);
    const std::string b = config_schema::format_value(spec, now, /*redact=*/false);
    if (a == b) continue;
    const std::string key = std::string(spec.section) + "." + std::string(spec.name);
    const std::string what = spec.secret ? key + " changed"
                                         : key + ": " + config_schema::format_value(spec, was, true) + " -> " +
                                               config_schema::format_value(spec, now, true);
    switch (how_to_apply(spec.section, spec.name)) {
      case Apply::kCache:
        cache_changed = true;
        live.push_back(what);
        break;
      case Apply::kLive: live.push_back(what); break;
      case Apply::kRestart: report.restart_needed.push_back(what); break;
    }
  }
  // The engine checks the cache part and refuses what needs a restart;
  // nothing else is applied before it said yes.
  // Keys of [cache] that need a restart keep the value in force.
  next.engine.cache.trace_file = in_force_.engine.cache.trace_file;
  if (cache_changed) LARDER_RETURN_IF_ERROR(reconfigure_cache_(next.engine.cache));
  if (next.log_level != in_force_.log_level) spdlog::set_level(spdlog::level::from_str(next.log_level));
  in_force_.engine.cache = next.engine.cache;
  in_force_.server.default_sampling = next.server.default_sampling;
  in_force_.server.default_max_tokens = next.server.default_max_tokens;
  in_force_.log_level = next.log_level;
  report.changed = std::move(live);
  report.default_sampling = in_force_.server.default_sampling;
  report.default_max_tokens = in_force_.server.default_max_tokens;
  return report;
}

}  // namespace larder
