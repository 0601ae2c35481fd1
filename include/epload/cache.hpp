// epload/cache.hpp — key, validate, load and store the serialized index.
//
// The cache knows nothing of loading backends.  Reads never crash and never
// half-trust: a missing, truncated, corrupt, foreign, wrong-version, unsafe
// (other owner, group/world-writable) or stale file means "rebuild", and an
// unusable cache directory means "work uncached".  None of these is an error;
// CacheReport says which happened and why (the CLI prints it under --verbose).
#pragma once

#include <memory>  // shared_ptr<const Index>, Catalog's state
#include <string>  // paths, reasons
#include <vector>  // search paths

#include "epload/index.hpp"
#include "epload/result.hpp"

namespace epload {

/// How much a cached index is checked before it is trusted.
enum class Validation {
  full,   ///< stat every search path and every watched metadata file
  paths,  ///< stat every search path only (frozen environments)
};

/// What identifies one cache file, and where caches live.
struct CacheOptions {
  /// The ordered search paths (sys.path); part of the key.
  std::vector<std::string> search_paths;
  /// Interpreter identity (executable, prefix, version), empty when the paths
  /// were given explicitly; part of the key.
  std::string interpreter;
  /// Cache directory; empty: $EPLOAD_CACHE_DIR, else $XDG_CACHE_HOME/epload,
  /// else ~/.cache/epload.
  std::string cache_dir;
  Validation validation = Validation::full;
  /// false: always scan, never read or write a cache file.
  bool use_cache = true;
  /// A read-only index shipped with the environment ("index build --output");
  /// empty: $EPLOAD_INDEX if set.  Used when it matches the search paths and
  /// its search-path stamps still hold; otherwise ignored (with a reason).
  std::string shipped_index;
  /// Empty: the complete index.  Else only these groups are loaded from a
  /// cache file (a partial Index: see Index::complete()): the cost of a hit
  /// is then that of the groups' share of the file, not of every installed
  /// distribution.  A rebuild still scans everything and may return the
  /// complete Index.
  std::vector<std::string> groups;
};

/// How an index was obtained.
enum class CacheStatus {
  hit,       ///< cache file valid and used
  rebuilt,   ///< scanned, and the cache file (re)written
  /// The cache file was stale: its answer was recomputed from the parts
  /// that did not change (listings, distributions) and what changed was
  /// read again, then the file rewritten; CacheReport::reason says how much.
  refreshed,
  uncached,  ///< scanned; no cache used (disabled, or directory unusable)
  shipped,   ///< the shipped read-only index was used
};

/// "hit", "rebuilt", "refreshed", "uncached" or "shipped".
const char* to_string(CacheStatus status);

/// What happened, for --verbose and tests.
struct CacheReport {
  CacheStatus status = CacheStatus::uncached;
  std::string reason;  ///< why the cache was not used, or was rebuilt
  std::string file;    ///< the cache file concerned, if any
  /// Set when the cache directory could not be used (unsafe, or the index
  /// could not be written there): the answer was served uncached, and every
  /// run will scan until it is fixed.
  std::string cache_dir_problem;
  /// Set when a shipped index (CacheOptions::shipped_index, else
  /// $EPLOAD_INDEX) was asked for but could not be used (missing, corrupt,
  /// foreign): why.  The answer came from the cache or a scan instead.
  std::string shipped_problem;
};

/// The directory caches live in, resolved from the options and environment.
std::string resolve_cache_dir(const CacheOptions& options);

/// The cache file for this key (inside resolve_cache_dir()).
std::string cache_file_path(const CacheOptions& options);

/// Returns the index for the options: from the cache when it is valid, else
/// by scanning (and storing the result when the cache is usable).  Fails only
/// when the scan fails (see scan()).
Result<std::shared_ptr<const Index>> open_index(const CacheOptions& options,
                                                CacheReport* report = nullptr);

/// True when every stamp checked under `validation` still matches the file
/// system and none is racy; otherwise false and `why` names the first change.
/// An index without the complete watched list (a partial load under `paths`
/// validation) cannot vouch for `full`: false, and `why` says so.
bool still_valid(const Index& index, Validation validation, std::string* why = nullptr);

/// Serializes `index` to `path` atomically (temp file + rename in the same
/// directory, which must exist), file mode 0600.  `relocatable`: search paths
/// are stored relative to the file's directory (they must be absolute) and
/// the file is 0644, for an index shipped with an environment and read by all
/// its users.
Result<void> write_index(const Index& index, const std::string& path, bool relocatable = false);

/// Stores `index` as the cache file for `options` (the file cache_file_path()
/// names, carrying the full key), exactly as open_index() does after a
/// rebuild: creates the cache directory (mode 0700) if needed, refuses a
/// directory owned by another user or writable by group/others, writes
/// atomically (mode 0600) and prunes old files.  Returns the file's path.
/// For `epload index build`; open_index() already stores what it rebuilds.
Result<std::string> store_index(const Index& index, const CacheOptions& options);

/// Parses a serialized index.  Any defect (truncation, corruption, foreign
/// JSON, other format version) is an Errc::cache error saying what is wrong.
/// Freshness is not checked here (see still_valid).  `groups` empty: the
/// complete index; else a partial one of those groups (without watched
/// files), reading only the head of the file and those groups' sections.
Result<Index> read_index(const std::string& path, const std::vector<std::string>& groups = {});

/// Removes every file epload keeps in the cache directory (index caches,
/// learned-device stores of the loader and of the Python autoload, leftover
/// temporary files) and nothing else; returns how many.
Result<int> clear_cache(const CacheOptions& options);

/// A long-lived handle for in-process users: every get() re-validates the
/// current index cheaply (stats per `validation`) and rebuilds it when the
/// file system changed.  Thread-safe.
class Catalog {
 public:
  explicit Catalog(CacheOptions options);
  ~Catalog();
  Catalog(const Catalog&) = delete;
  Catalog& operator=(const Catalog&) = delete;

  /// The current index; the shared_ptr keeps an index alive for its users
  /// even after a later get() replaced it.
  Result<std::shared_ptr<const Index>> get(CacheReport* report = nullptr);

 private:
  // Its state (options, lock, current index) lives in src/cache/catalog.cpp.
  friend struct CatalogAccess;
  struct State;
  std::unique_ptr<State> m;
};

}  // namespace epload
