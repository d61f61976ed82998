// The config schema, internal to daemon/: one row per key saying how to
// read it, what is allowed (the text of the error message), how to store it
// and how to read it back (for dump_config), plus the sections (tables) and
// the old key names that still work (aliases). daemon/config.cpp walks the
// TOML document against it. Adding a key means one row in config_schema.cpp
// and one documented line in config/larder.toml.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "daemon/config.h"
#include "storage/status.h"

namespace larder::config_schema {

enum class Kind {
  kInt,
  kFloat,
  kString,
  kBool,
  kSize,        // bytes: an integer or a string with a unit (daemon/byte_size.h)
  kDuration,    // seconds: an integer or a string like "1d12h" (daemon/duration.h)
  kStringList,  // a TOML array of strings; on the command line comma-separated
};

struct Value {
  int64_t i = 0;     // kInt, kSize (bytes), kDuration (seconds)
  double f = 0;      // kFloat
  bool b = false;    // kBool
  std::string s;     // kString
  std::vector<std::string> list;  // kStringList
};

// Returns OK, or a non-OK Status whose (optional) message adds detail to
// "must be <allowed>".
using ApplyFn = Status (*)(const Value&, DaemonConfig&);
using GetFn = Value (*)(const DaemonConfig&);

struct KeySpec {
  std::string_view section;  // dotted table path: "server", "cache.disk"
  std::string_view name;
  Kind kind;
  std::string_view allowed;  // completes "must be ..."
  ApplyFn apply;
  GetFn get;
  bool secret = false;  // never shown: dump_config and error messages print kRedacted instead
};

// An old key name that still sets a key, for one release, with a warning.
struct KeyAlias {
  std::string_view section;  // where the old key is: "cache"
  std::string_view name;     // its old name: "dir"
  std::string_view target;   // the key it sets, dotted: "cache.disk.dir"
};

// What dump_config prints for each secret list entry; refused when read back.
inline constexpr std::string_view kRedacted = "<redacted>";

// Every key, grouped by section in the order dump_config prints them.
std::span<const KeySpec> specs();

// Every section, dump order: "model", "server", "cache", "cache.device",
// "cache.host", "cache.disk", "engine", "sampling", "log".
std::span<const std::string_view> sections();

std::span<const KeyAlias> aliases();

// ---- conversions (config_values.cpp) ----------------------------------------

// The node as the spec's kind. Errors: kInvalidArgument with the detail
// for "must be ... (DETAIL)": "got a string" on a type mismatch, the reason
// of parse_byte_size / parse_duration, "negative".
Result<Value> value_from_node(const KeySpec& spec, const toml::node& node);

// Command-line text as the spec's kind ("8080", "2GiB", "1d12h", "true",
// "a, b"). Errors as value_from_node ("not an integer", ...).
Result<Value> value_from_text(const KeySpec& spec, std::string_view text);

// The value as TOML text (sizes and durations as quoted strings with units;
// secrets as kRedacted when `redact`).
std::string format_value(const KeySpec& spec, const Value& v, bool redact);

}  // namespace larder::config_schema
