// EvictionPolicy (storage/eviction_policy.h): eviction orders worked out by
// hand for each policy, pins, holds, unknown keys, accounting; and a
// randomized cross-check of every policy against a naive vector-scan model.
#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "storage/eviction_policy.h"

using namespace larder;

namespace {

// Keys named by one letter; the key order (by letter) is deliberately the
// opposite of what some tests expect, so a test cannot pass on key order.
PageKey k(char c) { return PageKey{uint64_t(c), 0}; }

std::unique_ptr<EvictionPolicy> make(std::string_view name) {
  auto r = make_eviction_policy(name);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

EvictionEntry entry(int64_t bytes = 100, int32_t depth = 0, int32_t n_users = 1) {
  return EvictionEntry{bytes, depth, n_users};
}

// Evicts everything evictable, victim by victim: the letters in order.
std::string drain(EvictionPolicy& p) {
  std::string out;
  while (std::optional<PageKey> v = p.victim()) {
    out.push_back(char(v->hi));
    p.erase(*v);
  }
  return out;
}

}  // namespace

TEST_CASE("make_eviction_policy knows four names", "[storage][policy]") {
  for (std::string_view n : {"lru", "lfu", "priority_lru", "priority_lfu"}) CHECK(make(n)->name() == n);
  auto bad = make_eviction_policy("mru");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad.status().message(), Catch::Matchers::Contains("mru") &&
                                         Catch::Matchers::Contains("lru, lfu, priority_lru, priority_lfu"));
  CHECK(make_eviction_policy("").status().code() == StatusCode::kInvalidArgument);
  CHECK(make_eviction_policy("LRU").status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("lru: least recently used first, ties tail first", "[storage][policy]") {
  auto p = make("lru");
  CHECK_FALSE(p->victim().has_value());
  SECTION("recency") {
    p->insert(k('a'), entry(), 1);
    p->insert(k('b'), entry(), 2);
    p->insert(k('c'), entry(), 3);
    p->touch(k('a'), 4);
    // inserted a@1 b@2 c@3, touch a@4 -> b c a
    CHECK(drain(*p) == "bca");
  }
  SECTION("re-insert is a use") {
    p->insert(k('a'), entry(), 1);
    p->insert(k('b'), entry(), 2);
    p->insert(k('a'), entry(), 3);
    // a@1 b@2, a again @3 -> b a
    CHECK(drain(*p) == "ba");
  }
  SECTION("same tick: deeper first") {
    // One finished sequence's pages made evictable at tick 1: a (page 0),
    // b (page 1), c (page 2); then x@2 at depth 9.
    p->insert(k('a'), entry(100, 0), 1);
    p->insert(k('b'), entry(100, 1), 1);
    p->insert(k('c'), entry(100, 2), 1);
    p->insert(k('x'), entry(100, 9), 2);
    // tick 1: c (2) b (1) a (0); then x (tick 2, its depth does not matter)
    CHECK(drain(*p) == "cbax");
  }
  SECTION("lfu counts do not matter") {
    p->insert(k('a'), entry(), 1);
    for (uint64_t t = 2; t < 6; ++t) p->touch(k('a'), t);  // a: 5 uses, last @5
    p->insert(k('b'), entry(), 6);
    // a@5 b@6 -> a b
    CHECK(drain(*p) == "ab");
  }
}

TEST_CASE("lfu: least frequently used first, ties by recency then depth", "[storage][policy]") {
  auto p = make("lfu");
  SECTION("frequency, then recency") {
    p->insert(k('a'), entry(), 1);
    p->insert(k('b'), entry(), 2);
    p->insert(k('c'), entry(), 3);
    p->touch(k('a'), 4);
    p->touch(k('a'), 5);
    p->touch(k('b'), 6);
    // uses: a 3 (last @5), b 2 (@6), c 1 (@3) -> c b a
    CHECK(p->victim() == k('c'));
    p->touch(k('c'), 7);
    p->touch(k('c'), 8);
    // c now 3 uses (last @8): b(2) a(3,@5) c(3,@8) -> b a c
    CHECK(drain(*p) == "bac");
  }
  SECTION("same frequency and tick: deeper first") {
    p->insert(k('x'), entry(100, 0), 1);
    p->insert(k('y'), entry(100, 2), 1);
    p->insert(k('z'), entry(100, 5), 2);
    // all 1 use; tick 1: y (depth 2) x (0); then z @2 -> y x z
    CHECK(drain(*p) == "yxz");
  }
  SECTION("re-insert counts as a use") {
    p->insert(k('a'), entry(), 1);
    p->insert(k('b'), entry(), 2);
    p->insert(k('a'), entry(), 3);
    p->insert(k('c'), entry(), 4);
    // a 2 uses; b 1 (@2), c 1 (@4) -> b c a
    CHECK(drain(*p) == "bca");
  }
  SECTION("erase forgets the history") {
    p->insert(k('a'), entry(), 1);
    p->touch(k('a'), 2);
    p->touch(k('a'), 3);
    p->insert(k('b'), entry(), 4);
    p->erase(k('a'));
    p->insert(k('a'), entry(), 5);  // 1 use again
    p->touch(k('b'), 6);
    // a 1 use @5, b 2 uses -> a b
    CHECK(drain(*p) == "ab");
  }
}

TEST_CASE("priority_lru: single-use before shared, lru inside each class", "[storage][policy]") {
  auto p = make("priority_lru");
  SECTION("classes") {
    p->insert(k('a'), entry(100, 0, 1), 1);
    p->insert(k('b'), entry(100, 0, 2), 2);
    p->insert(k('c'), entry(100, 0, 1), 3);
    p->insert(k('d'), entry(100, 0, 3), 4);
    // single: a@1 c@3; shared: b@2 d@4 -> a c b d
    CHECK(drain(*p) == "acbd");
  }
  SECTION("add_user moves an entry to the shared class") {
    p->insert(k('a'), entry(), 1);
    p->insert(k('b'), entry(), 2);
    p->insert(k('c'), entry(), 3);
    CHECK(p->victim() == k('a'));
    p->add_user(k('a'));  // a: 2 users, shared
    // single b@2 c@3, shared a -> b c a
    CHECK(p->victim() == k('b'));
    p->touch(k('b'), 4);
    // single c@3 b@4, shared a@1 -> c b a
    CHECK(drain(*p) == "cba");
  }
  SECTION("re-insert sets n_users") {
    p->insert(k('a'), entry(100, 0, 2), 1);
    p->insert(k('b'), entry(100, 0, 1), 2);
    p->insert(k('a'), entry(100, 0, 1), 3);  // a single-use again, used @3
    // single b@2 a@3 -> b a
    CHECK(drain(*p) == "ba");
  }
  SECTION("same tick inside a class: deeper first") {
    p->insert(k('a'), entry(100, 0, 2), 1);
    p->insert(k('b'), entry(100, 1, 2), 1);
    p->insert(k('c'), entry(100, 0, 1), 1);
    p->insert(k('d'), entry(100, 1, 1), 1);
    // single: d (depth 1) c (0); shared: b (1) a (0) -> d c b a
    CHECK(drain(*p) == "dcba");
  }
}

TEST_CASE("priority_lfu: single-use before shared, lfu inside each class", "[storage][policy]") {
  auto p = make("priority_lfu");
  p->insert(k('a'), entry(100, 0, 1), 1);
  p->insert(k('b'), entry(100, 0, 2), 2);
  p->insert(k('c'), entry(100, 0, 1), 3);
  p->insert(k('d'), entry(100, 0, 2), 4);
  p->touch(k('c'), 5);
  p->touch(k('c'), 6);
  p->touch(k('b'), 7);
  // single: a (1 use @1), c (3 @6); shared: d (1 @4), b (2 @7) -> a c d b
  CHECK(p->victim() == k('a'));
  p->add_user(k('c'));
  // c shared now: single a; shared d(1) b(2) c(3) -> a d b c
  CHECK(drain(*p) == "adbc");
}

TEST_CASE("pins: never victims, remembered before insert, kept across erase", "[storage][policy]") {
  for (std::string_view name : {"lru", "lfu", "priority_lru", "priority_lfu"}) {
    INFO(name);
    auto p = make(name);
    p->insert(k('a'), entry(), 1);
    p->insert(k('b'), entry(), 2);
    p->pin(k('a'));
    CHECK(p->is_pinned(k('a')));
    CHECK(p->n_pinned() == 1);
    CHECK(p->victim() == k('b'));  // a (oldest) is pinned
    p->erase(k('b'));
    CHECK_FALSE(p->victim().has_value());  // only the pinned a is left
    CHECK(p->size() == 1);
    p->unpin(k('a'));
    CHECK_FALSE(p->is_pinned(k('a')));
    CHECK(p->n_pinned() == 0);
    CHECK(p->victim() == k('a'));
    p->unpin(k('a'));  // not pinned: no-op
    CHECK(p->victim() == k('a'));

    p->pin(k('z'));  // not an entry yet
    CHECK(p->is_pinned(k('z')));
    CHECK(p->n_pinned() == 0);  // pins of absent keys do not count
    p->insert(k('z'), entry(), 3);
    p->insert(k('y'), entry(), 4);
    CHECK(p->n_pinned() == 1);
    // a@1 y@4, z@3 pinned -> a y
    CHECK(drain(*p) == "ay");
    CHECK(p->contains(k('z')));
    p->erase(k('z'));  // erased: the pin stays for a later insert
    CHECK(p->n_pinned() == 0);
    CHECK(p->is_pinned(k('z')));
    p->insert(k('z'), entry(), 5);
    CHECK_FALSE(p->victim().has_value());
    p->pin(k('z'));  // twice: still one pinned entry
    CHECK(p->n_pinned() == 1);
  }
}

TEST_CASE("holds: counted, no victim while held, recency kept", "[storage][policy]") {
  for (std::string_view name : {"lru", "lfu", "priority_lru", "priority_lfu"}) {
    INFO(name);
    {
      auto p = make(name);
      p->insert(k('a'), entry(), 1);
      p->insert(k('b'), entry(), 2);
      p->hold(k('a'));
      p->hold(k('a'));
      CHECK(p->victim() == k('b'));
      p->erase(k('b'));
      CHECK_FALSE(p->victim().has_value());
      p->release(k('a'));  // one of two holds left
      CHECK_FALSE(p->victim().has_value());
      p->release(k('a'));
      CHECK(p->victim() == k('a'));
      p->release(k('a'));  // not held: no-op, holds do not go negative
      p->hold(k('a'));
      CHECK_FALSE(p->victim().has_value());
    }
    {
      auto p = make(name);
      p->insert(k('a'), entry(), 1);
      p->insert(k('b'), entry(), 2);
      p->insert(k('c'), entry(), 3);
      p->hold(k('a'));
      p->release(k('a'));
      p->hold(k('b'));
      p->touch(k('b'), 4);  // a hit while held
      p->release(k('b'));
      // a@1 c@3 b@4 (lfu: a 1, c 1, b 2 uses) -> a c b in every policy
      CHECK(drain(*p) == "acb");
    }
    {
      auto p = make(name);
      p->insert(k('a'), entry(), 1);
      p->hold(k('a'));
      p->pin(k('a'));
      p->release(k('a'));
      CHECK_FALSE(p->victim().has_value());  // still pinned
      p->hold(k('a'));
      p->unpin(k('a'));
      CHECK_FALSE(p->victim().has_value());  // still held
      p->release(k('a'));
      CHECK(p->victim() == k('a'));
    }
  }
}

TEST_CASE("unknown keys are ignored", "[storage][policy]") {
  auto p = make("priority_lfu");
  p->touch(k('q'), 1);
  p->add_user(k('q'));
  p->hold(k('q'));
  p->release(k('q'));
  p->erase(k('q'));
  CHECK(p->size() == 0);
  CHECK(p->bytes() == 0);
  CHECK_FALSE(p->contains(k('q')));
  CHECK_FALSE(p->victim().has_value());
  // The hold and the user above left no trace: q is evictable and
  // single-use (before the single-use r used later), 1 use.
  p->insert(k('q'), entry(), 2);
  p->insert(k('r'), entry(), 3);
  CHECK(drain(*p) == "qr");
}

TEST_CASE("size() and bytes() sum every entry, pinned and held ones too", "[storage][policy]") {
  auto p = make("lru");
  p->insert(k('a'), entry(100), 1);
  p->insert(k('b'), entry(250), 2);
  p->insert(k('c'), entry(4096), 3);
  CHECK(p->size() == 3);
  CHECK(p->bytes() == 100 + 250 + 4096);  // 4446
  p->insert(k('b'), entry(50), 4);          // replaces b's 250
  CHECK(p->size() == 3);
  CHECK(p->bytes() == 100 + 50 + 4096);     // 4246
  p->erase(k('a'));
  CHECK(p->bytes() == 50 + 4096);           // 4146
  p->pin(k('c'));
  p->hold(k('b'));
  CHECK(p->size() == 2);
  CHECK(p->bytes() == 4146);
  CHECK(p->contains(k('b')));
  CHECK_FALSE(p->contains(k('a')));
  p->erase(k('b'));
  p->erase(k('c'));
  CHECK(p->size() == 0);
  CHECK(p->bytes() == 0);
}

// ---- randomized cross-check against a naive model ------------------------------

namespace {

// Independent reference: a flat vector, every question answered by a scan.
struct RefModel {
  struct E {
    PageKey key;
    int64_t bytes;
    int32_t depth, users;
    uint64_t tick, uses;
    int holds;
  };
  bool lfu = false, prio = false;
  std::vector<E> entries;
  std::vector<PageKey> pins;

  E* find(const PageKey& key) {
    for (E& e : entries) {
      if (e.key == key) return &e;
    }
    return nullptr;
  }
  bool pinned(const PageKey& key) const { return std::find(pins.begin(), pins.end(), key) != pins.end(); }

  // 0: x and y rank the same; < 0: x goes first; > 0: y goes first.
  int compare(const E& x, const E& y) const {
    if (prio) {
      const bool xs = x.users >= 2, ys = y.users >= 2;
      if (xs != ys) return xs ? 1 : -1;
    }
    if (lfu && x.uses != y.uses) return x.uses < y.uses ? -1 : 1;
    if (x.tick != y.tick) return x.tick < y.tick ? -1 : 1;
    if (x.depth != y.depth) return x.depth > y.depth ? -1 : 1;
    return 0;
  }

  // Every key that may be the next victim (all rank equally first).
  std::vector<PageKey> victims() const {
    std::vector<const E*> cand;
    for (const E& e : entries) {
      if (e.holds > 0 || pinned(e.key)) continue;
      if (cand.empty() || compare(e, *cand[0]) < 0) {
        cand.assign(1, &e);
      } else if (compare(e, *cand[0]) == 0) {
        cand.push_back(&e);
      }
    }
    std::vector<PageKey> out;
    for (const E* e : cand) out.push_back(e->key);
    return out;
  }
};

void cross_check(std::string_view name, bool lfu, bool prio, uint32_t seed) {
  auto p = make(name);
  RefModel ref;
  ref.lfu = lfu;
  ref.prio = prio;
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return int(rng() % uint32_t(n)); };
  uint64_t tick = 1;
  constexpr int kKeys = 12;
  for (int step = 0; step < 20000; ++step) {
    const PageKey key{uint64_t(1000 + pick(kKeys)), uint64_t(pick(2))};  // 24 keys
    if (pick(3) != 0) ++tick;  // a third of the ops share the previous tick
    RefModel::E* e = ref.find(key);
    switch (pick(10)) {
      case 0:
      case 1: {
        const EvictionEntry in{int64_t(1 + pick(5000)), int32_t(pick(4)), int32_t(1 + pick(3))};
        p->insert(key, in, tick);
        if (e) {
          e->bytes = in.bytes;
          e->depth = in.depth;
          e->users = std::max(e->users, in.n_users);  // users are kept
          e->tick = tick;
          ++e->uses;
        } else {
          ref.entries.push_back({key, in.bytes, in.depth, in.n_users, tick, 1, 0});
        }
        break;
      }
      case 2:
      case 3:
        p->touch(key, tick);
        if (e) {
          e->tick = tick;
          ++e->uses;
        }
        break;
      case 4:
        p->add_user(key);
        if (e) ++e->users;
        break;
      case 5:
        p->hold(key);
        if (e) ++e->holds;
        break;
      case 6:
        p->release(key);
        if (e && e->holds > 0) --e->holds;
        break;
      case 7:
        if (pick(2) == 0) {
          p->pin(key);
          if (!ref.pinned(key)) ref.pins.push_back(key);
        } else {
          p->unpin(key);
          ref.pins.erase(std::remove(ref.pins.begin(), ref.pins.end(), key), ref.pins.end());
        }
        break;
      case 8:
        p->erase(key);
        if (e) ref.entries.erase(ref.entries.begin() + (e - ref.entries.data()));
        break;
      case 9:  // evict the victim, as a tier over budget does
        if (std::optional<PageKey> v = p->victim()) {
          p->erase(*v);
          ref.entries.erase(ref.entries.begin() + (ref.find(*v) - ref.entries.data()));
        }
        break;
    }
    // The policy's victim is one of the model's equally ranked first ones.
    const std::vector<PageKey> expect = ref.victims();
    const std::optional<PageKey> got = p->victim();
    INFO(name << " step " << step);
    REQUIRE(got.has_value() == !expect.empty());
    if (got) REQUIRE(std::find(expect.begin(), expect.end(), *got) != expect.end());
    REQUIRE(p->size() == ref.entries.size());
    int64_t bytes = 0;
    size_t n_pinned = 0;
    for (const RefModel::E& x : ref.entries) {
      bytes += x.bytes;
      if (ref.pinned(x.key)) ++n_pinned;
    }
    REQUIRE(p->bytes() == bytes);
    REQUIRE(p->n_pinned() == n_pinned);
    REQUIRE(p->contains(key) == (ref.find(key) != nullptr));
    REQUIRE(p->is_pinned(key) == ref.pinned(key));
  }
}

}  // namespace

TEST_CASE("every policy agrees with a naive model over random operations", "[storage][policy]") {
  cross_check("lru", false, false, 12345);
  cross_check("lfu", true, false, 777);
  cross_check("priority_lru", false, true, 4242);
  cross_check("priority_lfu", true, true, 9001);
}
