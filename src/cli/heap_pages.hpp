// heap_pages.hpp — transparent huge pages for the CLI's heap.
//
// Why: a short `epload` run touches 1-2 MB of fresh heap (the cache file's
// buffer, the index's tables, the loader's slots), one page fault per 4 KiB
// page.  Where a fault traps to a hypervisor (measured on a PVM guest:
// 12-15 us per fault, against ~0.2 ms for a whole 2 MiB huge page) those
// ~330 faults were a quarter of `epload load`'s 15 ms.  BENCHMARKS.md has the
// figures ("Huge pages for the CLI's heap").
//
// Where a fault is cheap (~1.2 us on another machine class) a huge page
// costs more than the faults it saves in a run that touches 1-2 MB of heap
// (`epload load`: 0.37 ms slower with them), and less in a full scan, which
// touches ~7 MB (`entry-points --no-cache` at 6,000 distributions: 1.65 ms
// faster).  So main() asks only where faults are dear (one fault timed, a
// few us), and a command that is about to scan (--no-cache) asks again,
// as a big run; EPLOAD_HUGE_PAGES=1/0 decides instead.  See huge_pages_pay()
// in big_buffer.hpp.
//
// What it costs: the heap's resident size rounds up to 2 MiB blocks (a few
// MiB per process; the CLI is short-lived).  With THP set to `never` it
// does nothing (one read of the setting, ~20 us).  Only the CLI does this:
// the library and the Python module never change how their host process's
// memory is backed.
#pragma once

namespace epload::cli {

/// Marks the allocator's heap segment MADV_HUGEPAGE and collapses the block
/// already in use, when huge_pages_pay(big_run); once per process.  Call
/// first thing in main(), and with `big_run` before a full scan; errors are
/// ignored (this only ever changes speed).
void prefer_huge_heap_pages(bool big_run = false);

}  // namespace epload::cli
