// cache_internal.hpp — what the cache's translation units share.
//
// cache_sections.*    an index file's bytes and the layout of its sections
// cache_reader.hpp    the reader, in two files (the only simdjson users):
//   cache_read_head.cpp  JSON values and the head (line 1)
//   cache.cpp            the sections, the complete and partial loads
// cache_write.cpp     the serializer (by hand: simdjson 3.0 has no writer)
// cache_refresh.cpp   a stale file refreshed: recomputed from its parts
// json_text.*        the checksum hash, hex digits, JSON string escapes
// cache_key.cpp       the key, its hash and file name, the cache directory,
//                     lexical path helpers
// cache_validate.cpp  still_valid(): the stat comparisons
// cache_store.cpp     open_index(), Catalog, atomic writes, safety checks,
//                     pruning (of the files kept_files.hpp knows)
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "atomic_file.hpp"  // dir_name, and what every cache file is written with
#include "json_text.hpp"   // the hash, hex digits, JSON strings
#include "index_provenance.hpp"
#include "epload/cache.hpp"
#include "epload/index.hpp"
#include "epload/result.hpp"

namespace epload::detail {

/// Bumped whenever the file layout or its meaning changes; part of the key,
/// so files of other versions are simply never looked up (and pruned).
inline constexpr int k_cache_format_version = 7;

/// Bumped whenever the scanner's answer for the same files changes (2: a
/// dist-info stem stands for METADATA only as the wheel format writes it;
/// 3: a distribution with entry points is named by its METADATA).
/// Part of the key too: a cache written by an older scanner is never looked
/// up, so its answer is not served, and it is pruned like any unused file.
inline constexpr int k_scanner_version = 3;

/// Everything that identifies one cache file.  The hash of this names the
/// file; the full key is also stored inside it and compared on load, so a
/// hash collision or a foreign file means "rebuild", never a wrong answer.
struct CacheKey {
  std::string interpreter;
  std::vector<std::string> search_paths;
  /// The current directory when a search path is "" or relative, else "".
  std::string cwd;
};

/// The key for `options` (calls getcwd only when a search path is relative).
/// The interpreter's executable (its first field, up to a NUL) is keyed by
/// its real path: `python` and `python3` of one environment share a file.
CacheKey make_key(const CacheOptions& options);

/// True when the first of `paths` is left out of the cache key, and of the
/// index cached for it: other entries follow it, and it is a directory in
/// which importlib's Lookup finds nothing now (MetadataIn::none).  The
/// working directory at the head of sys.path ('' or a script's directory)
/// usually is one: keyed without it, all such directories share one cache
/// file, and the answer is the same, since the entry contributes no
/// distribution.  Costs one listing of that directory.
bool head_left_out(const std::vector<std::string>& paths);

/// `options` without their first search path, in `storage`.
const CacheOptions& without_head(const CacheOptions& options, CacheOptions& storage);

/// The options a cache file is keyed by now: without_head() when
/// head_left_out(), else `options` itself.
const CacheOptions& keyed_options(const CacheOptions& options, CacheOptions& storage);

/// False when `index`, opened for `options` without their first search
/// path, no longer may be: that entry holds metadata now.
bool still_keyed(const Index& index, const CacheOptions& options);

/// The current directory when a search path in `paths` is relative, else "".
std::string key_cwd(const std::vector<std::string>& paths);

/// True when `path` is "" or does not start with '/'.
bool is_relative(std::string_view path);

/// 64-bit FNV-1a of the key and the format version, length-prefixed fields.
std::uint64_t key_hash(const CacheKey& key);

/// "index-<16 hex digits>.json".
std::string cache_file_name(const CacheKey& key);

/// Lexical normalization of an absolute path, like os.path.normpath: no "."
/// components, ".." removes its parent, no repeated or trailing '/'.
std::string normalize_path(std::string_view path);

/// `path` relative to directory `base` (both absolute and normalized).
std::string relative_path(std::string_view path, std::string_view base);

/// Joins a directory and a relative name with one '/'.
std::string join_path(std::string_view dir, std::string_view name);

/// strerror(errno), for error messages.
inline std::string errno_text() { return std::strerror(errno); }

/// An absolute, normalized form of `path` (getcwd for a relative one).
std::string absolute_path(std::string_view path);

// ---- the file format (cache_write.cpp, cache.cpp) ---------------------------

/// What the serializer needs beyond the Index.
struct WriteOptions {
  const CacheKey* key = nullptr;  ///< stored in the file; null: empty key
  bool relocatable = false;       ///< search paths relative to `base_dir`
  std::string base_dir;           ///< absolute, normalized; relocatable only
};

/// A serialized index: the file is `head` followed by `body` (kept apart so
/// that the megabytes of the body are not copied once more to join them).
struct SerializedIndex {
  std::string head;  ///< line 1
  std::string body;  ///< the sections
};

/// Serializes an index to JSON Lines text.  Fails only for a relocatable
/// index whose search paths are not absolute, or a relative metadata
/// directory outside its search path.
Result<SerializedIndex> serialize_index(const Index& index, const WriteOptions& options);

/// What the parser checks beyond well-formedness.
class EarlyFullCheck;
struct WatchedSeen;

/// The bytes simdjson may read past the end of a document
/// (SIMDJSON_PADDING; cache_reader.hpp checks that they agree).
inline constexpr std::size_t k_json_padding = 64;

struct ReadExpectations {
  /// When set: the file must carry exactly this key (interpreter, cwd and the
  /// search-path list) and must not be relocatable.
  const CacheKey* key = nullptr;
  /// When set (shipped index): the stored search paths, resolved against
  /// `base_dir` if relocatable, must equal these after lexical normalization;
  /// the Index then carries these exact strings.
  const std::vector<std::string>* search_paths = nullptr;
  /// The directory of the file, absolute and normalized (relocatable files).
  std::string base_dir;
  /// Empty: read everything (a complete Index).  Else read only the head and
  /// these groups' sections (a partial Index).
  std::vector<std::string> groups;
  /// Partial reads: also the watched section (`full` validation needs it).
  bool watched = false;
  /// Partial reads with `watched`: every watched file with its stamp, not
  /// only their names and digest (to name the file that changed).
  bool watched_stamps = false;
  /// Partial reads with `watched` (names and digest): when set, the names
  /// are read first and their check started here, so that its stat calls
  /// overlap the parse of the groups' sections.  A failed read abandons it.
  EarlyFullCheck* early_check = nullptr;
  /// Read through a private read-only mapping of the file (see
  /// memory.hpp) instead of copies in fresh memory.
  bool map_file = false;
};

/// Reads and parses the open file `fd` (the caller checked its safety;
/// `file` names it in messages): the head, then only the sections `expect`
/// selects, each with pread at the offset the head records.  Any defect in
/// what is read, or an unmet expectation, is an Errc::cache error.
Result<Index> read_index_fd(int fd, std::string_view file, const ReadExpectations& expect);

// ---- validation (cache_validate.cpp) ---------------------------------------

/// The check for a shipped index: each search path must exist exactly when it
/// did and have the same mtime_ns (dev, ino and ctime change when an
/// environment is copied, so they are not compared).
bool shipped_still_valid(const Index& index, std::string* why);

/// A `full` check of watched names started before their Index is complete
/// (by the cache reader, ReadExpectations::early_check): a helper thread on
/// the other CPU stats them while the reader goes on parsing, and
/// still_valid(index, full, why, this) joins it.  One use per object.
class EarlyFullCheck {
 public:
  /// Files the check's threads take at a time from their shared counter:
  /// ~60 us of stats.  The threads finish at most one chunk apart, so a
  /// small chunk keeps the last one short (256 left one thread statting
  /// ~0.5 ms alone at the end of a 1,000-file check).  The reader publishes
  /// names in the same steps: a helper waits for whole chunks.
  static constexpr std::size_t k_chunk = 32;

  EarlyFullCheck();
  ~EarlyFullCheck();  // abandons a check still running
  EarlyFullCheck(const EarlyFullCheck&) = delete;
  EarlyFullCheck& operator=(const EarlyFullCheck&) = delete;

  /// Creates the helper thread ahead of start(), waiting on the other CPU
  /// (its creation, ~70 us, then overlaps the reading of the head); start()
  /// sets it going, or abandon() ends it.  Nothing when there is no other
  /// CPU or no thread to be had: start() then tries again.
  void prepare();
  /// Starts checking `names` (relative to `paths`) on a helper thread, when
  /// there are enough to split and another CPU; else does nothing (the
  /// check then runs whole in still_valid).  The spans' memory must stay put
  /// until still_valid() or abandon().  Only the first `ready` names need
  /// to be written yet: the helper waits for publish() to reach the others,
  /// so it can start while the reader is still parsing them.
  void start(std::span<const WatchedName> names, std::span<const std::string_view> paths,
             std::int64_t scanned_at, std::size_t ready = std::numeric_limits<std::size_t>::max());
  /// The first `ready` names are written (release): the helper may read
  /// them.  Every name must be published before still_valid() joins the
  /// check; a read that cannot publish them all abandons it.
  void publish(std::size_t ready);
  /// Stops a started check (its answer is not wanted) and waits for it.
  void abandon();
  /// True from a prepare() or a start() that set a helper going until
  /// still_valid() or abandon() finishes it.
  bool running() const { return m != nullptr; }

  struct State;

 private:
  friend bool still_valid(const Index&, Validation, std::string*, EarlyFullCheck*, WatchedSeen*);
  std::unique_ptr<State> m;
};

/// What a `full` check found of the watched files: what a refresh then need
/// not stat again.
struct WatchedSeen {
  /// Every watched file holds.
  bool hold = false;
  /// When the check stat'ed every file by name (against the digest): per
  /// watched file, in the index's order, its fresh stamp; empty when not
  /// known.
  std::vector<FileStamp> stamps;
};

/// still_valid() (cache.hpp), joining `early` when it was started on this
/// index's watched names; `early` is finished or abandoned on return.  With
/// `seen` under `full`, the watched files are checked even when a search
/// path changed, and `seen` says what the check found of them; otherwise it
/// is left empty.
bool still_valid(const Index& index, Validation validation, std::string* why, EarlyFullCheck* early,
                 WatchedSeen* seen = nullptr);

}  // namespace epload::detail
