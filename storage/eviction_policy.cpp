// The eviction policies of storage/eviction_policy.h. One implementation
// serves all four: every policy ranks an entry by the tuple
//   (class, frequency, tick, -depth, key)
// and evicts the smallest rank first, with `class` (0 single-use, 1 shared)
// zero unless the policy has the priority rule and `frequency` zero unless
// it is lfu. So lru is (tick, -depth, key); lfu is (frequency, tick, -depth,
// key); the priority policies put their inner order inside two classes.
// The key at the end only makes the order total (reproducible); -depth
// makes equal ticks go tail first.
//
// Evictable entries (neither pinned nor held) sit in a std::set ordered by
// rank: insert/touch/hold/release/erase/pin are O(log n), victim() O(1).
#include "storage/eviction_policy.h"

#include <algorithm>
#include <compare>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace larder {
namespace {

struct PolicyKind {
  std::string_view name;
  bool by_frequency;  // lfu: rank by uses before recency
  bool by_priority;   // single-use entries before shared ones
};

constexpr PolicyKind kKinds[] = {
    {"lru", false, false},
    {"lfu", true, false},
    {"priority_lru", false, true},
    {"priority_lfu", true, true},
};

// Smallest first = evicted first.
struct Rank {
  uint32_t shared = 0;    // 1 when n_users >= 2 (priority policies only)
  uint64_t freq = 0;      // uses (lfu only)
  uint64_t tick = 0;      // the last use
  int64_t neg_depth = 0;  // -depth: the deeper page goes first
  uint64_t hi = 0, lo = 0;
  auto operator<=>(const Rank&) const = default;
};

struct Node {
  EvictionEntry entry;
  uint64_t tick = 0;
  uint64_t freq = 0;
  int32_t holds = 0;
  bool pinned = false;
  bool queued = false;  // in the evictable set
};

// The accounting of kEvictionPolicyEntryBytes (eviction_policy.h): a glibc
// malloc chunk is the request plus an 8-byte header, rounded up to 16.
constexpr int64_t malloc_chunk(size_t n) { return int64_t((n + 8 + 15) / 16 * 16); }
constexpr int64_t kHashNodeBytes = malloc_chunk(sizeof(void*) + sizeof(std::pair<const PageKey, Node>));
constexpr int64_t kBucketBytes = 2 * sizeof(void*);
constexpr int64_t kSetNodeBytes = malloc_chunk(4 * sizeof(void*) + sizeof(Rank));
static_assert(kHashNodeBytes + kBucketBytes + kSetNodeBytes <= kEvictionPolicyEntryBytes &&
                  kHashNodeBytes + kBucketBytes + kSetNodeBytes + 64 > kEvictionPolicyEntryBytes,
              "kEvictionPolicyEntryBytes no longer matches the node sizes: recompute it");

class RankedPolicy final : public EvictionPolicy {
 public:
  explicit RankedPolicy(const PolicyKind& kind) : kind_(kind) {}

  std::string_view name() const override { return kind_.name; }

  void insert(const PageKey& key, const EvictionEntry& entry, uint64_t tick) override {
    auto [it, added] = nodes_.try_emplace(key);
    Node& n = it->second;
    dequeue(key, n);
    bytes_ += entry.bytes - (added ? 0 : n.entry.bytes);
    const int32_t users = added ? entry.n_users : std::max(entry.n_users, n.entry.n_users);
    n.entry = entry;
    n.entry.n_users = users;
    n.tick = tick;
    n.freq = added ? 1 : n.freq + 1;
    if (added && pins_.count(key) != 0) {
      n.pinned = true;
      ++n_pinned_;
    }
    enqueue(key, n);
  }

  void touch(const PageKey& key, uint64_t tick) override {
    update(key, [tick](Node& n) {
      n.tick = tick;
      ++n.freq;
    });
  }

  void add_user(const PageKey& key) override {
    update(key, [](Node& n) { ++n.entry.n_users; });
  }

  void hold(const PageKey& key) override {
    update(key, [](Node& n) { ++n.holds; });
  }

  void release(const PageKey& key) override {
    update(key, [](Node& n) {
      if (n.holds > 0) --n.holds;
    });
  }

  void erase(const PageKey& key) override {
    auto it = nodes_.find(key);
    if (it == nodes_.end()) return;
    dequeue(key, it->second);
    bytes_ -= it->second.entry.bytes;
    if (it->second.pinned) --n_pinned_;
    nodes_.erase(it);
  }

  void pin(const PageKey& key) override {
    pins_.insert(key);
    update(key, [this](Node& n) {
      if (!n.pinned) ++n_pinned_;
      n.pinned = true;
    });
  }

  void unpin(const PageKey& key) override {
    pins_.erase(key);
    update(key, [this](Node& n) {
      if (n.pinned) --n_pinned_;
      n.pinned = false;
    });
  }

  bool is_pinned(const PageKey& key) const override { return pins_.count(key) != 0; }

  std::optional<PageKey> victim() const override {
    if (order_.empty()) return std::nullopt;
    return PageKey{order_.begin()->hi, order_.begin()->lo};
  }

  bool contains(const PageKey& key) const override { return nodes_.count(key) != 0; }
  size_t size() const override { return nodes_.size(); }
  int64_t bytes() const override { return bytes_; }
  size_t n_pinned() const override { return n_pinned_; }

  std::vector<EntryState> entries() const override {
    std::vector<EntryState> out;
    out.reserve(nodes_.size());
    for (const auto& [key, n] : nodes_) out.push_back(EntryState{key, n.entry, n.tick, n.holds});
    return out;
  }

  std::vector<PageKey> pinned_keys() const override { return {pins_.begin(), pins_.end()}; }

 private:
  Rank rank(const PageKey& key, const Node& n) const {
    Rank r;
    r.shared = kind_.by_priority && n.entry.n_users >= 2 ? 1 : 0;
    r.freq = kind_.by_frequency ? n.freq : 0;
    r.tick = n.tick;
    r.neg_depth = -int64_t(n.entry.depth);
    r.hi = key.hi;
    r.lo = key.lo;
    return r;
  }

  void dequeue(const PageKey& key, Node& n) {
    if (!n.queued) return;
    order_.erase(rank(key, n));
    n.queued = false;
  }

  void enqueue(const PageKey& key, Node& n) {
    if (n.queued || n.pinned || n.holds > 0) return;
    order_.insert(rank(key, n));
    n.queued = true;
  }

  // Changes a known entry's node with its rank kept in step; unknown keys
  // are ignored.
  template <typename F>
  void update(const PageKey& key, F&& change) {
    auto it = nodes_.find(key);
    if (it == nodes_.end()) return;
    dequeue(key, it->second);
    change(it->second);
    enqueue(key, it->second);
  }

  const PolicyKind kind_;
  std::unordered_map<PageKey, Node, PageKeyHash> nodes_;
  std::set<Rank> order_;  // the evictable entries, victim first
  std::unordered_set<PageKey, PageKeyHash> pins_;  // inserted or not
  int64_t bytes_ = 0;
  size_t n_pinned_ = 0;
};

}  // namespace

void move_entries(const EvictionPolicy& from, EvictionPolicy& to) {
  // Pins first: an inserted pinned key is then never queued as a victim.
  for (const PageKey& key : from.pinned_keys()) to.pin(key);
  for (const EvictionPolicy::EntryState& e : from.entries()) {
    to.insert(e.key, e.entry, e.tick);
    for (int32_t i = 0; i < e.holds; ++i) to.hold(e.key);
  }
}

Result<std::unique_ptr<EvictionPolicy>> make_eviction_policy(std::string_view name) {
  for (const PolicyKind& kind : kKinds) {
    if (kind.name == name) return std::unique_ptr<EvictionPolicy>(std::make_unique<RankedPolicy>(kind));
  }
  return Status::invalid_argument("unknown eviction policy \"" + std::string(name) +
                                  "\" (known: " + std::string(eviction_policy_names()) + ")");
}

std::string_view eviction_policy_names() { return "lru, lfu, priority_lru, priority_lfu"; }

}  // namespace larder
