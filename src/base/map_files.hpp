// map_files.hpp — whether this process reads its cache files through
// mappings of them instead of copies.
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
#pragma once

#include <atomic>

namespace epload::detail {

inline std::atomic<bool> g_map_cache_files{false};

/// Reads cache files through mappings from now on, for the rest of the
/// process.
inline void map_cache_files() { g_map_cache_files.store(true, std::memory_order_relaxed); }

/// True once map_cache_files() was called.
inline bool cache_files_mapped() { return g_map_cache_files.load(std::memory_order_relaxed); }

}  // namespace epload::detail
