// KV page pool: one allocation, made at start, for fixed-size pages that hold
// the keys and values of `page_size` consecutive positions of one sequence
// for every layer (DESIGN.md "Page key and record").
//
// Page layout (the bytes a page record stores, whatever backend wrote them;
// read_page / write_page copy a page in this layout):
//   for layer l in [0, n_layer):
//     K block: [page_size][kv_dim] values of `dtype`
//     V block: [page_size][kv_dim] values of `dtype`
// so page_bytes = n_layer * 2 * page_size * kv_dim * dtype_bytes.
//
// In memory the pool keeps each layer's blocks together instead: layer l of
// page p (its K block, then its V block) sits at
//   base + (l * n_pages + p) * 2 * block_bytes,
// so a sequence whose pages were handed out in order (the free list starts
// ascending) has one layer's K/V in one run of memory, which is what a decode
// step's attention streams through layer by layer. Against whole pages side
// by side (layer l of consecutive pages 2 * n_layer blocks apart) a 16k-
// position decode step's attention over 16 layers of 1B-shaped f16 K/V took
// 28.8-32.7 instead of 29.9-37.0 ms on one thread and 16.9-18.7 instead of
// 18.5-19.3 on two (AMD EPYC Zen 5, six alternated runs; docs/cpu-kernels.md).
//
// The pool only hands out and takes back pages; reference counts, the prefix
// index and eviction live in PrefixCache (engine/kv/prefix_cache.h).
// Not thread-safe: owned by the engine thread.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "storage/status.h"

namespace larder {

// Element type of stored K/V. kQ8_0: each token's K (and V) row of kv_dim
// values as kv_dim / 32 Q8_0 blocks (an f16 scale and 32 int8 quants,
// llama.cpp's quantize_row_q8_0), 1.0625 bytes per value.
enum class KvDtype : uint32_t { kF32 = 0, kF16 = 1, kQ8_0 = 2 };
const char* kv_dtype_name(KvDtype t);
// The dtype named "f32", "f16" or "q8_0" (kv_dtype_name's names); nullopt
// for any other name.
std::optional<KvDtype> kv_dtype_from_name(std::string_view name);
// Bytes of one token's K (or V) row of kv_dim values (kQ8_0: kv_dim % 32 == 0).
inline size_t kv_row_bytes(KvDtype t, int kv_dim) {
  return t == KvDtype::kQ8_0 ? size_t(kv_dim / 32) * 34 : size_t(kv_dim) * (t == KvDtype::kF16 ? 2 : 4);
}

struct KvLayout {
  int n_layer = 0;
  int kv_dim = 0;       // n_head_kv * head_dim
  int page_size = 16;   // tokens per page, a power of two
  KvDtype dtype = KvDtype::kF32;

  size_t row_bytes() const { return kv_row_bytes(dtype, kv_dim); }
  size_t block_bytes() const { return size_t(page_size) * row_bytes(); }
  size_t page_bytes() const { return size_t(n_layer) * 2 * block_bytes(); }
  bool operator==(const KvLayout&) const = default;
};

// Where a pool's page bytes live: host memory owned by the pool, or nowhere
// (an index-only pool whose bytes live on a device, see engine/backend.h).
enum class PageMemory { kHost, kNone };

class PagePool {
 public:
  // Allocates n_pages pages (64-byte aligned) when memory is kHost; kNone
  // keeps only the free list. kResourceExhausted with the sizes involved when
  // the allocation fails.
  static Result<std::unique_ptr<PagePool>> create(const KvLayout& layout, int n_pages,
                                                  PageMemory memory = PageMemory::kHost);

  const KvLayout& layout() const { return layout_; }
  int n_pages() const { return n_pages_; }
  int n_free() const { return int(free_.size()); }

  // Takes a page from the free list; nullopt when none is free.
  std::optional<int> allocate();
  // Returns a page to the free list (page must be allocated).
  void release(int page);

  bool has_host_memory() const { return base_ != nullptr; }
  // Start of the K (or V) block of `layer` in `page`: [page_size][kv_dim].
  // Only for a kHost pool.
  void* k_block(int page, int layer) { return base_ + block_offset(page, layer); }
  void* v_block(int page, int layer) { return base_ + block_offset(page, layer) + layout_.block_bytes(); }
  const void* k_block(int page, int layer) const { return base_ + block_offset(page, layer); }
  const void* v_block(int page, int layer) const { return base_ + block_offset(page, layer) + layout_.block_bytes(); }
  // Copies a page's bytes out to, or in from, the record layout above:
  // layout().page_bytes() bytes. Only for a kHost pool.
  void read_page(int page, uint8_t* out) const;
  void write_page(int page, const uint8_t* in);

 private:
  PagePool() = default;
  size_t block_offset(int page, int layer) const {
    assert(base_ && page >= 0 && page < n_pages_ && layer >= 0 && layer < layout_.n_layer);
    return (size_t(layer) * size_t(n_pages_) + size_t(page)) * 2 * layout_.block_bytes();
  }
  struct FreeDeleter { void operator()(uint8_t* p) const; };
  KvLayout layout_;
  int n_pages_ = 0;
  std::unique_ptr<uint8_t, FreeDeleter> mem_;
  uint8_t* base_ = nullptr;
  std::vector<int> free_;       // stack of free page ids
  std::vector<uint8_t> in_use_; // per page, for release() checks
};

}  // namespace larder
