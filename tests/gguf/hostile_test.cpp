// Malformed GGUF files: every one must give a clear error Status, never a
// crash, an over-read (this binary is also run under AddressSanitizer) or a
// huge allocation. Byte offsets patched below follow the GGUF v3 layout:
//   0 magic(4) | 4 version u32 | 8 n_tensors u64 | 16 n_kv u64 |
//   24 first key: length u64 | 32 key bytes | type u32 | value ...
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "tests/support/gguf_writer.h"

using namespace larder;
using namespace larder::testing;

namespace {

std::string temp_file(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("larder_gguf_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// Writes bytes to a temp file, opens it, removes the file, returns the status.
Status open_bytes(const std::vector<uint8_t>& bytes, const std::string& name = "hostile.gguf") {
  const std::string path = temp_file(name);
  Status w = write_file_bytes(path, bytes);
  if (!w.is_ok()) return w;
  auto r = GgufFile::open(path);
  std::filesystem::remove(path);
  return r.status();
}

void patch_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }
void patch_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }

// A small valid file: metadata of several kinds (first key "a.b", a u32
// array), a nested array, an F32 and a Q8_0 tensor.
GgufWriter small_writer() {
  GgufWriter w;
  w.add("a.b", gguf_array(GgufValueType::kUint32, {gguf_u32(1), gguf_u32(2), gguf_u32(3)}));
  w.add("general.architecture", gguf_str("llama"));
  w.add("nested", gguf_array(GgufValueType::kArray,
                             {gguf_i32_array({1, 2}), gguf_array(GgufValueType::kString, {gguf_str("x")})}));
  w.add("f", gguf_f32(0.5f));
  w.set_alignment(32);
  REQUIRE(w.add_tensor("t0", {4, 2}, GgmlType::kF32, {1, 2, 3, 4, 5, 6, 7, 8}).is_ok());
  std::vector<float> q(32);
  for (int i = 0; i < 32; ++i) q[size_t(i)] = float(i) / 8.0f;
  REQUIRE(w.add_tensor("t1", {32}, GgmlType::kQ8_0, q).is_ok());
  return w;
}

bool has(const Status& s, const std::string& needle) {
  return s.message().find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("the small writer file is valid", "[gguf][hostile]") {
  const std::vector<uint8_t> bytes = small_writer().to_bytes();
  CHECK(open_bytes(bytes).is_ok());
}

TEST_CASE("a file truncated at every length gives an error", "[gguf][hostile]") {
  const std::vector<uint8_t> bytes = small_writer().to_bytes();
  REQUIRE(bytes.size() > 100);
  const std::string path = temp_file("trunc.gguf");
  for (size_t len = 0; len < bytes.size(); ++len) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + ptrdiff_t(len));
    REQUIRE(write_file_bytes(path, cut).is_ok());
    auto r = GgufFile::open(path);
    INFO("length " << len);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == StatusCode::kCorruption);
    CHECK(has(r.status(), path));
  }
  std::filesystem::remove(path);
}

TEST_CASE("hostile counts and lengths are refused before allocating", "[gguf][hostile]") {
  SECTION("tensor count 2^60") {
    GgufWriter w = small_writer();
    w.override_tensor_count(uint64_t(1) << 60);
    Status s = open_bytes(w.to_bytes());
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK(has(s, "tensor count 1152921504606846976"));
  }
  SECTION("metadata count 2^62") {
    GgufWriter w = small_writer();
    w.override_kv_count(uint64_t(1) << 62);
    Status s = open_bytes(w.to_bytes());
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK(has(s, "metadata count"));
  }
  SECTION("key string length 2^60") {
    std::vector<uint8_t> b = small_writer().to_bytes();
    patch_u64(b, 24, uint64_t(1) << 60);  // length of the first key "a.b"
    Status s = open_bytes(b);
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK(has(s, "metadata key length 1152921504606846976"));
    CHECK(has(s, "offset 32"));
  }
  SECTION("array count beyond the file") {
    std::vector<uint8_t> b = small_writer().to_bytes();
    // "a.b": 24 len | 32 "a.b" | 35 type u32 (9) | 39 elem type u32 (4) | 43 count u64.
    REQUIRE(b[35] == 9);
    REQUIRE(b[39] == 4);
    REQUIRE(b[43] == 3);
    for (uint64_t count : {uint64_t(1000000), uint64_t(1) << 62, ~uint64_t(0)}) {
      patch_u64(b, 43, count);
      Status s = open_bytes(b);
      CHECK(s.code() == StatusCode::kCorruption);
      CHECK(has(s, "array of " + std::to_string(count) + " uint32"));
    }
  }
  SECTION("unknown metadata value type") {
    std::vector<uint8_t> b = small_writer().to_bytes();
    patch_u32(b, 35, 13);
    Status s = open_bytes(b);
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK(has(s, "unknown metadata value type 13"));
  }
  SECTION("absurd tensor dimensions") {
    GgufWriter w;
    w.add_tensor_raw("huge", {int64_t(1) << 40, int64_t(1) << 40}, 0, {});
    Status s = open_bytes(w.to_bytes());
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK(has(s, "'huge' has too many elements"));
    GgufWriter w2;
    w2.add_tensor_raw("neg", {-1}, 0, {});
    Status s2 = open_bytes(w2.to_bytes());
    CHECK(s2.code() == StatusCode::kCorruption);
    CHECK(has(s2, "'neg' has an absurd dimension"));
  }
}

TEST_CASE("bad headers", "[gguf][hostile]") {
  std::vector<uint8_t> b = small_writer().to_bytes();
  SECTION("bad magic") {
    b[0] = 'X';
    Status s = open_bytes(b);
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK(has(s, "bad magic"));
  }
  SECTION("version 1 and version 4") {
    for (uint32_t v : {1u, 4u}) {
      GgufWriter w = small_writer();
      w.set_version(v);
      Status s = open_bytes(w.to_bytes());
      CHECK(s.code() == StatusCode::kUnsupported);
      CHECK(has(s, "GGUF version " + std::to_string(v)));
    }
  }
  SECTION("version 2 is accepted") {
    GgufWriter w = small_writer();
    w.set_version(2);
    CHECK(open_bytes(w.to_bytes()).is_ok());
  }
  SECTION("no such file, a directory, an empty file") {
    auto r = GgufFile::open(temp_file("does_not_exist.gguf"));
    CHECK(r.status().code() == StatusCode::kNotFound);
    auto d = GgufFile::open(std::filesystem::temp_directory_path().string());
    CHECK_FALSE(d.is_ok());
    CHECK(open_bytes({}).code() == StatusCode::kCorruption);
  }
  SECTION("a FIFO is refused without waiting for a writer") {
    // Found by the hostile pass of the draft model: --draft-model (and
    // --model) naming a FIFO blocked start-up in open() for ever.
    const std::string path = temp_file("fifo.gguf");
    std::filesystem::remove(path);
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    auto pending = std::async(std::launch::async, [&] { return GgufFile::open(path).status(); });
    if (pending.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      const int w = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);  // unblock it, then fail
      if (w >= 0) ::close(w);
      std::filesystem::remove(path);
      FAIL("opening a FIFO as a GGUF file blocked");
    }
    const Status st = pending.get();
    std::filesystem::remove(path);
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK(has(st, "not a regular file"));
  }
  SECTION("alignment 0 and 48") {
    for (uint32_t a : {0u, 48u}) {
      GgufWriter w;
      w.set_alignment(a);
      Status s = open_bytes(w.to_bytes());
      CHECK(s.code() == StatusCode::kCorruption);
      CHECK(has(s, "general.alignment " + std::to_string(a)));
    }
  }
  SECTION("duplicate key") {
    GgufWriter w;
    w.add("k", gguf_u32(1));
    w.add("k", gguf_u32(2));
    Status s = open_bytes(w.to_bytes());
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK(has(s, "duplicate metadata key 'k'"));
  }
  SECTION("bool value 2") {
    GgufWriter w;
    w.add("a.b", gguf_bool(true));
    std::vector<uint8_t> bb = w.to_bytes();
    bb[39] = 2;  // 24 len | 32 "a.b" | 35 type | 39 value
    Status s = open_bytes(bb);
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK(has(s, "bool value 2"));
  }
}

TEST_CASE("array nesting is limited to 8 levels", "[gguf][hostile]") {
  auto nest = [](int levels) {
    GgufValue v = gguf_i32_array({7});
    for (int i = 1; i < levels; ++i) v = gguf_array(GgufValueType::kArray, {v});
    GgufWriter w;
    w.add("deep", v);
    return w.to_bytes();
  };
  CHECK(open_bytes(nest(8)).is_ok());
  Status s = open_bytes(nest(9));
  CHECK(s.code() == StatusCode::kCorruption);
  CHECK(has(s, "nested deeper than 8"));
}

TEST_CASE("bad tensor infos", "[gguf][hostile]") {
  const std::vector<uint8_t> four_floats(16, 0);
  SECTION("unknown tensor type id names the tensor and the id") {
    GgufWriter w;
    w.add_tensor_raw("blk.0.mystery", {4}, 99, four_floats);
    Status s = open_bytes(w.to_bytes());
    CHECK(s.code() == StatusCode::kUnsupported);
    CHECK(has(s, "'blk.0.mystery'"));
    CHECK(has(s, "type id 99"));
  }
  SECTION("an i-quant larder does not compute with is named, and its size known") {
    // IQ3_S (ggml type 21): 110 bytes per 256 values; two rows.
    GgufWriter w;
    w.add_tensor_raw("blk.0.ffn_up.weight", {256, 2}, 21, std::vector<uint8_t>(220, 0));
    const std::string path = temp_file("iq3s.gguf");
    REQUIRE(write_file_bytes(path, w.to_bytes()).is_ok());
    auto f = GgufFile::open(path);
    std::filesystem::remove(path);  // the mapping stays valid
    REQUIRE(f.is_ok());
    const GgufTensorInfo* t = f.value()->find_tensor("blk.0.ffn_up.weight");
    REQUIRE(t != nullptr);
    CHECK(std::string(ggml_type_name(t->type)) == "IQ3_S");
    CHECK(t->n_bytes == 220);
    CHECK_FALSE(ggml_type_supported(t->type));
  }
  SECTION("data offset past the end") {
    GgufWriter w;
    w.add_tensor_raw("far", {4}, 0, four_floats, uint64_t(1) << 20);
    Status s = open_bytes(w.to_bytes());
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK(has(s, "'far'"));
    CHECK(has(s, "outside the file"));
  }
  SECTION("an offset near 2^64 is named as stored, not wrapped around") {
    // Found by the hostile pass of issue 11: offset 2^64 - 64 printed a
    // range that wrapped around into the file.
    GgufWriter w;
    w.add_tensor_raw("huge", {4}, 0, four_floats, ~uint64_t(63));
    Status s = open_bytes(w.to_bytes());
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK(has(s, "'huge' data at offset 18446744073709551552 of the data section"));
    CHECK(has(s, "outside the file"));
  }
  SECTION("data longer than the file") {
    GgufWriter w;
    w.add_tensor_raw("long", {1000}, 0, four_floats);  // needs 4000 bytes, has 16
    Status s = open_bytes(w.to_bytes());
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK(has(s, "'long'"));
  }
  SECTION("misaligned offset") {
    GgufWriter w;
    w.add_tensor_raw("mis", {4}, 0, four_floats, 4);
    std::vector<uint8_t> b = w.to_bytes();
    b.resize(b.size() + 64, 0);  // data would be inside the file
    Status s = open_bytes(b);
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK(has(s, "'mis' data offset 4 is not aligned to 32"));
  }
  SECTION("row length not a multiple of the Q8_0 block") {
    GgufWriter w;
    w.add_tensor_raw("q", {33}, uint32_t(GgmlType::kQ8_0), std::vector<uint8_t>(68, 0));
    Status s = open_bytes(w.to_bytes());
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK(has(s, "'q' row length 33 is not a multiple of the Q8_0 block size 32"));
  }
  SECTION("n_dims 0 and 5") {
    for (size_t nd : {size_t(0), size_t(5)}) {
      GgufWriter w;
      w.add_tensor_raw("d", std::vector<int64_t>(nd, 1), 0, four_floats);
      Status s = open_bytes(w.to_bytes());
      CHECK(s.code() == StatusCode::kCorruption);
      CHECK(has(s, "n_dims " + std::to_string(nd)));
    }
  }
  SECTION("duplicate tensor name") {
    GgufWriter w;
    w.add_tensor_raw("same", {4}, 0, four_floats);
    w.add_tensor_raw("same", {4}, 0, four_floats);
    Status s = open_bytes(w.to_bytes());
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK(has(s, "duplicate tensor name 'same'"));
  }
}
