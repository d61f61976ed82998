#include "engine/scheduler.h"

#include <algorithm>

namespace larder {

int pages_for(int n_positions, int page_size) {
  return n_positions <= 0 ? 0 : (n_positions + page_size - 1) / page_size;
}

namespace {

// New pages `s` needs so that positions [0, n_positions) have a page.
int new_pages(const SchedSeq& s, int n_positions, int page_size) {
  return std::max(0, pages_for(n_positions, page_size) - s.n_pages_held);
}

}  // namespace

StepPlan schedule(const SchedState& st) {
  StepPlan plan;
  const int ps = st.page_size;
  int avail = st.n_available_pages;

  // Running sequences left after preemption, oldest first.
  std::vector<const SchedSeq*> live;
  live.reserve(st.running.size());
  for (const SchedSeq& s : st.running) live.push_back(&s);

  // What this step needs at least: a page for each decode position that
  // starts a page, and one for the oldest prefill if its pages are full.
  const SchedSeq* oldest_prefill = nullptr;
  for (const SchedSeq* s : live) {
    if (s->phase == SchedPhase::kPrefill && s->n_computed < s->n_target) {
      oldest_prefill = s;
      break;
    }
  }
  auto need_of = [&](const SchedSeq* s) {
    if (s->phase == SchedPhase::kDecode) return new_pages(*s, s->n_computed + 1, ps);
    if (s == oldest_prefill) return new_pages(*s, s->n_computed + 1, ps);
    return 0;
  };
  int need = 0;
  for (const SchedSeq* s : live) need += need_of(s);
  // Preempt the youngest until the rest fit; the last one left is never
  // preempted (it has the whole pool but the pinned pages: if it still does
  // not fit, the engine fails it with a clear error).
  while (need > avail && live.size() > 1) {
    const SchedSeq* victim = live.back();
    live.pop_back();
    plan.preempt.push_back(victim->id);
    avail += victim->n_pages_exclusive;
    need -= need_of(victim);
  }

  for (const SchedSeq* s : live) {
    if (s->phase != SchedPhase::kDecode) continue;
    plan.decode.push_back(s->id);
    avail = std::max(0, avail - need_of(s));
  }

  int budget = std::max(0, st.token_budget - int(plan.decode.size()));
  for (const SchedSeq* s : live) {
    if (budget == 0) break;
    if (s->phase != SchedPhase::kPrefill || s->n_computed >= s->n_target) continue;
    const int want = std::min(s->n_target - s->n_computed, budget);
    // Positions that fit in the pages it holds plus the available ones.
    const int room = (s->n_pages_held + avail) * ps - s->n_computed;
    const int n = std::min(want, room);
    if (n <= 0) continue;
    plan.prefill.push_back(PrefillChunk{s->id, n});
    budget -= n;
    avail -= new_pages(*s, s->n_computed + n, ps);
  }

  // Admission: FCFS, after the running sequences took what they need.
  int n_running = int(live.size());
  const int usable = st.n_pool_pages - st.n_pinned_pages;
  for (const SchedSeq& q : st.queued) {
    // The prompt and the first generated position.
    const int total = pages_for(q.n_target + 1, ps);
    if (total > usable) {
      plan.refuse.push_back(Refusal{
          q.id, "the prompt needs " + std::to_string(total) + " KV pages of " + std::to_string(ps) +
                    " tokens; the device tier holds " + std::to_string(st.n_pool_pages) + " (" +
                    std::to_string(st.n_pinned_pages) + " pinned): raise cache.device.budget"});
      continue;
    }
    if (n_running >= st.max_running || q.n_pages_to_take > avail) break;
    plan.admit.push_back(q.id);
    avail -= q.n_pages_to_take;
    ++n_running;
  }
  return plan;
}

}  // namespace larder
