// What the engine's cache admin calls return (Generator::cache_report, pin,
// unpin, evict; GET /admin/cache, /metrics and POST /admin/cache/* in api/).
// Plain values: no JSON, no HTTP (DESIGN.md: JSON ends in api/).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "storage/page_tier.h"

namespace larder {

// One tier of the KV cache, counted since start.
//   device  the page pool the forward pass reads (engine/kv/prefix_cache.h):
//           hits / misses are prefix pages of admitted requests found
//           resident / not resident; bytes_restored is page bytes copied
//           onto the device from a lower tier, bytes_spilled record bytes
//           copied off it (spills and demotions), with the time of those
//           copies; entries are sealed pages, bytes_used every page taken
//           (active or cached) times page_bytes.
//   host, disk  (storage/page_tier.h TierStats): hits / misses are keys
//           read; bytes_restored the record bytes its reads returned,
//           bytes_spilled the record bytes its puts took, with the time
//           spent in them.
struct CacheTierReport {
  std::string name;        // "device", "host", "disk"
  std::string policy;      // eviction policy in force
  bool persistent = false; // survives a restart
  int64_t budget_bytes = 0;
  int64_t bytes_used = 0;
  int64_t entries = 0;     // pages (records) held
  int64_t pinned = 0;      // of those, pinned
  int64_t hits = 0, misses = 0;
  int64_t bytes_restored = 0, bytes_spilled = 0;
  double restore_seconds = 0, spill_seconds = 0;
  int64_t puts_skipped = 0;   // records larger than the whole budget, or not written below the disk reserve
  int64_t writes_failed = 0;  // puts / erases that failed (disk faults)
  std::array<int64_t, size_t(EvictReason::kCount)> evictions{};  // by EvictReason
};

struct CacheReport {
  std::vector<CacheTierReport> tiers;  // device first, then host, disk (those that exist)
  int page_size = 0;                   // tokens per page
  int64_t page_bytes = 0;              // bytes of one device page
  int64_t pool_pages = 0;              // pages allocated at start
  int64_t budget_pages = 0;            // pages the device budget allows now (<= pool_pages)
  int64_t free_pages = 0;              // pages a new request can take now (free + evictable)
  int64_t queue_length = 0;            // requests waiting for admission
  int64_t running = 0;                 // sequences admitted (prefill, decode, restore)
  int64_t preemptions = 0;             // since start
  // since start: lookups in the tiers below the device, by what the engine
  // chose (engine_restore.cpp's restore_or_recompute): read the pages, or
  // prefill them because the measured prefill rate beat the slowest tier's
  // measured read bandwidth.
  int64_t chose_restore = 0;
  int64_t chose_recompute = 0;
  int64_t requests_total = 0;          // since start
  int64_t prefill_tokens = 0;          // since start: prompt positions computed by prefill (Engine::Stats)
  int64_t draft_tokens = 0;            // since start: speculative draft tokens verified (Engine::Stats)
  int64_t draft_tokens_accepted = 0;   // since start: of those, agreed with and emitted
  int64_t draft_model_tokens = 0;      // since start: of draft_tokens, the draft model's (engine.draft_model)
  int64_t draft_model_tokens_accepted = 0;  // since start: of those, agreed with and emitted
  int64_t choice_pages_shared = 0;     // since start: full pages n > 1 choices share with their prompt
  int64_t choice_pages_copied = 0;     // since start: partial last pages copied for them
  int64_t pinned_prefixes = 0;         // pins in force (pin())
  int64_t pinned_pages = 0;            // distinct page keys they cover
};

// A pin or unpin.
struct PinResult {
  int n_prompt_tokens = 0;  // the prompt's tokens
  int n_pages = 0;          // its full pages (pinned or unpinned)
  int n_tokens = 0;         // tokens those pages cover: n_pages * page_size
  int n_cached_tokens = 0;  // pin: tokens that were cached already (not computed for the pin)
  bool changed = true;      // false: the prefix was pinned already (pin) / not pinned (never for unpin: an error)
};

// An admin eviction: entries removed from each tier, device first.
struct EvictResult {
  std::vector<std::pair<std::string, int64_t>> evicted;  // (tier name, entries removed)
  int64_t active_skipped = 0;  // device pages left because a running request holds them
};

}  // namespace larder
