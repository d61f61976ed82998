// RocksDbPageStore: the background compaction of erased records
// (rocksdb_store.h, "Space"). Erasing a record writes tombstones; its bytes
// on disk come back only when a compaction drops the record's blob index and
// RocksDB then deletes the blob files left all garbage (or relocates the
// live blobs of old files: blob GC). After many erases nothing may trigger
// a compaction for a long time, so the store runs one itself.
#include <algorithm>
#include <chrono>
#include <vector>

#include <spdlog/spdlog.h>

#include "storage/rocksdb_store_impl.h"

namespace larder {

using namespace rocksdb_detail;

void RocksDbPageStore::Impl::note_erased(int64_t bytes, bool legacy) {
  const int64_t trigger = options.compaction_trigger_bytes > 0 ? options.compaction_trigger_bytes
                                                               : default_compaction_trigger_bytes(budget.load());
  if (erased_bytes_since_compaction.fetch_add(bytes) + bytes < trigger && !legacy) return;
  {
    std::lock_guard<std::mutex> lock(compact_mu);
    if (legacy) compact_legacy = true;
    if (erased_bytes_since_compaction.load() < trigger) return;
    erased_bytes_since_compaction = 0;
  }
  request_compaction();
}

void RocksDbPageStore::Impl::request_compaction() {
  std::lock_guard<std::mutex> lock(compact_mu);
  compact_requested = true;
  compact_cv.notify_all();
}

bool RocksDbPageStore::Impl::compaction_in_flight() {
  std::lock_guard<std::mutex> lock(compact_mu);
  return compact_requested || compact_running;
}

void RocksDbPageStore::Impl::compact_loop() {
  // A fault can begin on any thread without waking this one, so it looks
  // every poll_ms; an idle store recovers by itself too (found in hostile
  // testing: a store that could not open stayed down until the next page
  // read or write, and so did the pins the engine keeps there).
  const auto poll = std::chrono::milliseconds(std::clamp<int64_t>(options.retry_interval_ms, 100, 2000));
  int64_t next_own_try_ms = 0;  // at most one try of this thread's per poll
  std::unique_lock<std::mutex> lock(compact_mu);
  for (;;) {
    if (compact_stop) return;
    if (faulted() && now_ms() >= std::max(next_retry_ms.load(), next_own_try_ms)) {
      lock.unlock();
      maybe_recover(/*force=*/false);  // moves next_retry_ms on while the fault lasts
      next_own_try_ms = now_ms() + poll.count();
      lock.lock();
      continue;
    }
    if (!compact_requested) {
      compact_cv.wait_for(lock, poll, [this] { return compact_stop || compact_requested; });
      continue;
    }
    // At most one compaction per interval: a request meanwhile waits.
    const int64_t wait_ms = next_compact_ms - now_ms();
    if (wait_ms > 0) {
      compact_cv.wait_for(lock, std::min(poll, std::chrono::milliseconds(wait_ms)), [this] { return compact_stop; });
      continue;
    }
    compact_requested = false;
    compact_running = true;
    const bool legacy = compact_legacy;
    lock.unlock();
    {
      std::shared_lock<std::shared_mutex> db_lock(db_mu);
      if (db && !bg_errors->any()) compact_now(legacy);
    }
    lock.lock();
    compact_running = false;
    next_compact_ms = now_ms() + options.compaction_interval_ms;
    compact_cv.notify_all();
  }
}

void RocksDbPageStore::Impl::compact_now(bool legacy) {
  const auto t0 = std::chrono::steady_clock::now();
  rocksdb::CompactRangeOptions o;
  o.exclusive_manual_compaction = false;  // flushes and RocksDB's own compactions go on
  o.max_subcompactions = 1;               // one thread: the engine keeps the cores
  o.canceled = &compaction_cancel;
  std::vector<rocksdb::ColumnFamilyHandle*> cfs{cf_pages, cf_meta};
  if (legacy) cfs.push_back(cf_default);
  for (rocksdb::ColumnFamilyHandle* cf : cfs) {
    rocksdb::Status s = db->CompactRange(o, cf, nullptr, nullptr);
    if (!s.ok()) {
      // Cancelled by a close or a reopen, or a fault (the listener saw it).
      spdlog::debug("page store {}: compaction of {}: {}", options.dir, cf->GetName(), s.ToString());
      return;
    }
  }
  ++n_compactions;
  if (legacy && n_legacy.load() == 0) {
    std::lock_guard<std::mutex> lock(compact_mu);
    compact_legacy = false;  // nothing left there to compact
  }
  spdlog::debug("page store {}: compacted erased records in {} ms", options.dir, elapsed_ns(t0) / 1000000);
}

void RocksDbPageStore::Impl::stop_compactor() {
  {
    std::lock_guard<std::mutex> lock(compact_mu);
    compact_stop = true;
  }
  compaction_cancel = true;
  compact_cv.notify_all();
  if (compactor.joinable()) compactor.join();
  compaction_cancel = false;
}

bool RocksDbPageStore::Impl::wait_for_compactions(int64_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  {
    std::unique_lock<std::mutex> lock(compact_mu);
    if (!compact_cv.wait_until(lock, deadline, [this] { return compact_stop || (!compact_requested && !compact_running); })) {
      return false;
    }
  }
  // RocksDB's own flushes and compactions (and the deletion of the files
  // they made obsolete, which ends each job).
  for (;;) {
    bool busy = false;
    {
      std::shared_lock<std::shared_mutex> db_lock(db_mu);
      if (!db) return true;
      uint64_t v = 0;
      for (const char* p : {"rocksdb.num-running-compactions", "rocksdb.num-running-flushes"}) {
        if (db->GetIntProperty(p, &v) && v > 0) busy = true;
      }
      for (rocksdb::ColumnFamilyHandle* cf : {cf_pages, cf_meta, cf_default}) {
        for (const char* p : {"rocksdb.compaction-pending", "rocksdb.mem-table-flush-pending"}) {
          if (db->GetIntProperty(cf, p, &v) && v > 0) busy = true;
        }
      }
    }
    if (!busy) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool RocksDbPageStore::wait_for_compactions(int64_t timeout_ms) { return impl_->wait_for_compactions(timeout_ms); }
int64_t RocksDbPageStore::n_compactions() const { return impl_->n_compactions.load(); }

std::vector<PageKey> RocksDbPageStore::keys() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<PageKey> out;
  out.reserve(impl_->index.size());
  for (const auto& [key, entry] : impl_->index) out.push_back(key);
  return out;
}

}  // namespace larder
