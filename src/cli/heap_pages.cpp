// heap_pages.cpp — see heap_pages.hpp.
#include "cli/heap_pages.hpp"

#include <fcntl.h>     // open
#include <sys/mman.h>  // madvise
#include <unistd.h>    // read, close

#include <cstdint>  // uintptr_t
#include <cstdlib>  // malloc, free
#include <cstring>  // strstr

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1; glibc 2.36's headers do not name it
#endif

namespace epload::cli {
namespace {

constexpr std::uintptr_t k_huge_page = std::uintptr_t{2} << 20;
/// mimalloc 2.0 reserves its heap in 32 MiB segments aligned to their size.
/// Were that ever different, madvise() applies to whatever part of the
/// range is mapped heap and its error is ignored: the cost is only the gain.
constexpr std::uintptr_t k_segment = std::uintptr_t{32} << 20;

void* at(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

/// False when the administrator turned transparent huge pages off
/// ("[never]"), which MADV_COLLAPSE would not honour by itself.
bool huge_pages_allowed() {
  const int fd = ::open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[128];
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return false;
  text[n] = '\0';
  return std::strstr(text, "[never]") == nullptr;
}

}  // namespace

void prefer_huge_heap_pages() {
  static bool done = false;
  if (done) return;
  done = true;
  if (!huge_pages_allowed()) return;
  void* probe = std::malloc(16);
  if (probe == nullptr) return;
  const auto p = reinterpret_cast<std::uintptr_t>(probe);
  std::free(probe);
  // The rest of the segment: each 2 MiB block becomes one huge page at its
  // first touch instead of up to 512 faults.
  (void)::madvise(at(p & ~(k_segment - 1)), k_segment, MADV_HUGEPAGE);
  // The block already touched cannot take a huge page by fault any more;
  // collapse it now.  Fails harmlessly (EINVAL) on kernels before 6.1.
  (void)::madvise(at(p & ~(k_huge_page - 1)), k_huge_page, MADV_COLLAPSE);
}

}  // namespace epload::cli
