// Storage-internal: what tests may put under RocksDbPageStore. This header
// includes RocksDB; only storage/ and tests/ include it (RocksDB types never
// leave storage/: other modules only pass the pointer along, as an
// incomplete type).
#pragma once

#include <memory>

#include <rocksdb/file_system.h>

namespace larder {

struct RocksDbHooks {
  // The file system RocksDB uses instead of the default one, e.g. a
  // rocksdb::FileSystemWrapper that injects NoSpace/IOError failures
  // (tests/storage/fault_fs.h). Also answers the store's free-space checks.
  std::shared_ptr<rocksdb::FileSystem> file_system;
};

}  // namespace larder
