// memory.hpp — how the core backs the memory its reads fill: fresh buffers
// backed in one system call, buffers of a read's size, and whether cache
// files are mapped instead of copied.
//
// Backing a fresh buffer in one system call.
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

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

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

// ---- A buffer of a read's size, its pages backed at once.
//
// The cache reader's sections and the learned store's text are read into
// fresh buffers of up to ~0.5 MB; prefault() backs their pages in one
// system call instead of a page fault each.

/// Frees a buffer from big_alloc().
inline void free_big(char* p) { delete[] p; }

/// A buffer from big_alloc(); free_big() is its deleter.
using BigBuffer = std::unique_ptr<char[], void (*)(char*)>;

/// `n` uninitialised bytes (callers write every byte they read), their
/// pages backed.
inline BigBuffer big_alloc(std::size_t n) {
  char* p = new char[n == 0 ? 1 : n];
  prefault(p, n);
  return BigBuffer(p, free_big);
}

// ---- Whether this process reads its cache files through mappings of them
// instead of copies.
//
// What it buys: a fresh page filled by pread costs about ten times what a
// page cache page mapped in does on the machines measured, so the CLI maps
// its index file (each range backed in one madvise(MADV_POPULATE_READ)) and
// its learned-device store: 0.2-0.3 ms (5-8%) of a lazy `epload load` under
// `paths` validation and 0.3-0.5 ms (3%) under `full`, at 6,000
// distributions (BENCHMARKS.md, "What the speed machinery buys").
// The price: should another program truncate such a file in place while it
// is mapped, the next touch of a lost page raises SIGBUS (epload itself
// only replaces its files by rename; cli/main.cpp explains the signal).  So
// only a short-lived process turns it on: the CLI, first thing in main().
// The library's default, and so the Python module's, is to copy.

inline std::atomic<bool> g_map_cache_files{false};

/// Reads cache files through mappings from now on, for the rest of the
/// process.
inline void map_cache_files() { g_map_cache_files.store(true, std::memory_order_relaxed); }

/// True once map_cache_files() was called.
inline bool cache_files_mapped() { return g_map_cache_files.load(std::memory_order_relaxed); }

}  // namespace epload::detail
