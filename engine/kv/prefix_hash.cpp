#include "engine/kv/prefix_hash.h"

#include <cassert>
#include <cstring>
#include <string>

#include <xxhash.h>

namespace larder {
namespace {

PageKey key_from(XXH128_hash_t h) { return PageKey{h.high64, h.low64}; }

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(char((v >> (8 * i)) & 0xFF));
}

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(char((v >> (8 * i)) & 0xFF));
}

}  // namespace

PageKey prefix_root(const std::array<uint8_t, 16>& fingerprint, const KvLayout& layout,
                    std::string_view numerics, std::string_view cache_salt) {
  std::string buf;
  buf.append("larder-kv-root-v2");
  buf.append(reinterpret_cast<const char*>(fingerprint.data()), fingerprint.size());
  put_u32(buf, uint32_t(layout.n_layer));
  put_u32(buf, uint32_t(layout.kv_dim));
  put_u32(buf, uint32_t(layout.page_size));
  put_u32(buf, uint32_t(layout.dtype));
  put_u64(buf, numerics.size());
  buf.append(numerics);
  put_u64(buf, cache_salt.size());
  buf.append(cache_salt);
  return key_from(XXH3_128bits(buf.data(), buf.size()));
}

PageKey salted_root(const PageKey& root, std::string_view request_salt) {
  if (request_salt.empty()) return root;
  std::string buf;
  buf.append("larder-kv-salt-v1");
  put_u64(buf, root.hi);
  put_u64(buf, root.lo);
  put_u64(buf, request_salt.size());
  buf.append(request_salt);
  return key_from(XXH3_128bits(buf.data(), buf.size()));
}

PageKey prefix_next(const PageKey& parent, std::span<const int32_t> page_tokens) {
  std::string buf;
  buf.reserve(16 + page_tokens.size() * 4);
  put_u64(buf, parent.hi);
  put_u64(buf, parent.lo);
  for (int32_t t : page_tokens) put_u32(buf, uint32_t(t));
  return key_from(XXH3_128bits(buf.data(), buf.size()));
}

PageKey prefix_partial(const PageKey& parent, std::span<const int32_t> tail_tokens) {
  static constexpr std::string_view kMarker = "larder-kv-partial-v1";
  std::string buf(kMarker);
  buf.reserve(kMarker.size() + 16 + tail_tokens.size() * 4);
  put_u64(buf, parent.hi);
  put_u64(buf, parent.lo);
  for (int32_t t : tail_tokens) put_u32(buf, uint32_t(t));
  return key_from(XXH3_128bits(buf.data(), buf.size()));
}

std::vector<PageKey> prefix_chain(const PageKey& root, std::span<const int32_t> tokens,
                                  int page_size, int n_pages) {
  assert(size_t(n_pages) * size_t(page_size) <= tokens.size());
  std::vector<PageKey> keys;
  keys.reserve(size_t(n_pages));
  PageKey h = root;
  for (int i = 0; i < n_pages; ++i) {
    h = prefix_next(h, tokens.subspan(size_t(i) * size_t(page_size), size_t(page_size)));
    keys.push_back(h);
  }
  return keys;
}

}  // namespace larder
