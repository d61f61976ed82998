#include "engine/kv/page_pool.h"

#include <cassert>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/cpu/huge_pages.h"

namespace larder {

const char* kv_dtype_name(KvDtype t) {
  switch (t) {
    case KvDtype::kF32: return "f32";
    case KvDtype::kF16: return "f16";
    case KvDtype::kQ8_0: return "q8_0";
  }
  return "?";
}

std::optional<KvDtype> kv_dtype_from_name(std::string_view name) {
  for (KvDtype t : {KvDtype::kF32, KvDtype::kF16, KvDtype::kQ8_0})
    if (name == kv_dtype_name(t)) return t;
  return std::nullopt;
}


void PagePool::FreeDeleter::operator()(uint8_t* p) const { std::free(p); }

Result<std::unique_ptr<PagePool>> PagePool::create(const KvLayout& layout, int n_pages,
                                                   PageMemory memory) {
  if (layout.n_layer <= 0 || layout.kv_dim <= 0 || layout.page_size <= 0 ||
      (layout.page_size & (layout.page_size - 1)) != 0) {
    return Status::invalid_argument("KV layout: n_layer, kv_dim must be > 0 and page_size a power of two");
  }
  if (layout.dtype == KvDtype::kQ8_0 && layout.kv_dim % 32 != 0) {
    return Status::invalid_argument("KV layout: q8_0 K/V needs kv_dim a multiple of 32, not " +
                                    std::to_string(layout.kv_dim));
  }
  if (n_pages <= 0) return Status::invalid_argument("KV page pool needs at least one page");
  size_t total = layout.page_bytes() * size_t(n_pages);
  size_t rounded = (total + 63) / 64 * 64;
  uint8_t* p = nullptr;
  // On huge pages: attention reads one kv head's slice of every K/V row, a
  // few cache lines per 4 KiB page of a page's blocks.
  if (memory == PageMemory::kHost) p = static_cast<uint8_t*>(alloc_huge_aligned(rounded));
  if (memory == PageMemory::kHost && p == nullptr) {
    return Status::resource_exhausted("cannot allocate KV page pool: " + std::to_string(n_pages) +
                                      " pages x " + std::to_string(layout.page_bytes()) + " bytes = " +
                                      std::to_string(total) + " bytes");
  }
  std::unique_ptr<PagePool> pool(new PagePool());
  pool->layout_ = layout;
  pool->n_pages_ = n_pages;
  pool->mem_.reset(p);
  pool->base_ = p;
  pool->free_.reserve(size_t(n_pages));
  for (int i = n_pages - 1; i >= 0; --i) pool->free_.push_back(i);
  pool->in_use_.assign(size_t(n_pages), 0);
  return pool;
}

std::optional<int> PagePool::allocate() {
  if (free_.empty()) return std::nullopt;
  int page = free_.back();
  free_.pop_back();
  in_use_[size_t(page)] = 1;
  return page;
}

void PagePool::read_page(int page, uint8_t* out) const {
  const size_t two_blocks = 2 * layout_.block_bytes();  // a layer's K and V blocks, in both layouts
  for (int l = 0; l < layout_.n_layer; ++l) std::memcpy(out + size_t(l) * two_blocks, k_block(page, l), two_blocks);
}

void PagePool::write_page(int page, const uint8_t* in) {
  const size_t two_blocks = 2 * layout_.block_bytes();
  for (int l = 0; l < layout_.n_layer; ++l) std::memcpy(k_block(page, l), in + size_t(l) * two_blocks, two_blocks);
}

void PagePool::release(int page) {
  assert(page >= 0 && page < n_pages_ && in_use_[size_t(page)]);
  in_use_[size_t(page)] = 0;
  free_.push_back(page);
}

}  // namespace larder
