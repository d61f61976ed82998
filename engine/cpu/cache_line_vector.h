// std::vector whose storage starts on a cache line (64 bytes).
//
// Threads write disjoint slices of the forward pass's activation buffers
// (row chunks of a matmul's output, kv heads of the attention output). With
// the buffer 64-byte aligned, a slice that starts a multiple of 64 bytes in
// shares no cache line with its neighbour; with malloc's 16-byte alignment
// every such edge is a line two threads write (false sharing). The 8-lane
// attention of AVX2 builds sums V into its output slice block by block: its
// test bench's 2-thread decode step with one kv head per call took 1.8x as
// long with the output 16 bytes off a line (docs/cpu-kernels.md).
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace larder {

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};

  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}

  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t) noexcept { ::operator delete(p, kAlign); }

  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept { return true; }
};

template <class T>
using CacheLineVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace larder
