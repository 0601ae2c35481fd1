// prefault.hpp — backing a fresh buffer in one system call.
//
// Memory the process has not touched yet costs a page fault per 4 KiB page
// on first write: ~12-15 us each on one class of virtual machine this was
// measured on (see BENCHMARKS.md), so reading a 500 KB cache section into a
// fresh buffer paid more for its faults than for the read.  madvise(
// MADV_POPULATE_WRITE) backs the whole range at once (~6 us per page there),
// without changing how the memory is backed (no huge pages, nothing for the
// host process's other memory).  Where a fault costs ~1.2 us it still pays
// for buffers that are written whole (the cold scan's tables: 0.15-1.2 ms
// faster with it, 3.4 ms less CPU, measured with prefault() limited to
// dear faults), so it is used wherever faults are.  A hint only: on
// kernels before 5.14 it fails with EINVAL and the pages fault in as
// before.  Buffers under four pages are left alone: the system call would
// cost about what their faults do.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

namespace epload::detail {

inline constexpr std::size_t k_prefault_min = 16 * 1024;

/// Backs the whole pages inside [p, p + n) that a write is about to touch.
inline void prefault(void* p, std::size_t n) {
#ifdef MADV_POPULATE_WRITE
  if (p == nullptr || n < k_prefault_min) return;
  constexpr std::uintptr_t page = 4096;
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t lo = (begin + page - 1) & ~(page - 1);
  const std::uintptr_t hi = (begin + n) & ~(page - 1);
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)n;
#endif
}

/// Maps in the pages of [p, p + n), part of a mapping of a file, from the
/// page cache in one call, for reading: a private writable mapping's pages
/// stay shared with the page cache until written (MAP_POPULATE would copy
/// each one).  A hint: before Linux 5.14 they fault in when read.
inline void populate_read(void* p, std::size_t n) {
#ifndef MADV_POPULATE_READ
  constexpr int MADV_POPULATE_READ = 22;  // Linux 5.14; older headers do not name it
#endif
  if (p == nullptr || n == 0) return;
  constexpr std::uintptr_t page = 4096;
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t lo = begin & ~(page - 1);
  ::madvise(reinterpret_cast<void*>(lo), begin + n - lo, MADV_POPULATE_READ);
}

/// prefault() for the spare capacity a vector was just reserved with.
template <class Vector>
void prefault_capacity(Vector& v) {
  prefault(v.data() + v.size(), (v.capacity() - v.size()) * sizeof(typename Vector::value_type));
}

}  // namespace epload::detail
