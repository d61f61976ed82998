#include "storage/access_trace.h"

#include <cerrno>
#include <cstring>

#include <sys/stat.h>

#include <spdlog/spdlog.h>

namespace larder {

namespace {
constexpr char kHeader[] = "# larder page-access trace v1\n";
}  // namespace

Result<std::unique_ptr<AccessTrace>> AccessTrace::open(const std::string& path, int64_t page_bytes,
                                                       int64_t record_bytes, int page_size) {
  // Only a trace (or an empty file) is written over: found in hostile
  // testing, a trace_file naming the model or the config file emptied it.
  struct stat st {};
  const bool regular = ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
  if (std::FILE* old = regular ? std::fopen(path.c_str(), "rb") : nullptr) {
    char head[sizeof(kHeader) - 1] = {};
    const size_t n = std::fread(head, 1, sizeof(head), old);
    const bool empty = n == 0 && std::feof(old);
    std::fclose(old);
    if (!empty && (n != sizeof(head) || std::memcmp(head, kHeader, sizeof(head)) != 0)) {
      return Status::invalid_argument("cache.trace_file: " + path +
                                      " exists and is not a larder page-access trace; refusing to write over it "
                                      "(name a new file, or remove it)");
    }
  }
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    return Status::io_error("cache.trace_file: cannot write " + path + ": " + std::strerror(errno));
  }
  std::unique_ptr<AccessTrace> t(new AccessTrace());
  t->file_ = f;
  t->start_ = std::chrono::steady_clock::now();
  std::fprintf(f, "%sP %lld %lld %d\n", kHeader, static_cast<long long>(page_bytes),
               static_cast<long long>(record_bytes), page_size);
  t->thread_ = std::thread([p = t.get()] { p->run(); });
  return t;
}

AccessTrace::~AccessTrace() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (file_ != nullptr) std::fclose(file_);
}

int64_t AccessTrace::now_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start_).count();
}

void AccessTrace::push(std::string line) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (lines_.size() >= kMaxQueuedLines) {
      ++dropped_;
      return;
    }
    lines_.push_back(std::move(line));
  }
  cv_.notify_one();
}

void AccessTrace::request(uint64_t req, std::span<const PageKey> keys, std::span<const char> where) {
  std::string out = "R " + std::to_string(now_ms()) + " " + std::to_string(req) + " " + std::to_string(keys.size()) + "\n";
  for (size_t i = 0; i < keys.size(); ++i) {
    out += "K " + std::to_string(req) + " " + keys[i].to_hex() + " " + std::to_string(i) + " " +
           (i < where.size() ? where[i] : 'm') + "\n";
  }
  out.pop_back();
  push(std::move(out));
}

void AccessTrace::sealed(uint64_t req, const PageKey& key, int depth) {
  push("S " + std::to_string(req) + " " + key.to_hex() + " " + std::to_string(depth));
}

void AccessTrace::finished(uint64_t req) { push("F " + std::to_string(now_ms()) + " " + std::to_string(req)); }

void AccessTrace::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return lines_.empty() && !writing_; });
}

int64_t AccessTrace::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

void AccessTrace::run() {
  std::unique_lock<std::mutex> lock(mu_);
  int64_t reported = 0;
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !lines_.empty(); });
    std::deque<std::string> batch;
    batch.swap(lines_);
    const int64_t dropped = dropped_;
    writing_ = true;
    lock.unlock();
    if (!write_failed_) {
      if (dropped > reported) {
        std::fprintf(file_, "# %lld lines dropped (the writer fell behind)\n", static_cast<long long>(dropped - reported));
        reported = dropped;
      }
      for (const std::string& l : batch) {
        std::fputs(l.c_str(), file_);
        std::fputc('\n', file_);
      }
      if (std::fflush(file_) != 0 || std::ferror(file_) != 0) {
        // A full disk or an I/O error: say so once and stop writing (the
        // cache and serving go on; the trace ends here, maybe mid-line,
        // which larder-sim skips).
        write_failed_ = true;
        spdlog::warn("cache.trace_file: writing the access trace failed ({}); no more lines are written until a restart",
                     std::strerror(errno));
      }
    }
    lock.lock();
    writing_ = false;
    idle_cv_.notify_all();
    if (stopping_ && lines_.empty()) return;
  }
}

}  // namespace larder
