// Status and Result<T>: larder's error values (no exceptions cross module
// boundaries). Lives in storage/ because storage depends on nothing of ours
// and every other module may depend on storage's public headers.
//
// Codes (pick the most specific):
//   kInvalidArgument  the caller passed something malformed (bad JSON value,
//                     bad config key, out-of-range number)
//   kNotFound         a named thing does not exist (file, model, key)
//   kCorruption       stored bytes failed validation (GGUF file, page record)
//   kUnsupported      well-formed but not handled (tensor type, architecture)
//   kOutOfRange       a size/length limit was exceeded (context length)
//   kResourceExhausted out of memory, pages, disk capacity
//   kIOError          the OS or RocksDB failed an operation
//   kCancelled        the operation was abandoned (client gone, shutdown)
//   kInternal         a bug on our side
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace larder {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kCorruption,
  kUnsupported,
  kOutOfRange,
  kResourceExhausted,
  kIOError,
  kCancelled,
  kInternal,
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  static Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
  static Status out_of_range(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
  static Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status io_error(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
  static Status cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "Corruption: <message>"
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Result<T>: a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).is_ok() && "Result from an OK Status");
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { assert(is_ok()); return std::get<T>(v_); }
  const T& value() const& { assert(is_ok()); return std::get<T>(v_); }
  T&& value() && { assert(is_ok()); return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace larder

// Propagate a non-OK Status from an expression returning Status.
#define LARDER_RETURN_IF_ERROR(expr)          \
  do {                                        \
    ::larder::Status _st = (expr);            \
    if (!_st.is_ok()) return _st;             \
  } while (0)

#define LARDER_CONCAT_INNER(a, b) a##b
#define LARDER_CONCAT(a, b) LARDER_CONCAT_INNER(a, b)
// LARDER_ASSIGN_OR_RETURN(auto x, f());  -- x = value of f() or return its Status.
#define LARDER_ASSIGN_OR_RETURN(lhs, expr) \
  LARDER_ASSIGN_OR_RETURN_IMPL(LARDER_CONCAT(_res_, __LINE__), lhs, expr)
#define LARDER_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.is_ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
