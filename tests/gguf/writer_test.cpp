// The test GGUF writer round-trips through the reader: metadata of every type
// (nested arrays too) and tensors in each storage type, with expected bytes
// worked out by hand.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/random_llama.h"

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

// ---- quantized encoders (tests/support/quant_encode.h) ----------------------
//
// Error bounds, from the block formats (docs/quant-formats.md) and the
// encoders' min/max scale choice. A = max|x| over the block (k-quants: the
// 256-value super-block); for sub-block s: a_s = max|x|, lo_s = min(x, 0),
// r_s = max(x) - lo_s; R = max r_s, M = max -lo_s. A quant of step h rounds
// to within h/2; a k-quant's stored sub-block step is sc * d with
// sc = ceil(step / d), so at most step + d; its min dmin * round(-lo / dmin)
// is off by at most dmin / 2, which a clamped end quant can add once more:
//   Q4_0  step A/7,  |err| <= A/14         Q5_0  step A/15, |err| <= A/30
//   Q4_1  step (max-min)/15 -> (max-min)/30   Q5_1 (max-min)/31 -> (max-min)/62
//   Q2_K  step r_s/3,  d = R/45,  dmin = M/15:  r_s/6  + R/90   + M/30
//   Q3_K  step a_s/3,  d = A/93:                a_s/6  + A/186
//   Q4_K  step r_s/15, d = R/945, dmin = M/63:  r_s/30 + R/1890 + M/126
//   Q5_K  step r_s/31, d = R/1953, dmin = M/63: r_s/62 + R/3906 + M/126
//   Q6_K  step a_s/31, d = A/3937:              a_s/62 + A/7874
//   IQ4_NL step A/127: the table's largest gap is 24 (half: 12) and its top,
//          113, is 14 below 127, so |err| <= 14 step:     14 A/127
//   IQ4_XS step a_s/127, d = A/3937:             14 a_s/127 + 14 A/3937
// plus the f16 rounding of the scales (rounded up: <= 2^-10 relative, or
// 2^-24 absolute when subnormal, times sc <= 127): 2^-9 A + 2^-17.

namespace {

struct SubStats {
  float amax = 0, lo = 0, hi = -1e30f;
};

SubStats stats(const float* x, int n) {
  SubStats s;
  for (int i = 0; i < n; ++i) {
    s.amax = std::max(s.amax, std::fabs(x[i]));
    s.lo = std::min(s.lo, x[i]);
    s.hi = std::max(s.hi, x[i]);
  }
  return s;
}

// The bound above for value i of a block of `type` starting at x.
double error_bound(GgmlType type, const float* x, int i) {
  const int bs = int(ggml_block_size(type));
  const SubStats blk = stats(x, bs);
  const double A = blk.amax;
  const int sub = (type == GgmlType::kQ4_K || type == GgmlType::kQ5_K || type == GgmlType::kIQ4_XS) ? 32 : 16;
  double R = 0, M = 0;
  for (int s = 0; s < bs / sub; ++s) {
    const SubStats ss = stats(x + s * sub, sub);
    R = std::max(R, double(ss.hi - ss.lo));
    M = std::max(M, double(-ss.lo));
  }
  const SubStats mine = stats(x + (i / sub) * sub, sub);
  const double r_s = mine.hi - mine.lo, a_s = mine.amax;
  double b = 0;
  switch (type) {
    case GgmlType::kQ4_0: b = A / 14; break;
    case GgmlType::kQ5_0: b = A / 30; break;
    case GgmlType::kQ4_1: b = (blk.hi - *std::min_element(x, x + bs)) / 30.0; break;
    case GgmlType::kQ5_1: b = (blk.hi - *std::min_element(x, x + bs)) / 62.0; break;
    case GgmlType::kQ2_K: b = r_s / 6 + R / 90 + M / 30; break;
    case GgmlType::kQ3_K: b = a_s / 6 + A / 186; break;
    case GgmlType::kQ4_K: b = r_s / 30 + R / 1890 + M / 126; break;
    case GgmlType::kQ5_K: b = r_s / 62 + R / 3906 + M / 126; break;
    case GgmlType::kQ6_K: b = a_s / 62 + A / 7874; break;
    case GgmlType::kQ8_0: b = A / 254; break;
    case GgmlType::kIQ4_NL: b = 14 * A / 127; break;
    case GgmlType::kIQ4_XS: b = 14 * a_s / 127 + 14 * A / 3937; break;
    default: FAIL("no bound");
  }
  return b + A / 512 + 1.0 / 131072;
}

// Deterministic test rows: ~N(0, sd^2) (sum of 4 uniforms), with a shift.
std::vector<float> test_row(uint32_t seed, int n, float sd, float shift) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t st = seed * 2654435761u + 12345u;
  auto u01 = [&] {
    st = st * 1664525u + 1013904223u;
    return float(st >> 8) / 16777216.0f;
  };
  for (float& x : v) x = (u01() + u01() + u01() + u01() - 2.0f) * 1.7320508f * sd + shift;
  return v;
}

std::vector<float> round_trip(GgmlType type, const std::vector<float>& x) {
  std::vector<uint8_t> enc(ggml_row_size(type, int64_t(x.size())));
  REQUIRE(encode_row(type, x.data(), int64_t(x.size()), enc.data()).is_ok());
  std::vector<float> y(x.size());
  dequantize_row(type, enc.data(), y.data(), int64_t(x.size()));
  return y;
}

const GgmlType kQuantTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
                                GgmlType::kQ5_1, GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K,
                                GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS};

}  // namespace

TEST_CASE("quantized rows decode within the format's error bound", "[gguf][writer][quant]") {
  const int n = 1024;  // 4 super-blocks, 32 legacy blocks
  for (GgmlType type : kQuantTypes) {
    INFO(ggml_type_name(type));
    // Gaussian rows at weight scales (0.02 gives subnormal f16 k-quant scales),
    // all-positive and all-negative rows, zeros, a constant, an outlier, and
    // sub-blocks of very different magnitude.
    std::vector<std::vector<float>> rows;
    uint32_t seed = 1;
    for (float sd : {0.02f, 0.06f, 1.0f, 300.0f}) rows.push_back(test_row(seed++, n, sd, 0.0f));
    rows.push_back(test_row(seed++, n, 0.1f, 0.5f));
    rows.push_back(test_row(seed++, n, 0.1f, -0.5f));
    rows.push_back(std::vector<float>(n, 0.0f));
    rows.push_back(std::vector<float>(n, -0.3f));
    std::vector<float> outlier = test_row(seed++, n, 0.05f, 0.0f);
    outlier[77] = 4.0f;
    outlier[600] = -7.0f;
    rows.push_back(outlier);
    std::vector<float> mixed = test_row(seed++, n, 1.0f, 0.0f);
    for (int i = 0; i < n; ++i) mixed[size_t(i)] *= ((i / 16) % 3 == 0) ? 1e-3f : 1.0f;
    rows.push_back(mixed);

    double worst_ratio = 0;
    for (const std::vector<float>& x : rows) {
      const std::vector<float> y = round_trip(type, x);
      const int bs = int(ggml_block_size(type));
      for (int i = 0; i < n; ++i) {
        const double err = std::fabs(double(y[size_t(i)]) - x[size_t(i)]);
        const double bound = error_bound(type, x.data() + (i / bs) * bs, i % bs);
        worst_ratio = std::max(worst_ratio, err / bound);
        if (err > bound) {
          INFO("value " << i << ": " << x[size_t(i)] << " -> " << y[size_t(i)] << ", bound " << bound);
          CHECK(err <= bound);
          break;
        }
      }
    }
    // The bound is not slack everywhere: some value comes within half of it.
    CHECK(worst_ratio > 0.5);
  }
}

TEST_CASE("quantized blocks by hand", "[gguf][writer][quant]") {
  SECTION("Q4_0") {
    // x_i = 0.25 * (i % 15 - 7): max|x| = 1.75, d = 1.75 / 7 = 0.25 (f16
    // 0x3400), q_i = i % 15 + 1; qs[j] = q_j | q_{j+16} << 4.
    std::vector<float> x(32);
    for (int i = 0; i < 32; ++i) x[size_t(i)] = 0.25f * float(i % 15 - 7);
    uint8_t b[18];
    REQUIRE(encode_row(GgmlType::kQ4_0, x.data(), 32, b).is_ok());
    CHECK((b[0] | b[1] << 8) == 0x3400);
    CHECK(b[2] == 0x21);   // q0 = 1, q16 = 2
    CHECK(b[3] == 0x32);   // q1 = 2, q17 = 3
    CHECK(b[16] == 0x1F);  // q14 = 15, q30 = 30 % 15 + 1 = 1
    CHECK(round_trip(GgmlType::kQ4_0, x) == x);
  }
  SECTION("Q4_K") {
    // Sub-block s: step sc_s / 256 with sc = 63, 56, ..., 14 (63 - 7s) and
    // min -m_s / 512 with m = 63, 55, ..., 7 (63 - 8s); quants
    // q_i = (7i + s) % 16 take every value 0..15 in each sub-block. So
    // d = max step / 63 = 2^-8 (f16 0x1C00), dmin = max min / 63 = 2^-9
    // (0x1800), and every x is on the grid.
    const int sc[8] = {63, 56, 49, 42, 35, 28, 21, 14}, m[8] = {63, 55, 47, 39, 31, 23, 15, 7};
    std::vector<float> x(256);
    for (int i = 0; i < 256; ++i) {
      const int s = i / 32, q = (7 * i + s) % 16;
      x[size_t(i)] = float(sc[s]) / 256.0f * float(q) - float(m[s]) / 512.0f;
    }
    uint8_t b[144];
    REQUIRE(encode_row(GgmlType::kQ4_K, x.data(), 256, b).is_ok());
    CHECK((b[0] | b[1] << 8) == 0x1C00);
    CHECK((b[2] | b[3] << 8) == 0x1800);
    // Scales: bytes 0..3 sc_s | (sc_{s+4} >> 4) << 6; 4..7 m_s | (m_{s+4} >> 4) << 6;
    // 8..11 (sc_{s+4} & 15) | (m_{s+4} & 15) << 4.
    const uint8_t scales[12] = {0xBF, 0x78, 0x71, 0x2A, 0x7F, 0x77, 0x2F, 0x27, 0xF3, 0x7C, 0xF5, 0x7E};
    CHECK(std::memcmp(b + 4, scales, 12) == 0);
    CHECK(b[16] == 0x10);  // q0 = 0 low, q32 = (224 + 1) % 16 = 1 high
    CHECK(b[17] == 0x87);  // q1 = 7, q33 = (231 + 1) % 16 = 8
    CHECK(round_trip(GgmlType::kQ4_K, x) == x);
  }
  SECTION("Q6_K") {
    // Sub-block s (16 values): scale 127 - 8s, d = 2^-10 (f16 0x1400);
    // q = -31 or 31 at the first value (so max|x| = 31 * step), else
    // (5i) % 63 - 31. Stored u = q + 32.
    std::vector<float> x(256);
    for (int i = 0; i < 256; ++i) {
      const int s = i / 16;
      const int q = i % 16 == 0 ? ((s & 1) ? 31 : -31) : (5 * i) % 63 - 31;
      x[size_t(i)] = float(127 - 8 * s) / 1024.0f * float(q);
    }
    uint8_t b[210];
    REQUIRE(encode_row(GgmlType::kQ6_K, x.data(), 256, b).is_ok());
    // ql[0]: u0 = 1 (low), u64 = 1 (high); ql[1]: u1 = 6, u65 = 11;
    // ql[33]: u33 = 40 -> 8, u97 = 45 -> 13; qh[1] (byte 129): top bits of
    // u1, u33, u65, u97 = 0, 2, 0, 2 at bits 0, 2, 4, 6.
    CHECK(b[0] == 0x11);
    CHECK(b[1] == 0xB6);
    CHECK(b[33] == 0xD8);
    CHECK(b[129] == 0x88);
    for (int s = 0; s < 16; ++s) CHECK(int8_t(b[192 + s]) == 127 - 8 * s);
    CHECK((b[208] | b[209] << 8) == 0x1400);
    CHECK(round_trip(GgmlType::kQ6_K, x) == x);
  }
}

TEST_CASE("random llama files take llama.cpp's Q4_K_M and Q5_K_M tensor types", "[gguf][writer][quant]") {
  RandomLlamaSpec s;  // Llama-3.2-1B: 16 layers, tied output, rows of 2048 / 8192
  s.n_layer = 16;
  s.mix = WeightMix::kQ4_K_M;
  auto type = [&](const std::string& name, int layer, int64_t ne0) {
    return ggml_type_name(random_llama_matrix_type(s, name, layer, ne0));
  };
  // use_more_bits(i, 16): i < 2, i >= 14, (i - 2) % 3 == 2 -> 0 1 4 7 10 13 14 15.
  const char* v_types[16] = {"Q6_K", "Q6_K", "Q4_K", "Q4_K", "Q6_K", "Q4_K", "Q4_K", "Q6_K",
                             "Q4_K", "Q4_K", "Q6_K", "Q4_K", "Q4_K", "Q6_K", "Q6_K", "Q6_K"};
  for (int i = 0; i < 16; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    CHECK(std::string(type(p + "attn_v.weight", i, 2048)) == v_types[i]);
    CHECK(std::string(type(p + "ffn_down.weight", i, 8192)) == v_types[i]);
    CHECK(std::string(type(p + "attn_q.weight", i, 2048)) == "Q4_K");
    CHECK(std::string(type(p + "ffn_gate.weight", i, 2048)) == "Q4_K");
  }
  CHECK(std::string(type("token_embd.weight", -1, 2048)) == "Q6_K");  // tied: the output's type
  s.tied_output = false;
  CHECK(std::string(type("token_embd.weight", -1, 2048)) == "Q4_K");
  CHECK(std::string(type("output.weight", -1, 2048)) == "Q6_K");
  s.mix = WeightMix::kQ5_K_M;
  CHECK(std::string(type("blk.3.attn_k.weight", 3, 2048)) == "Q5_K");
  CHECK(std::string(type("blk.4.attn_v.weight", 4, 2048)) == "Q6_K");
  // 2 layers: use_more_bits picks layer 1 only (7 * 2 / 8 = 1).
  s.n_layer = 2;
  CHECK(std::string(type("blk.0.ffn_down.weight", 0, 1024)) == "Q5_K");
  CHECK(std::string(type("blk.1.ffn_down.weight", 1, 1024)) == "Q6_K");
  // Qwen2.5-0.5B rows of 896: fallbacks Q4_K -> Q5_0, Q5_K -> Q5_1, output Q8_0.
  s.n_layer = 24;
  s.tied_output = true;
  s.mix = WeightMix::kQ4_K_M;
  CHECK(std::string(type("blk.0.attn_q.weight", 0, 896)) == "Q5_0");
  CHECK(std::string(type("blk.0.attn_v.weight", 0, 896)) == "Q8_0");  // Q6_K -> Q8_0
  CHECK(std::string(type("blk.5.ffn_down.weight", 5, 4864)) == "Q6_K");
  CHECK(std::string(type("blk.6.ffn_down.weight", 6, 4864)) == "Q4_K");
  CHECK(std::string(type("token_embd.weight", -1, 896)) == "Q8_0");
  s.mix = WeightMix::kQ5_K_M;
  CHECK(std::string(type("blk.0.attn_q.weight", 0, 896)) == "Q5_1");
  // Uniform types keep weight_type where the rows fit.
  s.mix = WeightMix::kUniform;
  s.weight_type = GgmlType::kQ3_K;
  CHECK(std::string(type("token_embd.weight", -1, 2048)) == "Q3_K");
  CHECK(std::string(type("blk.0.attn_q.weight", 0, 896)) == "Q4_0");
  s.weight_type = GgmlType::kQ4_1;
  CHECK(std::string(type("blk.0.attn_q.weight", 0, 48)) == "F16");
}

TEST_CASE("a random llama model in a mix loads with the mix's tensor types", "[gguf][writer][quant]") {
  RandomLlamaSpec s;
  s.n_embd = 256;
  s.n_ff = 512;
  s.n_layer = 2;
  s.mix = WeightMix::kQ4_K_M;
  const std::string path = temp_file("mix.gguf");
  REQUIRE(write_random_llama_gguf(path, s).is_ok());
  auto r = GgufFile::open(path);
  std::filesystem::remove(path);
  REQUIRE(r.is_ok());
  const GgufFile& f = **r;
  CHECK(f.get_int("general.file_type").value() == 15);
  auto type_of = [&](const char* name) { return f.find_tensor(name)->type; };
  CHECK(type_of("token_embd.weight") == GgmlType::kQ6_K);
  CHECK(type_of("blk.0.attn_v.weight") == GgmlType::kQ4_K);
  CHECK(type_of("blk.1.attn_v.weight") == GgmlType::kQ6_K);
  CHECK(type_of("blk.1.ffn_down.weight") == GgmlType::kQ6_K);
  CHECK(type_of("blk.1.ffn_up.weight") == GgmlType::kQ4_K);
  CHECK(type_of("blk.1.attn_norm.weight") == GgmlType::kF32);
}

TEST_CASE("drop_resident keeps a mapped tensor's bytes and ignores memory outside the mapping", "[gguf]") {
  // A 64 KiB F32 tensor (16 pages of 4 KiB) of known values.
  std::vector<float> values(16384);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i) * 0.5f - 7.0f;
  GgufWriter w;
  REQUIRE(w.add_tensor("big", {16384}, GgmlType::kF32, values).is_ok());
  const std::string path = temp_file("resident.gguf");
  REQUIRE(w.write(path).is_ok());
  auto r = GgufFile::open(path);
  std::filesystem::remove(path);  // the mapping outlives the name
  REQUIRE(r.is_ok());
  const GgufTensorInfo* t = (*r)->find_tensor("big");
  REQUIRE(t != nullptr);
  REQUIRE(std::memcmp(t->data, values.data(), values.size() * 4) == 0);  // pages faulted in
  (*r)->drop_resident(t->data, t->n_bytes);
  // The file's pages come back on the next read: the same bytes.
  CHECK(std::memcmp(t->data, values.data(), values.size() * 4) == 0);
  // Heap memory (not the mapping) is left alone: MADV_DONTNEED would zero it.
  std::vector<uint8_t> heap(1 << 16, 0xAB);
  (*r)->drop_resident(heap.data(), heap.size());
  CHECK(std::all_of(heap.begin(), heap.end(), [](uint8_t b) { return b == 0xAB; }));
}
