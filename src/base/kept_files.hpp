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

/// How many files of one kind a cache directory keeps (the least recently
/// used beyond it are pruned), unless the kind says otherwise.
inline constexpr std::size_t k_keep_newest = 64;

/// A kind of file kept in the cache directory: "<prefix>X<suffix>" for a
/// non-empty X, and its temporaries while written by write_atomic(),
/// "." + prefix + ... + ".tmp." + ....  A name is not enough to make a file
/// ours (the directory may be shared: a project's, $HOME): pruning and
/// clearing touch only a regular file of ours (same owner) that starts with
/// `magic`; a temporary one may also be shorter, a prefix of it (a write cut
/// short).
struct KeptFiles {
  std::string_view prefix;      ///< "index-"
  std::string_view suffix;      ///< ".json"
  std::string_view magic;       ///< what every such file starts with: "{\"format\":\"epload-index\","
  std::size_t keep_newest = k_keep_newest;  ///< at most this many, by last use; 0: no limit
};

/// Makes prune_cache_dir() and clear_cache_dir() treat `files` as
/// epload's.  The module that names them calls it from a static
/// initializer of the file that writes them (so every program that can
/// write them knows them); returns true.  `files` must outlive the process.
bool keep_files(const KeptFiles& files);

/// What a name in a cache directory is (by its name only: whether the file
/// is ours is decided by its content, see KeptFiles).
struct KeptName {
  const KeptFiles* files = nullptr;  ///< the registered kind; null: not ours, never touched
  bool temp = false;                 ///< a write of that kind in progress or abandoned
};
KeptName kept_file_kind(std::string_view name);

/// Removes from `dir`, among the files of ours (see KeptFiles): those of
/// each kind whose last use (the later of atime and mtime) is more than 30
/// days ago, then the least recently used ones beyond a kind's keep_newest
/// (`keep` counting as the most recent); temporary files older than an
/// hour.  `keep` (a file name) is never removed.  Errors are ignored:
/// pruning is housekeeping, never a reason to fail a write.
void prune_cache_dir(const std::string& dir, std::string_view keep);

/// Removes every file of ours (of any registered kind, or a temporary
/// one; see KeptFiles) from `dir`; returns how many.  A missing directory
/// holds none (and is not created).
Result<int> clear_cache_dir(const std::string& dir);

}  // namespace epload::detail
