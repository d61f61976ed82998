#include "storage/cache_sim.h"

#include <charconv>
#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "storage/eviction_policy.h"
#include "storage/memory_store.h"

namespace larder {

double SimResult::hit_rate(size_t tier) const {
  return pages_looked_up == 0 ? 0 : 100.0 * double(tiers[tier].hits) / double(pages_looked_up);
}

double SimResult::live_hit_rate(size_t tier) const {
  return pages_looked_up == 0 ? 0 : 100.0 * double(live_hits[tier]) / double(pages_looked_up);
}

namespace {

// The disk tier's ttl sweep runs at most this often (RocksDbStoreOptions
// ttl_sweep_interval_ms's default).
constexpr int64_t kTtlSweepMs = 60000;

// One tier: which pages it holds, within a byte budget, in its policy's
// order. Each entry costs entry_bytes.
class SimTier {
 public:
  SimTier(int64_t budget, int64_t entry_bytes, std::unique_ptr<EvictionPolicy> policy)
      : budget_(budget), entry_bytes_(entry_bytes), policy_(std::move(policy)) {}

  bool enabled() const { return budget_ >= entry_bytes_ && entry_bytes_ > 0; }
  bool has(const PageKey& k) const { return last_use_.count(k) != 0; }
  void touch(const PageKey& k, uint64_t tick, int64_t t) {
    if (!has(k)) return;
    policy_->touch(k, tick);
    last_use_[k] = t;
  }
  void hold(const PageKey& k) { policy_->hold(k); }
  void release(const PageKey& k, uint64_t tick) {
    policy_->release(k);
    policy_->touch(k, tick);
  }
  void add_user(const PageKey& k) { policy_->add_user(k); }
  // Inserts k; the keys evicted to make room come back in `evicted`.
  // Returns false when k could not be placed (everything else held).
  bool insert(const PageKey& k, int depth, uint64_t tick, int64_t t, std::vector<PageKey>& evicted) {
    if (!enabled()) return false;
    if (has(k)) {
      touch(k, tick, t);
      return true;
    }
    while (int64_t(last_use_.size() + 1) * entry_bytes_ > budget_) {
      std::optional<PageKey> v = policy_->victim();
      if (!v) return false;
      erase(*v);
      evicted.push_back(*v);
    }
    EvictionEntry e;
    e.bytes = entry_bytes_;
    e.depth = depth;
    policy_->insert(k, e, tick);
    last_use_[k] = t;
    ever_.insert(k);
    return true;
  }
  // Whether k was ever placed in this tier during the replay.
  bool ever(const PageKey& k) const { return ever_.count(k) != 0; }
  void erase(const PageKey& k) {
    policy_->erase(k);
    last_use_.erase(k);
    ++evictions_;
  }
  // Erases entries unused since before t - ttl_ms.
  void sweep(int64_t t, int64_t ttl_ms) {
    std::vector<PageKey> old;
    for (const auto& [k, last] : last_use_) {
      if (last < t - ttl_ms) old.push_back(k);
    }
    for (const PageKey& k : old) erase(k);
  }
  int64_t evictions() const { return evictions_; }

 private:
  int64_t budget_, entry_bytes_;
  std::unique_ptr<EvictionPolicy> policy_;
  std::unordered_map<PageKey, int64_t, PageKeyHash> last_use_;
  std::unordered_set<PageKey, PageKeyHash> ever_;
  int64_t evictions_ = 0;
};

bool parse_key(const std::string& hex, PageKey& out) {
  if (hex.size() != 32) return false;
  auto part = [&](size_t at, uint64_t& v) {
    auto [p, ec] = std::from_chars(hex.data() + at, hex.data() + at + 16, v, 16);
    return ec == std::errc() && p == hex.data() + at + 16;
  };
  return part(0, out.hi) && part(16, out.lo);
}

Status bad_line(int64_t n, const std::string& why) {
  return Status::invalid_argument("trace line " + std::to_string(n) + ": " + why);
}

}  // namespace

Result<SimResult> simulate_trace(std::istream& in, const CacheOptions& options) {
  SimResult r;
  r.tiers[0].name = "device";
  r.tiers[1].name = "host";
  r.tiers[2].name = "disk";
  std::string line;
  int64_t n = 0;
  if (!std::getline(in, line) || line.rfind("# larder page-access trace v1", 0) != 0) {
    return bad_line(1, "not a larder page-access trace (v1): the first line must be \"# larder page-access trace v1\"");
  }
  ++n;
  int64_t page_bytes = 0, record_bytes = 0;
  std::unique_ptr<SimTier> device, host, disk;
  auto policy = [&](const std::string& tier, const std::string& name) -> Result<std::unique_ptr<EvictionPolicy>> {
    Result<std::unique_ptr<EvictionPolicy>> p = make_eviction_policy(name);
    if (!p.is_ok()) return Status::invalid_argument("cache." + tier + ".policy: " + p.status().message());
    return p;
  };
  const bool write_through = options.write_through;
  const int64_t ttl_ms = options.disk.ttl_seconds * 1000;
  uint64_t tick = 0;
  int64_t now = 0, last_sweep = 0;
  // Pages each running request holds on the device.
  std::unordered_map<std::string, std::vector<PageKey>> held;
  std::unordered_set<std::string> missing;  // requests past their first miss

  // Moves pages the device evicted down the chain; pages the host evicts
  // under write_back go to disk.
  std::vector<PageKey> evicted, evicted_host, evicted_disk;
  auto place_on_disk = [&](const PageKey& k) {
    if (disk && !disk->has(k)) disk->insert(k, 0, ++tick, now, evicted_disk);
  };
  auto demote = [&] {
    for (const PageKey& k : evicted) {
      if (host && host->enabled()) {
        evicted_host.clear();
        host->insert(k, 0, ++tick, now, evicted_host);
        if (!write_through) {
          for (const PageKey& h : evicted_host) place_on_disk(h);
        }
      } else if (!write_through) {
        place_on_disk(k);
      }
    }
    evicted.clear();
  };

  // A bad last line with no newline after it is what a writer killed
  // mid-line (kill -9, a full disk) leaves: it is skipped, not an error.
#define LINE_ERROR(why)                  \
  do {                                   \
    if (in.eof()) {                      \
      r.truncated_last_line = true;      \
      goto replayed;                     \
    }                                    \
    return bad_line(n, why);             \
  } while (0)
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::string op;
    f >> op;
    if (op == "P") {
      int page_size = 0;
      // Bounded so that the byte counts below cannot overflow (a page of a
      // real model is a few MiB).
      constexpr int64_t kMaxBytes = int64_t(1) << 32;
      if (!(f >> page_bytes >> record_bytes >> page_size) || page_bytes <= 0 || record_bytes <= 0 || page_size <= 0 ||
          page_bytes > kMaxBytes || record_bytes > kMaxBytes || page_size > (1 << 20)) {
        LINE_ERROR("P needs page_bytes record_bytes page_size > 0 (bytes up to 4 GiB, page_size up to 2^20)");
      }
      r.page_size = page_size;
      LARDER_ASSIGN_OR_RETURN(auto pd, policy("device", options.device.policy));
      LARDER_ASSIGN_OR_RETURN(auto ph, policy("host", options.host.policy));
      LARDER_ASSIGN_OR_RETURN(auto pk, policy("disk", options.disk.policy));
      device = std::make_unique<SimTier>(options.device.budget_bytes, page_bytes, std::move(pd));
      host = std::make_unique<SimTier>(options.host.budget_bytes, record_bytes + kHostEntryOverheadBytes, std::move(ph));
      const bool has_disk = !options.disk.dir.empty() || options.disk.budget_bytes > 0;
      disk = std::make_unique<SimTier>(has_disk ? options.disk.budget_bytes : 0, 16 + record_bytes, std::move(pk));
      continue;
    }
    if (!device) LINE_ERROR("events before the P line");
    if (op == "R") {
      std::string req;
      int64_t t = 0, keys = 0;
      if (!(f >> t >> req >> keys)) LINE_ERROR("R needs t_ms req n");
      now = t;
      ++r.requests;
      missing.erase(req);
      if (ttl_ms > 0 && now - last_sweep >= kTtlSweepMs) {
        disk->sweep(now, ttl_ms);
        last_sweep = now;
      }
    } else if (op == "K") {
      std::string req, hex, where;
      int depth = 0;
      PageKey k;
      if (!(f >> req >> hex >> depth >> where) || !parse_key(hex, k) || where.size() != 1) {
        LINE_ERROR("K needs req key depth where");
      }
      ++r.pages_looked_up;
      switch (where[0]) {
        case 'd': ++r.live_hits[0]; break;
        case 'h': ++r.live_hits[1]; break;
        case 'k': ++r.live_hits[2]; break;
        case 'm': ++r.live_missed; break;
        default: LINE_ERROR("where must be d, h, k or m");
      }
      if (missing.count(req)) {
        ++r.pages_missed;
        continue;
      }
      int tier = -1;
      if (device->has(k)) tier = 0;
      else if (host->has(k)) tier = 1;
      else if (disk->has(k)) tier = 2;
      // The daemon found a page the trace never sealed: it was in that tier
      // before the trace started (a warm cache directory). Seed it there,
      // as if it had been from the start.
      if (tier < 0 && (where[0] == 'h' || where[0] == 'k') && !device->ever(k) && !host->ever(k) && !disk->ever(k)) {
        SimTier& held_before = where[0] == 'h' ? *host : *disk;
        std::vector<PageKey> dropped;
        if (held_before.insert(k, depth, ++tick, now, dropped)) tier = where[0] == 'h' ? 1 : 2;
        r.pages_seeded += tier > 0 ? 1 : 0;
      }
      if (tier < 0) {
        missing.insert(req);
        ++r.pages_missed;
        continue;
      }
      ++r.tiers[size_t(tier)].hits;
      ++tick;
      if (tier == 0) {
        device->hold(k);
        device->add_user(k);
      } else {
        SimTier& below = tier == 1 ? *host : *disk;
        below.touch(k, tick, now);
        below.add_user(k);  // as the tiers count a read
        if (!device->insert(k, depth, tick, now, evicted)) continue;
        device->hold(k);
        demote();
      }
      held[req].push_back(k);
    } else if (op == "S") {
      std::string req, hex;
      int depth = 0;
      PageKey k;
      if (!(f >> req >> hex >> depth) || !parse_key(hex, k)) LINE_ERROR("S needs req key depth");
      ++tick;
      if (device->has(k)) continue;  // sealed by another request first: this copy stays private
      if (device->insert(k, depth, tick, now, evicted)) {
        device->hold(k);
        held[req].push_back(k);
      }
      demote();
      if (write_through) place_on_disk(k);
    } else if (op == "F") {
      std::string req;
      int64_t t = 0;
      if (!(f >> t >> req)) LINE_ERROR("F needs t_ms req");
      now = t;
      const uint64_t at = ++tick;
      auto it = held.find(req);
      if (it != held.end()) {
        for (auto k = it->second.rbegin(); k != it->second.rend(); ++k) device->release(*k, at);
        held.erase(it);
      }
      missing.erase(req);
    } else {
      LINE_ERROR("unknown event '" + op + "'");
    }
  }
#undef LINE_ERROR
replayed:
  r.tiers[0].evictions = device ? device->evictions() : 0;
  r.tiers[1].evictions = host ? host->evictions() : 0;
  r.tiers[2].evictions = disk ? disk->evictions() : 0;
  r.restored_tokens = (r.tiers[1].hits + r.tiers[2].hits) * r.page_size;
  r.prefilled_tokens = r.pages_missed * r.page_size;
  return r;
}

std::string format_sim_result(const SimResult& r, bool with_live) {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "requests %lld, pages looked up %lld (%d tokens each)\n",
                static_cast<long long>(r.requests), static_cast<long long>(r.pages_looked_up), r.page_size);
  out += buf;
  out += with_live ? "tier      hits    hit rate   live rate   evictions\n" : "tier      hits    hit rate   evictions\n";
  for (size_t i = 0; i < r.tiers.size(); ++i) {
    if (with_live) {
      std::snprintf(buf, sizeof buf, "%-8s %6lld   %7.1f%%    %7.1f%%   %9lld\n", r.tiers[i].name.c_str(),
                    static_cast<long long>(r.tiers[i].hits), r.hit_rate(i), r.live_hit_rate(i),
                    static_cast<long long>(r.tiers[i].evictions));
    } else {
      std::snprintf(buf, sizeof buf, "%-8s %6lld   %7.1f%%   %9lld\n", r.tiers[i].name.c_str(),
                    static_cast<long long>(r.tiers[i].hits), r.hit_rate(i),
                    static_cast<long long>(r.tiers[i].evictions));
    }
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "missed   %6lld   %7.1f%%\nrestored tokens %lld, prefilled tokens %lld\n",
                static_cast<long long>(r.pages_missed),
                r.pages_looked_up == 0 ? 0.0 : 100.0 * double(r.pages_missed) / double(r.pages_looked_up),
                static_cast<long long>(r.restored_tokens), static_cast<long long>(r.prefilled_tokens));
  out += buf;
  if (r.pages_seeded > 0) {
    out += "note: " + std::to_string(r.pages_seeded) +
           " pages were in host or disk before the trace started; each was placed there at its first lookup\n";
  }
  if (r.truncated_last_line) out += "note: the trace's last line was cut off (its writer stopped mid-line) and was skipped\n";
  return out;
}

}  // namespace larder
