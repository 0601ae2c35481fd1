// big_buffer.hpp — buffers of a read's size, backed at once, on huge pages
// when the process asked for it and faults are dear here.
//
// A cold query reads ~0.5 MB of cache sections and the learned-device store
// into fresh buffers.  On one machine class BENCHMARKS.md describes, a fresh
// 4 KiB page costs 12-15 us at its first touch, and still several us after
// madvise(MADV_POPULATE_WRITE) (prefault.hpp); a whole 2 MiB huge page costs
// ~0.2 ms.  (On another, a fault costs ~1.2 us and a huge page more than the
// faults it saves: there none of this happens; see huge_pages_pay().)
// There the CLI's heap is on huge pages already (cli/heap_pages.cpp);
// the Python module lives in its host's heap, which epload must not change,
// so it turns on a pool of its own instead: big buffers are then cut from
// 2 MiB chunks of epload's own memory marked MADV_HUGEPAGE (one chunk, ~2
// MiB resident, serves a query of the default environment).  A chunk whose
// buffers are all freed is unmapped, or reused when it is the current one.
// Without the pool, or with transparent huge pages off, a big buffer is a
// plain heap buffer, prefaulted.
#pragma once

#include <cstddef>
#include <memory>

namespace epload::detail {

/// Frees a buffer from big_alloc() (or one from new char[]).
void free_big(char* p);

/// A buffer from big_alloc(); free_big() is its deleter.
using BigBuffer = std::unique_ptr<char[], void (*)(char*)>;

/// `n` uninitialised bytes, their pages backed.  Thread-safe.
BigBuffer big_alloc(std::size_t n);

/// Whether `p` lies in one of the pool's chunks (what tests ask).
bool in_pool(const char* p);

/// Cuts later big buffers from the huge-page pool, when huge_pages_pay().
/// The Python module calls it once at import.
void use_huge_page_pool();

/// False when the administrator turned transparent huge pages off
/// ("[never]") or the setting cannot be read.
bool huge_pages_allowed();

/// Whether huge pages are worth having in this process.  They pay where a
/// fresh 4 KiB page is dear: 12-15 us at its first touch on one machine
/// class BENCHMARKS.md describes, where a huge page costs ~0.2 ms and saves
/// hundreds of faults; on another, a fault costs ~1.2 us while a huge page
/// (zeroed, and compacted for when memory is fragmented) still costs
/// 0.05-0.4 ms, so a run that touches ~1-2 MB of heap is faster in small
/// pages, and only one that touches many megabytes (`big_run`: a full scan,
/// ~7 MB of tables at 6,000 distributions) gains.  Hence: never with
/// transparent huge pages "[never]"; EPLOAD_HUGE_PAGES=1 or 0 decides when
/// set; otherwise `big_run` or faults_are_dear() (prefault.hpp).
bool huge_pages_pay(bool big_run = false);

/// The decision of huge_pages_pay() from its inputs: the environment
/// variable's value (nullptr when unset), whether THP is allowed, and
/// whether they would pay untold (a big run, or dear faults).
bool huge_pages_pay(const char* setting, bool allowed, bool would_pay);

}  // namespace epload::detail
