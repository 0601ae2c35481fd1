// heap_pages.hpp — transparent huge pages for the CLI's heap before a full
// scan.
//
// What it buys: a full scan (`--no-cache`) touches ~7 MB of fresh heap at
// 6,000 distributions, one page fault per 4 KiB page.  Marked for huge
// pages, each 2 MiB block faults once: `epload entry-points --no-cache`
// 1.7-2.2 ms (6-7.5%) faster there (BENCHMARKS.md, "What the speed
// machinery buys").  A run that reads the cache touches 1-2 MB and
// gains nothing, so only a full scan asks.  The price: the heap's resident
// size rounds up to 2 MiB blocks while the (short) process runs.  Only the
// CLI does this: the library and the Python module never change how their
// host process's memory is backed.
#pragma once

namespace epload::cli {

/// Marks the allocator's heap segment MADV_HUGEPAGE and collapses the block
/// already in use, unless transparent huge pages are "[never]"; once per
/// process.  Errors are ignored (this only ever changes speed).
void prefer_huge_heap_pages();

}  // namespace epload::cli
