// epload/cache.hpp — key, validate, load and store the serialized index.
//
// The cache knows nothing of loading backends.  Reads never crash and never
// half-trust: a missing, truncated, corrupt, foreign, wrong-version, unsafe
// (other owner, group/world-writable) or stale file means "rebuild", and an
// unusable cache directory means "work uncached".  None of these is an error;
// CacheReport says which happened and why (the CLI prints it under --verbose).
#pragma once

#include <cstdint>     // CacheFileIdentity
#include <functional>  // CacheOptions::while_validating
#include <memory>      // shared_ptr<const Index>
#include <mutex>   // Catalog
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

/// A caller's work on an index read from the cache while its `full` check
/// runs on the other CPU (CacheOptions::while_validating).
using WhileValidating = std::function<void(const std::shared_ptr<const Index>&)>;

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
  /// Optional, for hosts that build on the index at once (a loader): on a
  /// cache hit whose `full` check runs on the other CPU, called on the
  /// calling thread with the Index while that check is still running, so
  /// that the caller's own work overlaps the stat calls.  open_index()
  /// returns that same Index only if the check passes; if it does not,
  /// open_index() rebuilds and returns another, and whatever the callback
  /// made from the first must be dropped (compare the pointers).  Not called
  /// otherwise (a miss, `paths` validation, one CPU, few watched files).
  WhileValidating while_validating;
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

/// One version of a cache file.  Cache files are replaced whole (a rename),
/// never written in place, so two reads of the same identity read the same
/// bytes.
struct CacheFileIdentity {
  std::uint64_t dev = 0, ino = 0, size = 0;
  std::int64_t mtime_ns = 0;
  /// False for "no file" (an answer not read from a cache file).
  bool known() const { return size != 0; }
  bool operator==(const CacheFileIdentity&) const = default;
};

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
  /// On a `hit`: the version of `file` the index was read from.
  CacheFileIdentity file_identity;
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
/// validation, see Index::watched_complete()) cannot vouch for `full`: false,
/// and `why` says so.
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
  /// `sibling`: a Catalog of the same options but other groups (or none).
  /// A process asks for one group after another (PyTorch: `torch.backends`
  /// during `import torch`, `torch_dynamo_backends` at the first compile);
  /// while the sibling holds an index read from the cache file under `full`
  /// validation, this Catalog's groups are read from that same file version
  /// without its watched section (~0.6 ms at 6,000 distributions), and their
  /// freshness is the sibling index's `full` check, run on every get().
  explicit Catalog(CacheOptions options, std::shared_ptr<Catalog> sibling = nullptr);
  /// The current index; the shared_ptr keeps an index alive for its users
  /// even after a later get() replaced it.  `while_validating`, when set,
  /// is CacheOptions::while_validating for this call only (it is called
  /// only when the index is read from the cache file with its `full` check
  /// running on the other CPU).
  Result<std::shared_ptr<const Index>> get(
      CacheReport* report = nullptr,
      const WhileValidating& while_validating = {});
  /// True when made with a sibling.
  bool has_sibling() const { return m_sibling != nullptr; }

 private:
  /// This Catalog's groups read through the sibling (see the constructor),
  /// or nullptr when that cannot be done now.
  std::shared_ptr<const Index> through_sibling(const std::string& cwd, CacheReport* report);

  CacheOptions m_options;
  std::shared_ptr<Catalog> m_sibling;
  std::mutex m_mutex;
  std::shared_ptr<const Index> m_current;
  /// When m_current was read through the sibling: the sibling's index whose
  /// `full` check vouches for it.
  std::shared_ptr<const Index> m_voucher;
  CacheReport m_report;  ///< how m_current was obtained
  std::string m_cwd;     ///< the current directory it was keyed for, if relevant
};

}  // namespace epload
