// StorageWorkers: the storage threads. All PageStore (RocksDB) I/O happens
// here, so the engine thread only queues work and never waits on disk
// (DESIGN.md "Threads").
//
// Ordering: puts and erases of the same key run in the order they were
// queued (each key is bound to one thread's FIFO write queue). Reads are
// served before queued writes and see every put/erase queued before them,
// even one not yet in the store (read-your-writes through the pending map).
// Errors of put/erase are counted (n_failed_writes()) and logged at debug
// level only: the store reports its own faults (RocksDbPageStore logs them
// rate-limited); an exception thrown by the store is logged as a warning, at
// most once per 10 s.
//
// Thread-safe: any thread may call any method.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "storage/log_limiter.h"
#include "storage/page_store.h"

namespace larder {

class StorageWorkers {
 public:
  // Starts n_threads threads (at least 1) working on `store`, which must
  // outlive this object.
  StorageWorkers(PageStore& store, int n_threads);
  // Finishes every queued put, erase and read (calling its done), then joins.
  ~StorageWorkers();
  StorageWorkers(const StorageWorkers&) = delete;
  StorageWorkers& operator=(const StorageWorkers&) = delete;

  // Queues store.put(key, record). Never blocks on I/O.
  void put_async(PageKey key, std::string record);
  // Queues store.erase(key).
  void erase_async(PageKey key);
  // Reads keys in order and stops at the first one that is absent or fails
  // to read; calls done(records found, in order) on a storage thread. Read
  // errors end the prefix (logged at debug level, like write errors). done must not throw (an exception
  // is caught and logged) and must not call flush() (it would wait on the
  // thread it runs on).
  void get_prefix_async(std::vector<PageKey> keys,
                        std::function<void(std::vector<std::string>)> done);
  // The latest queued put or erase of `key` not yet in the store: nullopt
  // when none; a null pointer for an erase; else the record.
  std::optional<std::shared_ptr<const std::string>> pending_write(const PageKey& key) const;
  // Runs `task` on a storage thread, served like a read (before queued
  // writes). task must not throw (an exception is caught and logged) and
  // must not call flush().
  void run_async(std::function<void()> task);
  // Blocks until every put/erase queued before the call is in the store,
  // then calls store.flush() (its error is logged).
  void flush();
  // Puts, erases and reads queued or running.
  int64_t pending() const;
  // Puts and erases that failed since construction.
  int64_t n_failed_writes() const;
  // Called on a storage thread after each put with its outcome (a put the
  // store skipped, below its disk reserve, counts as failed). Set it before
  // queueing the first put; it must not block or call into this object.
  void set_put_done(std::function<void(const PageKey& key, bool ok)> done) { put_done_ = std::move(done); }

 private:
  struct WriteTask {
    PageKey key;
    std::shared_ptr<const std::string> record;  // null: erase
    uint64_t seq = 0;
  };
  struct ReadTask {
    std::vector<PageKey> keys;
    std::function<void(std::vector<std::string>)> done;
    std::function<void()> task;  // run_async: runs instead of the read
  };
  struct PendingWrite {
    std::shared_ptr<const std::string> record;  // null: erase
    uint64_t seq = 0;
  };

  void enqueue_write(PageKey key, std::shared_ptr<const std::string> record);
  void run(size_t shard);
  void do_write(const WriteTask& task);
  void do_read(ReadTask& task);

  PageStore& store_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // a task was queued, or stopping_
  std::condition_variable done_cv_;  // a write finished
  std::vector<std::deque<WriteTask>> write_queues_;  // one per thread
  std::vector<uint64_t> last_queued_seq_;   // per thread
  std::vector<uint64_t> last_done_seq_;     // per thread
  std::deque<ReadTask> reads_;              // any thread serves these
  // Latest queued, not yet completed write of each key.
  std::unordered_map<PageKey, PendingWrite, PageKeyHash> pending_writes_;
  uint64_t next_seq_ = 1;
  int64_t n_pending_ = 0;
  int64_t n_failed_writes_ = 0;
  std::function<void(const PageKey&, bool)> put_done_;
  bool stopping_ = false;
  LogLimiter log_{10000};
  std::vector<std::thread> threads_;
};

}  // namespace larder
