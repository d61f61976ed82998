// Engine: lookups of a sequence's pages in the tiers below the device
// (prefetch while queued, or at admission), the restore-or-recompute
// decision before each, and the restore of what a lookup found
// (engine/engine_impl.h).
#include <chrono>
#include <iterator>

#include "engine/engine_impl.h"

namespace larder {

bool Engine::Impl::restore_or_recompute(int n_pages) {
  // Restore time: record bytes over the measured read bandwidth of the
  // slowest tier (the one a miss above ends in); prefill time: positions
  // over the measured prefill rate. Until both are measured, restore.
  double read_bytes_per_s = 0;
  for (size_t i = 0; i < tiers->n_tiers(); ++i) {
    const TierStats t = tiers->tier(i).stats();
    if (t.read_seconds <= 0 || t.bytes_read <= 0) continue;
    const double bw = double(t.bytes_read) / t.read_seconds;
    if (read_bytes_per_s == 0 || bw < read_bytes_per_s) read_bytes_per_s = bw;
  }
  bool restore = true;
  if (read_bytes_per_s > 0 && prefill_rate > 0) {
    const double restore_s = double(n_pages) * double(page_record_size(size_t(layout.page_size), layout.page_bytes())) /
                             read_bytes_per_s;
    const double prefill_s = double(n_pages) * layout.page_size / prefill_rate;
    restore = restore_s <= prefill_s;
  }
  ++(restore ? stats.chose_restore : stats.chose_recompute);
  return restore;
}

void Engine::Impl::issue_lookup(Sequence& s, int from) {
  const int n = int(s.cacheable_keys.size()) - from;
  if (n <= 0 || s.lookup_skipped) return;
  if (!restore_or_recompute(n)) {
    s.lookup_skipped = true;
    return;
  }
  s.lookup_issued = true;
  s.lookup_done = false;
  s.lookup_from = from;
  s.prefetched.clear();
  std::vector<PageKey> keys(s.cacheable_keys.begin() + from, s.cacheable_keys.end());
  const uint64_t id = s.id;
  tiers->lookup_prefix_async(std::move(keys), [this, id](std::vector<TierChain::Found> found) {
    std::lock_guard<std::mutex> lk(mu);
    restore_results.push_back(RestoreResult{id, std::move(found)});
    cv.notify_one();
  });
}

Sequence* Engine::Impl::find_queued(uint64_t id) {
  for (auto& s : queued) {
    if (s->id == id) return s.get();
  }
  return nullptr;
}

void Engine::Impl::apply_restore(RestoreResult& r) {
  Sequence* sp = find_seq(r.seq_id);
  if (sp == nullptr) sp = find_queued(r.seq_id);
  if (sp == nullptr || !sp->lookup_issued || sp->lookup_done) return;  // finished, or a stale answer
  Sequence& s = *sp;
  s.prefetched = std::move(r.found);
  s.lookup_done = true;
  if (s.state == SeqState::kWaitingDisk) restore_prefetched(s);  // admitted meanwhile
}

void Engine::Impl::restore_prefetched(Sequence& s) {
  const int held = int(s.pages.block_table.size());
  const int from = s.lookup_from;
  if (held < from) {
    // The device evicted part of the prefix after the lookup was issued:
    // look up again from what it still holds.
    s.lookup_issued = s.lookup_skipped = false;
    issue_lookup(s, held);
    if (s.lookup_issued) return;  // still kWaitingDisk
  } else if (held - from < int(s.prefetched.size())) {
    std::vector<TierChain::Found> found(std::make_move_iterator(s.prefetched.begin() + (held - from)),
                                        std::make_move_iterator(s.prefetched.end()));
    std::span<const PageKey> keys(s.cacheable_keys.data() + held, s.cacheable_keys.size() - size_t(held));
    kv->restore(s.pages, s.tokens, keys, found, &s.key_where);
  }
  s.prefetched.clear();
  s.n_computed = int(s.pages.block_table.size()) * layout.page_size;
  if (s.sink->cancelled()) return finish(s, FinishReason::kCancelled);
  start_prefill(s);
}

}  // namespace larder
