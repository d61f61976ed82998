// The what-if simulator on hand-written traces; every count is worked out
// by hand in the comments.
#include <sstream>

#include <catch2/catch.hpp>

#include "storage/cache_sim.h"

using namespace larder;

namespace {

// 32 hex digits for a short name.
std::string k(char c) { return std::string(31, '0') + c; }

// Pages of 100 bytes (records of 200), 16 tokens each.
std::string trace() {
  std::ostringstream t;
  t << "# larder page-access trace v1\n"
    << "P 100 200 16\n"
    // Request 1 computes A (depth 0) and B (depth 1).
    << "R 0 1 2\nK 1 " << k('a') << " 0 m\nK 1 " << k('b') << " 1 m\n"
    << "S 1 " << k('a') << " 0\nS 1 " << k('b') << " 1\nF 5 1\n"
    // Request 2 computes C.
    << "R 10 2 1\nK 2 " << k('c') << " 0 m\nS 2 " << k('c') << " 0\nF 15 2\n"
    // Request 3 asks for A, B again (the daemon found A on the device, B on disk).
    << "R 20 3 2\nK 3 " << k('a') << " 0 d\nK 3 " << k('b') << " 1 k\nF 25 3\n";
  return t.str();
}

CacheOptions options(int64_t device_bytes) {
  CacheOptions o;
  o.device.budget_bytes = device_bytes;
  o.host.budget_bytes = 0;
  o.disk.dir = "unused";
  o.disk.budget_bytes = 1 << 20;
  return o;
}

}  // namespace

TEST_CASE("simulator: a two-page device evicts the tail first and restores from disk", "[cache_sim]") {
  std::istringstream in(trace());
  // Device of 2 pages. Request 1: A, B missed, sealed (device A B, disk A B
  // under write_through), released at one tick: B (deeper) is the victim
  // first. Request 2: C missed; sealing it evicts B. Request 3: A on the
  // device (hit), B on disk (hit) -> into the device, evicting C.
  SimResult r = simulate_trace(in, options(200)).value();
  CHECK(r.requests == 3);
  CHECK(r.pages_looked_up == 5);
  CHECK(r.tiers[0].hits == 1);
  CHECK(r.tiers[1].hits == 0);
  CHECK(r.tiers[2].hits == 1);
  CHECK(r.pages_missed == 3);
  CHECK(r.tiers[0].evictions == 2);  // B, then C
  CHECK(r.restored_tokens == 16);
  CHECK(r.prefilled_tokens == 48);
  CHECK(r.hit_rate(0) == Approx(20.0));
  CHECK(r.hit_rate(2) == Approx(20.0));
  // What the daemon saw, from the trace's `where` fields.
  CHECK(r.live_hits[0] == 1);
  CHECK(r.live_hits[2] == 1);
  CHECK(r.live_missed == 3);
}

TEST_CASE("simulator: a bigger device keeps everything; no disk tier loses B", "[cache_sim]") {
  {
    std::istringstream in(trace());
    SimResult r = simulate_trace(in, options(300)).value();  // 3 pages: nothing evicted
    CHECK(r.tiers[0].hits == 2);
    CHECK(r.tiers[2].hits == 0);
    CHECK(r.tiers[0].evictions == 0);
  }
  {
    std::istringstream in(trace());
    CacheOptions o = options(200);
    o.disk.dir.clear();
    o.disk.budget_bytes = 0;  // memory only: B is gone once evicted
    SimResult r = simulate_trace(in, o).value();
    CHECK(r.tiers[0].hits == 1);
    CHECK(r.tiers[2].hits == 0);
    CHECK(r.pages_missed == 4);
  }
  {
    // A host tier of one record (200 + 296 bytes): B, evicted from the
    // device when C is sealed, moves to the host; request 3 finds it there.
    std::istringstream in(trace());
    CacheOptions o = options(200);
    o.host.budget_bytes = 496;
    SimResult r = simulate_trace(in, o).value();
    CHECK(r.tiers[1].hits == 1);
    CHECK(r.tiers[2].hits == 0);
  }
}

TEST_CASE("simulator: malformed traces are refused with the line", "[cache_sim]") {
  for (const auto& [text, want] : std::vector<std::pair<std::string, std::string>>{
           {"hello\n", "line 1"},
           {"# larder page-access trace v1\nR 0 1 1\n", "line 2: events before the P line"},
           {"# larder page-access trace v1\nP 100 200 16\nK 1 xyz 0 m\n", "line 3: K needs"},
           {"# larder page-access trace v1\nP 100 200 16\nK 1 " + k('a') + " 0 q\n", "where must be"},
           {"# larder page-access trace v1\nP 100 200 16\nZ\n", "unknown event"},
       }) {
    std::istringstream in(text);
    auto r = simulate_trace(in, options(200));
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), Catch::Contains(want));
  }
  std::istringstream in(trace());
  CacheOptions o = options(200);
  o.device.policy = "fifo";
  auto r = simulate_trace(in, o);
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("cache.device.policy"));
}

// Seen in hostile testing: a daemon killed while writing its trace leaves a
// last line cut in two, and the whole trace was refused ("trace line 17:
// S needs req key depth").
TEST_CASE("simulator: a cut-off last line (no newline) is skipped; the same line whole is an error",
          "[cache_sim]") {
  const std::string cut = trace() + "S 4 " + k('a').substr(0, 9);
  std::istringstream in(cut);
  Result<SimResult> r = simulate_trace(in, options(200));
  REQUIRE(r.is_ok());
  CHECK(r->truncated_last_line);
  CHECK(r->requests == 3);  // as without the cut line
  CHECK(r->pages_looked_up == 5);
  CHECK_THAT(format_sim_result(*r, false), Catch::Contains("last line was cut off"));

  std::istringstream whole(cut + "\n");
  Result<SimResult> bad = simulate_trace(whole, options(200));
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad.status().message(), Catch::Contains("trace line 17"));

  std::istringstream clean(trace());
  CHECK_FALSE(simulate_trace(clean, options(200)).value().truncated_last_line);
}

// Seen by a new user: a trace recorded on a warm cache directory replayed
// to 0% hits under the recording config (live: 80%), because pages on disk
// at start were never sealed in the trace.
TEST_CASE("simulator: pages found on disk before the trace started are seeded there at first sight",
          "[cache_sim]") {
  std::ostringstream t;
  t << "# larder page-access trace v1\nP 100 200 16\n"
    // Request 1 finds D (depth 0) and E (depth 1) on disk, never sealed in
    // this trace, then misses F and seals it.
    << "R 0 1 3\nK 1 " << k('d') << " 0 k\nK 1 " << k('e') << " 1 k\nK 1 " << k('f') << " 2 m\n"
    << "S 1 " << k('f') << " 2\nF 5 1\n"
    // Request 2: the same three, all on the device now.
    << "R 10 2 3\nK 2 " << k('d') << " 0 d\nK 2 " << k('e') << " 1 d\nK 2 " << k('f') << " 2 d\nF 15 2\n";
  std::istringstream in(t.str());
  Result<SimResult> rr = simulate_trace(in, options(1 << 20));
  INFO(rr.status().to_string());
  REQUIRE(rr.is_ok());
  const SimResult& r = *rr;
  CHECK(r.pages_seeded == 2);
  CHECK(r.tiers[2].hits == 2);  // D and E from disk
  CHECK(r.tiers[0].hits == 3);  // request 2
  CHECK(r.pages_missed == 1);   // F once
  CHECK(r.hit_rate(0) == Approx(r.live_hit_rate(0)));
  CHECK(r.hit_rate(2) == Approx(r.live_hit_rate(2)));
  // A page missed live (m) and never sealed is not seeded: a miss both ways.
  std::istringstream miss("# larder page-access trace v1\nP 100 200 16\nR 0 1 1\nK 1 " + k('9') + " 0 m\nF 1 1\n");
  SimResult m = simulate_trace(miss, options(1 << 20)).value();
  CHECK(m.pages_seeded == 0);
  CHECK(m.pages_missed == 1);
}

TEST_CASE("simulator: a P line with sizes that would overflow the byte counts is refused", "[cache_sim]") {
  for (const char* p : {"P 9223372036854775807 200 16", "P 100 9223372036854775807 16", "P 100 200 2147483647"}) {
    INFO(p);
    std::istringstream in(std::string("# larder page-access trace v1\n") + p + "\nR 0 1 0\nF 1 1\n");
    Result<SimResult> r = simulate_trace(in, options(1 << 20));
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains("trace line 2"));
  }
}
