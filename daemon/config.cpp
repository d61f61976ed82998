#include "daemon/config.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <toml++/toml.h>

#include "api/access_policy.h"
#include "daemon/byte_size.h"
#include "daemon/toml_text.h"

namespace larder {
namespace {

// ---- the schema -----------------------------------------------------------
// One row per key: how to read it, what is allowed (the text of the error
// message), how to store it and how to read it back (for dump_config). Adding
// a key means one row here and one documented line in config/larder.toml.

enum class Kind { kInt, kFloat, kString, kSize, kStringList };

struct Value {
  int64_t i = 0;     // kInt, kSize (bytes)
  double f = 0;      // kFloat
  std::string s;     // kString
  std::vector<std::string> list;  // kStringList (a TOML array of strings; flags: comma-separated)
};

// Returns OK, or a non-OK Status whose (optional) message adds detail to
// "must be <allowed>".
using ApplyFn = Status (*)(const Value&, DaemonConfig&);
using GetFn = Value (*)(const DaemonConfig&);

struct KeySpec {
  std::string_view section;
  std::string_view name;
  Kind kind;
  std::string_view allowed;  // completes "must be ..."
  ApplyFn apply;
  GetFn get;
  bool secret = false;  // never shown: dump_config and error messages print kRedacted instead
};

// What dump_config prints for each secret list entry; refused when read back.
constexpr std::string_view kRedacted = "<redacted>";

Status bad(std::string detail = "") { return Status::invalid_argument(std::move(detail)); }

Status int_in(int64_t v, int64_t lo, int64_t hi) {
  return v >= lo && v <= hi ? Status::ok() : bad();
}
// NaN fails every comparison, so it is rejected here too.
Status float_in(double v, double lo, double hi) {
  return v >= lo && v <= hi ? Status::ok() : bad();
}
// A setting the sampler holds as a 32-bit float: the range holds for the
// float too (1e-50 is above 0 as a double and 0 as a float, as requests
// check: api/openai_request.cpp). lo_open: lo itself is outside.
Status float32_in(double v, double lo, double hi, bool lo_open = false) {
  const auto in = [&](double x) { return (lo_open ? x > lo : x >= lo) && x <= hi; };
  if (!in(v)) return bad();
  const float f = static_cast<float>(v);
  if (in(static_cast<double>(f))) return Status::ok();
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);
  return bad("it is " + std::string(buf, ec == std::errc() ? end : buf) + " as a 32-bit float");
}

Value of_int(int64_t i) { Value v; v.i = i; return v; }
// Settings held as float print as the shortest decimal that reads back as the
// same float (0.8f prints as 0.8, not 0.800000011920929).
Value of_float(double f) {
  Value v;
  v.f = f;
  const float narrow = static_cast<float>(f);
  if (static_cast<double>(narrow) == f) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), narrow);
    if (ec == std::errc()) v.f = std::strtod(std::string(buf, end).c_str(), nullptr);
  }
  return v;
}
Value of_string(std::string s) { Value v; v.s = std::move(s); return v; }
Value of_list(std::vector<std::string> list) { Value v; v.list = std::move(list); return v; }

// Normalizes every entry with `normalize` into `out`; the first bad entry's
// reason is the error detail.
Status apply_list(const std::vector<std::string>& in, Result<std::string> (*normalize)(std::string_view),
                  std::vector<std::string>& out) {
  std::vector<std::string> result;
  for (const std::string& entry : in) {
    Result<std::string> n = normalize(entry);
    if (!n.is_ok()) return bad(n.status().message());
    if (std::find(result.begin(), result.end(), *n) == result.end()) result.push_back(*n);
  }
  out = std::move(result);
  return Status::ok();
}

constexpr int kMaxCtx = 1 << 20;
constexpr std::array<std::string_view, 7> kLogLevels = {"trace", "debug", "info", "warn",
                                                         "error", "critical", "off"};

// clang-format off
const KeySpec kSpecs[] = {
  // [model]
  {"model", "path", Kind::kString, "a path to a GGUF file",
   [](const Value& v, DaemonConfig& c) { c.engine.model_path = expand_home(v.s); return Status::ok(); },
   [](const DaemonConfig& c) { return of_string(c.engine.model_path); }},
  {"model", "id", Kind::kString, "a model id (empty: the file's stem)",
   [](const Value& v, DaemonConfig& c) { c.engine.model_id = v.s; return Status::ok(); },
   [](const DaemonConfig& c) { return of_string(c.engine.model_id); }},
  {"model", "context_length", Kind::kInt, "an integer between 0 and 1048576 (0: the model's)",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(int_in(v.i, 0, kMaxCtx)); c.engine.n_ctx = int(v.i); return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.engine.n_ctx); }},
  // [server]
  {"server", "host", Kind::kString, "a non-empty host name or IP address",
   [](const Value& v, DaemonConfig& c) {
     if (v.s.empty()) return bad();
     c.server.host = v.s; return Status::ok(); },
   [](const DaemonConfig& c) { return of_string(c.server.host); }},
  {"server", "port", Kind::kInt, "an integer between 0 and 65535 (0: any free port)",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(int_in(v.i, 0, 65535)); c.server.port = int(v.i); return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.server.port); }},
  {"server", "max_body", Kind::kSize, "a size between 1KiB and 1GiB",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(int_in(v.i, 1 << 10, 1 << 30)); c.server.max_body_bytes = size_t(v.i); return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(int64_t(c.server.max_body_bytes)); }},
  {"server", "shutdown_grace_s", Kind::kFloat, "a number of seconds between 0 and 3600",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(float_in(v.f, 0, 3600)); c.server.shutdown_grace_s = v.f; return Status::ok(); },
   [](const DaemonConfig& c) { return of_float(c.server.shutdown_grace_s); }},
  {"server", "allowed_hosts", Kind::kStringList,
   "a list of host names or IP addresses without a port (\"*\": any; \".example.lan\": the domain and its subdomains)",
   [](const Value& v, DaemonConfig& c) { return apply_list(v.list, &normalize_allowed_host, c.server.allowed_hosts); },
   [](const DaemonConfig& c) { return of_list(c.server.allowed_hosts); }},
  {"server", "cors_origins", Kind::kStringList,
   "a list of web origins like \"http://localhost:3000\" (\"*\": any)",
   [](const Value& v, DaemonConfig& c) { return apply_list(v.list, &normalize_cors_origin, c.server.cors_origins); },
   [](const DaemonConfig& c) { return of_list(c.server.cors_origins); }},
  {"server", "api_keys", Kind::kStringList, "a list of API keys (printable ASCII without spaces)",
   [](const Value& v, DaemonConfig& c) {
     for (size_t i = 0; i < v.list.size(); ++i) {
       const std::string n = std::to_string(i + 1);
       if (v.list[i] == kRedacted) return bad("key " + n + " is " + std::string(kRedacted) + ": --print-config hides the keys; put the real ones back");
       if (!valid_api_key(v.list[i])) return bad("key " + n + " is not 1 to 4096 printable ASCII characters without spaces");
     }
     c.server.api_keys = v.list; return Status::ok(); },
   [](const DaemonConfig& c) { return of_list(c.server.api_keys); }, /*secret=*/true},
  {"server", "api_key_file", Kind::kString, "a path to a file of API keys, one per line (empty: none)",
   [](const Value& v, DaemonConfig& c) { c.api_key_file = expand_home(v.s); return Status::ok(); },
   [](const DaemonConfig& c) { return of_string(c.api_key_file); }},
  {"server", "max_connections", Kind::kInt, "an integer between 1 and 1000000",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(int_in(v.i, 1, 1000000)); c.server.max_connections = int(v.i); return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.server.max_connections); }},
  {"server", "request_timeout_s", Kind::kFloat, "a number of seconds above 0 and at most 86400",
   [](const Value& v, DaemonConfig& c) {
     if (!(v.f > 0 && v.f <= 86400)) return bad();
     c.server.request_timeout_s = v.f; return Status::ok(); },
   [](const DaemonConfig& c) { return of_float(c.server.request_timeout_s); }},
  {"server", "idle_timeout_s", Kind::kFloat, "a number of seconds above 0 and at most 86400",
   [](const Value& v, DaemonConfig& c) {
     if (!(v.f > 0 && v.f <= 86400)) return bad();
     c.server.idle_timeout_s = v.f; return Status::ok(); },
   [](const DaemonConfig& c) { return of_float(c.server.idle_timeout_s); }},
  // [cache]
  {"cache", "dir", Kind::kString, "a directory path (empty: no disk tier)",
   [](const Value& v, DaemonConfig& c) { c.engine.cache.disk.dir = expand_home(v.s); return Status::ok(); },
   [](const DaemonConfig& c) { return of_string(c.engine.cache.disk.dir); }},
  {"cache", "page_size", Kind::kInt, "a power of two between 1 and 1024",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(int_in(v.i, 1, 1024));
     if ((v.i & (v.i - 1)) != 0) return bad();
     c.engine.cache.page_size = int(v.i); return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.engine.cache.page_size); }},
  {"cache", "memory_capacity", Kind::kSize, "a size of at least 1MiB",
   [](const Value& v, DaemonConfig& c) {
     if (v.i < (1 << 20)) return bad();
     c.engine.cache.device.budget_bytes = v.i; return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.engine.cache.device.budget_bytes); }},
  {"cache", "disk_capacity", Kind::kSize, "a size of at least 1MiB",
   [](const Value& v, DaemonConfig& c) {
     if (v.i < (1 << 20)) return bad();
     c.engine.cache.disk.budget_bytes = v.i; return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.engine.cache.disk.budget_bytes); }},
  {"cache", "write_policy", Kind::kString, "\"write_through\" or \"write_back\"",
   [](const Value& v, DaemonConfig& c) {
     if (v.s != "write_through" && v.s != "write_back") return bad();
     c.engine.cache.write_through = v.s == "write_through"; return Status::ok(); },
   [](const DaemonConfig& c) { return of_string(c.engine.cache.write_through ? "write_through" : "write_back"); }},
  {"cache", "kv_dtype", Kind::kString, "\"f32\" or \"f16\"",
   [](const Value& v, DaemonConfig& c) {
     if (v.s != "f32" && v.s != "f16") return bad();
     c.engine.cache.kv_dtype = v.s; return Status::ok(); },
   [](const DaemonConfig& c) { return of_string(c.engine.cache.kv_dtype); }},
  {"cache", "salt", Kind::kString, "a string",
   [](const Value& v, DaemonConfig& c) { c.engine.cache.salt = v.s; return Status::ok(); },
   [](const DaemonConfig& c) { return of_string(c.engine.cache.salt); }},
  {"cache", "storage_threads", Kind::kInt, "an integer between 1 and 64",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(int_in(v.i, 1, 64)); c.engine.cache.n_storage_threads = int(v.i); return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.engine.cache.n_storage_threads); }},
  // [engine]
  {"engine", "threads", Kind::kInt, "an integer between 0 and 1024 (0: all cores)",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(int_in(v.i, 0, 1024)); c.engine.n_threads = int(v.i); return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.engine.n_threads); }},
  {"engine", "device", Kind::kString, "\"auto\", \"cuda\" or \"cpu\"",
   [](const Value& v, DaemonConfig& c) {
     if (v.s != "auto" && v.s != "cuda" && v.s != "cpu") return bad();
     c.engine.device = v.s; return Status::ok(); },
   [](const DaemonConfig& c) { return of_string(c.engine.device); }},
  {"engine", "max_running", Kind::kInt, "an integer between 1 and 1024",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(int_in(v.i, 1, 1024)); c.engine.max_running = int(v.i); return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.engine.max_running); }},
  // [sampling]
  {"sampling", "temperature", Kind::kFloat, "a number between 0 and 2 (0: greedy; the range requests accept)",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(float32_in(v.f, 0, 2)); c.server.default_sampling.temperature = float(v.f); return Status::ok(); },
   [](const DaemonConfig& c) { return of_float(c.server.default_sampling.temperature); }},
  {"sampling", "top_k", Kind::kInt, "an integer between 0 and 1000000 (0: off)",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(int_in(v.i, 0, 1000000)); c.server.default_sampling.top_k = int(v.i); return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.server.default_sampling.top_k); }},
  {"sampling", "top_p", Kind::kFloat, "a number above 0 and at most 1 (1: off; the range requests accept)",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(float32_in(v.f, 0, 1, /*lo_open=*/true)); c.server.default_sampling.top_p = float(v.f); return Status::ok(); },
   [](const DaemonConfig& c) { return of_float(c.server.default_sampling.top_p); }},
  {"sampling", "min_p", Kind::kFloat, "a number between 0 and 1 (0: off)",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(float32_in(v.f, 0, 1)); c.server.default_sampling.min_p = float(v.f); return Status::ok(); },
   [](const DaemonConfig& c) { return of_float(c.server.default_sampling.min_p); }},
  {"sampling", "repeat_penalty", Kind::kFloat, "a number above 0 and at most 10 (1: off)",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(float32_in(v.f, 0, 10, /*lo_open=*/true));
     c.server.default_sampling.repeat_penalty = float(v.f); return Status::ok(); },
   [](const DaemonConfig& c) { return of_float(c.server.default_sampling.repeat_penalty); }},
  {"sampling", "repeat_last_n", Kind::kInt, "an integer between -1 and 1048576 (-1: the whole context)",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(int_in(v.i, -1, kMaxCtx)); c.server.default_sampling.repeat_last_n = int(v.i); return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.server.default_sampling.repeat_last_n); }},
  {"sampling", "presence_penalty", Kind::kFloat, "a number between -2 and 2 (0: off)",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(float32_in(v.f, -2, 2)); c.server.default_sampling.presence_penalty = float(v.f); return Status::ok(); },
   [](const DaemonConfig& c) { return of_float(c.server.default_sampling.presence_penalty); }},
  {"sampling", "frequency_penalty", Kind::kFloat, "a number between -2 and 2 (0: off)",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(float32_in(v.f, -2, 2)); c.server.default_sampling.frequency_penalty = float(v.f); return Status::ok(); },
   [](const DaemonConfig& c) { return of_float(c.server.default_sampling.frequency_penalty); }},
  {"sampling", "max_tokens", Kind::kInt, "-1 (until the context is full) or an integer between 1 and 1048576",
   [](const Value& v, DaemonConfig& c) {
     if (v.i != -1) LARDER_RETURN_IF_ERROR(int_in(v.i, 1, kMaxCtx));
     c.server.default_max_tokens = int(v.i); return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.server.default_max_tokens); }},
  // [log]
  {"log", "level", Kind::kString, "one of trace, debug, info, warn, error, critical, off",
   [](const Value& v, DaemonConfig& c) {
     for (std::string_view l : kLogLevels) if (v.s == l) { c.log_level = v.s; return Status::ok(); }
     return bad(); },
   [](const DaemonConfig& c) { return of_string(c.log_level); }},
};
// clang-format on

constexpr std::array<std::string_view, 6> kSections = {"model", "server", "cache",
                                                       "engine", "sampling", "log"};

const KeySpec* find_spec(std::string_view section, std::string_view name) {
  for (const KeySpec& s : kSpecs)
    if (s.section == section && s.name == name) return &s;
  return nullptr;
}

bool is_section(std::string_view name) {
  for (std::string_view s : kSections)
    if (s == name) return true;
  return false;
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

// ---- formatting -----------------------------------------------------------

std::string format_value(const KeySpec& spec, const Value& v, bool redact) {
  switch (spec.kind) {
    case Kind::kInt: return std::to_string(v.i);
    case Kind::kFloat: return format_float(v.f);
    case Kind::kString: return toml_quote(v.s);
    case Kind::kSize: return toml_quote(format_byte_size(v.i));
    case Kind::kStringList: {
      std::string out = "[";
      for (const std::string& e : v.list) {
        out += (out.size() > 1 ? ", " : "") + toml_quote(redact && spec.secret ? kRedacted : std::string_view(e));
      }
      return out + "]";
    }
  }
  return "";
}

std::string known_keys(std::string_view section) {
  std::string out;
  for (const KeySpec& s : kSpecs) {
    if (s.section != section) continue;
    if (!out.empty()) out += ", ";
    out += s.name;
  }
  return out;
}

std::string known_sections() {
  std::string out;
  for (std::string_view s : kSections) out += (out.empty() ? "[" : ", [") + std::string(s) + "]";
  return out;
}

// ---- applying values ------------------------------------------------------

// Converts a TOML node to the spec's kind. On a type mismatch returns a
// non-OK Status whose message says what was found.
Result<Value> value_from_node(const KeySpec& spec, const toml::node& node) {
  Value v;
  switch (spec.kind) {
    case Kind::kInt:
      if (!node.is_integer()) return bad(std::string("got ") + type_name(node));
      v.i = node.as_integer()->get();
      return v;
    case Kind::kFloat:
      if (node.is_integer()) v.f = double(node.as_integer()->get());
      else if (node.is_floating_point()) v.f = node.as_floating_point()->get();
      else return bad(std::string("got ") + type_name(node));
      return v;
    case Kind::kString:
      if (!node.is_string()) return bad(std::string("got ") + type_name(node));
      v.s = node.as_string()->get();
      return v;
    case Kind::kStringList: {
      const toml::array* array = node.as_array();
      if (array == nullptr) return bad(std::string("got ") + type_name(node));
      for (const toml::node& element : *array) {
        if (!element.is_string()) return bad(std::string("got an array holding ") + type_name(element));
        v.list.push_back(element.as_string()->get());
      }
      return v;
    }
    case Kind::kSize:
      if (node.is_integer()) {
        v.i = node.as_integer()->get();
        if (v.i < 0) return bad("negative");
        return v;
      }
      if (node.is_string()) {
        LARDER_ASSIGN_OR_RETURN(v.i, parse_byte_size(node.as_string()->get()));
        return v;
      }
      return bad(std::string("got ") + type_name(node));
  }
  return bad();
}

// Converts command-line text to the spec's kind.
Result<Value> value_from_text(const KeySpec& spec, std::string_view text) {
  Value v;
  switch (spec.kind) {
    case Kind::kInt: {
      const char* end = text.data() + text.size();
      auto [ptr, ec] = std::from_chars(text.data(), end, v.i);
      if (ec != std::errc() || ptr != end || text.empty()) return bad("not an integer");
      return v;
    }
    case Kind::kFloat: {
      std::string s(text);
      char* end = nullptr;
      errno = 0;
      v.f = std::strtod(s.c_str(), &end);
      if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE) return bad("not a number");
      return v;
    }
    case Kind::kString:
      v.s = std::string(text);
      return v;
    case Kind::kSize: {
      LARDER_ASSIGN_OR_RETURN(v.i, parse_byte_size(text));
      return v;
    }
    case Kind::kStringList: {
      // "a, b,c" -> {"a", "b", "c"}; "" -> {}.
      std::string_view rest = text;
      while (!rest.empty()) {
        const size_t comma = rest.find(',');
        std::string_view item = rest.substr(0, comma);
        while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
        while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
        if (!item.empty()) v.list.emplace_back(item);
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
      return v;
    }
  }
  return bad();
}

// "must be <allowed>" plus the detail of `st`, if any, in parentheses.
std::string reason(const KeySpec& spec, const Status& st) {
  std::string r = "must be " + std::string(spec.allowed);
  if (!st.message().empty()) r += " (" + st.message() + ")";
  return r;
}

Status apply_node(const KeySpec& spec, const toml::node& node, DaemonConfig& config) {
  const std::string shown = spec.secret ? "[" + std::string(kRedacted) + "]" : show_node(node);
  const std::string prefix = "config error: " + std::string(spec.section) + "." + std::string(spec.name) +
                             " = " + shown + ": ";
  Result<Value> v = value_from_node(spec, node);
  Status st = v.is_ok() ? spec.apply(*v, config) : v.status();
  if (st.is_ok()) return st;
  return Status::invalid_argument(prefix + reason(spec, st) + where(node.source()));
}

Status apply_table(const toml::table& root, DaemonConfig& config) {
  for (auto&& [section_key, section_node] : root) {
    const std::string section(section_key.str());
    if (!is_section(section)) {
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
    for (auto&& [key, node] : *table) {
      const std::string name(key.str());
      const KeySpec* spec = find_spec(section, name);
      if (spec == nullptr) {
        std::string msg = "config error: unknown key " + section + "." + name;
        const KeySpec* best = nullptr;
        size_t best_d = 3;  // suggest only close matches
        for (const KeySpec& s : kSpecs) {
          if (s.section != section) continue;
          const size_t d = edit_distance(name, s.name);
          if (d < best_d) best_d = d, best = &s;
        }
        if (best) msg += " (did you mean " + std::string(best->name) + "?)";
        msg += " (known keys in [" + section + "]: " + known_keys(section) + ")";
        return Status::invalid_argument(msg + where(key.source()));
      }
      LARDER_RETURN_IF_ERROR(apply_node(*spec, node, config));
    }
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
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::invalid_argument("config error: " + path + " is a directory, not a config file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    const std::string what = "config error: cannot read config file " + path + ": " + std::strerror(err);
    if (err == ENOENT) return Status::not_found(what);
    return Status::io_error(what);
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::io_error("config error: cannot read config file " + path);
  return load_config_string(text.str(), std::move(base), path);
}

Status set_config_value(std::string_view key, std::string_view text, DaemonConfig& config,
                        std::string_view label) {
  const size_t dot = key.find('.');
  const KeySpec* spec = dot == std::string_view::npos ? nullptr
                                                      : find_spec(key.substr(0, dot), key.substr(dot + 1));
  if (spec == nullptr) return Status::invalid_argument("unknown config key " + std::string(key));
  Result<Value> v = value_from_text(*spec, text);
  Status st = v.is_ok() ? spec->apply(*v, config) : v.status();
  if (st.is_ok()) return st;
  const std::string shown = spec->secret ? std::string(kRedacted) : std::string(text);
  return Status::invalid_argument(std::string(label) + " " + shown + ": " + reason(*spec, st));
}

std::string dump_config(const DaemonConfig& config, bool redact_secrets) {
  std::string out;
  std::string_view section;
  for (const KeySpec& spec : kSpecs) {
    if (spec.section != section) {
      section = spec.section;
      out += (out.empty() ? "[" : "\n[") + std::string(section) + "]\n";
    }
    out += std::string(spec.name) + " = " + format_value(spec, spec.get(config), redact_secrets) + "\n";
  }
  return out;
}

}  // namespace larder
