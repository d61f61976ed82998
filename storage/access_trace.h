// AccessTrace: writes the page-access trace (format: storage/cache_sim.h) to
// a file on its own thread, so the engine thread never waits on the disk.
// Lines queue in memory; past kMaxQueuedLines unwritten lines new ones are
// dropped and counted (the trace then says so in a comment line), never
// blocking. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "storage/page_store.h"
#include "storage/status.h"

namespace larder {

class AccessTrace {
 public:
  static constexpr size_t kMaxQueuedLines = 1 << 20;

  // Creates (truncates) the file and writes the header: the format line and
  // P page_bytes record_bytes page_size. Errors: kIOError naming the path;
  // kInvalidArgument for an existing non-empty regular file that is not a
  // trace (it is left as it is: a model or config named by mistake).
  static Result<std::unique_ptr<AccessTrace>> open(const std::string& path, int64_t page_bytes,
                                                   int64_t record_bytes, int page_size);
  ~AccessTrace();  // writes what is queued, then closes the file

  // R and K lines of one request; where[i]: 'd', 'h', 'k' or 'm'.
  void request(uint64_t req, std::span<const PageKey> keys, std::span<const char> where);
  void sealed(uint64_t req, const PageKey& key, int depth);
  void finished(uint64_t req);
  // Blocks until every line queued so far is written and flushed (tests).
  void flush();
  int64_t dropped() const;

 private:
  AccessTrace() = default;
  void push(std::string line);
  void run();
  int64_t now_ms() const;

  std::FILE* file_ = nullptr;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<std::string> lines_;
  bool writing_ = false;
  bool write_failed_ = false;  // writer thread only: a write failed, nothing more is written
  bool stopping_ = false;
  int64_t dropped_ = 0;
  std::thread thread_;
};

}  // namespace larder
