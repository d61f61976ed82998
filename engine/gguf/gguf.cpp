// GGUF reader. See gguf.h for the format and the error contract.
//
// Every count, length and offset read from the file is checked against the
// bytes that remain before anything is allocated, so a hostile count cannot
// make us allocate more than a small multiple of the file size.
#include "engine/gguf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>

namespace larder {

namespace {

constexpr int kMaxArrayDepth = 8;
constexpr int kMaxDims = 4;
// Largest element count per dimension we accept (2^48): any real tensor is
// far smaller, and the product check below still catches overflow.
constexpr uint64_t kMaxDimExtent = uint64_t(1) << 48;
constexpr uint32_t kMaxAlignment = uint32_t(1) << 30;

const char* value_type_name(uint32_t t) {
  static const char* kNames[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                 "bool",  "string", "array", "uint64", "int64", "float64"};
  return t < 13 ? kNames[t] : "unknown";
}

// Fixed encoded size of a scalar value type; 0 for string/array/unknown.
size_t scalar_size(uint32_t t) {
  switch (GgufValueType(t)) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64: return 8;
    default: return 0;
  }
}

// Smallest number of bytes one value of type t can occupy in the file
// (a string: its u64 length; an array: u32 type + u64 count). 0 = unknown.
size_t min_encoded_size(uint32_t t) {
  if (t == uint32_t(GgufValueType::kString)) return 8;
  if (t == uint32_t(GgufValueType::kArray)) return 12;
  return scalar_size(t);
}

}  // namespace

// ---- GgufValue accessors ---------------------------------------------------

Result<int64_t> GgufValue::as_int() const {
  if (const auto* b = std::get_if<bool>(&v)) return int64_t(*b);
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&v)) {
    if (*u > uint64_t(INT64_MAX)) {
      return Status::out_of_range("value " + std::to_string(*u) + " does not fit in int64");
    }
    return int64_t(*u);
  }
  return Status::invalid_argument(std::string("value of type ") +
                                  value_type_name(uint32_t(type)) + " is not an integer");
}

Result<double> GgufValue::as_float() const {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<int64_t>(&v)) return double(*i);
  if (const auto* u = std::get_if<uint64_t>(&v)) return double(*u);
  return Status::invalid_argument(std::string("value of type ") +
                                  value_type_name(uint32_t(type)) + " is not a number");
}

Result<bool> GgufValue::as_bool() const {
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  return Status::invalid_argument(std::string("value of type ") +
                                  value_type_name(uint32_t(type)) + " is not a bool");
}

Result<std::string> GgufValue::as_string() const {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  return Status::invalid_argument(std::string("value of type ") +
                                  value_type_name(uint32_t(type)) + " is not a string");
}

const std::vector<GgufValue>* GgufValue::as_array() const {
  return std::get_if<std::vector<GgufValue>>(&v);
}

// ---- parser ----------------------------------------------------------------

class GgufParser {
 public:
  GgufParser(GgufFile* f) : f_(f), p_(f->map_), size_(f->size_) {}

  Status parse();

 private:
  Status corrupt(const std::string& what) const {
    return Status::corruption(f_->path_ + ": " + what + " (at offset " + std::to_string(pos_) +
                              ")");
  }
  size_t remaining() const { return size_ - pos_; }
  Status need(uint64_t n, const char* what) const {
    if (n > remaining()) {
      return corrupt(std::string("truncated: ") + what + " needs " + std::to_string(n) +
                     " bytes, " + std::to_string(remaining()) + " left");
    }
    return Status::ok();
  }
  template <typename T>
  Status read_pod(T* out, const char* what) {
    LARDER_RETURN_IF_ERROR(need(sizeof(T), what));
    std::memcpy(out, p_ + pos_, sizeof(T));  // GGUF is little-endian, as is this host
    pos_ += sizeof(T);
    return Status::ok();
  }
  Status read_string(std::string* out, const char* what);
  Status read_value(uint32_t type, int depth, GgufValue* out);
  Status read_tensor_info(GgufTensorInfo* ti);

  GgufFile* f_;
  const uint8_t* p_;
  size_t size_;
  size_t pos_ = 0;
};

Status GgufParser::read_string(std::string* out, const char* what) {
  uint64_t len = 0;
  LARDER_RETURN_IF_ERROR(read_pod(&len, what));
  if (len > remaining()) {
    return corrupt(std::string(what) + " length " + std::to_string(len) + " exceeds the " +
                   std::to_string(remaining()) + " bytes left in the file");
  }
  out->assign(reinterpret_cast<const char*>(p_ + pos_), size_t(len));
  pos_ += size_t(len);
  return Status::ok();
}

Status GgufParser::read_value(uint32_t type, int depth, GgufValue* out) {
  out->type = GgufValueType(type);
  switch (GgufValueType(type)) {
    case GgufValueType::kUint8: { uint8_t x{}; LARDER_RETURN_IF_ERROR(read_pod(&x, "uint8 value")); out->v = uint64_t(x); return Status::ok(); }
    case GgufValueType::kUint16: { uint16_t x{}; LARDER_RETURN_IF_ERROR(read_pod(&x, "uint16 value")); out->v = uint64_t(x); return Status::ok(); }
    case GgufValueType::kUint32: { uint32_t x{}; LARDER_RETURN_IF_ERROR(read_pod(&x, "uint32 value")); out->v = uint64_t(x); return Status::ok(); }
    case GgufValueType::kUint64: { uint64_t x{}; LARDER_RETURN_IF_ERROR(read_pod(&x, "uint64 value")); out->v = x; return Status::ok(); }
    case GgufValueType::kInt8: { int8_t x{}; LARDER_RETURN_IF_ERROR(read_pod(&x, "int8 value")); out->v = int64_t(x); return Status::ok(); }
    case GgufValueType::kInt16: { int16_t x{}; LARDER_RETURN_IF_ERROR(read_pod(&x, "int16 value")); out->v = int64_t(x); return Status::ok(); }
    case GgufValueType::kInt32: { int32_t x{}; LARDER_RETURN_IF_ERROR(read_pod(&x, "int32 value")); out->v = int64_t(x); return Status::ok(); }
    case GgufValueType::kInt64: { int64_t x{}; LARDER_RETURN_IF_ERROR(read_pod(&x, "int64 value")); out->v = x; return Status::ok(); }
    case GgufValueType::kFloat32: { float x{}; LARDER_RETURN_IF_ERROR(read_pod(&x, "float32 value")); out->v = double(x); return Status::ok(); }
    case GgufValueType::kFloat64: { double x{}; LARDER_RETURN_IF_ERROR(read_pod(&x, "float64 value")); out->v = x; return Status::ok(); }
    case GgufValueType::kBool: {
      uint8_t x = 0;
      LARDER_RETURN_IF_ERROR(read_pod(&x, "bool value"));
      if (x > 1) return corrupt("bool value " + std::to_string(x) + " is neither 0 nor 1");
      out->v = bool(x);
      return Status::ok();
    }
    case GgufValueType::kString: {
      std::string s;
      LARDER_RETURN_IF_ERROR(read_string(&s, "string value"));
      out->v = std::move(s);
      return Status::ok();
    }
    case GgufValueType::kArray: {
      if (depth >= kMaxArrayDepth) {
        return corrupt("arrays nested deeper than " + std::to_string(kMaxArrayDepth));
      }
      uint32_t elem_type = 0;
      uint64_t count = 0;
      LARDER_RETURN_IF_ERROR(read_pod(&elem_type, "array element type"));
      const size_t elem_min = min_encoded_size(elem_type);
      if (elem_min == 0) {
        return corrupt("unknown array element type " + std::to_string(elem_type));
      }
      LARDER_RETURN_IF_ERROR(read_pod(&count, "array count"));
      if (count > remaining() / elem_min) {
        return corrupt("array of " + std::to_string(count) + " " + value_type_name(elem_type) +
                       " values does not fit in the " + std::to_string(remaining()) +
                       " bytes left");
      }
      out->array_type = GgufValueType(elem_type);
      std::vector<GgufValue> items(static_cast<size_t>(count));
      for (auto& item : items) LARDER_RETURN_IF_ERROR(read_value(elem_type, depth + 1, &item));
      out->v = std::move(items);
      return Status::ok();
    }
  }
  return corrupt("unknown metadata value type " + std::to_string(type));
}

Status GgufParser::read_tensor_info(GgufTensorInfo* ti) {
  LARDER_RETURN_IF_ERROR(read_string(&ti->name, "tensor name"));
  uint32_t n_dims = 0;
  LARDER_RETURN_IF_ERROR(read_pod(&n_dims, "tensor n_dims"));
  if (n_dims < 1 || n_dims > uint32_t(kMaxDims)) {
    return corrupt("tensor '" + ti->name + "' has n_dims " + std::to_string(n_dims) +
                   " (must be 1..4)");
  }
  ti->n_dims = int(n_dims);
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t ne = 0;
    LARDER_RETURN_IF_ERROR(read_pod(&ne, "tensor dimension"));
    if (ne > kMaxDimExtent) {
      return corrupt("tensor '" + ti->name + "' has an absurd dimension ne[" + std::to_string(d) +
                     "] = " + std::to_string(ne));
    }
    ti->ne[d] = int64_t(ne);
  }
  uint32_t type_id = 0;
  LARDER_RETURN_IF_ERROR(read_pod(&type_id, "tensor type"));
  ti->type = GgmlType(type_id);
  if (ggml_type_name(ti->type) == nullptr) {
    return Status::unsupported(f_->path_ + ": tensor '" + ti->name + "' has unknown ggml type id " +
                               std::to_string(type_id));
  }
  LARDER_RETURN_IF_ERROR(read_pod(&ti->offset, "tensor offset"));

  // Element count and byte size with overflow checks.
  uint64_t n_el = 1;
  for (int d = 0; d < kMaxDims; ++d) {
    const uint64_t ne = uint64_t(ti->ne[d]);
    if (ne != 0 && n_el > uint64_t(INT64_MAX) / ne) {
      return corrupt("tensor '" + ti->name + "' has too many elements");
    }
    n_el *= ne;
  }
  const int64_t block = ggml_block_size(ti->type);
  if (ti->ne[0] % block != 0) {
    return corrupt("tensor '" + ti->name + "' row length " + std::to_string(ti->ne[0]) +
                   " is not a multiple of the " + ggml_type_name(ti->type) + " block size " +
                   std::to_string(block));
  }
  const uint64_t row_bytes = uint64_t(ti->ne[0] / block) * ggml_type_size(ti->type);
  uint64_t n_bytes = row_bytes;
  for (int d = 1; d < kMaxDims; ++d) {
    const uint64_t ne = uint64_t(ti->ne[d]);
    if (ne != 0 && n_bytes > uint64_t(SIZE_MAX) / ne) {
      return corrupt("tensor '" + ti->name + "' byte size overflows");
    }
    n_bytes *= ne;
  }
  ti->n_bytes = size_t(n_bytes);
  return Status::ok();
}

Status GgufParser::parse() {
  LARDER_RETURN_IF_ERROR(need(4, "magic"));
  if (std::memcmp(p_, "GGUF", 4) != 0) return corrupt("not a GGUF file (bad magic)");
  pos_ = 4;
  uint32_t version = 0;
  LARDER_RETURN_IF_ERROR(read_pod(&version, "version"));
  if (version != 2 && version != 3) {
    return Status::unsupported(f_->path_ + ": GGUF version " + std::to_string(version) +
                               " is not supported (only versions 2 and 3)");
  }
  f_->version_ = version;
  uint64_t n_tensors = 0, n_kv = 0;
  LARDER_RETURN_IF_ERROR(read_pod(&n_tensors, "tensor count"));
  LARDER_RETURN_IF_ERROR(read_pod(&n_kv, "metadata count"));
  // Minimal encodings: kv = key length(8) + type(4) + 1 byte value;
  // tensor info = name length(8) + n_dims(4) + ne(8) + type(4) + offset(8).
  if (n_kv > remaining() / 13) {
    return corrupt("metadata count " + std::to_string(n_kv) + " cannot fit in the file");
  }
  if (n_tensors > remaining() / 32) {
    return corrupt("tensor count " + std::to_string(n_tensors) + " cannot fit in the file");
  }

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    LARDER_RETURN_IF_ERROR(read_string(&key, "metadata key"));
    uint32_t type = 0;
    LARDER_RETURN_IF_ERROR(read_pod(&type, "metadata value type"));
    GgufValue value;
    LARDER_RETURN_IF_ERROR(read_value(type, 0, &value));
    if (f_->kv_.count(key)) return corrupt("duplicate metadata key '" + key + "'");
    f_->kv_.emplace(std::move(key), std::move(value));
  }

  if (const GgufValue* a = f_->find("general.alignment")) {
    auto v = a->as_int();
    if (!v.is_ok()) return corrupt("general.alignment is not an integer");
    const int64_t al = v.value();
    if (al <= 0 || al > int64_t(kMaxAlignment) || (al & (al - 1)) != 0) {
      return corrupt("general.alignment " + std::to_string(al) +
                     " is not a power of two in 1..2^30");
    }
    f_->alignment_ = uint32_t(al);
  }

  f_->tensors_.resize(size_t(n_tensors));
  std::set<std::string_view> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo& ti = f_->tensors_[size_t(i)];
    LARDER_RETURN_IF_ERROR(read_tensor_info(&ti));
    if (!names.insert(ti.name).second) return corrupt("duplicate tensor name '" + ti.name + "'");
  }
  if (n_tensors == 0) return Status::ok();

  const uint64_t align = f_->alignment_;
  const uint64_t data_start = (uint64_t(pos_) + align - 1) / align * align;
  if (data_start > size_) {
    return corrupt("data section start " + std::to_string(data_start) + " is past the end of the file (" +
                   std::to_string(size_) + " bytes)");
  }
  const uint64_t data_size = size_ - data_start;
  for (GgufTensorInfo& ti : f_->tensors_) {
    if (ti.offset % align != 0) {
      return Status::corruption(f_->path_ + ": tensor '" + ti.name + "' data offset " +
                                std::to_string(ti.offset) + " is not aligned to " +
                                std::to_string(align));
    }
    if (ti.offset > data_size || ti.n_bytes > data_size - ti.offset) {
      // The offset as stored (relative to the data section, which starts at
      // data_start): adding them could wrap around for a hostile offset.
      return Status::corruption(f_->path_ + ": tensor '" + ti.name + "' data at offset " +
                                std::to_string(ti.offset) + " of the data section (at byte " +
                                std::to_string(data_start) + "), " + std::to_string(ti.n_bytes) +
                                " bytes, lies outside the file (" +
                                std::to_string(size_) + " bytes)");
    }
    ti.data = p_ + data_start + ti.offset;
  }
  return Status::ok();
}

// ---- GgufFile ----------------------------------------------------------------

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused
  // below, as everything that is not a regular file).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) return Status::not_found(path + ": no such file");
    return Status::io_error(path + ": open failed: " + std::strerror(e));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::io_error(path + ": fstat failed: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::invalid_argument(path + ": not a regular file");
  }
  std::unique_ptr<GgufFile> f(new GgufFile());  // private constructor
  f->path_ = path;
  f->size_ = size_t(st.st_size);
  f->mtime_ns_ = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (f->size_ == 0) {
    ::close(fd);
    return Status::corruption(path + ": empty file (not a GGUF file)");
  }
  void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int e = errno;
  if (m == MAP_FAILED) {
    ::close(fd);
    return Status::io_error(path + ": mmap failed: " + std::strerror(e));
  }
  f->fd_ = fd;  // for read_at; the mapping stays valid either way
  f->map_ = static_cast<const uint8_t*>(m);
  GgufParser parser(f.get());
  LARDER_RETURN_IF_ERROR(parser.parse());
  return f;
}

void GgufFile::drop_resident(const uint8_t* p, size_t n) const {
  if (map_ == nullptr || p < map_ || n > size_ || p - map_ > std::ptrdiff_t(size_ - n)) return;
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

GgufFile::~GgufFile() {
  if (map_) ::munmap(const_cast<uint8_t*>(map_), size_);
  if (fd_ >= 0) ::close(fd_);
}

Status GgufFile::read_at(const uint8_t* p, void* dst, size_t n) const {
  if (map_ == nullptr || fd_ < 0 || p < map_ || n > size_ || size_t(p - map_) > size_ - n) {
    return Status::invalid_argument(path_ + ": read_at outside the file's mapping");
  }
  const off_t offset = off_t(p - map_);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd_, static_cast<uint8_t*>(dst) + done, n - done, offset + off_t(done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const std::string why = r < 0 ? std::string(std::strerror(errno)) : "the file is shorter now";
      return Status::io_error(path_ + " changed on disk after it was loaded (" + why + " at byte " +
                               std::to_string(size_t(offset) + done) + " of the " + std::to_string(size_) +
                               " loaded): restart larderd to load it again");
    }
    done += size_t(r);
  }
  // Written over in place since it was opened (the same inode: fd_ is
  // still that file)?
  struct stat st {};
  if (::fstat(fd_, &st) == 0) {
    const int64_t mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    if (size_t(st.st_size) != size_ || mtime_ns != mtime_ns_) {
      return Status::io_error(path_ + " changed on disk after it was loaded (now " + std::to_string(st.st_size) +
                              " bytes, modified after it was opened; " + std::to_string(size_) +
                              " bytes loaded): restart larderd to load it again");
    }
  }
  return Status::ok();
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  return it == kv_.end() ? nullptr : &it->second;
}

namespace {
template <typename T>
Result<T> typed_get(const GgufFile& f, std::string_view key, Result<T> (GgufValue::*get)() const) {
  const GgufValue* v = f.find(key);
  if (!v) return Status::not_found(f.path() + ": metadata key '" + std::string(key) + "' is absent");
  Result<T> r = (v->*get)();
  if (!r.is_ok()) {
    return Status(r.status().code() == StatusCode::kOutOfRange ? StatusCode::kOutOfRange
                                                               : StatusCode::kInvalidArgument,
                  f.path() + ": metadata key '" + std::string(key) + "': " + r.status().message());
  }
  return r;
}
}  // namespace

Result<int64_t> GgufFile::get_int(std::string_view key) const {
  return typed_get<int64_t>(*this, key, &GgufValue::as_int);
}
Result<double> GgufFile::get_float(std::string_view key) const {
  return typed_get<double>(*this, key, &GgufValue::as_float);
}
Result<std::string> GgufFile::get_string(std::string_view key) const {
  return typed_get<std::string>(*this, key, &GgufValue::as_string);
}
Result<bool> GgufFile::get_bool(std::string_view key) const {
  return typed_get<bool>(*this, key, &GgufValue::as_bool);
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const GgufTensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace larder
