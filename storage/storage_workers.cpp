#include "storage/storage_workers.h"

#include <exception>

#include <spdlog/spdlog.h>

namespace larder {

StorageWorkers::StorageWorkers(PageStore& store, int n_threads) : store_(store) {
  const size_t n = size_t(n_threads < 1 ? 1 : n_threads);
  write_queues_.resize(n);
  last_queued_seq_.assign(n, 0);
  last_done_seq_.assign(n, 0);
  threads_.reserve(n);
  for (size_t i = 0; i < n; ++i) threads_.emplace_back([this, i] { run(i); });
}

StorageWorkers::~StorageWorkers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void StorageWorkers::put_async(PageKey key, std::string record) {
  enqueue_write(key, std::make_shared<const std::string>(std::move(record)));
}

void StorageWorkers::erase_async(PageKey key) { enqueue_write(key, nullptr); }

void StorageWorkers::enqueue_write(PageKey key, std::shared_ptr<const std::string> record) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t shard = PageKeyHash()(key) % write_queues_.size();
    const uint64_t seq = next_seq_++;
    pending_writes_[key] = PendingWrite{record, seq};
    write_queues_[shard].push_back(WriteTask{key, std::move(record), seq});
    last_queued_seq_[shard] = seq;
    ++n_pending_;
  }
  work_cv_.notify_all();
}

void StorageWorkers::get_prefix_async(std::vector<PageKey> keys,
                                      std::function<void(std::vector<std::string>)> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    reads_.push_back(ReadTask{std::move(keys), std::move(done), nullptr});
    ++n_pending_;
  }
  work_cv_.notify_one();
}

std::optional<std::shared_ptr<const std::string>> StorageWorkers::pending_write(const PageKey& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_writes_.find(key);
  if (it == pending_writes_.end()) return std::nullopt;
  return it->second.record;
}

void StorageWorkers::run_async(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ReadTask t;
    t.task = std::move(task);
    reads_.push_back(std::move(t));
    ++n_pending_;
  }
  work_cv_.notify_one();
}

void StorageWorkers::flush() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    const std::vector<uint64_t> target = last_queued_seq_;
    done_cv_.wait(lock, [&] {
      for (size_t i = 0; i < target.size(); ++i) {
        if (last_done_seq_[i] < target[i]) return false;
      }
      return true;
    });
  }
  Status st = store_.flush();
  if (!st.is_ok()) log_.log(spdlog::level::warn, "flush", "storage workers: flush: " + st.to_string());
}

int64_t StorageWorkers::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return n_pending_;
}

int64_t StorageWorkers::n_failed_writes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return n_failed_writes_;
}

void StorageWorkers::run(size_t shard) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] {
      return stopping_ || !reads_.empty() || !write_queues_[shard].empty();
    });
    if (!reads_.empty()) {
      ReadTask task = std::move(reads_.front());
      reads_.pop_front();
      lock.unlock();
      do_read(task);
      lock.lock();
      --n_pending_;
      continue;
    }
    if (!write_queues_[shard].empty()) {
      WriteTask task = std::move(write_queues_[shard].front());
      write_queues_[shard].pop_front();
      lock.unlock();
      do_write(task);
      lock.lock();
      auto it = pending_writes_.find(task.key);
      if (it != pending_writes_.end() && it->second.seq == task.seq) pending_writes_.erase(it);
      last_done_seq_[shard] = task.seq;
      --n_pending_;
      done_cv_.notify_all();
      continue;
    }
    if (stopping_) return;  // queues drained
  }
}

void StorageWorkers::do_write(const WriteTask& task) {
  Status st;
  try {
    st = task.record ? store_.put(task.key, *task.record) : store_.erase(task.key);
  } catch (const std::exception& e) {
    st = Status::internal(std::string("storage workers: exception: ") + e.what());
  }
  if (!st.is_ok()) {
    const char* what = task.record ? "put" : "erase";
    if (st.code() == StatusCode::kInternal) {
      log_.log(spdlog::level::warn, "exception",
               std::string("storage workers: ") + what + " " + task.key.to_hex() + " failed: " + st.to_string());
    } else {
      spdlog::debug("storage workers: {} {} failed: {}", what, task.key.to_hex(), st.to_string());
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++n_failed_writes_;
  }
  if (task.record && put_done_) put_done_(task.key, st.is_ok());
}

void StorageWorkers::do_read(ReadTask& task) {
  if (task.task) {
    try {
      task.task();
    } catch (const std::exception& e) {
      log_.log(spdlog::level::err, "exception", std::string("storage workers: a task threw: ") + e.what());
    } catch (...) {
      log_.log(spdlog::level::err, "exception", "storage workers: a task threw");
    }
    return;
  }
  std::vector<std::string> found;
  found.reserve(task.keys.size());
  for (const PageKey& key : task.keys) {
    // A queued write of this key wins over what the store holds now.
    bool pending = false;
    std::shared_ptr<const std::string> pending_record;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_writes_.find(key);
      if (it != pending_writes_.end()) {
        pending = true;
        pending_record = it->second.record;
      }
    }
    if (pending) {
      if (!pending_record) break;  // queued erase
      found.push_back(*pending_record);
      continue;
    }
    try {
      Result<std::optional<std::string>> r = store_.get(key);
      if (!r.is_ok()) {
        spdlog::debug("storage workers: read of {} failed, prefix ends there: {}", key.to_hex(),
                      r.status().to_string());
        break;
      }
      if (!r->has_value()) break;
      found.push_back(std::move(**r));
    } catch (const std::exception& e) {
      log_.log(spdlog::level::err, "exception",
               "storage workers: read of " + key.to_hex() + " threw: " + e.what());
      break;
    }
  }
  try {
    if (task.done) task.done(std::move(found));
  } catch (const std::exception& e) {
    spdlog::error("storage workers: get_prefix callback threw: {}", e.what());
  } catch (...) {
    spdlog::error("storage workers: get_prefix callback threw");
  }
}

}  // namespace larder
