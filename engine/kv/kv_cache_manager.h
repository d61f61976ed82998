// KvCacheManager: the KV cache as the engine thread sees it (DESIGN.md
// "Inside the engine"), after llama.cpp's llama-memory.h (prepare, then
// apply) and vLLM v1's kv_cache_manager.py:
//   match_prefix  which pages of a prompt are where: resident on the device
//                 (and whether evictable), or to be looked up below;
//   prepare       acquire the resident prefix, allocate pages for new
//                 positions, restore pages read from a lower tier (one
//                 batched copy to the device per call);
//   commit        seal the pages that filled up: hash, index, spill
//                 (write_through) to the tier chain.
// The device tier is the backend's page pool with its prefix index
// (PrefixCache); a page evicted from it is demoted down the tier chain
// (storage/tier_chain.h) with its record. Only commit (and restore, which
// seals what it verified) adds to the index.
//
// Not thread-safe: the engine thread owns it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/backend.h"
#include "engine/kv/prefix_cache.h"
#include "storage/access_trace.h"
#include "storage/log_limiter.h"
#include "storage/page_record.h"
#include "storage/tier_chain.h"

namespace larder {

// One sequence's pages: what the forward pass reads (block_table) and the
// keys of its sealed leading pages.
struct SeqPages {
  uint64_t id = 0;                   // the sequence's id, for the access trace
  PageKey root;                      // chain root (salted per request)
  std::vector<int32_t> block_table;  // page ids, ceil(n_positions / page_size)
  std::vector<PageKey> keys;         // keys of the sealed leading pages, in order
};

// Counters since start; atomics, so that other threads may read them while
// the engine thread counts.
struct KvCacheStats {
  std::atomic<int64_t> pages_reused_device{0};  // prefix pages found resident
  std::atomic<int64_t> pages_restored{0};       // pages restored from a lower tier
  std::atomic<int64_t> pages_spilled{0};        // records queued to persistent tiers
  std::atomic<int64_t> pages_respilled{0};      // of those, again after a lost write (retry_lost_writes, write_back_all)
  std::atomic<int64_t> pages_demoted{0};        // records handed down to the host tier on device eviction
  std::atomic<int64_t> records_rejected{0};     // failed verification, dropped
  // The same by the tier they came from (TierChain index; the report's
  // "corrupt" evictions of that tier).
  std::array<std::atomic<int64_t>, 4> records_rejected_by_tier{};
  std::atomic<int64_t> tokens_reused_partial{0};  // prompt tokens taken from part of a page (reuse_partial)
  std::atomic<int64_t> partial_pages_kept{0};     // partial tail pages kept at release
  // fork (n > 1 choices): full pages shared by reference, partial last pages copied.
  std::atomic<int64_t> pages_shared_fork{0};
  std::atomic<int64_t> pages_copied_fork{0};
  // The device tier's row of GET /admin/cache and /metrics:
  std::atomic<int64_t> pages_missed_device{0};  // prefix pages looked up, not resident
  std::atomic<int64_t> bytes_restored{0};       // page bytes copied onto the device by restores
  std::atomic<int64_t> bytes_copied_out{0};     // record bytes copied off the device (spill, demote)
  std::atomic<int64_t> restore_ns{0}, copy_out_ns{0};  // time in those copies
};

class KvCacheManager {
 public:
  // chain may be null (memory only). write_through: as CacheOptions.
  // device_policy: the device tier's eviction order (null: lru).
  KvCacheManager(Backend& backend, const PageRecordMeta& meta, TierChain* chain, bool write_through,
                 std::unique_ptr<EvictionPolicy> device_policy = nullptr);

  int page_size() const { return layout_.page_size; }
  const KvLayout& layout() const { return layout_; }

  // Keys of the first n_pages full pages of tokens under root.
  std::vector<PageKey> chain_keys(const PageKey& root, std::span<const int32_t> tokens, int n_pages) const;

  struct Match {
    int n_device = 0;     // leading keys resident on the device
    int n_evictable = 0;  // of those, pages no sequence holds now
  };
  // Which leading keys are resident; changes nothing.
  Match match_prefix(std::span<const PageKey> keys) const;

  // prepare, step 1: holds the first n resident pages of keys (from
  // match_prefix) in `seq`.
  void acquire_prefix(SeqPages& seq, std::span<const PageKey> keys, int n);
  // prepare, step 2: restores records read from lower tiers for the pages
  // after seq's current ones (found[i] holds keys[i]), verifying each
  // against its key and tokens (page j covers tokens[j*ps, (j+1)*ps)),
  // copying all of them to the device in one batch, and sealing them. Stops
  // at the first record that fails verification (dropped and erased from
  // the chain) or when no page is available. Returns the pages restored.
  // where (optional) gets one entry per page taken: 'd' when it turned out
  // resident on the device, 'h' from a non-persistent tier, 'k' from a
  // persistent one.
  int restore(SeqPages& seq, std::span<const int32_t> tokens, std::span<const PageKey> keys,
              std::vector<TierChain::Found>& found, std::vector<char>* where = nullptr);
  // prepare, token granularity: when seq holds exactly n_computed / ps
  // full pages, finds the resident page after that prefix sharing the most
  // leading tokens with tokens[n_computed, n_computed + max_reuse) (max_reuse
  // <= page_size), copies it into a new page of seq's own and returns how
  // many tokens it covers (0: none; nothing changed). Those positions need
  // no prefill: equal prefixes give equal K/V, and the rest of the copied
  // page is overwritten as the prefill goes on.
  int reuse_partial(SeqPages& seq, std::span<const int32_t> tokens, int n_computed, int max_reuse);
  // Fork (n > 1 choices of one prompt): gives `child` (which holds no
  // pages) the K/V of `parent`'s positions [0, n_positions): its full pages
  // by reference (held once more: read-only from now on, as shared pages
  // are) with their keys, and a copy of the partial last page (positions
  // n_positions / ps * ps .. n_positions - 1) in a page of the child's own,
  // which it goes on writing. parent must hold ceil(n_positions / ps)
  // pages with its full ones committed. Returns false, child unchanged,
  // when no page is available for the copy (or the copy failed).
  bool fork(const SeqPages& parent, SeqPages& child, int n_positions);
  // prepare, step 3: pages for positions [0, n_positions); false when the
  // device has no page left (nothing allocated is lost).
  bool ensure_pages(SeqPages& seq, int n_positions);
  // Seals the full pages of positions [0, n_computed) not sealed yet,
  // indexing them and, under write_through, queueing them for spilling
  // (flush_spills).
  void commit(SeqPages& seq, std::span<const int32_t> tokens, int n_computed);
  // Copies the pages commit() sealed for spilling out of the device in one
  // batch and queues their records to the persistent tiers. The engine calls
  // it once per step; an eviction of a queued page, and write_back_all(),
  // call it first.
  void flush_spills();
  // Copies the pages the device evicted since the last call (a demotion
  // queued by the evict hook) out of the device in one batch and hands their
  // records down the tier chain. Every call that writes into a newly
  // allocated page (ensure_pages, restore, reuse_partial) calls it first, so
  // an evicted page's bytes are read before they are overwritten; the engine
  // also calls it once per step.
  void flush_demotions();
  // Releases every page of seq, tail first, so that the tail of a finished
  // or preempted sequence is evicted before its head. With the sequence's
  // tokens and n_computed (positions whose K/V are written), a partial tail
  // page (n_computed % page_size tokens after the sealed ones) is kept on
  // the device as a cached page under prefix_partial(), so that a returning
  // chat reuses it through reuse_partial instead of recomputing up to
  // page_size - 1 tokens. Such a page never leaves the device (it is not a
  // whole page: never spilled or demoted) and is the first of the
  // sequence's pages to be evicted.
  void release(SeqPages& seq, std::span<const int32_t> tokens = {}, int n_computed = 0);

  // Pages a sequence holding these would free if released (ref count 1).
  int n_exclusive(const SeqPages& seq) const;
  int n_available() const { return cache_.n_available(); }
  int headroom() const { return cache_.headroom(); }  // PrefixCache::headroom
  // Pages the device tier may use: its budget (PrefixCache::page_limit),
  // at most the pool allocated at start (n_pool_pages).
  int n_pages() const { return cache_.page_limit(); }
  int n_pool_pages() const { return pool_.n_pages(); }
  int n_free() const { return pool_.n_free(); }
  int n_resident() const { return cache_.n_sealed(); }

  // At shutdown: every sealed page on the device that no persistent tier
  // has yet (write_back), or whose spill was lost (TierChain::write_lost),
  // is written down.
  void write_back_all();
  // Spills again up to kLostWritesPerRetry pages still on the device whose
  // spill was lost, once the persistent tier takes writes again
  // (TierChain::take_lost_writes). The engine calls it once per step.
  static constexpr size_t kLostWritesPerRetry = 64;
  void retry_lost_writes();

  const KvCacheStats& stats() const { return stats_; }
  // Pages commit() seals are logged here (S lines); null: no trace.
  void set_trace(AccessTrace* trace) { trace_ = trace; }

  // ---- admin (engine/engine_admin.cpp) ---------------------------------
  // The device tier's index, for pins, admin eviction, its budget and its
  // policy.
  PrefixCache& device() { return cache_; }
  const PrefixCache& device() const { return cache_; }
  // Writes the page sealed under `key` to the persistent tiers (a pinned
  // prefix must survive a restart): when none has it yet, or always with
  // `rewrite` (a persistent tier evicted it since). Returns false when the
  // key is not resident or its record could not be read.
  bool persist(const PageKey& key, bool rewrite = false);
  // Admin eviction of the partial tail pages kept after `parent` (release)
  // that no sequence holds; returns how many went.
  int evict_partials_after(const PageKey& parent);

 private:
  // Pages the device evicted whose records go down the chain
  // (flush_demotions); tokens moved out of page_tokens_, which a new owner
  // of the page may overwrite before the copy.
  struct Demotion {
    int page;
    PageKey key;
    bool persisted;
    std::vector<int32_t> tokens;
  };
  std::vector<Demotion> demote_queue_;
  std::vector<uint8_t> demote_buf_;
  // The page's record (tokens + bytes read from the device); empty on a
  // failed copy (logged).
  std::string record_of(int page, const PageKey& key);

  Backend& backend_;
  PagePool& pool_;
  KvLayout layout_;
  PageRecordMeta meta_;
  TierChain* chain_;
  bool write_through_;
  PrefixCache cache_;
  void add_child(int page, const PageKey& parent);
  void forget_child(int page);

  std::vector<std::vector<int32_t>> page_tokens_;  // per page id: its tokens once sealed
  std::vector<uint8_t> partial_;                    // per page id: 1 for a kept partial tail page
  // Sealed resident pages by the key of the page before them (or the root):
  // where reuse_partial looks for a page that matches part of a prompt's next page.
  std::unordered_map<PageKey, std::vector<int>, PageKeyHash> children_;
  std::unordered_map<int, PageKey> parent_of_;
  std::vector<uint8_t> page_buf_;                   // one page, host side
  std::vector<uint8_t> batch_buf_;                  // restore / spill: pages in a row
  std::vector<std::pair<int, PageKey>> spill_queue_;  // sealed this step, to copy out
  KvCacheStats stats_;
  AccessTrace* trace_ = nullptr;
  LogLimiter log_limited_{10000};
};

}  // namespace larder
