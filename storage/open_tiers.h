// open_tier_chain: builds the tiers below the device page pool from the
// [cache] options (storage/cache_options.h) — the host tier when
// host.budget > 0, the disk tier when disk.dir is set — and the TierChain
// over them. The daemon calls it (through EngineOptions::open_tiers), and so
// do tests; the engine never names a concrete store.
#pragma once

#include <functional>
#include <memory>

#include "storage/cache_options.h"
#include "storage/status.h"
#include "storage/tier_chain.h"

namespace larder {

struct RocksDbHooks;  // storage/rocksdb_hooks.h

// Errors: kInvalidArgument for an unknown policy name or a bad budget. A disk
// tier that cannot be opened (locked by another process, no permission,
// ...) is an error with on_error = kFail; with kMemoryOnly (the default) it
// is logged once as an error naming the directory and the key, and the
// chain goes on without it. hooks: tests only (a fault-injecting file
// system under RocksDB).
// pins_at_open: given to the disk tier (page_tier.h).
Result<std::shared_ptr<TierChain>> open_tier_chain(const CacheOptions& options, PinsAtOpen pins_at_open = nullptr,
                                                   std::shared_ptr<const RocksDbHooks> hooks = nullptr);

// open_tier_chain with these hooks, as EngineOptions::open_tiers takes it.
std::function<Result<std::shared_ptr<TierChain>>(const CacheOptions&, PinsAtOpen)> tier_factory(
    std::shared_ptr<const RocksDbHooks> hooks = nullptr);

}  // namespace larder
