#include "storage/tier_chain.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

namespace larder {

TierChain::TierChain(std::vector<TierSlot> tiers, TierChainOptions options) : options_(options) {
  for (TierSlot& t : tiers) {
    Slot s;
    s.tier = std::move(t.tier);
    s.persistent = t.persistent;
    s.workers = std::make_unique<StorageWorkers>(*s.tier, std::max(1, options.n_threads_per_tier));
    if (s.persistent) s.workers->set_put_done([this](const PageKey& key, bool ok) { note_put(key, ok); });
    slots_.push_back(std::move(s));
  }
  // write_back: what a non-persistent tier evicts for budget moves one tier
  // down (its persistent tiers below, for now every persistent tier).
  if (!options_.write_through) {
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].persistent) continue;
      slots_[i].tier->set_evict_sink([this, i](const PageKey& key, std::string record) {
        {
          std::lock_guard<std::mutex> lock(unpersisted_mu_);
          if (unpersisted_.erase(key) == 0) return;  // already on a persistent tier
        }
        auto shared = std::make_shared<const std::string>(std::move(record));
        for (size_t j = i + 1; j < slots_.size(); ++j) {
          if (slots_[j].persistent) slots_[j].workers->put_async(key, *shared);
        }
      });
    }
  }
}

TierChain::~TierChain() {
  drain_write_back();
  for (Slot& s : slots_) s.tier->set_evict_sink(nullptr);
  // Workers drain their queues as they are destroyed, fastest tier first,
  // so that what an upper tier hands down is still queued below.
  for (Slot& s : slots_) s.workers.reset();
  // Found in hostile testing: pages whose writes failed through the stop
  // (the disk still full) were lost at the restart without a word.
  if (const size_t n = n_lost_.load(); n > 0) {
    spdlog::warn("tier chain: {} page(s) could not be written to disk before the stop (disk full or below its "
                 "reserve): a restart computes them again",
                 n);
  }
}

bool TierChain::has_persistent() const {
  return std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.persistent; });
}

bool TierChain::spill_sealed(const PageKey& key, std::string record) {
  if (!options_.write_through || !has_persistent()) return false;
  put_persistent(key, std::move(record));
  return true;
}

void TierChain::demote(const PageKey& key, std::string record, bool persisted) {
  if (slots_.empty()) return;
  Slot& first = slots_.front();
  if (!first.persistent) {
    if (!options_.write_through && !persisted) {
      std::lock_guard<std::mutex> lock(unpersisted_mu_);
      unpersisted_.insert(key);
    }
    first.workers->put_async(key, std::move(record));
    return;
  }
  if (!persisted) put_persistent(key, std::move(record));
}

void TierChain::put_persistent(const PageKey& key, std::string record) {
  auto shared = std::make_shared<const std::string>(std::move(record));
  for (Slot& s : slots_) {
    if (s.persistent) s.workers->put_async(key, *shared);
  }
}

void TierChain::note_put(const PageKey& key, bool ok) {
  if (ok && n_lost_.load() == 0) return;  // the common case: nothing to forget or note
  std::lock_guard<std::mutex> lock(lost_mu_);
  if (ok) {
    if (!lost_.empty()) put_worked_since_loss_ = true;
    lost_.erase(key);
  } else if (lost_.size() < kMaxLostWrites) {
    lost_.insert(key);
  }
  n_lost_ = lost_.size();
}

bool TierChain::write_lost(const PageKey& key) const {
  if (n_lost_.load() == 0) return false;
  std::lock_guard<std::mutex> lock(lost_mu_);
  return lost_.count(key) != 0;
}

std::vector<PageKey> TierChain::take_lost_writes(size_t max) {
  std::vector<PageKey> out;
  if (n_lost_.load() == 0) return out;
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now().time_since_epoch()).count();
  std::lock_guard<std::mutex> lock(lost_mu_);
  if (!put_worked_since_loss_ || now - last_retry_ms_ < options_.retry_interval_ms) return out;
  last_retry_ms_ = now;
  for (auto it = lost_.begin(); it != lost_.end() && out.size() < max;) {
    out.push_back(*it);
    it = lost_.erase(it);
  }
  // Another put has to work before the next keys go out (the retried ones
  // themselves count).
  put_worked_since_loss_ = false;
  n_lost_ = lost_.size();
  return out;
}

void TierChain::erase(const PageKey& key) {
  {
    std::lock_guard<std::mutex> lock(unpersisted_mu_);
    unpersisted_.erase(key);
  }
  {
    std::lock_guard<std::mutex> lock(lost_mu_);
    lost_.erase(key);
    n_lost_ = lost_.size();
  }
  for (Slot& s : slots_) s.workers->erase_async(key);
}

void TierChain::lookup_prefix_async(std::vector<PageKey> keys, std::function<void(std::vector<Found>)> done) {
  if (slots_.empty() || keys.empty()) {
    if (done) done({});
    return;
  }
  // Served by the last tier's threads: the slowest reads must not hold up
  // the writes of a fast tier.
  slots_.back().workers->run_async([this, keys = std::move(keys), done = std::move(done)] {
    std::vector<Found> found;
    lookup_now(keys, found);
    try {
      if (done) done(std::move(found));
    } catch (const std::exception& e) {
      spdlog::error("tier chain: lookup callback threw: {}", e.what());
    }
  });
}

void TierChain::lookup_now(const std::vector<PageKey>& keys, std::vector<Found>& out) {
  const size_t n = keys.size();
  // The tier serving each key: the fastest holding it (a queued put counts;
  // a queued erase hides what the tier still holds).
  std::vector<int> source(n, -1);
  std::vector<std::shared_ptr<const std::string>> queued(n);
  for (size_t t = 0; t < slots_.size(); ++t) {
    std::vector<bool> held = slots_[t].tier->contains_batch(keys);
    for (size_t i = 0; i < n; ++i) {
      if (source[i] >= 0) continue;
      if (auto pending = slots_[t].workers->pending_write(keys[i])) {
        if (*pending) source[i] = int(t), queued[i] = *pending;
        continue;
      }
      if (i < held.size() && held[i]) source[i] = int(t);
    }
  }
  size_t prefix = 0;
  while (prefix < n && source[prefix] >= 0) ++prefix;
  std::vector<std::optional<std::string>> records(prefix);
  for (size_t t = 0; t < slots_.size(); ++t) {
    std::vector<PageKey> want;
    std::vector<size_t> where;
    for (size_t i = 0; i < prefix; ++i) {
      if (source[i] != int(t)) continue;
      if (queued[i]) {
        records[i] = *queued[i];
        continue;
      }
      want.push_back(keys[i]);
      where.push_back(i);
    }
    if (want.empty()) continue;
    std::vector<std::optional<std::string>> got = slots_[t].tier->get_batch(want, options_.read_timeout_ms);
    for (size_t j = 0; j < where.size() && j < got.size(); ++j) records[where[j]] = std::move(got[j]);
  }
  out.clear();
  for (size_t i = 0; i < prefix; ++i) {
    if (!records[i]) break;  // a failed or timed-out read ends the prefix
    out.push_back(Found{std::move(*records[i]), source[i]});
  }
}

std::optional<std::string> TierChain::get_now(const PageKey& key) {
  for (Slot& s : slots_) {
    if (auto pending = s.workers->pending_write(key)) {
      if (*pending) return **pending;
      continue;
    }
    std::vector<std::optional<std::string>> got = s.tier->get_batch(std::span<const PageKey>(&key, 1),
                                                                    options_.read_timeout_ms);
    if (!got.empty() && got[0]) return std::move(*got[0]);
  }
  return std::nullopt;
}

void TierChain::drain_write_back() {
  std::vector<PageKey> keys;
  {
    std::lock_guard<std::mutex> lock(unpersisted_mu_);
    keys.assign(unpersisted_.begin(), unpersisted_.end());
    unpersisted_.clear();
  }
  if (keys.empty()) return;
  // Pages demoted under write_back that no persistent tier has yet: written
  // down now (shutdown), read from the fastest tier still holding them.
  for (Slot& s : slots_) s.workers->flush();
  for (const PageKey& key : keys) {
    for (Slot& s : slots_) {
      if (s.persistent) break;
      std::vector<std::optional<std::string>> got = s.tier->get_batch(std::span<const PageKey>(&key, 1), 0);
      if (!got.empty() && got[0]) {
        put_persistent(key, std::move(*got[0]));
        break;
      }
    }
  }
}

void TierChain::flush() {
  for (Slot& s : slots_) s.workers->flush();
}

int64_t TierChain::pending() const {
  int64_t n = 0;
  for (const Slot& s : slots_) n += s.workers->pending();
  return n;
}

}  // namespace larder
