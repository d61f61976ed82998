// Encoders for the quantized GGML block formats, for writing test and
// benchmark models (gguf_writer.h's encode_row calls these). Written from the
// block layouts in docs/quant-formats.md (GGUF spec, llama.cpp's k-quants PR
// #1684, ggml-common.h's structs), not from llama.cpp's quantizers: the scale
// choice is the plain min/max one, not llama.cpp's error-minimising search, so
// the blocks are valid and close to x but not the blocks llama-quantize writes.
//
// Scale choice, per block (B values) or k-quant sub-block (16 or 32 values):
//   symmetric types (Q4_0, Q5_0, Q3_K, Q6_K): step = max|x| / L with L = 7,
//     15, 3, 31 (the largest positive quant), q = round(x / step);
//   IQ4_NL, IQ4_XS: step = max|x| / 127, q = the index of the table value
//     (kIQ4Values, -127..113) nearest to x / step;
//   types with a min (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K): lo = min(x) (for the
//     k-quants min(x, 0), since their offset -dmin * m is never positive),
//     step = (max(x) - lo) / (2^bits - 1), q = round((x - lo) / step).
// k-quants (and IQ4_XS, sc in 0..31) store each sub-block step as an integer sc times the f16
// super-block scale d = max(step) / sc_max; sc = ceil(step / d), so the stored
// step is in [step, step + d] and no quant leaves its range; the min is
// m * dmin with dmin = max(-lo) / m_max and m = round(-lo / dmin). Every f16
// scale is rounded up (never below the exact value). Resulting error bounds:
// tests/gguf/writer_test.cpp.
#pragma once

#include <cstdint>

#include "engine/gguf/ggml_types.h"

namespace larder::testing {

// Encodes one block of `type` (Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K, IQ4_NL, IQ4_XS) from ggml_block_size(type) floats at x into
// ggml_type_size(type) bytes at dst (any alignment). Returns false, writing
// nothing, for other types.
bool encode_quant_block(GgmlType type, const float* x, uint8_t* dst);

}  // namespace larder::testing
