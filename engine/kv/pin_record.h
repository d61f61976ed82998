// The pinned prefixes of one model, kept in one small record in the
// persistent tiers so that pins survive a restart (Engine::pin; read back
// and applied again when the engine starts).
//
// Key (reserved: no page or answer key can take it but by a 128-bit hash
// collision): pin_record_key(root) = XXH3-128 of "larder-pins-v1" | root.hi
// | root.lo (u64 LE), where root is the engine's chain root
// (engine/kv/prefix_hash.h prefix_root: model fingerprint, KV layout,
// numerics and the config's salt). So each model and layout sharing a
// cache directory has its own pin record, and a changed page_size, kv_dtype
// or salt starts with none (the old pages are unusable anyway).
//
// Byte layout (integers little-endian, no padding), version 1:
//   bytes 0-7   magic "LRDPINS1"
//   u32         n_pins
//   per pin:    u64 root.hi, u64 root.lo  (the prefix's chain root: the
//                                          engine's root salted with the
//                                          request's cache_salt)
//               u32 n_keys, then n_keys x (u64 hi, u64 lo): its page keys, in chain order
//   u64         XXH3-64 of every byte before it
// A record that is truncated, too long, or fails its checksum decodes as
// an error (the engine logs it and starts without pins).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "storage/page_store.h"
#include "storage/page_tier.h"
#include "storage/status.h"

namespace larder {

struct PinnedPrefix {
  PageKey root;               // chain root of the prefix (salted per request)
  std::vector<PageKey> keys;  // its full pages' keys, in order (>= 1)
  bool operator==(const PinnedPrefix&) const = default;
};

// The reserved key of the pin record under the engine's chain root.
PageKey pin_record_key(const PageKey& engine_root);

std::string encode_pin_record(const std::vector<PinnedPrefix>& pins);
// Errors: kCorruption naming what is wrong (magic, length, checksum, a pin
// without keys).
Result<std::vector<PinnedPrefix>> decode_pin_record(std::string_view record);

// For a persistent tier as it opens (storage/page_tier.h PinsAtOpen): the
// record key and every pinned page key of the record under `engine_root`;
// none when there is no record or it does not decode (the engine logs that
// when it reads the pins).
PinsAtOpen stored_pin_keys(const PageKey& engine_root);

}  // namespace larder
