// AccessPolicy: the checks every request passes before it is routed, in this
// order (loop thread; no I/O):
//   1. Host allow-list (DNS rebinding): a request whose `Host` header names
//      another host gets 403 (code "host_not_allowed"). Allowed: localhost
//      and its subdomains, 127.0.0.1, [::1], the listen address, and
//      ServerOptions::allowed_hosts; any port. When the listen address is a
//      wildcard (0.0.0.0, ::) and allowed_hosts is empty, any Host passes. An
//      HTTP/1.0 request without a Host header passes; an HTTP/1.1 one gets
//      400 (code "missing_host"), as RFC 9112 section 3.2 asks.
// Every check reads only the request line and headers: the connection runs
// them once the head is parsed, before the body is read, so a refused
// client never gets a body buffered (api/http_connection.h).
//   2. CORS: a request with an `Origin` header that is not in
//      ServerOptions::cors_origins gets 403 (code "origin_not_allowed") unless
//      its method is GET, HEAD or OPTIONS; its responses carry no
//      Access-Control-* headers, so the page cannot read them. A preflight
//      (OPTIONS with Origin and Access-Control-Request-Method) from an
//      allowed origin gets 204 with the allowed methods and headers; from
//      another origin 403.
//   3. API keys: when ServerOptions::api_keys is not empty, every request
//      except /health and OPTIONS must carry one of them as
//      `Authorization: Bearer KEY` (or `X-Api-Key: KEY`, as llama.cpp's
//      server accepts); otherwise 401 (code "invalid_api_key",
//      `WWW-Authenticate: Bearer`). Keys are compared in constant time and
//      never logged or echoed.
//   4. A POST that carries an Origin header (a browser) must declare
//      `Content-Type: application/json` (parameters allowed): otherwise 415
//      (code "unsupported_media_type"). The three content types a page may
//      send without a preflight (text/plain, form encodings) can thus never
//      start a generation. Without Origin (curl, SDKs, scripts) the body is
//      read as JSON whatever its declared type, as llama.cpp's server does,
//      so `curl -d` without `-H` keeps working.
//   5. Admin endpoints (is_admin_path; only when ServerOptions::admin_enabled,
//      else they are unknown paths like any other): never CORS-enabled — a
//      request with an Origin header gets 403 (code "origin_not_allowed")
//      unless it is a GET or HEAD (whose answer carries no Access-Control-*
//      headers, so no page can read it), and so does every preflight, also
//      from an origin in cors_origins. With ServerOptions::admin_token set
//      they need that token (Bearer or X-Api-Key) and no API key opens them
//      (401 "invalid_api_key" otherwise); without it, the API key rule of 3.
// Origins and hosts compare case-insensitively.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/http_message.h"
#include "storage/status.h"

namespace larder {

struct ServerOptions;

// Config validation shared with daemon/config.cpp. Each returns the
// normalized entry or kInvalidArgument with the reason.
// An origin: "*" (any), "null" (opaque origins: file:// pages and sandboxed
// frames, of any site), or scheme://host[:port] with no path; lower-cased,
// one trailing "/" and a default port (:80 for http, :443 for https) dropped.
Result<std::string> normalize_cors_origin(std::string_view origin);
// A host: "*" (any), a name or IPv4 address ("example.lan"), ".example.lan"
// (the name and all its subdomains), an IPv6 address with or without
// brackets (stored as "[::1]"); no port. Lower-cased.
Result<std::string> normalize_allowed_host(std::string_view host);

// "/metrics", "/admin" and every path under "/admin/" (api/admin_routes.h).
bool is_admin_path(std::string_view path);

class AccessPolicy {
 public:
  // Errors (kInvalidArgument): an entry of cors_origins or allowed_hosts
  // that does not normalize (message names it), an API key or admin token
  // that holds other than printable ASCII without spaces (or an empty key).
  static Result<AccessPolicy> create(const ServerOptions& options);

  // nullopt: route the request. Otherwise the response to send instead (a
  // refusal with an OpenAI-shaped error body, or a preflight's 204).
  std::optional<HttpResponse> check(const HttpRequest& request) const;
  // Headers every response to `request` carries: for an allowed origin
  // Access-Control-Allow-Origin (the origin echoed) and `Vary: Origin`; when
  // cors_origins is configured, `Vary: Origin` on every other response too.
  HttpHeaders response_headers(const HttpRequest& request) const;

  bool host_allowed(std::string_view host_header) const;
  bool origin_allowed(std::string_view origin) const;
  // Constant time in the length of `presented` (never exits early on a
  // mismatch): true when it equals one of the keys.
  bool key_valid(std::string_view presented) const;

 private:
  std::vector<std::string> hosts_;    // normalized; may hold "*" and ".suffix" entries
  bool any_host_ = false;
  std::vector<std::string> origins_;  // normalized
  bool any_origin_ = false;
  std::vector<std::string> keys_;
  bool admin_enabled_ = true;
  std::string admin_token_;  // empty: the API keys rule
};

// True for a key that can be sent in a header: 1 to 4096 printable ASCII
// characters without spaces.
bool valid_api_key(std::string_view key);

}  // namespace larder
