// GGUF reader: mmaps a GGUF v2/v3 file, parses and bounds-checks the header,
// metadata and tensor infos. Tensor data is used in place from the mapping.
//
// Format: https://github.com/ggerganov/ggml/blob/master/docs/gguf.md
//   magic "GGUF", u32 version, u64 n_tensors, u64 n_kv, then n_kv
//   (string key, u32 type, value), then n_tensors (string name, u32 n_dims,
//   u64 ne[n_dims], u32 ggml type, u64 offset), padding to
//   general.alignment (default 32), then tensor data.
//
// Every offset, size, count and string length is checked against the file
// size; a bad file gives Status::corruption("<path>: <what is wrong>"),
// never a crash or an over-read. Unknown tensor types give
// Status::unsupported naming the type id and the tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/gguf/ggml_types.h"
#include "storage/status.h"

namespace larder {

// GGUF metadata value types (gguf.md "gguf_metadata_value_type").
enum class GgufValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5,
  kFloat32 = 6, kBool = 7, kString = 8, kArray = 9, kUint64 = 10,
  kInt64 = 11, kFloat64 = 12,
};

// One metadata value. Arrays may nest (array of arrays).
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  // Scalars are widened: all integer types (and bool) in i64/u64, floats in f64.
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<GgufValue>> v;
  GgufValueType array_type = GgufValueType::kUint8;  // element type when kArray

  // Typed accessors; return nullopt-like failure through Result.
  Result<int64_t> as_int() const;      // any integer type or bool
  Result<double> as_float() const;     // float32/float64 or any integer
  Result<bool> as_bool() const;
  Result<std::string> as_string() const;
  const std::vector<GgufValue>* as_array() const;  // nullptr if not an array
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] = row length (contiguous)
  uint64_t offset = 0;           // from the start of the data section
  const uint8_t* data = nullptr; // into the mapping; n_bytes long
  size_t n_bytes = 0;
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class GgufFile {
 public:
  // Maps and parses `path`. Errors: kNotFound (no file), kIOError (mmap),
  // kCorruption (malformed), kUnsupported (version, tensor type).
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  size_t file_size() const { return size_; }
  uint32_t alignment() const { return alignment_; }

  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;  // nullptr if absent
  // Convenience typed getters: kNotFound if absent, kInvalidArgument if the
  // type is wrong (message names the key).
  Result<int64_t> get_int(std::string_view key) const;
  Result<double> get_float(std::string_view key) const;
  Result<std::string> get_string(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  // Drops this process's resident pages of the mapping that lie wholly
  // inside [p, p + n) (madvise MADV_DONTNEED: the file's pages stay in the
  // page cache and come back on the next read). For bytes that were copied
  // elsewhere (repacked weights). A range outside the mapping is ignored.
  void drop_resident(const uint8_t* p, size_t n) const;
  // Copies the n bytes the mapping shows at [p, p + n) into dst with a
  // read of the file (pread), not through the mapping: a file truncated
  // since it was opened gives an error (kIOError, naming the file and
  // saying to restart) where a read of the mapping would raise SIGBUS, and
  // so does one written over in place (`cp` over it: its size or
  // modification time differs from the ones it had when opened), whose
  // bytes are no longer the weights the rest of the model was loaded from.
  // A file replaced by a rename keeps the opened one readable: no error.
  // kInvalidArgument for a range outside the mapping.
  Status read_at(const uint8_t* p, void* dst, size_t n) const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;  // nullptr if absent

 private:
  GgufFile() = default;
  std::string path_;
  const uint8_t* map_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;  // kept open for read_at
  int64_t mtime_ns_ = 0;  // at open (st_mtim), for read_at's check
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
  friend class GgufParser;
};

}  // namespace larder
