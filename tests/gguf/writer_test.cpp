// The test GGUF writer round-trips through the reader: metadata of every type
// (nested arrays too) and tensors in each storage type, with expected bytes
// worked out by hand.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>
#include <filesystem>
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

}  // namespace

TEST_CASE("metadata of every type round-trips", "[gguf][writer]") {
  GgufWriter w;
  w.add("u8", gguf_u8(250));
  w.add("i8", gguf_i8(-100));
  w.add("u16", gguf_u16(65000));
  w.add("i16", gguf_i16(-32000));
  w.add("u32", gguf_u32(4000000000u));
  w.add("i32", gguf_i32(-2000000000));
  w.add("u64", gguf_u64(18000000000000000000ull));
  w.add("i64", gguf_i64(-9000000000000000000ll));
  w.add("f32", gguf_f32(0.1f));
  w.add("f64", gguf_f64(0.1));
  w.add("bool", gguf_bool(true));
  w.add("str", gguf_str("h\xC3\xA9llo"));
  w.add("empty", gguf_array(GgufValueType::kFloat64, {}));
  // [[1, 2], [], [3]] of int32, and [["a"], ["b", "c"]] of strings, nested in one more level.
  GgufValue ints = gguf_array(GgufValueType::kArray,
                              {gguf_i32_array({1, 2}), gguf_i32_array({}), gguf_i32_array({3})});
  GgufValue strs = gguf_array(GgufValueType::kArray,
                              {gguf_str_array({"a"}), gguf_str_array({"b", "c"})});
  w.add("nested", gguf_array(GgufValueType::kArray, {ints, strs}));
  const std::string path = temp_file("meta.gguf");
  REQUIRE(w.write(path).is_ok());
  auto r = GgufFile::open(path);
  std::filesystem::remove(path);
  REQUIRE(r.is_ok());
  const GgufFile& f = **r;
  CHECK(f.metadata().size() == 14);
  CHECK(f.get_int("u8").value() == 250);
  CHECK(f.find("u8")->type == GgufValueType::kUint8);
  CHECK(f.get_int("i8").value() == -100);
  CHECK(f.get_int("u16").value() == 65000);
  CHECK(f.get_int("i16").value() == -32000);
  CHECK(f.get_int("u32").value() == 4000000000ll);
  CHECK(f.get_int("i32").value() == -2000000000ll);
  // 1.8e19 > INT64_MAX: out of range as int64, fine as a float.
  CHECK(f.get_int("u64").status().code() == StatusCode::kOutOfRange);
  CHECK(f.get_float("u64").value() == 18000000000000000000.0);
  CHECK(f.get_int("i64").value() == -9000000000000000000ll);
  CHECK(f.get_float("f32").value() == double(0.1f));  // float32 in the file
  CHECK(f.get_float("f64").value() == 0.1);
  CHECK(f.get_bool("bool").value() == true);
  CHECK(f.get_int("bool").value() == 1);
  CHECK(f.get_string("str").value() == "h\xC3\xA9llo");
  CHECK(f.get_bool("str").status().code() == StatusCode::kInvalidArgument);
  REQUIRE(f.find("empty")->as_array() != nullptr);
  CHECK(f.find("empty")->as_array()->empty());
  CHECK(f.find("empty")->array_type == GgufValueType::kFloat64);

  const GgufValue* n = f.find("nested");
  REQUIRE(n != nullptr);
  CHECK(n->array_type == GgufValueType::kArray);
  const auto& top = *n->as_array();
  REQUIRE(top.size() == 2);
  const auto& ia = *top[0].as_array();
  REQUIRE(ia.size() == 3);
  CHECK(ia[0].array_type == GgufValueType::kInt32);
  REQUIRE(ia[0].as_array()->size() == 2);
  CHECK((*ia[0].as_array())[1].as_int().value() == 2);
  CHECK(ia[1].as_array()->empty());
  CHECK((*ia[2].as_array())[0].as_int().value() == 3);
  const auto& sa = *top[1].as_array();
  REQUIRE(sa.size() == 2);
  CHECK((*sa[1].as_array())[1].as_string().value() == "c");
  CHECK(top[0].as_int().status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("tensors round-trip in every storage type", "[gguf][writer]") {
  GgufWriter w;
  w.set_alignment(64);
  REQUIRE(w.add_tensor("f32", {3}, GgmlType::kF32, {1.5f, -2.0f, 0.1f}).is_ok());
  // F16 of 1, 0.1, 65504, -2 = 0x3C00, 0x2E66, 0x7BFF, 0xC000 (IEEE binary16 by hand;
  // 0.1 checked with numpy: np.float16(0.1).view(np.uint16) == 0x2E66).
  REQUIRE(w.add_tensor("f16", {4}, GgmlType::kF16, {1.0f, 0.1f, 65504.0f, -2.0f}).is_ok());
  // BF16 of 1.0 and -2.0: the top 16 bits, 0x3F80 and 0xC000.
  REQUIRE(w.add_tensor("bf16", {2}, GgmlType::kBF16, {1.0f, -2.0f}).is_ok());
  // Q8_0 block with max|x| = 127: d = 1.0 (f16 0x3C00), q = round half away
  // from zero: 127 -> 127, -3.5 -> -4, 2.5 -> 3, 0.49 -> 0, -127 -> -127, rest 0.
  std::vector<float> q(32, 0.0f);
  q[0] = 127.0f; q[1] = -3.5f; q[2] = 2.5f; q[3] = 0.49f; q[4] = -127.0f;
  REQUIRE(w.add_tensor("q8", {32, 1}, GgmlType::kQ8_0, q).is_ok());
  CHECK(w.add_tensor("bad", {33}, GgmlType::kQ8_0, std::vector<float>(33)).code() == StatusCode::kInvalidArgument);
  CHECK(w.add_tensor("bad", {4}, GgmlType::kF32, std::vector<float>(3)).code() == StatusCode::kInvalidArgument);
  CHECK(w.add_tensor("bad", {32}, GgmlType::kQ4_K, std::vector<float>(32)).code() == StatusCode::kInvalidArgument);

  const std::string path = temp_file("tensors.gguf");
  REQUIRE(w.write(path).is_ok());
  auto r = GgufFile::open(path);
  std::filesystem::remove(path);
  REQUIRE(r.is_ok());
  const GgufFile& f = **r;
  CHECK(f.alignment() == 64);
  REQUIRE(f.tensors().size() == 4);
  for (const auto& t : f.tensors()) CHECK(t.offset % 64 == 0);
  CHECK(f.tensors()[1].offset == 64);  // 12 bytes of f32, padded to 64

  const GgufTensorInfo* a = f.find_tensor("f32");
  REQUIRE(a != nullptr);
  float fv[3];
  std::memcpy(fv, a->data, 12);
  CHECK(fv[0] == 1.5f);
  CHECK(fv[2] == 0.1f);

  const GgufTensorInfo* h = f.find_tensor("f16");
  REQUIRE(h != nullptr);
  CHECK(h->n_bytes == 8);
  uint16_t hv[4];
  std::memcpy(hv, h->data, 8);
  CHECK(hv[0] == 0x3C00);
  CHECK(hv[1] == 0x2E66);
  CHECK(hv[2] == 0x7BFF);
  CHECK(hv[3] == 0xC000);

  const GgufTensorInfo* b = f.find_tensor("bf16");
  REQUIRE(b != nullptr);
  uint16_t bv[2];
  std::memcpy(bv, b->data, 4);
  CHECK(bv[0] == 0x3F80);
  CHECK(bv[1] == 0xC000);

  const GgufTensorInfo* q8 = f.find_tensor("q8");
  REQUIRE(q8 != nullptr);
  CHECK(q8->n_dims == 2);
  REQUIRE(q8->n_bytes == 34);
  uint16_t d;
  std::memcpy(&d, q8->data, 2);
  CHECK(d == 0x3C00);
  const int8_t* qs = reinterpret_cast<const int8_t*>(q8->data + 2);
  CHECK(qs[0] == 127);
  CHECK(qs[1] == -4);
  CHECK(qs[2] == 3);
  CHECK(qs[3] == 0);
  CHECK(qs[4] == -127);
  CHECK(qs[31] == 0);
}

TEST_CASE("to_bytes and write produce the same file", "[gguf][writer]") {
  GgufWriter w;
  w.add("x", gguf_str("y"));
  REQUIRE(w.add_tensor("t", {2, 2}, GgmlType::kF16, {1, 2, 3, 4}).is_ok());
  const std::vector<uint8_t> mem = w.to_bytes();
  const std::string path = temp_file("same.gguf");
  REQUIRE(w.write(path).is_ok());
  CHECK(std::filesystem::file_size(path) == mem.size());
  REQUIRE(write_file_bytes(path, mem).is_ok());
  CHECK(GgufFile::open(path).is_ok());
  std::filesystem::remove(path);
  // Header by hand: "GGUF", version 3, 1 tensor, 1 kv.
  REQUIRE(mem.size() > 24);
  CHECK(std::memcmp(mem.data(), "GGUF\x03\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01", 17) == 0);
}
