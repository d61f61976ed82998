// Page-access traces and the what-if simulator (docs/cache-tuning.md).
//
// The daemon can log every page access of the KV cache to a trace file
// (cache.trace_file): which pages each request asked for, in chain order,
// where each was found, and which pages were computed (sealed). No text, no
// token ids: keys are 128-bit hashes. Replaying a trace under other budgets
// and policies shows an admin what a config change would do before making
// it (`larder-sim --trace FILE --config candidate.toml`).
//
// Trace format, v1: text, one event per line, fields separated by spaces:
//   # larder page-access trace v1          first line
//   P <page_bytes> <record_bytes> <page_size>   the page sizes (device, record, tokens)
//   R <t_ms> <req> <n>                     request <req> looked up <n> pages at
//                                          t_ms (ms since the trace began); n K lines follow
//   K <req> <key> <depth> <where>          one page of the request, in chain order;
//                                          where: d (device), h (host), k (disk), m (miss)
//   S <req> <key> <depth>                  request <req> computed and sealed a page
//   F <t_ms> <req>                         request <req> finished: its pages are released
// <key> is 32 hex digits; depth is the page's index in its chain.
//
// The simulator models each tier with its byte budget and policy (the same
// EvictionPolicy code the daemon runs), the write policy and the disk ttl:
// a request's pages are looked up device -> host -> disk, stopping at the
// first miss (the rest are prefilled, as in the engine); sealed pages enter
// the device (and disk under write_through); a device eviction moves the
// page to the host (or, write_back without a host, to disk); a host
// eviction under write_back moves it to disk. It does not model the pages a
// running request holds before they are sealed (at most one per request),
// nor concurrency: requests replay one event at a time in trace order.
#pragma once

#include <array>
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "storage/cache_options.h"
#include "storage/status.h"

namespace larder {

struct SimTierResult {
  std::string name;       // "device", "host", "disk"
  int64_t hits = 0;       // pages found in this tier (not in a faster one)
  int64_t evictions = 0;  // pages that left it (budget or ttl)
};

struct SimResult {
  int64_t requests = 0;
  int64_t pages_looked_up = 0;       // K lines
  int64_t pages_missed = 0;          // prefilled
  std::array<SimTierResult, 3> tiers;  // device, host, disk
  int64_t restored_tokens = 0;       // host + disk hits * page_size
  int64_t prefilled_tokens = 0;      // misses * page_size
  int page_size = 0;
  // The same counts as the daemon measured them (the trace's `where`).
  int64_t live_hits[3] = {0, 0, 0};
  int64_t live_missed = 0;
  // The trace's last line was cut off (no newline, not a whole event: the
  // writer was killed mid-line) and was skipped.
  bool truncated_last_line = false;
  // Pages the daemon found in host or disk that the trace never sealed
  // (there before the trace started), placed in that tier at first sight.
  int64_t pages_seeded = 0;

  // hits / pages_looked_up, in percent (0 when nothing was looked up).
  double hit_rate(size_t tier) const;
  double live_hit_rate(size_t tier) const;
};

// Replays the trace read from `in` under `options` (tier budgets and
// policies, write policy, disk ttl; a disk tier exists when disk.dir is set
// or the budget is > 0). Errors: kInvalidArgument naming the line for a
// malformed trace (except a cut-off last line: truncated_last_line) or an
// unknown policy.
Result<SimResult> simulate_trace(std::istream& in, const CacheOptions& options);

// The result as a table for people (what larder-sim prints).
std::string format_sim_result(const SimResult& r, bool with_live);

}  // namespace larder
