// Engine: the pins kept across restarts, in engine/kv/pin_record.h's record
// in the persistent tiers: read back and applied at the start, merged with
// new ones when a disk tier that was down returns (the pin watch), and
// written with the pinned pages the disk lacks. Engine::pin / unpin
// (engine_admin.cpp) change the list; these keep it stored.
#include <algorithm>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "engine/engine_impl.h"

namespace larder {

namespace {
// How often the pin watch looks whether the disk tier came back.
constexpr std::chrono::milliseconds kPinWatchInterval{1000};
}  // namespace

// ---- pins across restarts --------------------------------------------------------

bool Engine::Impl::persistent_tiers_available() const {
  for (size_t i = 0; tiers && i < tiers->n_tiers(); ++i) {
    if (tiers->persistent(i) && !tiers->tier(i).available()) return false;
  }
  return true;
}

namespace {
// The pins stored under `root` in the chain's persistent tiers; empty when
// there are none or their record does not decode (logged); nullopt when a
// tier holds the record but reading it failed (try again later, rather
// than take the list for empty and write over it).
std::optional<std::vector<PinnedPrefix>> read_stored_pins(TierChain& tiers, const PageKey& root) {
  const PageKey record_key = pin_record_key(root);
  // The index first: a daemon without pins reads nothing (no miss counted).
  bool held = false;
  for (size_t i = 0; i < tiers.n_tiers() && !held; ++i) {
    held = tiers.tier(i).contains_batch(std::span<const PageKey>(&record_key, 1))[0];
  }
  if (!held) return std::vector<PinnedPrefix>();
  std::optional<std::string> record = tiers.get_now(record_key);
  if (!record) return std::nullopt;
  Result<std::vector<PinnedPrefix>> decoded = decode_pin_record(*record);
  if (!decoded.is_ok()) {
    spdlog::warn("cache: the pinned prefixes could not be read back ({}); starting without pins",
                 decoded.status().message());
    return std::vector<PinnedPrefix>();
  }
  for (size_t i = 0; i < tiers.n_tiers(); ++i) tiers.tier(i).pin(record_key);
  return std::move(decoded).value();
}
}  // namespace

void Engine::Impl::load_pins() {
  if (!tiers || !tiers->has_persistent()) return;
  std::optional<std::vector<PinnedPrefix>> stored;
  if (persistent_tiers_available()) stored = read_stored_pins(*tiers, root);
  stored_pins_unread = !stored.has_value();
  // No engine thread yet: the device is pinned here.
  if (stored) {
    for (const PageKey& key : adopt_pins(std::move(*stored))) kv->device().pin(key);
  }
  if (!pins.empty()) spdlog::info("cache: {} pinned prefix(es), {} pages, applied again", pins.size(), pin_counts.size());
  start_pin_watch();
}

std::vector<PageKey> Engine::Impl::adopt_pins(std::vector<PinnedPrefix> stored) {
  const size_t device_room = size_t(std::max(0, kv->n_pages() - min_device_pages()));
  std::vector<PageKey> device_keys;
  for (PinnedPrefix& p : stored) {
    if (std::find(pins.begin(), pins.end(), p) != pins.end()) continue;
    size_t n_new = 0;
    for (const PageKey& key : p.keys) n_new += pin_counts.count(key) == 0 ? 1 : 0;
    const bool on_device = pin_counts.size() + n_new <= device_room;
    for (const PageKey& key : p.keys) {
      if (on_device && pin_counts.count(key) == 0) device_keys.push_back(key);
      for (size_t i = 0; i < tiers->n_tiers(); ++i) tiers->tier(i).pin(key);
      ++pin_counts[key];
    }
    if (!on_device) {
      spdlog::warn("cache: a pinned prefix of {} pages is not pinned on the device: its budget ({} pages) "
                   "leaves room for {} pinned pages (one full context must stay free)",
                   p.keys.size(), kv->n_pages(), device_room);
    }
    pins.push_back(std::move(p));
  }
  // Pinned under a larger budget (or another config) before the restart:
  // kept, since dropping an admin's pin loses more than the bytes past it.
  if (std::string why = pins_overflow(pin_counts.size()); !why.empty()) {
    spdlog::warn("cache: the stored pins exceed a tier's budget, which holds them past it: {}", why);
  }
  publish_pin_counts();
  return device_keys;
}

bool Engine::Impl::merge_stored_pins() {
  if (!stored_pins_unread) return true;
  if (!persistent_tiers_available()) return false;
  std::optional<std::vector<PinnedPrefix>> stored = read_stored_pins(*tiers, root);
  if (!stored) return false;  // held but not read: later
  stored_pins_unread = false;
  std::vector<PageKey> device_keys = adopt_pins(std::move(*stored));
  if (!device_keys.empty()) {
    run_sync([this, device_keys] { for (const PageKey& key : device_keys) kv->device().pin(key); }, kControlTimeout);
  }
  return true;
}

void Engine::Impl::resync_pins() {
  if (!tiers || !tiers->has_persistent() || (!stored_pins_unread && !pins_unsaved)) return;
  if (!persistent_tiers_available()) return;
  const size_t n_before = pins.size();
  if (!merge_stored_pins()) return;  // the record is held but could not be read: the next resync
  save_pins();
  std::vector<PageKey> keys;
  keys.reserve(pin_counts.size());
  for (const auto& [key, n] : pin_counts) keys.push_back(key);
  Result<int> n_lost = persist_missing(keys);
  // A write that failed again (the disk filled up at once) leaves the
  // tier unavailable: the next resync tries the list and pages again
  // (noticed in hostile testing: they were logged as written back).
  if (!persistent_tiers_available()) {
    pins_unsaved = true;
    spdlog::warn("cache: the disk tier failed again while the pins were written back; trying again when it returns");
    return;
  }
  if (!n_lost.is_ok()) pins_unsaved = true;  // the engine did not answer: the pages at the next resync
  spdlog::info("cache: the disk tier is available again: {} pinned prefix(es) stored there applied, {} in all "
               "written back{}",
               pins.size() - n_before, pins.size(),
               !n_lost.is_ok()   ? " (their pages later: " + n_lost.status().message() + ")"
               : *n_lost > 0     ? " (" + std::to_string(*n_lost) + " of their pages held nowhere: written when next computed)"
                                 : "");
}

Result<int> Engine::Impl::persist_missing(const std::vector<PageKey>& keys) {
  if (!tiers || !tiers->has_persistent() || keys.empty()) return 0;
  tiers->flush();  // writes queued before: a page spilled at seal counts
  std::unordered_set<PageKey, PageKeyHash> missing;
  for (size_t i = 0; i < tiers->n_tiers(); ++i) {
    if (!tiers->persistent(i)) continue;
    const std::vector<bool> held = tiers->tier(i).contains_batch(keys);
    for (size_t j = 0; j < held.size(); ++j) {
      if (!held[j]) missing.insert(keys[j]);
    }
  }
  if (missing.empty()) return 0;
  auto not_resident = std::make_shared<std::vector<PageKey>>();
  const bool ok = run_sync(
      [this, not_resident, todo = std::vector<PageKey>(missing.begin(), missing.end())] {
        for (const PageKey& key : todo) {
          if (!kv->persist(key, /*rewrite=*/true)) not_resident->push_back(key);
        }
      },
      kControlTimeout);
  if (!ok) return engine_busy();
  int n_lost = 0;
  for (const PageKey& key : *not_resident) {
    std::optional<std::string> record = tiers->get_now(key);  // a host tier's copy
    if (record) tiers->put_persistent(key, std::move(*record));
    else ++n_lost;
  }
  tiers->flush();
  return n_lost;
}

void Engine::Impl::start_pin_watch() {
  pin_watch = std::thread([this] {
    std::unique_lock<std::mutex> lk(pin_watch_mu);
    while (!pin_watch_cv.wait_for(lk, kPinWatchInterval, [this] { return pin_watch_stop; })) {
      lk.unlock();
      if (std::unique_lock<std::mutex> admin(admin_mu, std::try_to_lock); admin.owns_lock()) resync_pins();
      lk.lock();
    }
  });
}

void Engine::Impl::stop_pin_watch() {
  {
    std::lock_guard<std::mutex> lk(pin_watch_mu);
    pin_watch_stop = true;
  }
  pin_watch_cv.notify_all();
  if (pin_watch.joinable()) pin_watch.join();
  std::lock_guard<std::mutex> admin(admin_mu);
  if (!stored_pins_unread && !pins_unsaved) return;  // Engine::stop flushes the tiers anyway
  if (tiers) tiers->flush();  // a disk tier that came back reopens here, while the engine still runs
  resync_pins();  // pins the disk tier could not take while it was down
}

void Engine::Impl::save_pins() {
  if (!tiers || !tiers->has_persistent()) return;
  // Never over the stored list before it was read (found in hostile
  // testing: a pin that waited behind other requests while the disk tier
  // came back wrote its own list over the stored one).
  if (!merge_stored_pins()) {
    pins_unsaved = true;
    return;
  }
  pins_unsaved = !persistent_tiers_available();
  const PageKey record_key = pin_record_key(root);
  if (pins.empty()) {
    tiers->erase(record_key);
  } else {
    for (size_t i = 0; i < tiers->n_tiers(); ++i) tiers->tier(i).pin(record_key);
    tiers->put_persistent(record_key, encode_pin_record(pins));
  }
  tiers->flush();
  // The write may be what faulted the tier (the disk filled up just then).
  if (!persistent_tiers_available()) pins_unsaved = true;
}

}  // namespace larder
