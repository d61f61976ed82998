#include "engine/cpu/huge_pages.h"

#include <algorithm>
#include <cstdlib>

#include <sys/mman.h>

namespace larder {

void* alloc_huge_aligned(size_t bytes) {
  constexpr size_t kHugePage = size_t(2) << 20;
  const size_t align = bytes < kHugePage ? 64 : kHugePage;
  void* mem = nullptr;
  if (posix_memalign(&mem, align, std::max<size_t>(64, bytes)) != 0) return nullptr;
  if (bytes >= kHugePage) ::madvise(mem, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
  return mem;
}

}  // namespace larder
