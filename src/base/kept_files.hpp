// kept_files.hpp — the files epload keeps in its cache directory: each
// module that writes one registers its names here (the index cache, the
// loader's learned store, the CLI's remembered sys.paths), so that pruning
// and `epload index clear` know every kind of file without one module
// knowing another's names.  (Writing them: atomic_file.hpp.)
#pragma once

#include <cstddef>      // size_t
#include <string>       // paths
#include <string_view>  // names

#include "epload/result.hpp"  // Result

namespace epload::detail {

/// A kind of file kept in the cache directory: "<prefix>X<suffix>" for a
/// non-empty X, and its temporaries while written by write_atomic(),
/// "." + prefix + ... + ".tmp." + ....
struct KeptFiles {
  std::string_view prefix;      ///< "index-"
  std::string_view suffix;      ///< ".json"
  std::size_t keep_newest = 0;  ///< at most this many by last use, or 0: no limit
};

/// Makes prune_cache_dir() and clear_cache_dir() treat `files` as
/// epload's.  The module that names them calls it from a static
/// initializer of the file that writes them (so every program that can
/// write them knows them); returns true.  `files` must outlive the process.
bool keep_files(const KeptFiles& files);

/// What a name in a cache directory is.
struct KeptName {
  const KeptFiles* files = nullptr;  ///< the registered kind; null: not ours, never touched
  bool temp = false;                 ///< a write of that kind in progress or abandoned
};
KeptName kept_file_kind(std::string_view name);

/// Removes from `dir`: files of each kind whose last use (the later of
/// atime and mtime) is more than 30 days ago, then the least recently used
/// ones beyond a kind's keep_newest (`keep` counting as the most recent);
/// temporary files older than an hour.  `keep` (a file name) is never
/// removed.  Errors are ignored: pruning is housekeeping, never a reason to
/// fail a write.
void prune_cache_dir(const std::string& dir, std::string_view keep);

/// Removes every file of ours (of any registered kind, or a temporary
/// one) from `dir`; returns how many.  A missing directory holds none.
Result<int> clear_cache_dir(const std::string& dir);

}  // namespace epload::detail
