// CountingFs: a rocksdb::FileSystemWrapper over the default file system that
// counts, per kind of file (by name: ".log" WAL, ".blob", ".sst", other),
// the bytes read through random-access and sequential files and the
// Sync/Fsync calls on writable files. Hand it to RocksDbStoreOptions::hooks
// (storage/rocksdb_hooks.h) with hooks_for().
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <rocksdb/file_system.h>

#include "storage/rocksdb_hooks.h"

namespace larder::testing {

class CountingFs : public rocksdb::FileSystemWrapper {
 public:
  enum Kind { kWal, kBlob, kTable, kOther, kNumKinds };

  CountingFs() : rocksdb::FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  static const char* kClassName() { return "LarderCountingFs"; }
  const char* Name() const override { return kClassName(); }

  static Kind kind_of(const std::string& name) {
    auto ends = [&](const char* ext) {
      const std::string e(ext);
      return name.size() >= e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0;
    };
    if (ends(".log")) return kWal;
    if (ends(".blob")) return kBlob;
    if (ends(".sst")) return kTable;
    return kOther;
  }

  int64_t bytes_read(Kind k) const { return bytes_read_[k].load(); }
  int64_t syncs(Kind k) const { return syncs_[k].load(); }
  void reset() {
    for (auto& v : bytes_read_) v = 0;
    for (auto& v : syncs_) v = 0;
  }

  rocksdb::IOStatus NewRandomAccessFile(const std::string& f, const rocksdb::FileOptions& o,
                                        std::unique_ptr<rocksdb::FSRandomAccessFile>* r,
                                        rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->NewRandomAccessFile(f, o, r, dbg);
    if (s.ok()) r->reset(new ReadFile(std::move(*r), bytes_read_[kind_of(f)]));
    return s;
  }
  rocksdb::IOStatus NewSequentialFile(const std::string& f, const rocksdb::FileOptions& o,
                                      std::unique_ptr<rocksdb::FSSequentialFile>* r,
                                      rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->NewSequentialFile(f, o, r, dbg);
    if (s.ok()) r->reset(new SeqFile(std::move(*r), bytes_read_[kind_of(f)]));
    return s;
  }
  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->NewWritableFile(f, o, r, dbg);
    if (s.ok()) r->reset(new WriteFile(std::move(*r), syncs_[kind_of(f)]));
    return s;
  }
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->ReopenWritableFile(f, o, r, dbg);
    if (s.ok()) r->reset(new WriteFile(std::move(*r), syncs_[kind_of(f)]));
    return s;
  }
  rocksdb::IOStatus ReuseWritableFile(const std::string& f, const std::string& old,
                                      const rocksdb::FileOptions& o,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->ReuseWritableFile(f, old, o, r, dbg);
    if (s.ok()) r->reset(new WriteFile(std::move(*r), syncs_[kind_of(f)]));
    return s;
  }

 private:
  using IOOptions = rocksdb::IOOptions;
  using Dbg = rocksdb::IODebugContext;

  class ReadFile : public rocksdb::FSRandomAccessFileOwnerWrapper {
   public:
    ReadFile(std::unique_ptr<rocksdb::FSRandomAccessFile>&& f, std::atomic<int64_t>& n)
        : rocksdb::FSRandomAccessFileOwnerWrapper(std::move(f)), n_(n) {}
    rocksdb::IOStatus Read(uint64_t off, size_t len, const IOOptions& o, rocksdb::Slice* result, char* scratch,
                           Dbg* dbg) const override {
      rocksdb::IOStatus s = target()->Read(off, len, o, result, scratch, dbg);
      if (s.ok()) n_ += int64_t(result->size());
      return s;
    }
    rocksdb::IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t num_reqs, const IOOptions& o,
                                Dbg* dbg) override {
      rocksdb::IOStatus s = target()->MultiRead(reqs, num_reqs, o, dbg);
      for (size_t i = 0; i < num_reqs; ++i) {
        if (reqs[i].status.ok()) n_ += int64_t(reqs[i].result.size());
      }
      return s;
    }

   private:
    std::atomic<int64_t>& n_;
  };

  class SeqFile : public rocksdb::FSSequentialFileOwnerWrapper {
   public:
    SeqFile(std::unique_ptr<rocksdb::FSSequentialFile>&& f, std::atomic<int64_t>& n)
        : rocksdb::FSSequentialFileOwnerWrapper(std::move(f)), n_(n) {}
    rocksdb::IOStatus Read(size_t len, const IOOptions& o, rocksdb::Slice* result, char* scratch,
                           Dbg* dbg) override {
      rocksdb::IOStatus s = target()->Read(len, o, result, scratch, dbg);
      if (s.ok()) n_ += int64_t(result->size());
      return s;
    }
    rocksdb::IOStatus PositionedRead(uint64_t off, size_t len, const IOOptions& o, rocksdb::Slice* result,
                                     char* scratch, Dbg* dbg) override {
      rocksdb::IOStatus s = target()->PositionedRead(off, len, o, result, scratch, dbg);
      if (s.ok()) n_ += int64_t(result->size());
      return s;
    }

   private:
    std::atomic<int64_t>& n_;
  };

  class WriteFile : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    WriteFile(std::unique_ptr<rocksdb::FSWritableFile>&& f, std::atomic<int64_t>& n)
        : rocksdb::FSWritableFileOwnerWrapper(std::move(f)), n_(n) {}
    rocksdb::IOStatus Sync(const IOOptions& o, Dbg* dbg) override {
      ++n_;
      return target()->Sync(o, dbg);
    }
    rocksdb::IOStatus Fsync(const IOOptions& o, Dbg* dbg) override {
      ++n_;
      return target()->Fsync(o, dbg);
    }

   private:
    std::atomic<int64_t>& n_;
  };

  std::array<std::atomic<int64_t>, kNumKinds> bytes_read_{};
  std::array<std::atomic<int64_t>, kNumKinds> syncs_{};
};

inline std::shared_ptr<const RocksDbHooks> hooks_for(const std::shared_ptr<CountingFs>& fs) {
  auto h = std::make_shared<RocksDbHooks>();
  h->file_system = fs;
  return h;
}

}  // namespace larder::testing
