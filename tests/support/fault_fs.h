// FaultFs: a rocksdb::FileSystemWrapper over the default file system that
// acts like a full disk while `full` is set: appends, syncs and
// preallocations of writable files fail with NoSpace (as write(2) does with
// ENOSPC; creating an empty file still works) and GetFreeSpace reports 0.
// While `full` is clear it reports `free_bytes` (default: plenty). Hand it
// to RocksDbStoreOptions::hooks (storage/rocksdb_hooks.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <rocksdb/file_system.h>

#include "storage/rocksdb_hooks.h"

namespace larder::testing {

class FaultFs : public rocksdb::FileSystemWrapper {
 public:
  FaultFs() : rocksdb::FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  static const char* kClassName() { return "LarderFaultFs"; }
  const char* Name() const override { return kClassName(); }

  std::atomic<bool> full{false};
  std::atomic<uint64_t> free_bytes{uint64_t(1) << 40};
  std::atomic<int64_t> n_failed{0};  // operations failed on purpose

  rocksdb::IOStatus no_space() {
    ++n_failed;
    return rocksdb::IOStatus::NoSpace("fault injection: disk full");
  }

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->NewWritableFile(f, o, r, dbg);
    if (s.ok()) r->reset(new File(std::move(*r), *this));
    return s;
  }
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->ReopenWritableFile(f, o, r, dbg);
    if (s.ok()) r->reset(new File(std::move(*r), *this));
    return s;
  }
  rocksdb::IOStatus ReuseWritableFile(const std::string& f, const std::string& old,
                                      const rocksdb::FileOptions& o,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->ReuseWritableFile(f, old, o, r, dbg);
    if (s.ok()) r->reset(new File(std::move(*r), *this));
    return s;
  }
  rocksdb::IOStatus GetFreeSpace(const std::string& /*path*/, const rocksdb::IOOptions& /*o*/,
                                 uint64_t* diskfree, rocksdb::IODebugContext* /*dbg*/) override {
    *diskfree = full.load() ? 0 : free_bytes.load();
    return rocksdb::IOStatus::OK();
  }

 private:
  class File : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    File(std::unique_ptr<rocksdb::FSWritableFile>&& f, FaultFs& fs)
        : rocksdb::FSWritableFileOwnerWrapper(std::move(f)), fs_(fs) {}
    using IOOptions = rocksdb::IOOptions;
    using Dbg = rocksdb::IODebugContext;
    rocksdb::IOStatus Append(const rocksdb::Slice& d, const IOOptions& o, Dbg* dbg) override {
      if (fs_.full) return fs_.no_space();
      return target()->Append(d, o, dbg);
    }
    rocksdb::IOStatus Append(const rocksdb::Slice& d, const IOOptions& o,
                             const rocksdb::DataVerificationInfo& v, Dbg* dbg) override {
      if (fs_.full) return fs_.no_space();
      return target()->Append(d, o, v, dbg);
    }
    rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& d, uint64_t off, const IOOptions& o,
                                       Dbg* dbg) override {
      if (fs_.full) return fs_.no_space();
      return target()->PositionedAppend(d, off, o, dbg);
    }
    rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& d, uint64_t off, const IOOptions& o,
                                       const rocksdb::DataVerificationInfo& v, Dbg* dbg) override {
      if (fs_.full) return fs_.no_space();
      return target()->PositionedAppend(d, off, o, v, dbg);
    }
    rocksdb::IOStatus Allocate(uint64_t off, uint64_t len, const IOOptions& o, Dbg* dbg) override {
      if (fs_.full) return fs_.no_space();
      return target()->Allocate(off, len, o, dbg);
    }

   private:
    FaultFs& fs_;
  };
};

// Hooks that put fs under a store.
inline std::shared_ptr<const RocksDbHooks> hooks_for(const std::shared_ptr<FaultFs>& fs) {
  auto h = std::make_shared<RocksDbHooks>();
  h->file_system = fs;
  return h;
}

}  // namespace larder::testing
