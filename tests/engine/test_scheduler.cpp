// schedule(state) -> StepPlan, on hand-built states. Every expected plan is
// worked out by hand in the comment above its checks (page_size 16 unless
// said otherwise).
#include <catch2/catch.hpp>

#include "engine/scheduler.h"

using namespace larder;

namespace {

SchedSeq decoding(uint64_t id, int n_computed, int held, int exclusive = -1) {
  SchedSeq s;
  s.id = id;
  s.phase = SchedPhase::kDecode;
  s.n_target = n_computed;
  s.n_computed = n_computed;
  s.n_pages_held = held;
  s.n_pages_exclusive = exclusive < 0 ? held : exclusive;
  return s;
}

SchedSeq prefilling(uint64_t id, int n_computed, int n_target, int held) {
  SchedSeq s;
  s.id = id;
  s.phase = SchedPhase::kPrefill;
  s.n_computed = n_computed;
  s.n_target = n_target;
  s.n_pages_held = held;
  s.n_pages_exclusive = held;
  return s;
}

SchedSeq queued(uint64_t id, int n_prompt, int to_take) {
  SchedSeq s;
  s.id = id;
  s.phase = SchedPhase::kQueued;
  s.n_target = n_prompt;
  s.n_pages_to_take = to_take;
  return s;
}

std::vector<uint64_t> ids(const std::vector<PrefillChunk>& chunks) {
  std::vector<uint64_t> out;
  for (const auto& c : chunks) out.push_back(c.id);
  return out;
}

}  // namespace

TEST_CASE("pages_for rounds up", "[scheduler]") {
  CHECK(pages_for(0, 16) == 0);
  CHECK(pages_for(1, 16) == 1);
  CHECK(pages_for(16, 16) == 1);
  CHECK(pages_for(17, 16) == 2);
  CHECK(pages_for(100, 1) == 100);
}

TEST_CASE("decode first, then prefill chunks fill the token budget", "[scheduler]") {
  SchedState st;
  st.n_pool_pages = 100;
  st.n_available_pages = 50;
  st.token_budget = 512;
  // Three decoders mid-page (positions 20, 40, 70 go into pages they hold:
  // 20/16 = page 1 of 2 held, 40/16 = page 2 of 3, 70/16 = page 4 of 5).
  st.running = {decoding(1, 20, 2), decoding(2, 40, 3), decoding(3, 70, 5),
                prefilling(4, 0, 1000, 0), prefilling(5, 0, 100, 0)};
  StepPlan p = schedule(st);
  CHECK(p.preempt.empty());
  CHECK(p.decode == std::vector<uint64_t>{1, 2, 3});
  // Budget 512 - 3 decode tokens = 509 for prefill, all to the oldest
  // prefill (4 wants 1000); it takes ceil(509 / 16) = 32 of the 50 pages.
  REQUIRE(p.prefill.size() == 1);
  CHECK(p.prefill[0].id == 4);
  CHECK(p.prefill[0].n_tokens == 509);
}

TEST_CASE("a prefill chunk is cut to the pages available and the rest of the budget goes on", "[scheduler]") {
  SchedState st;
  st.n_pool_pages = 100;
  st.n_available_pages = 3;
  st.token_budget = 512;
  // Seq 1 holds 1 page with 10 positions computed: room = (1 + 3) * 16 - 10
  // = 54 positions; it wants 500 -> chunk 54, using all 3 available pages.
  // Seq 2 then has room (0 + 0) * 16 - 0 = 0: no chunk.
  st.running = {prefilling(1, 10, 510, 1), prefilling(2, 0, 40, 0)};
  StepPlan p = schedule(st);
  CHECK(p.preempt.empty());
  REQUIRE(p.prefill.size() == 1);
  CHECK(p.prefill[0].id == 1);
  CHECK(p.prefill[0].n_tokens == 54);

  // With 10 pages: seq 1 wants min(500, 512) = 500, room (1 + 10) * 16 -
  // 10 = 166 -> chunk 166, using pages_for(176) - 1 = 10 pages: none left
  // for seq 2.
  st.n_available_pages = 10;
  p = schedule(st);
  REQUIRE(p.prefill.size() == 1);
  CHECK(p.prefill[0].n_tokens == 166);

  // With 100 pages: seq 1 gets its 500 (pages_for(510) - 1 = 31 pages),
  // seq 2 the remaining budget 12 of its 40.
  st.n_available_pages = 100;
  p = schedule(st);
  CHECK(ids(p.prefill) == std::vector<uint64_t>{1, 2});
  CHECK(p.prefill[0].n_tokens == 500);
  CHECK(p.prefill[1].n_tokens == 12);
}

TEST_CASE("out of pages, the youngest sequences are preempted until decode fits", "[scheduler]") {
  SchedState st;
  st.n_pool_pages = 12;
  st.n_available_pages = 1;
  st.token_budget = 512;
  // Seqs 1, 2, 3 all sit at a page boundary (32, 48, 16 positions computed,
  // holding exactly 2, 3, 1 pages): each needs 1 new page; 3 needed, 1
  // available. Preempt 3 (youngest): +1 exclusive page -> 2 available, need
  // 2: fits. Plan: preempt {3}, decode {1, 2}.
  st.running = {decoding(1, 32, 2), decoding(2, 48, 3), decoding(3, 16, 1)};
  StepPlan p = schedule(st);
  CHECK(p.preempt == std::vector<uint64_t>{3});
  CHECK(p.decode == std::vector<uint64_t>{1, 2});

  // If seq 3 shared its page with seq 1 (exclusive 0), preempting it frees
  // nothing: need 2 > 1, so seq 2 goes too (+3): preempt {3, 2}, decode {1}.
  st.running[2].n_pages_exclusive = 0;
  p = schedule(st);
  CHECK(p.preempt == std::vector<uint64_t>{3, 2});
  CHECK(p.decode == std::vector<uint64_t>{1});

  // The last sequence is never preempted, even when nothing is available.
  st.running = {decoding(1, 32, 2)};
  st.n_available_pages = 0;
  p = schedule(st);
  CHECK(p.preempt.empty());
  CHECK(p.decode == std::vector<uint64_t>{1});
}

TEST_CASE("a stalled oldest prefill preempts younger sequences", "[scheduler]") {
  SchedState st;
  st.n_pool_pages = 20;
  st.n_available_pages = 0;
  st.token_budget = 512;
  // Seq 1 (prefill) holds 2 full pages (32 computed of 100): it needs a page
  // to go on, none available. Seq 2 decodes mid-page (needs none) and holds
  // 4 pages. Preempt seq 2 -> 4 available; seq 1 room = (2 + 4) * 16 - 32 =
  // 64 positions of the 68 it wants.
  st.running = {prefilling(1, 32, 100, 2), decoding(2, 50, 4)};
  StepPlan p = schedule(st);
  CHECK(p.preempt == std::vector<uint64_t>{2});
  CHECK(p.decode.empty());
  REQUIRE(p.prefill.size() == 1);
  CHECK(p.prefill[0].n_tokens == 64);
}

TEST_CASE("admission is first come, first served, within max_running and the available pages", "[scheduler]") {
  SchedState st;
  st.n_pool_pages = 64;
  st.n_available_pages = 10;
  st.max_running = 3;
  st.running = {decoding(1, 20, 2)};  // mid-page: needs nothing
  // Queue: a (takes 4), b (takes 7), c (takes 1). a fits (10 -> 6); b does
  // not (7 > 6) and blocks c although c would fit.
  st.queued = {queued(10, 60, 4), queued(11, 100, 7), queued(12, 5, 1)};
  StepPlan p = schedule(st);
  CHECK(p.admit == std::vector<uint64_t>{10});
  CHECK(p.refuse.empty());

  // With 20 available: a (20 -> 16), b (16 -> 9), then max_running 3 is
  // reached (1 running + 2 admitted): c waits.
  st.n_available_pages = 20;
  p = schedule(st);
  CHECK(p.admit == std::vector<uint64_t>{10, 11});
}

TEST_CASE("a request that can never fit is refused; one that could fit later waits", "[scheduler]") {
  SchedState st;
  st.n_pool_pages = 8;
  st.n_pinned_pages = 2;
  st.n_available_pages = 1;
  st.page_size = 16;
  // Prompt of 96 tokens + 1 generated = 97 positions -> 7 pages > 8 - 2 = 6
  // usable: refused. Prompt of 95 -> 96 positions -> 6 pages: fits one day,
  // but takes 6 > 1 available now: waits (not refused).
  st.queued = {queued(1, 96, 7), queued(2, 95, 6), queued(3, 1, 1)};
  StepPlan p = schedule(st);
  REQUIRE(p.refuse.size() == 1);
  CHECK(p.refuse[0].id == 1);
  CHECK_THAT(p.refuse[0].reason, Catch::Contains("needs 7 KV pages") && Catch::Contains("cache.device.budget"));
  CHECK(p.admit.empty());  // 2 blocks 3
}

TEST_CASE("a sequence waiting for a restore holds its pages but takes no step", "[scheduler]") {
  SchedState st;
  st.n_pool_pages = 32;
  st.n_available_pages = 4;
  SchedSeq w;
  w.id = 7;
  w.phase = SchedPhase::kWaitingRestore;
  w.n_target = 200;
  w.n_pages_held = 3;
  w.n_pages_exclusive = 3;
  st.running = {w, decoding(8, 16, 1)};  // seq 8 at a boundary: 1 page
  StepPlan p = schedule(st);
  CHECK(p.preempt.empty());
  CHECK(p.decode == std::vector<uint64_t>{8});
  CHECK(p.prefill.empty());
}

TEST_CASE("a budget shrunk under the running sequences: negative availability preempts until they fit",
          "[scheduler]") {
  SchedState st;
  st.n_pool_pages = 34;  // the new limit
  st.token_budget = 512;
  st.max_running = 8;
  // Four decoders of 19 pages each (76 in use), all at a page start
  // (position 304 = 19 * 16): each needs 1 page. Limit 34, nothing cached:
  // availability 34 - 76 = -42. Need 4 > -42: preempt 4 (avail -42 + 19 =
  // -23, need 3), 3 (-4, need 2), 2 (15, need 1): 1 fits and decodes.
  // (Clamped to 0, as before, one preemption looked enough: 0 + 19 >= 3.)
  st.n_available_pages = -42;
  st.running = {decoding(1, 304, 19), decoding(2, 304, 19), decoding(3, 304, 19), decoding(4, 304, 19)};
  StepPlan p = schedule(st);
  CHECK(p.preempt == std::vector<uint64_t>{4, 3, 2});
  CHECK(p.decode == std::vector<uint64_t>{1});
  // Still over the limit by more than a victim frees: no new page for the
  // one left either, and nothing admitted.
  st.n_available_pages = -100;
  st.queued = {queued(9, 10, 1)};
  p = schedule(st);
  CHECK(p.preempt == std::vector<uint64_t>{4, 3, 2});
  CHECK(p.admit.empty());
}
