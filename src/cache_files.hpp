// cache_files.hpp — the files of a cache directory: what each name is, and
// how old files are pruned and the directory cleared, so that `epload index
// clear` knows every file the index cache, the loader's learned store and
// the Python autoload's store leave.  (Writing them: atomic_file.hpp.)
#pragma once

#include <string>       // paths
#include <string_view>  // names

#include "epload/result.hpp"  // Result

namespace epload::detail {

/// What a name in a cache directory is.
enum class CacheFileKind {
  other,    ///< not ours: never touched
  index,    ///< index-<hash>.json — the entry-point index (cache_store.cpp)
  learned,  ///< learned-<hash>.txt — the loader's learned devices (learned.cpp)
  devices,  ///< devices-<group>-<host>.json — the Python autoload's store of earlier versions (now learned-*), cleared
  python,   ///< python-<hash>.txt — an interpreter's remembered sys.path (cli/python_memo.cpp)
  temp,     ///< .index-*, .learned-*, .devices-*, .python-* containing ".tmp.": a write in progress or abandoned
};
CacheFileKind cache_file_kind(std::string_view name);

/// Removes from `dir`: index files whose last use (the later of atime and
/// mtime) is more than 30 days ago, then the least recently used ones beyond
/// 64; learned stores (both kinds) and remembered sys.paths unused for 30
/// days; temporary files older than an hour.  `keep` (a file name) is never removed.  Errors are ignored:
/// pruning is housekeeping, never a reason to fail a write.
void prune_cache_dir(const std::string& dir, std::string_view keep);

/// Removes every file of ours (any kind but `other`) from `dir`; returns how
/// many.  A missing directory holds none.
Result<int> clear_cache_dir(const std::string& dir);

}  // namespace epload::detail
