#include "daemon/config.h"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include <spdlog/spdlog.h>
#include <toml++/toml.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/config_schema.h"
#include "daemon/toml_text.h"

namespace larder {
namespace {

// The keys themselves (one row per key) are in config_schema.cpp; this file
// walks a TOML document against them.
using config_schema::KeyAlias;
using config_schema::KeySpec;
using config_schema::kRedacted;
using config_schema::Value;

// ---- the schema's shape ----------------------------------------------------

std::string dotted(std::string_view section, std::string_view name) {
  return std::string(section) + "." + std::string(name);
}

const KeySpec* find_spec(std::string_view section, std::string_view name) {
  for (const KeySpec& s : config_schema::specs())
    if (s.section == section && s.name == name) return &s;
  return nullptr;
}

// `key` dotted in full: "cache.disk.dir".
const KeySpec* find_spec(std::string_view key) {
  const size_t dot = key.rfind('.');
  return dot == std::string_view::npos ? nullptr : find_spec(key.substr(0, dot), key.substr(dot + 1));
}

const KeyAlias* find_alias(std::string_view key) {
  for (const KeyAlias& a : config_schema::aliases())
    if (dotted(a.section, a.name) == key) return &a;
  return nullptr;
}

// The tables directly inside `parent` ("" for the top level): for "cache",
// {"cache.device", "cache.host", "cache.disk"}.
std::vector<std::string_view> child_sections(std::string_view parent) {
  std::vector<std::string_view> out;
  for (std::string_view s : config_schema::sections()) {
    std::string_view rest = s;
    if (!parent.empty()) {
      if (s.size() <= parent.size() + 1 || s.substr(0, parent.size()) != parent || s[parent.size()] != '.') continue;
      rest = s.substr(parent.size() + 1);
    }
    if (rest.find('.') == std::string_view::npos) out.push_back(s);
  }
  return out;
}

bool is_child_section(std::string_view parent, std::string_view path) {
  const std::vector<std::string_view> children = child_sections(parent);
  return std::find(children.begin(), children.end(), path) != children.end();
}

// Levenshtein distance, for "did you mean" on unknown keys.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The first key of `section`, for examples in messages.
std::string first_key(std::string_view section) {
  for (const KeySpec& s : config_schema::specs())
    if (s.section == section) return std::string(s.name);
  return "...";
}

// ---- message text ----------------------------------------------------------

// "[cache.device], [cache.host], [cache.disk]"
std::string list_sections(const std::vector<std::string_view>& sections) {
  std::string out;
  for (std::string_view s : sections) out += (out.empty() ? "[" : ", [") + std::string(s) + "]";
  return out;
}

std::string known_sections() { return list_sections(child_sections("")); }

// "page_size, write_policy, ...; tables: [cache.device], ..." (old names are
// left out: they are on their way out).
std::string known_keys(std::string_view section) {
  std::string out;
  for (const KeySpec& s : config_schema::specs()) {
    if (s.section != section) continue;
    if (!out.empty()) out += ", ";
    out += s.name;
  }
  const std::vector<std::string_view> children = child_sections(section);
  if (!children.empty()) out += "; tables: " + list_sections(children);
  return out;
}

// The candidates closest to `name` (edit distance below 3; ties all kept),
// comparing `name` with the part of each after its last dot.
std::vector<std::string> closest(std::string_view name, const std::vector<std::string>& candidates) {
  size_t best = 3;
  std::vector<std::string> picks;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(name, std::string_view(c).substr(c.rfind('.') + 1));
    if (d < best) best = d, picks.clear();
    if (d == best) picks.push_back(c);
  }
  return picks;
}

// " (did you mean A, B or C?)", each pick between `open` and `close`; ""
// for no picks.
std::string did_you_mean(const std::vector<std::string>& picks, std::string_view open = "",
                         std::string_view close = "") {
  if (picks.empty()) return "";
  std::string out = " (did you mean ";
  for (size_t i = 0; i < picks.size(); ++i) {
    if (i > 0) out += i + 1 == picks.size() ? " or " : ", ";
    out += std::string(open) + picks[i] + std::string(close);
  }
  return out + "?)";
}

Status unknown_key(std::string_view section, std::string_view name, const toml::key& key,
                   const toml::node& node) {
  const std::string full = dotted(section, name);
  const std::vector<std::string_view> children = child_sections(section);
  if (node.is_table() && !children.empty()) {
    const std::vector<std::string> tables(children.begin(), children.end());
    const std::string hint = did_you_mean(closest(name, tables), "[", "]");
    return Status::invalid_argument("config error: unknown table [" + full + "]" + hint + " (known tables in [" +
                                    std::string(section) + "]: " + list_sections(children) + ")" +
                                    where(key.source()));
  }
  // The keys of this table, and those of the tables below it as written
  // from here: "ttl" in [cache] gets "did you mean disk.ttl?".
  std::vector<std::string> candidates;
  for (const KeySpec& s : config_schema::specs()) {
    if (s.section == section) candidates.emplace_back(s.name);
    if (is_child_section(section, s.section)) {
      candidates.push_back(dotted(s.section.substr(section.size() + 1), s.name));
    }
  }
  return Status::invalid_argument("config error: unknown key " + full + did_you_mean(closest(name, candidates)) +
                                  " (known keys in [" + std::string(section) + "]: " + known_keys(section) + ")" +
                                  where(key.source()));
}

// "must be <allowed>" plus the detail of `st`, if any, in parentheses.
std::string reason(const KeySpec& spec, const Status& st) {
  std::string r = "must be " + std::string(spec.allowed);
  if (!st.message().empty()) r += " (" + st.message() + ")";
  return r;
}

// ---- applying a document ---------------------------------------------------

// One load: the settings set so far, by the key as written (to catch an old
// name and its new one in the same file), and the old names warned about.
struct Load {
  struct Seen {
    std::string written;  // "cache.dir" or "cache.disk.dir"
    toml::source_region at;
  };
  DaemonConfig& config;
  std::map<std::string, Seen> set;  // by the key's new name
  std::set<std::string> warned;
};

void warn_old_name(Load* load, const KeyAlias& alias, const std::string& old, const std::string& at) {
  if (load != nullptr && !load->warned.insert(old).second) return;
  const KeySpec* target = find_spec(alias.target);
  spdlog::warn("config: {} is an old name, use {} instead ([{}] {}); the old name still works in this release "
               "but will be removed in the next{}",
               old, alias.target, target->section, target->name, at);
}

// Applies `node` to `spec`'s setting; `written` is the key as the file
// spells it (an old name, or the dotted new one), which messages name.
Status apply_key(Load& load, const KeySpec& spec, const std::string& written, const toml::node& node) {
  const std::string canonical = dotted(spec.section, spec.name);
  auto [it, fresh] = load.set.try_emplace(canonical, Load::Seen{written, node.source()});
  if (!fresh) {
    // TOML refuses a key set twice, so this is an old name and its new one.
    const bool first_is_old = it->second.written != canonical;
    const std::string& old = first_is_old ? it->second.written : written;
    const toml::source_region& old_at = first_is_old ? it->second.at : node.source();
    const toml::source_region& new_at = first_is_old ? node.source() : it->second.at;
    return Status::invalid_argument("config error: " + old + where(old_at) + " and " + canonical + where(new_at) +
                                    " are the same setting (" + old + " is the old name of " + canonical +
                                    "): keep only " + canonical);
  }
  const std::string shown = !spec.secret                     ? show_node(node)
                           : spec.kind == config_schema::Kind::kString ? "\"" + std::string(kRedacted) + "\""
                                                                     : "[" + std::string(kRedacted) + "]";
  Result<Value> v = config_schema::value_from_node(spec, node);
  Status st = v.is_ok() ? spec.apply(*v, load.config) : v.status();
  if (st.is_ok()) return st;
  return Status::invalid_argument("config error: " + written + " = " + shown + ": " + reason(spec, st) +
                                  where(node.source()));
}

// The keys of the table at `section` ("cache", "cache.disk"), and the
// tables inside it.
Status apply_section(Load& load, const std::string& section, const toml::table& table) {
  for (auto&& [key, node] : table) {
    const std::string name(key.str());
    const std::string full = dotted(section, name);
    if (const KeySpec* spec = find_spec(section, name)) {
      LARDER_RETURN_IF_ERROR(apply_key(load, *spec, full, node));
    } else if (const KeyAlias* alias = find_alias(full)) {
      warn_old_name(&load, *alias, full, where(key.source()));
      const KeySpec* target = find_spec(alias->target);
      assert(target != nullptr);
      LARDER_RETURN_IF_ERROR(apply_key(load, *target, full, node));
    } else if (is_child_section(section, full)) {
      const toml::table* inner = node.as_table();
      if (inner == nullptr) {
        return Status::invalid_argument("config error: " + full + " = " + show_node(node) + ": must be a table (a [" +
                                        full + "] section, or keys like " + name + "." + first_key(full) +
                                        " = ... in [" + section + "])" + where(node.source()));
      }
      LARDER_RETURN_IF_ERROR(apply_section(load, full, *inner));
    } else {
      return unknown_key(section, name, key, node);
    }
  }
  return Status::ok();
}

Status apply_table(const toml::table& root, DaemonConfig& config) {
  Load load{config, {}, {}};
  for (auto&& [section_key, section_node] : root) {
    const std::string section(section_key.str());
    if (!is_child_section("", section)) {
      if (!section_node.is_table()) {
        return Status::invalid_argument("config error: unknown key " + section +
                                        " (keys belong in a section: " + known_sections() + ")" +
                                        where(section_key.source()));
      }
      return Status::invalid_argument("config error: unknown section [" + section + "] (known: " +
                                      known_sections() + ")" + where(section_key.source()));
    }
    const toml::table* table = section_node.as_table();
    if (table == nullptr) {
      return Status::invalid_argument("config error: " + section + " = " + show_node(section_node) +
                                      ": must be a table (a [" + section + "] section)" +
                                      where(section_node.source()));
    }
    LARDER_RETURN_IF_ERROR(apply_section(load, section, *table));
  }
  return Status::ok();
}

}  // namespace

std::string expand_home(const std::string& path) {
  if (path.empty() || path[0] != '~') return path;
  if (path.size() > 1 && path[1] != '/') return path;  // "~user" is not supported: leave it
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') return path;
  return std::string(home) + path.substr(1);
}

std::string default_cache_dir() {
  // XDG Base Directory spec: relative values of XDG_CACHE_HOME are invalid
  // and must be ignored.
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/larder";
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') return std::string(home) + "/.cache/larder";
  return "";
}

DaemonConfig default_config() {
  DaemonConfig c;
  c.engine.cache.disk.dir = default_cache_dir();
  return c;
}

Result<DaemonConfig> load_config_string(std::string_view toml, DaemonConfig base,
                                        const std::string& source_name) {
  toml::table root;
  try {
    root = toml::parse(toml, source_name);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    return Status::invalid_argument(
        "config error: " + (source_name.empty() ? "" : source_name + " ") + "line " +
        std::to_string(b.line) + ", column " + std::to_string(b.column) +
        ": malformed TOML: " + std::string(e.description()));
  }
  LARDER_RETURN_IF_ERROR(apply_table(root, base));
  return base;
}

Result<DaemonConfig> load_config_file(const std::string& path, DaemonConfig base) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer. Whatever is not a
  // regular file (a FIFO, a socket, a device such as /dev/zero) is refused
  // on the open descriptor: reading it could block or never end, and the
  // reload reading it would hang.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string what = "config error: cannot read config file " + path + ": " + std::strerror(err);
    if (err == ENOENT) return Status::not_found(what);
    return Status::io_error(what);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    return Status::io_error("config error: cannot read config file " + path + ": " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) {
    return Status::invalid_argument("config error: " + path + " is a directory, not a config file");
  }
  if (!S_ISREG(st.st_mode)) return Status::invalid_argument("config error: " + path + " is not a regular file");
  // At most one byte past the limit is read: a file that keeps growing costs
  // no more than that.
  std::string text;
  char buf[65536];
  while (text.size() <= kMaxConfigFileBytes) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return Status::io_error("config error: cannot read config file " + path + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    text.append(buf, size_t(n));
  }
  if (text.size() > kMaxConfigFileBytes) {
    return Status::invalid_argument("config error: " + path + " is larger than " +
                                    std::to_string(kMaxConfigFileBytes >> 20) + " MiB, too large for a config file");
  }
  return load_config_string(text, std::move(base), path);
}

Status set_config_value(std::string_view key, std::string_view text, DaemonConfig& config,
                        std::string_view label) {
  const KeySpec* spec = find_spec(key);
  if (spec == nullptr) {
    if (const KeyAlias* alias = find_alias(key)) {
      warn_old_name(nullptr, *alias, std::string(key), " (" + std::string(label) + ")");
      spec = find_spec(alias->target);
    }
  }
  if (spec == nullptr) return Status::invalid_argument("unknown config key " + std::string(key));
  Result<Value> v = config_schema::value_from_text(*spec, text);
  Status st = v.is_ok() ? spec->apply(*v, config) : v.status();
  if (st.is_ok()) return st;
  const std::string shown = spec->secret ? std::string(kRedacted) : std::string(text);
  return Status::invalid_argument(std::string(label) + " " + shown + ": " + reason(*spec, st));
}

std::string dump_config(const DaemonConfig& config, bool redact_secrets) {
  std::string out;
  std::string_view section;
  for (const KeySpec& spec : config_schema::specs()) {
    if (spec.section != section) {
      section = spec.section;
      out += (out.empty() ? "[" : "\n[") + std::string(section) + "]\n";
    }
    out += std::string(spec.name) + " = " +
           config_schema::format_value(spec, spec.get(config), redact_secrets) + "\n";
  }
  return out;
}

}  // namespace larder
