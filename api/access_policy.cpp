#include "api/access_policy.h"

#include "api/api_error.h"

#include <uv.h>

#include <algorithm>
#include <cctype>

#include <spdlog/spdlog.h>

#include "api/http_server.h"
#include "api/openai_response.h"

namespace larder {

namespace {

constexpr std::string_view kAllowMethods = "GET, POST, OPTIONS";
constexpr std::string_view kPreflightMaxAge = "600";  // seconds (Chromium caps it at 7200)

bool is_ipv6(std::string_view s) {
  unsigned char buf[16];
  return uv_inet_pton(AF_INET6, std::string(s).c_str(), buf) == 0;
}

// A DNS name or IPv4 address, lower case (RFC 3986 reg-name without the
// sub-delims and percent-encoding nobody uses in a Host).
bool is_host_name(std::string_view s) {
  if (s.empty() || s.front() == '-' || s.front() == '.') return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isdigit(c) || (c >= 'a' && c <= 'z') || c == '-' || c == '.' || c == '_';
  });
}

// "name[:port]" or "[v6][:port]" (lower-cased) -> the name ("[v6]" keeps its
// brackets; a trailing dot is dropped). nullopt for anything else.
std::optional<std::string> host_name_of(std::string_view value) {
  std::string s = ascii_lower(trim_ows(value));
  std::string name;
  std::string_view rest;
  if (!s.empty() && s.front() == '[') {
    const size_t close = s.find(']');
    if (close == std::string::npos || !is_ipv6(std::string_view(s).substr(1, close - 1))) return std::nullopt;
    name = s.substr(0, close + 1);
    rest = std::string_view(s).substr(close + 1);
  } else {
    const size_t colon = s.find(':');
    name = s.substr(0, colon);
    if (colon != std::string::npos) rest = std::string_view(s).substr(colon);
    if (name.size() > 1 && name.back() == '.') name.pop_back();
    if (!is_host_name(name)) return std::nullopt;
  }
  if (!rest.empty()) {
    if (rest.front() != ':' || rest.size() > 6) return std::nullopt;
    for (char c : rest.substr(1))
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  return name;
}

bool is_tchar(unsigned char c) {
  return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

// For messages: at most 100 characters of what the client sent.

HttpResponse refuse(int status, std::string message, const char* code) {
  return error_response(ApiError{status, std::move(message), "invalid_request_error", std::nullopt, std::string(code)});
}

bool is_health(std::string_view path) { return path == "/health" || path == "/v1/health"; }

bool is_json(const std::string* content_type) {
  if (content_type == nullptr) return false;
  std::string_view media = *content_type;
  media = trim_ows(media.substr(0, media.find(';')));
  return ascii_lower(media) == "application/json";
}

// Compares without an early exit: the time depends on a.size() only.
unsigned equal_in_constant_time(std::string_view a, std::string_view b) {
  size_t diff = a.size() ^ b.size();
  const size_t n = b.size();
  for (size_t i = 0; i < a.size(); ++i) {
    const unsigned char bc = n ? static_cast<unsigned char>(b[i % n]) : 0;
    diff |= static_cast<unsigned char>(a[i]) ^ bc;
    __asm__ __volatile__("" : "+r"(diff));  // keeps the compiler from short-cutting the loop
  }
  return diff == 0 ? 1u : 0u;
}

// "Authorization, Content-Type" plus the other (valid) names the preflight
// asks for: the origin is trusted, and the SDKs send headers of their own
// (X-Stainless-*, OpenAI-Organization, ...).
std::string allow_headers(const HttpRequest& request) {
  std::string out = "Authorization, Content-Type";
  const std::string* asked = request.header("access-control-request-headers");
  if (asked == nullptr) return out;
  std::vector<std::string> seen = {"authorization", "content-type"};
  std::string_view rest = *asked;
  while (!rest.empty() && seen.size() < 66) {
    const size_t comma = rest.find(',');
    std::string name = ascii_lower(trim_ows(rest.substr(0, comma)));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](unsigned char c) { return is_tchar(c); })) continue;
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
    out += ", " + name;
    seen.push_back(std::move(name));
  }
  return out;
}

}  // namespace

bool is_admin_path(std::string_view path) {
  return path == "/metrics" || path == "/admin" || path.starts_with("/admin/");
}

bool valid_api_key(std::string_view key) {
  if (key.empty() || key.size() > 4096) return false;
  return std::all_of(key.begin(), key.end(), [](unsigned char c) { return c > 0x20 && c < 0x7f; });
}

Result<std::string> normalize_cors_origin(std::string_view origin) {
  const auto bad = [&] {
    // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "x" + f().
    std::string msg(1, '"');
    msg += clip_for_message(origin);
    msg += "\" is not \"*\", \"null\" or an origin like \"http://localhost:3000\" (scheme://host[:port], no path)";
    return Status::invalid_argument(msg);
  };
  if (origin == "*" || origin == "null") return std::string(origin);
  std::string s = ascii_lower(origin);
  const size_t sep = s.find("://");
  if (sep == std::string::npos || sep == 0 || !std::isalpha(static_cast<unsigned char>(s[0]))) return bad();
  const std::string scheme = s.substr(0, sep);
  if (!std::all_of(scheme.begin(), scheme.end(),
                   [](unsigned char c) { return std::isalnum(c) || c == '+' || c == '-' || c == '.'; })) {
    return bad();
  }
  std::string authority = s.substr(sep + 3);
  if (!authority.empty() && authority.back() == '/') authority.pop_back();
  if (authority.find_first_of("/?#@ \t") != std::string::npos) return bad();
  const std::optional<std::string> name = host_name_of(authority);
  if (!name) return bad();
  const size_t port_at = authority.front() == '[' ? authority.find(']') + 1 : authority.find(':');
  std::string port = port_at == std::string::npos ? "" : authority.substr(port_at);
  if (port == ":" || (scheme == "http" && port == ":80") || (scheme == "https" && port == ":443")) port.clear();
  return scheme + "://" + *name + port;
}

Result<std::string> normalize_allowed_host(std::string_view host) {
  const auto bad = [&](const char* why) {
    std::string msg(1, '"');
    msg += clip_for_message(host);
    msg += "\" ";
    msg += why;
    return Status::invalid_argument(msg);
  };
  if (host == "*") return std::string(host);
  std::string s = ascii_lower(host);
  if (!s.empty() && s.front() == '[') {
    if (s.back() != ']' || !is_ipv6(std::string_view(s).substr(1, s.size() - 2))) return bad("is not an IPv6 address");
    return s;
  }
  if (s.find(':') != std::string::npos) {
    if (is_ipv6(s)) return "[" + s + "]";
    return bad("has a port or is not a host name (give names without a port: any port is accepted)");
  }
  const bool suffix = !s.empty() && s.front() == '.';
  if (!is_host_name(suffix ? std::string_view(s).substr(1) : std::string_view(s))) {
    return bad("is not a host name, \".domain\" or an IP address");
  }
  return s;
}

Result<AccessPolicy> AccessPolicy::create(const ServerOptions& options) {
  AccessPolicy p;
  p.hosts_ = {"localhost", ".localhost", "127.0.0.1", "[::1]"};
  const std::string listen = ascii_lower(options.host);
  const bool wildcard = listen == "0.0.0.0" || listen == "::" || listen == "[::]";
  if (!wildcard) {
    Result<std::string> h = normalize_allowed_host(listen);
    if (h.is_ok()) p.hosts_.push_back(*h);  // else the listener fails with its own message
  }
  p.any_host_ = wildcard && options.allowed_hosts.empty();
  for (const std::string& entry : options.allowed_hosts) {
    Result<std::string> h = normalize_allowed_host(entry);
    if (!h.is_ok()) return Status::invalid_argument("allowed_hosts: " + h.status().message());
    if (*h == "*") p.any_host_ = true;
    p.hosts_.push_back(*h);
  }
  for (const std::string& entry : options.cors_origins) {
    Result<std::string> o = normalize_cors_origin(entry);
    if (!o.is_ok()) return Status::invalid_argument("cors_origins: " + o.status().message());
    if (*o == "*") p.any_origin_ = true;
    p.origins_.push_back(*o);
  }
  for (size_t i = 0; i < options.api_keys.size(); ++i) {
    if (!valid_api_key(options.api_keys[i])) {
      return Status::invalid_argument("api_keys: key " + std::to_string(i + 1) +
                                      " is not 1 to 4096 printable ASCII characters without spaces");
    }
  }
  p.keys_ = options.api_keys;
  if (!options.admin_token.empty() && !valid_api_key(options.admin_token)) {
    return Status::invalid_argument("admin_token is not 1 to 4096 printable ASCII characters without spaces");
  }
  p.admin_enabled_ = options.admin_enabled;
  p.admin_token_ = options.admin_token;
  return p;
}

bool AccessPolicy::host_allowed(std::string_view host_header) const {
  if (any_host_) return true;
  const std::optional<std::string> name = host_name_of(host_header);
  if (!name) return false;
  for (const std::string& h : hosts_) {
    if (h.front() == '.' ? (*name == std::string_view(h).substr(1) || name->ends_with(h)) : *name == h) return true;
  }
  return false;
}

bool AccessPolicy::origin_allowed(std::string_view origin) const {
  if (any_origin_) return true;
  const std::string o = ascii_lower(trim_ows(origin));
  return std::find(origins_.begin(), origins_.end(), o) != origins_.end();
}

bool AccessPolicy::key_valid(std::string_view presented) const {
  unsigned match = 0;
  for (const std::string& k : keys_) match |= equal_in_constant_time(presented, k);
  return match != 0;
}

std::optional<HttpResponse> AccessPolicy::check(const HttpRequest& request) const {
  const std::string& method = request.method;
  if (request.http_major == 1 && request.http_minor >= 1 && !request.header("host")) {
    return refuse(400, "an HTTP/1.1 request needs a Host header (RFC 9112 section 3.2)", "missing_host");
  }
  // RFC 9112 section 3.2: more than one Host is a 400 (which one would
  // count for the allow-list?).
  if (std::count_if(request.headers.begin(), request.headers.end(), [](const auto& h) { return h.first == "host"; }) >
      1) {
    return refuse(400, "the request has more than one Host header (RFC 9112 section 3.2)", "duplicate_host");
  }
  if (const std::string* host = request.header("host"); host && !host_allowed(*host)) {
    spdlog::debug("api: refused {} {}: Host '{}' is not allowed", method, request.path(), clip_for_message(*host));
    return refuse(403,
                  "the Host header '" + clip_for_message(*host) +
                      "' names a host this server does not answer to (protection against DNS rebinding); "
                      "add the name to [server] allowed_hosts",
                  "host_not_allowed");
  }
  const std::string* origin = request.header("origin");
  const bool origin_ok = origin && origin_allowed(*origin);
  const std::string origin_refusal =
      origin ? "requests from the web origin '" + clip_for_message(*origin) + "' are not allowed; add it to [server] cors_origins"
             : "";
  const bool admin = admin_enabled_ && is_admin_path(request.path());
  if (admin && origin && method != "GET" && method != "HEAD" &&
      (method != "OPTIONS" || request.header("access-control-request-method"))) {
    spdlog::debug("api: refused {} {} from origin '{}': admin endpoints are not for web pages", method,
                  request.path(), clip_for_message(*origin));
    return refuse(403, "the admin endpoints cannot be called from a web page (origin '" + clip_for_message(*origin) +
                           "'), whatever [server] cors_origins allows",
                  "origin_not_allowed");
  }
  if (origin && method == "OPTIONS" && request.header("access-control-request-method")) {
    if (!origin_ok) {
      spdlog::debug("api: refused the preflight of {} from origin '{}'", request.path(), clip_for_message(*origin));
      return refuse(403, origin_refusal, "origin_not_allowed");
    }
    HttpResponse r;
    r.status = 204;
    r.content_type.clear();
    r.headers.emplace_back("Access-Control-Allow-Methods", std::string(kAllowMethods));
    r.headers.emplace_back("Access-Control-Allow-Headers", allow_headers(request));
    r.headers.emplace_back("Access-Control-Max-Age", std::string(kPreflightMaxAge));
    const std::string* pna = request.header("access-control-request-private-network");
    if (pna && ascii_lower(*pna) == "true") r.headers.emplace_back("Access-Control-Allow-Private-Network", "true");
    return r;
  }
  if (origin && !origin_ok && method != "GET" && method != "HEAD" && method != "OPTIONS") {
    spdlog::debug("api: refused {} {} from origin '{}'", method, request.path(), clip_for_message(*origin));
    return refuse(403, origin_refusal, "origin_not_allowed");
  }
  const bool admin_keyed = admin && !admin_token_.empty();
  if ((admin_keyed || !keys_.empty()) && method != "OPTIONS" && !is_health(request.path())) {
    std::optional<std::string_view> key;
    if (const std::string* auth = request.header("authorization")) {
      std::string_view v = trim_ows(*auth);
      if (v.size() > 7 && ascii_lower(v.substr(0, 7)) == "bearer ") key = trim_ows(v.substr(7));
    }
    if (const std::string* x = request.header("x-api-key"); x && !key) key = trim_ows(*x);
    if (admin_keyed && (!key || !equal_in_constant_time(*key, admin_token_))) {
      spdlog::debug("api: refused {} {}: {}", method, request.path(), key ? "wrong admin token" : "no admin token");
      HttpResponse r = refuse(401,
                              key ? "Incorrect admin token provided ([server] admin_token)."
                                  : "The admin endpoints need the admin token ([server] admin_token) in an "
                                    "Authorization header using Bearer auth.",
                              "invalid_api_key");
      r.headers.emplace_back("WWW-Authenticate", "Bearer");
      return r;
    }
    if (!admin_keyed && (!key || !key_valid(*key))) {
      spdlog::debug("api: refused {} {}: {}", method, request.path(), key ? "wrong API key" : "no API key");
      HttpResponse r = refuse(401,
                              key ? "Incorrect API key provided."
                                  : "You didn't provide an API key. Send it in an Authorization header using "
                                    "Bearer auth (Authorization: Bearer YOUR_KEY).",
                              "invalid_api_key");
      r.headers.emplace_back("WWW-Authenticate", "Bearer");
      return r;
    }
  }
  if (origin && method == "POST" && !is_json(request.header("content-type"))) {
    const std::string* type = request.header("content-type");
    return refuse(415,
                  "a request from a web page must send its body as Content-Type: application/json (got " +
                      (type ? "'" + clip_for_message(*type) + "'" : std::string("none")) + ")",
                  "unsupported_media_type");
  }
  return std::nullopt;
}

HttpHeaders AccessPolicy::response_headers(const HttpRequest& request) const {
  HttpHeaders h;
  const std::string* origin = request.header("origin");
  const bool admin = admin_enabled_ && is_admin_path(request.path());
  if (origin && origin_allowed(*origin) && !admin) h.emplace_back("Access-Control-Allow-Origin", *origin);
  if (!origins_.empty()) h.emplace_back("Vary", "Origin");
  return h;
}

}  // namespace larder
