// Memory for the large buffers the CPU kernels stream through (packed
// weights, the KV page pool): on transparent huge pages where the kernel
// grants them. Private to engine/cpu and engine/kv.
#pragma once

#include <cstddef>

namespace larder {

// `bytes` of memory (uninitialized; free with std::free), or nullptr when
// the allocation fails. Of 2 MiB or more: starts on a 2 MiB boundary and asks
// for transparent huge pages (madvise MADV_HUGEPAGE) on its whole 2 MiB
// extents; the tail keeps 4 KiB pages, so nothing is spent on rounding. Less:
// 64-byte aligned. Streaming a buffer on 4 KiB pages costs a TLB miss every
// 4 KiB (and, for strided reads such as one kv head's slice of every K/V
// row, several per page). Where THP is off or "never", madvise fails and the
// memory is plain.
void* alloc_huge_aligned(size_t bytes);

}  // namespace larder
