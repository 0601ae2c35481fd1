// prefault.cpp — how dear a page fault is here (see prefault.hpp).
#include "prefault.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <ctime>

namespace epload::detail {

std::uint64_t fresh_page_cost_ns() {
  // Four pages, each touched once; the cheapest touch is the fault's cost
  // (an interrupt or a preemption can only make one dearer).  16 KiB never
  // gets a huge page, so this measures the small pages a heap would fault.
  constexpr std::size_t k_pages = 4, k_page = 4096;
  void* m = ::mmap(nullptr, k_pages * k_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 0;
  auto now = [] {
    timespec t{};
    ::clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<std::uint64_t>(t.tv_sec) * 1000000000u + static_cast<std::uint64_t>(t.tv_nsec);
  };
  volatile char* p = static_cast<volatile char*>(m);
  std::uint64_t best = UINT64_MAX;
  (void)now();  // the clock's first call out of the measurement
  for (std::size_t i = 0; i < k_pages; ++i) {
    const std::uint64_t t0 = now();
    p[i * k_page] = 1;
    const std::uint64_t t1 = now();
    if (t1 - t0 < best) best = t1 - t0;
  }
  ::munmap(m, k_pages * k_page);
  return best == 0 ? 1 : best;
}

bool faults_are_dear() {
  static const bool dear = fresh_page_cost_ns() > k_dear_fault_ns;
  return dear;
}

}  // namespace epload::detail
