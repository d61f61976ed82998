// Engine::reconfigure: the cache options that change without a restart
// (POST /admin/reload, SIGHUP). Everything is checked before anything is
// applied; the device tier's part runs on the engine thread, the tiers
// below on the caller's thread (they are thread-safe, and their I/O must
// not hold up the engine thread).
#include <filesystem>
#include <limits>

#include <spdlog/spdlog.h>

#include "engine/engine_impl.h"

namespace larder {

namespace {

std::string restart_needed(const std::string& key, const std::string& was, const std::string& now) {
  return key + " changed (" + was + " -> " + now + "): this needs a restart";
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// Whether two spellings name one directory ("/c/", "/x/../c", a link to
// it): found in hostile testing, a reload with the cache dir spelled
// otherwise was refused as a change.
bool same_dir(const std::string& a, const std::string& b) {
  if (a == b) return true;
  if (a.empty() || b.empty()) return false;
  std::error_code ec;
  if (std::filesystem::equivalent(a, b, ec) && !ec) return true;
  const std::filesystem::path ca = std::filesystem::weakly_canonical(a, ec);
  if (ec) return false;
  const std::filesystem::path cb = std::filesystem::weakly_canonical(b, ec);
  return !ec && ca == cb;
}

// The keys of `next` that differ from `cur` and cannot change while the
// engine runs, each with its old and new value.
std::vector<std::string> restart_keys(const CacheOptions& cur, const CacheOptions& next) {
  std::vector<std::string> out;
  if (cur.page_size != next.page_size) {
    out.push_back(restart_needed("cache.page_size", std::to_string(cur.page_size), std::to_string(next.page_size)));
  }
  if (cur.kv_dtype != next.kv_dtype) {
    out.push_back(restart_needed("cache.kv_dtype", quoted(cur.kv_dtype), quoted(next.kv_dtype)));
  }
  if (cur.salt != next.salt) out.push_back("cache.salt changed: this needs a restart");
  if (cur.n_storage_threads != next.n_storage_threads) {
    out.push_back(restart_needed("cache.storage_threads", std::to_string(cur.n_storage_threads),
                                 std::to_string(next.n_storage_threads)));
  }
  if (cur.write_through != next.write_through) {
    const auto name = [](bool wt) { return quoted(wt ? "write_through" : "write_back"); };
    out.push_back(restart_needed("cache.write_policy", name(cur.write_through), name(next.write_through)));
  }
  if (!same_dir(cur.disk.dir, next.disk.dir)) {
    out.push_back(restart_needed("cache.disk.dir", quoted(cur.disk.dir), quoted(next.disk.dir)));
  }
  if (cur.disk.min_free_bytes != next.disk.min_free_bytes) {
    out.push_back(restart_needed("cache.disk.min_free", std::to_string(cur.disk.min_free_bytes),
                                 std::to_string(next.disk.min_free_bytes)));
  }
  if (cur.disk.sync != next.disk.sync) {
    out.push_back(restart_needed("cache.disk.sync", cur.disk.sync ? "true" : "false", next.disk.sync ? "true" : "false"));
  }
  if (cur.disk.on_error != next.disk.on_error) {
    const auto name = [](DiskOnError e) { return quoted(e == DiskOnError::kFail ? "fail" : "memory_only"); };
    out.push_back(restart_needed("cache.disk.on_error", name(cur.disk.on_error), name(next.disk.on_error)));
  }
  return out;
}

PageTier* tier_named(TierChain* chain, std::string_view name) {
  for (size_t i = 0; chain != nullptr && i < chain->n_tiers(); ++i) {
    if (chain->tier(i).name() == name) return &chain->tier(i);
  }
  return nullptr;
}

}  // namespace

Status Engine::reconfigure(const CacheOptions& next) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> admin(m.admin_mu);
  CacheOptions cur;
  {
    std::lock_guard<std::mutex> lk(m.live_mu);
    cur = m.live_cache;
  }
  // ---- check everything -------------------------------------------------------
  const std::vector<std::string> restart = restart_keys(cur, next);
  if (!restart.empty()) {
    std::string msg;
    for (const std::string& r : restart) msg += (msg.empty() ? "" : "; ") + r;
    return Status::invalid_argument(msg + " (nothing was applied)");
  }
  PageTier* host = tier_named(m.tiers.get(), "host");
  PageTier* disk = tier_named(m.tiers.get(), "disk");
  if (host == nullptr && next.host.budget_bytes > 0 && cur.host.budget_bytes != next.host.budget_bytes) {
    return Status::invalid_argument("cache.host.budget: the host tier is off (budget 0 at start); turning it on "
                                    "needs a restart (nothing was applied)");
  }
  // Found in hostile testing: with the disk tier not running (its store
  // could not be opened at start: locked, on_error = memory_only), these
  // were reported as applied.
  if (disk == nullptr && !cur.disk.dir.empty() &&
      (cur.disk.budget_bytes != next.disk.budget_bytes || cur.disk.policy != next.disk.policy ||
       cur.disk.ttl_seconds != next.disk.ttl_seconds)) {
    return Status::invalid_argument("cache.disk: the disk tier is not running (its store could not be opened at "
                                    "start); its budget, policy and ttl take effect at a restart (nothing was "
                                    "applied)");
  }
  for (const auto& [key, policy] : {std::pair{"cache.device.policy", next.device.policy},
                                    std::pair{"cache.host.policy", next.host.policy},
                                    std::pair{"cache.disk.policy", next.disk.policy}}) {
    Result<std::unique_ptr<EvictionPolicy>> p = make_eviction_policy(policy);
    if (!p.is_ok()) return Status::invalid_argument(std::string(key) + ": " + p.status().message());
  }
  if (next.host.budget_bytes < 0 || next.disk.budget_bytes < 0 || next.disk.ttl_seconds < 0) {
    return Status::invalid_argument("cache budgets and the ttl must not be negative (nothing was applied)");
  }
  // A smaller host or disk budget must still hold the pinned pages (never
  // evicted), as a smaller device budget must (below).
  const auto shrunk_budget = [&](const PageTier& t) -> int64_t {
    const bool host_tier = t.name() == "host", disk_tier = t.name() == "disk";
    if (!host_tier && !disk_tier) return std::numeric_limits<int64_t>::max();
    const int64_t was = host_tier ? cur.host.budget_bytes : cur.disk.budget_bytes;
    const int64_t now = host_tier ? next.host.budget_bytes : next.disk.budget_bytes;
    return now < was ? now : std::numeric_limits<int64_t>::max();
  };
  if (std::string why = m.pins_overflow(m.pin_counts.size(), shrunk_budget); !why.empty()) {
    return Status::invalid_argument(why + " (nothing was applied)");
  }
  const int64_t page_bytes = int64_t(m.layout.page_bytes());
  const int64_t want_pages = next.device.budget_bytes / page_bytes;
  const int64_t pool_pages = m.kv->n_pool_pages();  // fixed at start: safe to read here
  if (want_pages > pool_pages) {
    return Status::invalid_argument(
        "cache.device.budget = " + std::to_string(next.device.budget_bytes) + " bytes: more than the " +
        std::to_string(pool_pages) + " pages (" + std::to_string(pool_pages * page_bytes) +
        " bytes) of the page pool allocated at start; growing the device tier past it needs a restart "
        "(nothing was applied)");
  }

  // ---- the device (engine thread): budget and policy --------------------------
  const bool device_changed = cur.device.budget_bytes != next.device.budget_bytes ||
                              cur.device.policy != next.device.policy;
  if (device_changed) {
    auto st = std::make_shared<Status>();
    const int n_pinned = int(m.pin_counts.size());
    const bool ok = m.run_sync(
        [&m, st, want_pages, n_pinned, policy = next.device.policy, budget = next.device.budget_bytes,
         page_bytes] {
          const int64_t least = m.min_device_pages() + n_pinned;
          if (want_pages < least) {
            *st = Status::invalid_argument(
                "cache.device.budget = " + std::to_string(budget) + " bytes holds " + std::to_string(want_pages) +
                " KV pages of " + std::to_string(page_bytes) + " bytes; one full context of " +
                std::to_string(m.n_ctx) + " tokens and the " + std::to_string(n_pinned) + " pinned pages need " +
                std::to_string(least) + " (nothing was applied)");
            return;
          }
          PrefixCache& dev = m.kv->device();
          if (policy != dev.policy().name()) dev.set_policy(std::move(make_eviction_policy(policy)).value());
          const int before = dev.n_in_use();
          dev.set_page_limit(int(want_pages));
          if (dev.n_in_use() < before) {
            spdlog::info("cache: device budget now {} pages; {} cached pages evicted", want_pages,
                         before - dev.n_in_use());
          }
        },
        Impl::kControlTimeout);
    if (!ok) return Status::cancelled("the engine is stopped or did not answer within 30 s (nothing was applied)");
    LARDER_RETURN_IF_ERROR(*st);
  }

  // ---- the tiers below (this thread) -------------------------------------------
  Status first_error;
  const auto apply = [&](Status st) {
    if (!st.is_ok() && first_error.is_ok()) first_error = st;
  };
  if (host != nullptr) {
    if (cur.host.budget_bytes != next.host.budget_bytes) apply(host->set_budget(next.host.budget_bytes));
    if (cur.host.policy != next.host.policy) apply(host->set_policy(next.host.policy));
  }
  if (disk != nullptr) {
    if (cur.disk.budget_bytes != next.disk.budget_bytes) apply(disk->set_budget(next.disk.budget_bytes));
    if (cur.disk.policy != next.disk.policy) apply(disk->set_policy(next.disk.policy));
    if (cur.disk.ttl_seconds != next.disk.ttl_seconds) apply(disk->set_ttl(next.disk.ttl_seconds));
  }
  {
    std::lock_guard<std::mutex> lk(m.live_mu);
    m.live_cache = next;
  }
  if (!first_error.is_ok()) spdlog::error("cache: reconfiguring a tier failed: {}", first_error.to_string());
  return first_error;
}

}  // namespace larder
