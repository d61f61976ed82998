#include "daemon/config_schema.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>

#include "api/access_policy.h"

namespace larder::config_schema {
namespace {

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
constexpr int64_t kMiB = int64_t(1) << 20;
constexpr std::array<std::string_view, 7> kLogLevels = {"trace", "debug", "info", "warn",
                                                         "error", "critical", "off"};

// The eviction policies of storage/eviction_policy.h. Keep in step with
// eviction_policy_names() there (make_eviction_policy() is what builds
// them; the daemon checks the names here so a bad one stops it at start).
constexpr std::array<std::string_view, 4> kEvictionPolicies = {"lru", "lfu", "priority_lru",
                                                                "priority_lfu"};
constexpr std::string_view kPolicyAllowed =
    "one of \"lru\", \"lfu\", \"priority_lru\", \"priority_lfu\"";

Status apply_policy(const std::string& name, std::string& out) {
  for (std::string_view p : kEvictionPolicies) {
    if (name == p) {
      out = name;
      return Status::ok();
    }
  }
  return bad();
}

// 100 years of 365.25 days: 36525 * 86400 s.
constexpr int64_t kMaxTtlSeconds = int64_t(36525) * 86400;

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
  {"server", "max_n", Kind::kInt, "an integer between 1 and 128",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(int_in(v.i, 1, 128)); c.server.max_n = int(v.i); return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.server.max_n); }},
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
  {"server", "admin", Kind::kString, "\"on\" or \"off\"",
   [](const Value& v, DaemonConfig& c) {
     if (v.s != "on" && v.s != "off") return bad();
     c.server.admin_enabled = v.s == "on"; return Status::ok(); },
   [](const DaemonConfig& c) { return of_string(c.server.admin_enabled ? "on" : "off"); }},
  {"server", "admin_token", Kind::kString,
   "a token of printable ASCII characters without spaces (empty: the api_keys rule)",
   [](const Value& v, DaemonConfig& c) {
     if (v.s == kRedacted) return bad(std::string(kRedacted) + ": --print-config hides the token; put the real one back");
     if (!v.s.empty() && !valid_api_key(v.s)) return bad("it is not 1 to 4096 printable ASCII characters without spaces");
     c.server.admin_token = v.s; return Status::ok(); },
   [](const DaemonConfig& c) { return of_string(c.server.admin_token); }, /*secret=*/true},
  // [cache]
  {"cache", "page_size", Kind::kInt, "a power of two between 1 and 1024",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(int_in(v.i, 1, 1024));
     if ((v.i & (v.i - 1)) != 0) return bad();
     c.engine.cache.page_size = int(v.i); return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.engine.cache.page_size); }},
  {"cache", "write_policy", Kind::kString, "\"write_through\" or \"write_back\"",
   [](const Value& v, DaemonConfig& c) {
     if (v.s != "write_through" && v.s != "write_back") return bad();
     c.engine.cache.write_through = v.s == "write_through"; return Status::ok(); },
   [](const DaemonConfig& c) { return of_string(c.engine.cache.write_through ? "write_through" : "write_back"); }},
  {"cache", "kv_dtype", Kind::kString, "\"f16\", \"f32\" or \"q8_0\"",
   [](const Value& v, DaemonConfig& c) {
     if (v.s != "f32" && v.s != "f16" && v.s != "q8_0") return bad();
     c.engine.cache.kv_dtype = v.s; return Status::ok(); },
   [](const DaemonConfig& c) { return of_string(c.engine.cache.kv_dtype); }},
  {"cache", "salt", Kind::kString, "a string",
   [](const Value& v, DaemonConfig& c) { c.engine.cache.salt = v.s; return Status::ok(); },
   [](const DaemonConfig& c) { return of_string(c.engine.cache.salt); }},
  {"cache", "storage_threads", Kind::kInt, "an integer between 1 and 64",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(int_in(v.i, 1, 64)); c.engine.cache.n_storage_threads = int(v.i); return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.engine.cache.n_storage_threads); }},
  {"cache", "trace_file", Kind::kString, "a file path (\"\" = off)",
   [](const Value& v, DaemonConfig& c) { c.engine.cache.trace_file = expand_home(v.s); return Status::ok(); },
   [](const DaemonConfig& c) { return of_string(c.engine.cache.trace_file); }},
  // [cache.device]
  {"cache.device", "budget", Kind::kSize, "a size of at least 1MiB",
   [](const Value& v, DaemonConfig& c) {
     if (v.i < kMiB) return bad();
     c.engine.cache.device.budget_bytes = v.i; return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.engine.cache.device.budget_bytes); }},
  {"cache.device", "policy", Kind::kString, kPolicyAllowed,
   [](const Value& v, DaemonConfig& c) { return apply_policy(v.s, c.engine.cache.device.policy); },
   [](const DaemonConfig& c) { return of_string(c.engine.cache.device.policy); }},
  // [cache.host]
  {"cache.host", "budget", Kind::kSize, "0 (no host tier) or a size of at least 1MiB",
   [](const Value& v, DaemonConfig& c) {
     if (v.i != 0 && v.i < kMiB) return bad();
     c.engine.cache.host.budget_bytes = v.i; return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.engine.cache.host.budget_bytes); }},
  {"cache.host", "policy", Kind::kString, kPolicyAllowed,
   [](const Value& v, DaemonConfig& c) { return apply_policy(v.s, c.engine.cache.host.policy); },
   [](const DaemonConfig& c) { return of_string(c.engine.cache.host.policy); }},
  // [cache.disk]
  {"cache.disk", "dir", Kind::kString, "a directory path (empty: no disk tier)",
   [](const Value& v, DaemonConfig& c) { c.engine.cache.disk.dir = expand_home(v.s); return Status::ok(); },
   [](const DaemonConfig& c) { return of_string(c.engine.cache.disk.dir); }},
  {"cache.disk", "budget", Kind::kSize, "a size of at least 1MiB",
   [](const Value& v, DaemonConfig& c) {
     if (v.i < kMiB) return bad();
     c.engine.cache.disk.budget_bytes = v.i; return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.engine.cache.disk.budget_bytes); }},
  {"cache.disk", "min_free", Kind::kSize, "a size (0: no reserve)",
   [](const Value& v, DaemonConfig& c) {
     if (v.i < 0) return bad();
     c.engine.cache.disk.min_free_bytes = v.i; return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.engine.cache.disk.min_free_bytes); }},
  {"cache.disk", "policy", Kind::kString, kPolicyAllowed,
   [](const Value& v, DaemonConfig& c) { return apply_policy(v.s, c.engine.cache.disk.policy); },
   [](const DaemonConfig& c) { return of_string(c.engine.cache.disk.policy); }},
  {"cache.disk", "ttl", Kind::kDuration,
   "a duration like \"30d\", \"12h\", \"90m\", \"45s\" or \"1d12h\" (an integer: seconds; 0: never expire), "
   "at most 100 years (36525d)",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(int_in(v.i, 0, kMaxTtlSeconds)); c.engine.cache.disk.ttl_seconds = v.i; return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.engine.cache.disk.ttl_seconds); }},
  {"cache.disk", "sync", Kind::kBool, "true or false",
   [](const Value& v, DaemonConfig& c) { c.engine.cache.disk.sync = v.b; return Status::ok(); },
   [](const DaemonConfig& c) { Value v; v.b = c.engine.cache.disk.sync; return v; }},
  {"cache.disk", "on_error", Kind::kString, "\"memory_only\" or \"fail\"",
   [](const Value& v, DaemonConfig& c) {
     if (v.s == "memory_only") c.engine.cache.disk.on_error = DiskOnError::kMemoryOnly;
     else if (v.s == "fail") c.engine.cache.disk.on_error = DiskOnError::kFail;
     else return bad();
     return Status::ok(); },
   [](const DaemonConfig& c) {
     return of_string(c.engine.cache.disk.on_error == DiskOnError::kFail ? "fail" : "memory_only"); }},
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
  {"engine", "device_check", Kind::kBool, "true or false",
   [](const Value& v, DaemonConfig& c) { c.engine.device_check = v.b; return Status::ok(); },
   [](const DaemonConfig& c) { Value v; v.b = c.engine.device_check; return v; }},
  {"engine", "max_running", Kind::kInt, "an integer between 1 and 1024",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(int_in(v.i, 1, 1024)); c.engine.max_running = int(v.i); return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.engine.max_running); }},
  {"engine", "draft_tokens", Kind::kInt, "an integer between 0 and 32",
   [](const Value& v, DaemonConfig& c) {
     LARDER_RETURN_IF_ERROR(int_in(v.i, 0, 32)); c.engine.draft_tokens = int(v.i); return Status::ok(); },
   [](const DaemonConfig& c) { return of_int(c.engine.draft_tokens); }},
  {"engine", "draft_model", Kind::kString, "a path to a GGUF file sharing the model's vocabulary (empty: none)",
   [](const Value& v, DaemonConfig& c) { c.engine.draft_model = expand_home(v.s); return Status::ok(); },
   [](const DaemonConfig& c) { return of_string(c.engine.draft_model); }},
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

constexpr std::string_view kSections[] = {"model",      "server", "cache",    "cache.device", "cache.host",
                                          "cache.disk", "engine", "sampling", "log"};

constexpr KeyAlias kAliases[] = {
    {"cache", "dir", "cache.disk.dir"},
    {"cache", "memory_capacity", "cache.device.budget"},
    {"cache", "disk_capacity", "cache.disk.budget"},
};

}  // namespace

std::span<const KeySpec> specs() { return kSpecs; }
std::span<const std::string_view> sections() { return kSections; }
std::span<const KeyAlias> aliases() { return kAliases; }

}  // namespace larder::config_schema
