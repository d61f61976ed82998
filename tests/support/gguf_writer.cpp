// GGUF v3 writer for tests and benchmarks (see gguf_writer.h).
#include "tests/support/gguf_writer.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "engine/gguf/quant_blocks.h"
#include "tests/support/quant_encode.h"

namespace larder::testing {

// ---- value builders ----------------------------------------------------------

namespace {
GgufValue make(GgufValueType t, decltype(GgufValue::v) v) {
  GgufValue g;
  g.type = t;
  g.v = std::move(v);
  return g;
}
}  // namespace

GgufValue gguf_u8(uint8_t x) { return make(GgufValueType::kUint8, uint64_t(x)); }
GgufValue gguf_i8(int8_t x) { return make(GgufValueType::kInt8, int64_t(x)); }
GgufValue gguf_u16(uint16_t x) { return make(GgufValueType::kUint16, uint64_t(x)); }
GgufValue gguf_i16(int16_t x) { return make(GgufValueType::kInt16, int64_t(x)); }
GgufValue gguf_u32(uint32_t x) { return make(GgufValueType::kUint32, uint64_t(x)); }
GgufValue gguf_i32(int32_t x) { return make(GgufValueType::kInt32, int64_t(x)); }
GgufValue gguf_u64(uint64_t x) { return make(GgufValueType::kUint64, x); }
GgufValue gguf_i64(int64_t x) { return make(GgufValueType::kInt64, x); }
GgufValue gguf_f32(float x) { return make(GgufValueType::kFloat32, double(x)); }
GgufValue gguf_f64(double x) { return make(GgufValueType::kFloat64, x); }
GgufValue gguf_bool(bool x) { return make(GgufValueType::kBool, x); }
GgufValue gguf_str(std::string s) { return make(GgufValueType::kString, std::move(s)); }
GgufValue gguf_array(GgufValueType elem_type, std::vector<GgufValue> items) {
  GgufValue g = make(GgufValueType::kArray, std::move(items));
  g.array_type = elem_type;
  return g;
}
GgufValue gguf_str_array(const std::vector<std::string>& items) {
  std::vector<GgufValue> v;
  v.reserve(items.size());
  for (const auto& s : items) v.push_back(gguf_str(s));
  return gguf_array(GgufValueType::kString, std::move(v));
}
GgufValue gguf_f32_array(const std::vector<float>& items) {
  std::vector<GgufValue> v;
  v.reserve(items.size());
  for (float x : items) v.push_back(gguf_f32(x));
  return gguf_array(GgufValueType::kFloat32, std::move(v));
}
GgufValue gguf_i32_array(const std::vector<int32_t>& items) {
  std::vector<GgufValue> v;
  v.reserve(items.size());
  for (int32_t x : items) v.push_back(gguf_i32(x));
  return gguf_array(GgufValueType::kInt32, std::move(v));
}

// ---- row encoding ------------------------------------------------------------

Status encode_row(GgmlType type, const float* x, int64_t n, uint8_t* dst) {
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, x, size_t(n) * 4);
      return Status::ok();
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_fp16(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return Status::ok();
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_bf16(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return Status::ok();
    case GgmlType::kQ8_0: {
      if (n % kQ8_0BlockSize != 0) {
        return Status::invalid_argument("Q8_0 row of " + std::to_string(n) + " values is not a multiple of 32");
      }
      for (int64_t b = 0; b < n / kQ8_0BlockSize; ++b) {
        const float* xb = x + b * kQ8_0BlockSize;
        float amax = 0.0f;
        for (int j = 0; j < kQ8_0BlockSize; ++j) amax = std::max(amax, std::fabs(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint8_t* blk = dst + b * int64_t(sizeof(BlockQ8_0));
        const uint16_t dh = fp32_to_fp16(d);
        std::memcpy(blk, &dh, 2);
        for (int j = 0; j < kQ8_0BlockSize; ++j) {
          blk[2 + j] = uint8_t(int8_t(std::lround(xb[j] * id)));
        }
      }
      return Status::ok();
    }
    default: {
      const int64_t bs = ggml_block_size(type);
      if (!ggml_type_supported(type) || bs <= 1) {
        return Status::invalid_argument(std::string("cannot encode type ") +
                                        (ggml_type_name(type) ? ggml_type_name(type) : "?"));
      }
      if (n % bs != 0) {
        return Status::invalid_argument(std::string(ggml_type_name(type)) + " row of " + std::to_string(n) +
                                        " values is not a multiple of " + std::to_string(bs));
      }
      const size_t block_bytes = ggml_type_size(type);
      for (int64_t b = 0; b < n / bs; ++b) (void)encode_quant_block(type, x + b * bs, dst + b * int64_t(block_bytes));
      return Status::ok();
    }
  }
}

// ---- writer ----------------------------------------------------------------

class GgufSink {
 public:
  virtual ~GgufSink() = default;
  virtual void put(const void* p, size_t n) = 0;
  uint64_t pos() const { return pos_; }
  template <typename T>
  void pod(T v) { put(&v, sizeof(T)); }  // little-endian host, as GGUF
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    put(s.data(), s.size());
  }
  void pad_to(uint64_t align) {
    static const uint8_t kZeros[256] = {};
    while (pos_ % align != 0) {
      const uint64_t n = std::min<uint64_t>(sizeof(kZeros), align - pos_ % align);
      put(kZeros, size_t(n));
    }
  }

 protected:
  uint64_t pos_ = 0;
};

namespace {

class VectorSink : public GgufSink {
 public:
  explicit VectorSink(std::vector<uint8_t>* out) : out_(out) {}
  void put(const void* p, size_t n) override {
    const auto* b = static_cast<const uint8_t*>(p);
    out_->insert(out_->end(), b, b + n);
    pos_ += n;
  }

 private:
  std::vector<uint8_t>* out_;
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

class FileSink : public GgufSink {
 public:
  explicit FileSink(std::FILE* f) : f_(f) {}
  void put(const void* p, size_t n) override {
    if (n != 0 && std::fwrite(p, 1, n, f_) != n) failed_ = true;
    pos_ += n;
  }
  bool failed() const { return failed_; }

 private:
  std::FILE* f_;
  bool failed_ = false;
};

void put_value(GgufSink& out, const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::kUint8: out.pod<uint8_t>(uint8_t(std::get<uint64_t>(v.v))); return;
    case GgufValueType::kUint16: out.pod<uint16_t>(uint16_t(std::get<uint64_t>(v.v))); return;
    case GgufValueType::kUint32: out.pod<uint32_t>(uint32_t(std::get<uint64_t>(v.v))); return;
    case GgufValueType::kUint64: out.pod<uint64_t>(std::get<uint64_t>(v.v)); return;
    case GgufValueType::kInt8: out.pod<int8_t>(int8_t(std::get<int64_t>(v.v))); return;
    case GgufValueType::kInt16: out.pod<int16_t>(int16_t(std::get<int64_t>(v.v))); return;
    case GgufValueType::kInt32: out.pod<int32_t>(int32_t(std::get<int64_t>(v.v))); return;
    case GgufValueType::kInt64: out.pod<int64_t>(std::get<int64_t>(v.v)); return;
    case GgufValueType::kFloat32: out.pod<float>(float(std::get<double>(v.v))); return;
    case GgufValueType::kFloat64: out.pod<double>(std::get<double>(v.v)); return;
    case GgufValueType::kBool: out.pod<uint8_t>(std::get<bool>(v.v) ? 1 : 0); return;
    case GgufValueType::kString: out.str(std::get<std::string>(v.v)); return;
    case GgufValueType::kArray: {
      const auto& items = std::get<std::vector<GgufValue>>(v.v);
      out.pod<uint32_t>(uint32_t(v.array_type));
      out.pod<uint64_t>(items.size());
      for (const GgufValue& item : items) put_value(out, item);
      return;
    }
  }
}

Status check_shape(const std::string& name, const std::vector<int64_t>& ne, GgmlType type, int64_t* n_rows) {
  if (ne.empty() || ne.size() > 4) return Status::invalid_argument(name + ": 1..4 dims");
  int64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
  if (!ggml_type_supported(type)) {
    return Status::invalid_argument(name + ": the writer stores only the types larder reads");
  }
  if (ne[0] % ggml_block_size(type) != 0) {
    return Status::invalid_argument(name + ": ne[0] is not a multiple of the block size");
  }
  *n_rows = rows;
  return Status::ok();
}

}  // namespace

void GgufWriter::set_alignment(uint32_t alignment, bool write_key) {
  alignment_ = alignment;
  if (write_key) add("general.alignment", gguf_u32(alignment));
}

void GgufWriter::add(std::string key, GgufValue value) {
  kv_.emplace_back(std::move(key), std::move(value));
}

Status GgufWriter::add_tensor(std::string name, std::vector<int64_t> ne, GgmlType type,
                              std::vector<float> data) {
  int64_t rows = 0;
  LARDER_RETURN_IF_ERROR(check_shape(name, ne, type, &rows));
  if (int64_t(data.size()) != rows * ne[0]) {
    return Status::invalid_argument(name + ": " + std::to_string(data.size()) +
                                    " values for a shape of " + std::to_string(rows * ne[0]));
  }
  const int64_t ne0 = ne[0];
  auto shared = std::make_shared<std::vector<float>>(std::move(data));
  return add_tensor_rows(std::move(name), std::move(ne), type,
                         [shared, ne0](int64_t row, float* out) {
                           std::memcpy(out, shared->data() + row * ne0, size_t(ne0) * 4);
                         });
}

Status GgufWriter::add_tensor_rows(std::string name, std::vector<int64_t> ne, GgmlType type, GgufRowFn fn) {
  int64_t rows = 0;
  LARDER_RETURN_IF_ERROR(check_shape(name, ne, type, &rows));
  Tensor t;
  t.name = std::move(name);
  t.type_id = uint32_t(type);
  t.n_bytes = uint64_t(ggml_row_size(type, ne[0])) * uint64_t(rows);
  t.ne = std::move(ne);
  t.fn = std::move(fn);
  tensors_.push_back(std::move(t));
  return Status::ok();
}

void GgufWriter::add_tensor_raw(std::string name, std::vector<int64_t> ne, uint32_t type_id,
                                std::vector<uint8_t> bytes, std::optional<uint64_t> offset) {
  Tensor t;
  t.name = std::move(name);
  t.ne = std::move(ne);
  t.type_id = type_id;
  t.n_bytes = bytes.size();
  t.raw = std::move(bytes);
  t.offset_override = offset;
  tensors_.push_back(std::move(t));
}

void GgufWriter::serialize(GgufSink& out) const {
  const uint64_t align = alignment_ == 0 ? 1 : alignment_;
  out.put("GGUF", 4);
  out.pod<uint32_t>(version_);
  out.pod<uint64_t>(tensor_count_override_.value_or(tensors_.size()));
  out.pod<uint64_t>(kv_count_override_.value_or(kv_.size()));
  for (const auto& [key, value] : kv_) {
    out.str(key);
    out.pod<uint32_t>(uint32_t(value.type));
    put_value(out, value);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    out.str(t.name);
    out.pod<uint32_t>(uint32_t(t.ne.size()));
    for (int64_t n : t.ne) out.pod<uint64_t>(uint64_t(n));
    out.pod<uint32_t>(t.type_id);
    out.pod<uint64_t>(t.offset_override.value_or(offset));
    offset = (offset + t.n_bytes + align - 1) / align * align;
  }
  out.pad_to(align);
  std::vector<float> row;
  std::vector<uint8_t> enc;
  for (const Tensor& t : tensors_) {
    out.pad_to(align);
    if (!t.fn) {
      out.put(t.raw.data(), t.raw.size());
      continue;
    }
    const GgmlType type = GgmlType(t.type_id);
    const int64_t ne0 = t.ne[0];
    const size_t row_bytes = ggml_row_size(type, ne0);
    const int64_t rows = ne0 == 0 ? 0 : int64_t(t.n_bytes / (row_bytes ? row_bytes : 1));
    row.resize(size_t(ne0));
    enc.resize(row_bytes);
    for (int64_t r = 0; r < rows; ++r) {
      t.fn(r, row.data());
      (void)encode_row(type, row.data(), ne0, enc.data());  // type checked when added
      out.put(enc.data(), enc.size());
    }
  }
}

Status GgufWriter::write(const std::string& path) const {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "wb"));
  if (!f) return Status::io_error(path + ": cannot open for writing");
  std::vector<char> buf(size_t(4) << 20);
  std::setvbuf(f.get(), buf.data(), _IOFBF, buf.size());
  FileSink sink(f.get());
  serialize(sink);
  const bool close_failed = std::fclose(f.release()) != 0;
  if (sink.failed() || close_failed) return Status::io_error(path + ": write failed");
  return Status::ok();
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out;
  VectorSink sink(&out);
  serialize(sink);
  return out;
}

Status write_file_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "wb"));
  if (!f) return Status::io_error(path + ": cannot open for writing");
  const bool ok = bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), f.get()) == bytes.size();
  const bool close_failed = std::fclose(f.release()) != 0;
  if (!ok || close_failed) return Status::io_error(path + ": write failed");
  return Status::ok();
}

Status copy_gguf_with_chat_template(const std::string& src, const std::string& dst, const std::string& chat_template) {
  auto in = GgufFile::open(src);
  if (!in.is_ok()) return in.status();
  const GgufFile& f = **in;
  GgufWriter w;
  w.set_alignment(f.alignment(), /*write_key=*/false);  // general.alignment, if any, is copied below
  for (const auto& [key, value] : f.metadata()) {
    if (key != "tokenizer.chat_template") w.add(key, value);
  }
  w.add("tokenizer.chat_template", gguf_str(chat_template));
  for (const GgufTensorInfo& t : f.tensors()) {
    w.add_tensor_raw(t.name, std::vector<int64_t>(t.ne, t.ne + t.n_dims), static_cast<uint32_t>(t.type),
                     std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  return w.write(dst);
}

}  // namespace larder::testing
