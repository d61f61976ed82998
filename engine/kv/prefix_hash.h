// Chained prefix hash of KV pages (DESIGN.md "Page key and record"):
//   h_0 = XXH3-128(fingerprint || KV layout || cache_salt)
//   h_i = XXH3-128(h_{i-1} || token ids of page i)      (ids as int32 LE)
// A page's key therefore names the whole prefix up to and including it, under
// one model and KV layout: equal keys mean equal K/V (up to hash collisions,
// which the stored token ids and fingerprint in each record rule out).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "engine/kv/page_pool.h"
#include "storage/page_store.h"

namespace larder {

// Root of every chain for this model, KV layout, arithmetic and salt:
// XXH3-128 of "larder-kv-root-v2" | fingerprint (16 bytes) | u32 n_layer,
// kv_dim, page_size, dtype | u64 size + bytes of `numerics` | u64 size + bytes
// of `cache_salt` (little-endian). `numerics` is the backend's
// Backend::numerics_id(): K/V computed by other kernels differ in the last
// bits, and a restore must give exactly what a cold prefill gives.
PageKey prefix_root(const std::array<uint8_t, 16>& fingerprint, const KvLayout& layout,
                    std::string_view numerics, std::string_view cache_salt);

// The root for a request that sends its own `cache_salt` (vLLM's field):
// `root` itself when request_salt is empty (pages of unsalted requests keep
// their keys), else XXH3-128 of "larder-kv-salt-v1" | root (hi, lo as u64
// LE) | u64 size + bytes of request_salt. Requests with different salts
// never share a page: every page key descends from its root.
PageKey salted_root(const PageKey& root, std::string_view request_salt);

// Key of the page holding `page_tokens` (exactly page_size ids) after `parent`.
PageKey prefix_next(const PageKey& parent, std::span<const int32_t> page_tokens);

// Key under which a sequence's partial tail page (fewer than page_size
// tokens, kept on the device when the sequence ends) is indexed: XXH3-128 of
// "larder-kv-partial-v1" | parent (hi, lo as u64 LE) | the tail's token ids
// (int32 LE). The marker keeps it apart from every full page's key, so no
// prefix lookup ever finds it; only partial reuse (by parent) does.
PageKey prefix_partial(const PageKey& parent, std::span<const int32_t> tail_tokens);

// Keys of the first n_pages full pages of `tokens` (n_pages <= tokens.size() / page_size).
std::vector<PageKey> prefix_chain(const PageKey& root, std::span<const int32_t> tokens,
                                  int page_size, int n_pages);

}  // namespace larder
