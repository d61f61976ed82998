#include "storage/open_tiers.h"

#include <spdlog/spdlog.h>

#include "storage/memory_store.h"
#include "storage/rocksdb_store.h"

namespace larder {

Result<std::shared_ptr<TierChain>> open_tier_chain(const CacheOptions& options, PinsAtOpen pins_at_open,
                                                   std::shared_ptr<const RocksDbHooks> hooks) {
  std::vector<TierSlot> slots;
  if (options.host.budget_bytes > 0) {
    MemoryStoreOptions m;
    m.budget_bytes = options.host.budget_bytes;
    m.policy = options.host.policy;
    Result<std::unique_ptr<MemoryPageStore>> host = MemoryPageStore::create(m);
    if (!host.is_ok()) return Status::invalid_argument("cache.host: " + host.status().message());
    slots.push_back(TierSlot{std::shared_ptr<PageTier>(std::move(*host)), /*persistent=*/false});
  }
  if (!options.disk.dir.empty()) {
    RocksDbStoreOptions d;
    d.dir = options.disk.dir;
    d.capacity_bytes = options.disk.budget_bytes;
    d.min_free_bytes = options.disk.min_free_bytes;
    d.policy = options.disk.policy;
    d.ttl_seconds = options.disk.ttl_seconds;
    d.sync_writes = options.disk.sync;
    d.pins_at_open = std::move(pins_at_open);
    d.hooks = std::move(hooks);
    Result<std::unique_ptr<RocksDbPageStore>> disk = RocksDbPageStore::open(d);
    if (disk.is_ok()) {
      slots.push_back(TierSlot{std::shared_ptr<PageTier>(std::move(*disk)), /*persistent=*/true});
    } else if (disk.status().code() == StatusCode::kInvalidArgument || options.disk.on_error == DiskOnError::kFail) {
      return Status(disk.status().code(),
                    "cache.disk: " + disk.status().message() +
                        (options.disk.on_error == DiskOnError::kFail
                             ? " (cache.disk.on_error = \"fail\"; \"memory_only\" serves without the disk tier)"
                             : ""));
    } else {
      spdlog::error("cache.disk: {}; serving without the disk tier: nothing is written to disk and nothing "
                    "survives a restart (cache.disk.on_error = \"memory_only\"; \"fail\" refuses to start)",
                    disk.status().message());
    }
  }
  TierChainOptions c;
  c.write_through = options.write_through;
  c.n_threads_per_tier = options.n_storage_threads;
  return std::make_shared<TierChain>(std::move(slots), c);
}

std::function<Result<std::shared_ptr<TierChain>>(const CacheOptions&, PinsAtOpen)> tier_factory(
    std::shared_ptr<const RocksDbHooks> hooks) {
  return [hooks](const CacheOptions& options, PinsAtOpen pins_at_open) {
    return open_tier_chain(options, std::move(pins_at_open), hooks);
  };
}

}  // namespace larder
