// The AVX2 attention pass of attend_token (attention_avx2.cpp), for builds
// with AVX2, FMA and F16C but no AVX-512. Private to engine/cpu.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/kv/page_pool.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && !defined(__AVX512F__)
#define LARDER_ATTENTION_AVX2 1
#endif

namespace larder::attention_detail {

// Query heads sharing one pass over their kv head's K/V.
constexpr int kMaxHeads = 4;

// True when attend_heads8 takes heads of this size (a multiple of 8, <= 256).
bool heads8_supported(const KvLayout& lay, int hd);

// Heads [0, nh) of q (nh <= kMaxHeads, all of one kv head at offset `off` of
// a K/V row) over positions 0..pos into out ([nh][hd]). scores: nh x stride
// floats, stride >= pos + 1 rounded up to 16, plus 16.
void attend_heads8(const PagePool& pool, int layer, std::span<const int32_t> pages, int pos, int hd, size_t off,
                   const float* q, float* out, int nh, float* scores, size_t stride);

}  // namespace larder::attention_detail
