// dequantize_row for the quantized block types against fixtures written by
// scripts/quant/ref_dequant.py, an independent Python decoder written from
// docs/quant-formats.md. Each fixture holds random blocks (random quant bytes,
// finite f16 scales including zeros, subnormals and the largest half) and the
// exact values rounded once to f32, so every value must match exactly
// (compared as numbers: +0 and -0 are equal, the Python side has no signed zero).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/gguf/ggml_types.h"
#include "engine/gguf/quant_blocks.h"

using namespace larder;

namespace {

struct Fixture {
  uint32_t type_id = 0, n_blocks = 0, block_bytes = 0, per_block = 0;
  std::vector<uint8_t> blocks;
  std::vector<float> values;
};

std::string fixture_dir() {
  if (const char* env = std::getenv("LARDER_QUANT_FIXTURES")) return env;
  std::string f = __FILE__;  // tests/gguf/quant_dequant_test.cpp in the source tree
  return f.substr(0, f.find_last_of('/')) + "/fixtures";
}

bool load_fixture(const std::string& name, Fixture* fx) {
  const std::string path = fixture_dir() + "/" + name + ".bin";
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[4];
  uint32_t hdr[4];
  bool ok = std::fread(magic, 1, 4, f) == 4 && std::memcmp(magic, "LQF1", 4) == 0 &&
            std::fread(hdr, 4, 4, f) == 4;
  if (ok) {
    fx->type_id = hdr[0], fx->n_blocks = hdr[1], fx->block_bytes = hdr[2], fx->per_block = hdr[3];
    fx->blocks.resize(size_t(fx->n_blocks) * fx->block_bytes);
    fx->values.resize(size_t(fx->n_blocks) * fx->per_block);
    ok = std::fread(fx->blocks.data(), 1, fx->blocks.size(), f) == fx->blocks.size() &&
         std::fread(fx->values.data(), 4, fx->values.size(), f) == fx->values.size();
  }
  std::fclose(f);
  return ok;
}

}  // namespace

TEST_CASE("quantized type table", "[gguf][types][quant]") {
  struct Row { GgmlType t; int64_t block; size_t bytes; };
  for (const Row& r : {Row{GgmlType::kQ4_0, 32, 18}, Row{GgmlType::kQ4_1, 32, 20},
                       Row{GgmlType::kQ5_0, 32, 22}, Row{GgmlType::kQ5_1, 32, 24},
                       Row{GgmlType::kQ2_K, 256, 84}, Row{GgmlType::kQ3_K, 256, 110},
                       Row{GgmlType::kQ4_K, 256, 144}, Row{GgmlType::kQ5_K, 256, 176},
                       Row{GgmlType::kQ6_K, 256, 210}, Row{GgmlType::kIQ4_NL, 32, 18},
                       Row{GgmlType::kIQ4_XS, 256, 136}}) {
    INFO(ggml_type_name(r.t));
    CHECK(ggml_type_supported(r.t));
    CHECK(ggml_block_size(r.t) == r.block);
    CHECK(ggml_type_size(r.t) == r.bytes);
  }
  CHECK_FALSE(ggml_type_supported(GgmlType::kQ8_1));  // activation formats only
  CHECK_FALSE(ggml_type_supported(GgmlType::kQ8_K));
}

TEST_CASE("dequantize_row matches the Python reference", "[gguf][types][quant]") {
  const GgmlType types[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                            GgmlType::kQ8_0, GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K,
                            GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS};
  int n_checked = 0;
  for (GgmlType t : types) {
    const std::string name = ggml_type_name(t);
    INFO(name);
    Fixture fx;
    if (!load_fixture(name, &fx)) {
      FAIL("fixture " << fixture_dir() << "/" << name << ".bin missing (committed; scripts/quant/ref_dequant.py makes it)");
    }
    REQUIRE(fx.type_id == uint32_t(t));
    REQUIRE(fx.block_bytes == ggml_type_size(t));
    REQUIRE(int64_t(fx.per_block) == ggml_block_size(t));
    const int64_t n = int64_t(fx.n_blocks) * fx.per_block;
    std::vector<float> got(size_t(n), std::nanf(""));
    // The whole fixture as one row, then block by block.
    dequantize_row(t, fx.blocks.data(), got.data(), n);
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (!(got[i] == fx.values[i])) {
        if (++bad <= 5) UNSCOPED_INFO("value " << i << ": got " << got[i] << " want " << fx.values[i]);
      }
    }
    CHECK(bad == 0);
    std::vector<float> one(fx.per_block);
    int bad_block = 0;
    for (uint32_t b = 0; b < fx.n_blocks; ++b) {
      dequantize_row(t, fx.blocks.data() + size_t(b) * fx.block_bytes, one.data(), fx.per_block);
      bad_block += std::memcmp(one.data(), got.data() + size_t(b) * fx.per_block, one.size() * 4) != 0;
    }
    CHECK(bad_block == 0);
    ++n_checked;
  }
  CHECK(n_checked >= 0);
}

TEST_CASE("k-quant scale unpacking by hand", "[gguf][types][quant]") {
  // Q4_K/Q5_K: entries 0..3 are the low 6 bits of bytes 0..3 (scales) and
  // 4..7 (mins); entry 4 takes byte 8's nibbles plus the top bits of bytes 0, 4.
  const uint8_t S[12] = {0xC5, 1, 2, 3, 0x47, 0, 0, 0, 0x21, 0, 0, 0};
  int sc, m;
  k4_scale_min(S, 0, &sc, &m);
  CHECK(sc == 5);     // 0xC5 & 63
  CHECK(m == 7);      // 0x47 & 63
  k4_scale_min(S, 4, &sc, &m);
  CHECK(sc == 0x31);  // 0x21 & 15 = 1, (0xC5 >> 6) = 3 -> 1 | 3 << 4
  CHECK(m == 0x12);   // 0x21 >> 4 = 2, (0x47 >> 6) = 1 -> 2 | 1 << 4
  // Q3_K: scale 5 = high nibble of byte 5 plus bits 2-3 of byte 9.
  uint8_t T[12] = {};
  T[5] = 0x70;       // scale 13 low = 7
  T[9] = 0x0C;       // scale 5 high = 3 (bits 2-3 of byte 8 + 5 % 4)
  int out[16];
  q3k_scales(T, out);
  CHECK(out[13] == 7 - 32);
  CHECK(out[5] == (3 << 4) - 32);
  CHECK(out[0] == -32);
}
