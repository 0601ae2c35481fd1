// heap_pages.cpp — asks the kernel to back the CLI's heap with transparent
// huge pages (see heap_pages.hpp for why and what it costs).
#include "cli/heap_pages.hpp"

#include <sys/mman.h>  // madvise

#include <cstdint>  // uintptr_t
#include <cstdlib>  // malloc, free

#include "big_buffer.hpp"  // huge_pages_pay

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1; glibc 2.36's headers do not name it
#endif

namespace epload::cli {
namespace {

constexpr std::uintptr_t k_huge_page = std::uintptr_t{2} << 20;
/// mimalloc 2.0 reserves its heap in 32 MiB segments aligned to their size
/// (the first one before main(), for libstdc++'s emergency pool).  Were that
/// ever different, madvise() below applies to whatever part of the range is
/// mapped heap and the call's error is ignored: the cost is only the gain.
constexpr std::uintptr_t k_segment = std::uintptr_t{32} << 20;

void* at(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

}  // namespace

void prefer_huge_heap_pages(bool big_run) {
  // MADV_COLLAPSE would make a huge page even with THP "[never]": the
  // setting is honoured here, as is the machine's cost of a small page.
  static bool done = false;
  if (done || !epload::detail::huge_pages_pay(big_run)) return;
  done = true;
  void* probe = std::malloc(16);
  if (probe == nullptr) return;
  const auto p = reinterpret_cast<std::uintptr_t>(probe);
  std::free(probe);
  // The rest of the segment: each 2 MiB block becomes one huge page at its
  // first touch instead of up to 512 faults.
  (void)::madvise(at(p & ~(k_segment - 1)), k_segment, MADV_HUGEPAGE);
  // The block the allocator has already touched (its metadata, the first
  // objects) cannot take a huge page by fault any more; collapse it now.
  // Fails harmlessly (EINVAL) on kernels before 6.1.
  (void)::madvise(at(p & ~(k_huge_page - 1)), k_huge_page, MADV_COLLAPSE);
}

}  // namespace epload::cli
