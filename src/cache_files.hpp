// cache_files.hpp — the files of a cache directory: what each name is, how
// every writer replaces a file atomically, and how old files are pruned and
// the directory cleared.  One place, so that the index cache, the loader's
// learned store, the Python autoload's store and trace files share one
// writer and `epload index clear` knows every file any of them leaves.
#pragma once

#include <sys/stat.h>   // struct stat
#include <sys/types.h>  // mode_t

#include <initializer_list>  // write_atomic parts
#include <string>            // paths
#include <string_view>       // names

#include "epload/result.hpp"  // Result

namespace epload::detail {

/// What a name in a cache directory is.
enum class CacheFileKind {
  other,    ///< not ours: never touched
  index,    ///< index-<hash>.json — the entry-point index (cache_store.cpp)
  learned,  ///< learned-<hash>.txt — the loader's learned devices (learned.cpp)
  devices,  ///< devices-<group>-<host>.json — the Python autoload's store of earlier versions (now learned-*), cleared
  temp,     ///< .index-*, .learned-*, .devices-* containing ".tmp.": a write in progress or abandoned
};
CacheFileKind cache_file_kind(std::string_view name);

/// mkdir -p; the levels it creates get mode 0700.
Result<void> make_dirs(const std::string& dir);

/// Why the file or directory `st` describes (`what` names it in the
/// message) must not be trusted, or "" when it may: owned by another user
/// (root is accepted when `root_ok`), or writable by group or others.  A
/// cache's paths are handed to dlopen, so whoever could write it could run
/// code in this process.
std::string unsafe_reason(const struct stat& st, const std::string& what, bool root_ok = false);

/// make_dirs(dir), then the directory refused when it is unsafe
/// (unsafe_reason): the check every writer into a cache directory makes.
Result<void> make_safe_dir(const std::string& dir);

/// Writes `parts`, one after the other, to `path` through a temporary file
/// "." + <file name> + ".tmp.XXXXXX" in the same directory, then rename():
/// readers see the old file or the new one, whole.  The file gets exactly
/// `mode`.  On any failure (a full disk, a file-size limit, a read-only
/// directory) the temporary file is removed and `path` is left as it was;
/// the error names the system call, the file and the cause ("write
/// <temporary file>: No space left on device"), and callers add what was
/// being written.
Result<void> write_atomic(const std::string& path, std::initializer_list<std::string_view> parts,
                          mode_t mode);

/// Removes from `dir`: index files whose last use (the later of atime and
/// mtime) is more than 30 days ago, then the least recently used ones beyond
/// 64; learned stores (both kinds) unused for 30 days; temporary files older
/// than an hour.  `keep` (a file name) is never removed.  Errors are ignored:
/// pruning is housekeeping, never a reason to fail a write.
void prune_cache_dir(const std::string& dir, std::string_view keep);

/// Removes every file of ours (any kind but `other`) from `dir`; returns how
/// many.  A missing directory holds none.
Result<int> clear_cache_dir(const std::string& dir);

}  // namespace epload::detail
