// Draft tokens for speculative decoding by prompt lookup (engine_decode.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace larder {

// What followed the most recent earlier occurrence, within the last 65536
// tokens, of the last n tokens of `tokens`, for the largest n in [2, 4] that
// has one: at most max_draft ids. Empty when none (or max_draft <= 0).
// Example: tokens 5 6 7 8 | 9 | 6 7 8 -> the suffix 6 7 8 occurred at 1..3,
// followed by 9 6 7 8: the draft is {9, 6, 7} for max_draft 3.
std::vector<int32_t> prompt_lookup_draft(std::span<const int32_t> tokens, int max_draft);

}  // namespace larder
