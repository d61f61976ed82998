// Scheduler: which sequences run in the next engine step, as a plain
// function of the state (no model, no pages, no threads), so that every
// decision is tested on its own (tests/engine/test_scheduler.cpp). The
// engine thread builds a SchedState each step, calls schedule() and carries
// out the StepPlan (engine/engine.cpp).
//
// Rules (after vLLM v1's scheduler, with FCFS admission):
//   - Decode first: every decoding sequence gets one token per step.
//   - Chunked prefill: what is left of the step's token budget goes to
//     prefilling sequences, oldest first, in chunks; a chunk is cut to the
//     pages that are available, so a long prompt never starves decode.
//   - Out of pages: when the decoding (or the oldest prefilling) sequences
//     need more pages than are available, the youngest running sequences
//     are preempted (their pages released to the cache, so resuming them is
//     a prefix-cache hit) until the rest fit.
//   - Admission: queued requests enter in arrival order while fewer than
//     max_running run and the pages their prompt needs are available (free
//     or evictable); the first that does not fit waits, and so does every
//     request behind it (no overtaking, no starvation). A request is
//     refused only when it can never fit: its prompt needs more pages than
//     the pool has besides pinned pages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace larder {

enum class SchedPhase {
  kQueued,          // submitted, not admitted
  kWaitingRestore,  // admitted; prefix pages being read from a lower tier
  kPrefill,         // positions [n_computed, n_target) still to compute
  kDecode,          // one position per step
};

struct SchedSeq {
  uint64_t id = 0;
  SchedPhase phase = SchedPhase::kQueued;
  int n_target = 0;     // positions to compute before decoding (prefill); prompt length when queued
  int n_computed = 0;   // positions whose K/V are in its pages
  int n_pages_held = 0;  // pages in its block table
  // Pages only this sequence holds: what preempting it makes available.
  int n_pages_exclusive = 0;
  // kQueued only: pages admission must take from the available ones, i.e.
  // pages its prompt needs that are not resident (to allocate), plus its
  // resident prefix hits that are evictable now (they stop being evictable
  // once it holds them).
  int n_pages_to_take = 0;
};

struct SchedState {
  std::vector<SchedSeq> running;  // admitted, oldest first
  std::vector<SchedSeq> queued;   // waiting for admission, in arrival order
  // Free + evictable pages of the device tier; negative by the pages the
  // running sequences hold past a budget that shrank under them.
  int n_available_pages = 0;
  int n_pool_pages = 0;           // pages in the device pool
  int n_pinned_pages = 0;         // pages that are never available
  int page_size = 16;             // tokens per page
  int max_running = 8;            // most admitted sequences
  int token_budget = 512;         // positions computed per step (decode + prefill)
};

struct PrefillChunk {
  uint64_t id = 0;
  int n_tokens = 0;  // positions [n_computed, n_computed + n_tokens)
};

struct Refusal {
  uint64_t id = 0;
  std::string reason;  // for the client: what does not fit, and the knob
};

struct StepPlan {
  std::vector<uint64_t> preempt;       // running sequences to release and requeue, youngest first
  std::vector<uint64_t> decode;        // one position each, in running order
  std::vector<PrefillChunk> prefill;   // in running order
  std::vector<uint64_t> admit;         // queued sequences to admit, in arrival order
  std::vector<Refusal> refuse;         // queued sequences that can never fit
};

// Pages needed to hold positions [0, n_positions): ceil(n_positions / page_size).
int pages_for(int n_positions, int page_size);

// The plan for the next step. Admitted sequences start running in the step
// after (the engine matches their prefix first). Deterministic: the same
// state gives the same plan.
StepPlan schedule(const SchedState& state);

}  // namespace larder
