// ApiError: an OpenAI-shaped error and the HTTP status it goes out with.
// Body shape (OpenAI API reference, "Error codes"):
//   {"error": {"message": ..., "type": ..., "param": <string|null>, "code": <string|null>}}
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace larder {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";  // "invalid_request_error", "not_found_error", "server_error"
  std::optional<std::string> param;            // the offending request field, e.g. "temperature"
  std::optional<std::string> code;             // e.g. "model_not_found", "context_length_exceeded"

  // 400 invalid_request_error.
  static ApiError invalid(std::string message, std::optional<std::string> param = std::nullopt,
                          std::optional<std::string> code = std::nullopt) {
    return {400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
  }
  // 404 not_found_error.
  static ApiError not_found(std::string message, std::optional<std::string> param = std::nullopt,
                            std::optional<std::string> code = std::nullopt) {
    return {404, std::move(message), "not_found_error", std::move(param), std::move(code)};
  }
  // 500 server_error.
  static ApiError server(std::string message) {
    return {500, std::move(message), "server_error", std::nullopt, std::nullopt};
  }
};

// A client's text quoted in an error message: at most 100 bytes, cut at a
// UTF-8 character boundary, with "..." when cut (a 100 KB model name or Host
// header is never echoed whole).
inline std::string clip_for_message(std::string_view s) {
  if (s.size() <= 100) return std::string(s);
  size_t n = 100;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return std::string(s.substr(0, n)) + "...";
}

}  // namespace larder
