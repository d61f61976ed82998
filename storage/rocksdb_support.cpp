#include "storage/rocksdb_support.h"

#include <algorithm>
#include <charconv>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>

namespace larder {

namespace fs = std::filesystem;

Status translate_rocksdb_status(const rocksdb::Status& s, const std::string& what) {
  const std::string msg = what + ": " + s.ToString();
  if (s.IsNotFound()) return Status::not_found(msg);
  if (s.IsCorruption()) return Status::corruption(msg);
  if (s.IsInvalidArgument()) return Status::invalid_argument(msg);
  if (s.IsNotSupported()) return Status::unsupported(msg);
  return Status::io_error(msg);
}

namespace {

// A non-empty run of decimal digits, nothing else.
bool digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

bool is_rocksdb_file_name(const std::string& name) {
  std::string_view n(name);
  if (n.ends_with(".dbtmp")) n.remove_suffix(6);
  if (n == "CURRENT" || n == "IDENTITY" || n == "LOCK" || n == "LOG") return true;
  // <n>.dbtmp: the temporary file of a CURRENT being replaced (found in
  // hostile testing: one left by a crash made the store refuse to start).
  if (n.size() < name.size() && digits(n)) return true;
  for (std::string_view prefix : {"MANIFEST-", "OPTIONS-", "LOG.old."}) {
    if (n.starts_with(prefix)) return digits(n.substr(prefix.size()));
  }
  const size_t dot = n.rfind('.');
  if (dot == std::string_view::npos) return false;
  const std::string_view ext = n.substr(dot);
  return (ext == ".log" || ext == ".sst" || ext == ".blob") && digits(n.substr(0, dot));
}

namespace {

// "corrupt-<digits>[-<digits>]": a damaged copy move_store_contents_aside made.
bool is_damaged_copy_name(std::string_view n) {
  const std::string_view prefix = kDamagedInsidePrefix;
  if (!n.starts_with(prefix)) return false;
  n.remove_prefix(prefix.size());
  const size_t dash = n.find('-');
  return digits(n.substr(0, dash)) && (dash == std::string_view::npos || digits(n.substr(dash + 1)));
}

}  // namespace

std::string comma_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::vector<std::string> foreign_entries(const std::string& dir, size_t max) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end && out.size() < max; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code type_ec;
    const bool is_dir = it->is_directory(type_ec);
    if (is_dir && (is_damaged_copy_name(name) || name == "lost+found")) continue;
    if (!is_dir && is_rocksdb_file_name(name)) continue;
    out.push_back(name);
  }
  return out;
}

// ---- RocksDbInfoLog ---------------------------------------------------------

RocksDbInfoLog::RocksDbInfoLog(std::string dir, LogLimiter& limiter)
    : rocksdb::Logger(spdlog::should_log(spdlog::level::trace) ? rocksdb::INFO_LEVEL
                                                               : rocksdb::WARN_LEVEL),
      dir_(std::move(dir)),
      limiter_(limiter) {}

void RocksDbInfoLog::Logv(const char* format, va_list ap) { Logv(rocksdb::INFO_LEVEL, format, ap); }

void RocksDbInfoLog::Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) {
  if (level < GetInfoLogLevel()) return;
  const spdlog::level::level_enum ours = level >= rocksdb::ERROR_LEVEL && level != rocksdb::HEADER_LEVEL
                                             ? spdlog::level::warn
                                         : level == rocksdb::WARN_LEVEL ? spdlog::level::debug
                                                                        : spdlog::level::trace;
  if (!spdlog::should_log(ours)) return;
  char buf[1024];
  const int n = std::vsnprintf(buf, sizeof buf, format, ap);
  if (n < 0) return;
  std::string_view line(buf, std::min(size_t(n), sizeof buf - 1));
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.remove_suffix(1);
  const std::string message = "page store " + dir_ + ": rocksdb: " + std::string(line);
  if (ours == spdlog::level::warn) {
    limiter_.log(ours, "rocksdb error", message);
  } else {
    spdlog::log(ours, "{}", message);
  }
}

// ---- BackgroundErrors -------------------------------------------------------

void BackgroundErrors::OnBackgroundError(rocksdb::BackgroundErrorReason /*reason*/,
                                         rocksdb::Status* error) {
  if (error == nullptr || error->ok()) return;
  std::lock_guard<std::mutex> lock(mu_);
  // A status without a severity (kNoError) is still an error that stops
  // writes: count it as a hard one.
  const rocksdb::Status::Severity sev =
      error->severity() == rocksdb::Status::kNoError ? rocksdb::Status::kHardError : error->severity();
  if (!any()) worst_ = rocksdb::Status::kNoError;
  worst_ = std::max(worst_, sev);
  message_ = error->ToString();
  n_errors_.fetch_add(1);
}

void BackgroundErrors::OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason /*reason*/,
                                            rocksdb::Status error, bool* auto_recovery) {
  error.PermitUncheckedError();
  if (auto_recovery != nullptr) *auto_recovery = false;
}

std::optional<BackgroundErrors::Pending> BackgroundErrors::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!any()) return std::nullopt;
  return Pending{n_errors_.load(), worst_, message_};
}

void BackgroundErrors::mark_handled(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  if (seq > n_handled_.load()) n_handled_ = seq;
  if (!any()) worst_ = rocksdb::Status::kNoError;
}

// ---- moving a damaged store aside -------------------------------------------

namespace {

// Removes the directories `prefix`<unix seconds>[-<n>] in `parent` but the
// `keep` (>= 1) newest: by the time in the name, then the "-n".
void prune_damaged_copies(const fs::path& parent, const std::string& prefix, int keep) {
  std::error_code ec;
  struct Copy { int64_t t; int64_t n; fs::path path; };
  std::vector<Copy> copies;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    std::string_view rest = std::string_view(name).substr(prefix.size());
    const size_t dash = rest.find('-');
    auto number = [](std::string_view d, int64_t* out) {
      const auto r = std::from_chars(d.data(), d.data() + d.size(), *out);
      return !d.empty() && r.ec == std::errc() && r.ptr == d.data() + d.size();
    };
    Copy c{0, 0, it->path()};
    if (!number(rest.substr(0, dash), &c.t)) continue;  // not one of ours
    if (dash != std::string_view::npos && !number(rest.substr(dash + 1), &c.n)) continue;
    copies.push_back(std::move(c));
  }
  std::sort(copies.begin(), copies.end(),
            [](const Copy& a, const Copy& b) { return a.t != b.t ? a.t < b.t : a.n < b.n; });
  // A copy holds RocksDB's files only; a folder of that name holding
  // anything else is not one of ours (found in hostile testing: a user's
  // "corrupt-1" folder in the cache dir was deleted).
  auto only_rocksdb_files = [](const fs::path& dir) {
    std::error_code it_ec;
    for (fs::directory_iterator it(dir, it_ec), end; !it_ec && it != end; it.increment(it_ec)) {
      std::error_code type_ec;
      if (!it->is_regular_file(type_ec) || !is_rocksdb_file_name(it->path().filename().string())) return false;
    }
    return !it_ec;
  };
  for (size_t i = 0; i + size_t(std::max(keep, 1)) < copies.size(); ++i) {
    if (!only_rocksdb_files(copies[i].path)) {
      spdlog::warn("page store: {} looks like an old damaged copy but holds other files: left alone",
                   copies[i].path.string());
      continue;
    }
    std::error_code rm_ec;
    fs::remove_all(copies[i].path, rm_ec);
    if (rm_ec) {
      spdlog::warn("page store: cannot remove the old damaged copy {}: {}", copies[i].path.string(),
                   rm_ec.message());
    } else {
      spdlog::info("page store: removed the old damaged copy {}", copies[i].path.string());
    }
  }
}

// `base`<unix seconds>, with "-<n>" added while that exists.
std::string unused_name(const std::string& base) {
  const std::string stamp = base + std::to_string(std::time(nullptr));
  std::string name = stamp;
  std::error_code ec;
  for (int n = 1; fs::exists(name, ec); ++n) name = stamp + "-" + std::to_string(n);
  return name;
}

}  // namespace

Result<std::string> move_store_contents_aside(const std::string& dir, int keep) {
  const std::string inside = unused_name((fs::path(dir) / kDamagedInsidePrefix).string());
  std::error_code ec;
  fs::create_directory(inside, ec);
  if (ec) return Status::io_error("page store: cannot create " + inside + ": " + ec.message());
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // Only what RocksDB made: not this copy, older ones, or anything else.
    std::error_code type_ec;
    if (!is_rocksdb_file_name(name) || it->is_directory(type_ec)) continue;
    std::error_code mv_ec;
    fs::rename(it->path(), fs::path(inside) / name, mv_ec);
    if (mv_ec) {
      return Status::io_error("page store: moving " + it->path().string() + " into " + inside +
                              " failed: " + mv_ec.message());
    }
  }
  if (ec) return Status::io_error("page store: cannot list " + dir + ": " + ec.message());
  prune_damaged_copies(dir, kDamagedInsidePrefix, keep);
  return inside;
}

Result<std::string> move_store_aside(const std::string& dir, int keep) {
  std::string base = dir;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  const std::string aside = unused_name(base + ".corrupt-");
  std::error_code ec;
  if (fs::is_symlink(base, ec) || !foreign_entries(base, 1).empty()) {
    return move_store_contents_aside(base, keep);
  }
  fs::rename(dir, aside, ec);
  if (ec) {
    // A mount point (EBUSY), or a parent we may not write (EACCES: a
    // cache directory the daemon's user owns in one it does not). Found in
    // hostile testing: such a store stayed memory-only at every start.
    if (ec == std::errc::device_or_resource_busy || ec == std::errc::permission_denied ||
        ec == std::errc::operation_not_permitted || ec == std::errc::cross_device_link) {
      Result<std::string> inside = move_store_contents_aside(base, keep);
      if (inside.is_ok()) return inside;
      return Status::io_error("page store: moving " + dir + " aside to " + aside + " failed: " + ec.message() +
                              ", and into itself: " + inside.status().message());
    }
    return Status::io_error("page store: moving " + dir + " aside to " + aside + " failed: " + ec.message());
  }
  const fs::path parent = fs::path(base).parent_path().empty() ? fs::path(".") : fs::path(base).parent_path();
  prune_damaged_copies(parent, fs::path(base).filename().string() + ".corrupt-", keep);
  return aside;
}

}  // namespace larder
