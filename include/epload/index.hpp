// epload/index.hpp — the immutable entry-point index and its provenance.
//
// An Index is importlib.metadata's answer for one ordered list of search
// paths, plus the file stamps that let a cache decide cheaply whether that
// answer still holds.  It is built once (by the scanner or the cache reader,
// through IndexBuilder) and never changes; every string_view it hands out
// points into its own arena and lives as long as the Index.  Moving an Index
// keeps all views and pointers valid (the storage lives on the heap).
#pragma once

#include <cstdint>      // stamp fields
#include <memory>       // pimpl
#include <span>         // query results
#include <string>       // same_answer
#include <string_view>  // names and paths

#include "epload/entry_point.hpp"

namespace epload {

namespace detail {
struct IndexBuilderHooks;  // the cache reader's (src/index_hooks.hpp)
}  // namespace detail

/// The file metadata a cache compares to decide whether a file changed:
/// (device, inode, size, mtime_ns, ctime_ns, mode).  mode == 0 means "did not
/// exist / could not be stat'ed".  ctime catches in-place rewrites whose mtime
/// was restored.
struct FileStamp {
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;
  std::uint32_t mode = 0;

  bool exists() const { return mode != 0; }
  bool operator==(const FileStamp&) const = default;
};

/// A file or directory whose state the answer depends on, named relative to
/// one of the index's search paths (so it can be checked with fstatat).
struct WatchedFile {
  std::uint32_t search_path = 0;  ///< index into Index::search_paths()
  std::string_view rel_path;      ///< e.g. "foo-1.0.dist-info/entry_points.txt"
  FileStamp stamp;
};

/// A watched file by name only (an index loaded for `full` validation, which
/// carries the digest of the stamps instead of the stamps).
struct WatchedName {
  std::string_view rel_path;      ///< as in WatchedFile
  std::uint32_t search_path = 0;  ///< index into Index::search_paths()
};

/// A 128-bit digest of the stamps of every watched file, in order (see
/// Index::watched_digest()).
struct WatchedDigest {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  bool operator==(const WatchedDigest&) const = default;
};

/// Immutable, queryable entry-point index.
class Index {
 public:
  Index();
  Index(Index&&) noexcept;
  Index& operator=(Index&&) noexcept;
  ~Index();

  /// The search paths, in order, exactly as given to the scanner.
  std::span<const std::string_view> search_paths() const;
  /// De-duplicated distributions in discovery order (first on the path wins).
  std::span<const Distribution> distributions() const;
  /// All entry points in importlib's order: groups sorted by name (code
  /// point order), discovery order within a group.
  std::span<const EntryPoint> entry_points() const;
  /// The distinct group names, sorted.
  std::span<const std::string_view> groups() const;
  /// The entry points of one group in discovery order; empty if none.
  std::span<const EntryPoint> group(std::string_view group) const;
  /// The first entry point named `name` in `group`, or nullptr (a miss is not
  /// an error).
  const EntryPoint* find(std::string_view group, std::string_view name) const;
  /// The first distribution (in discovery order) whose metadata importlib
  /// would fail on, or nullptr.  importlib.metadata.entry_points() raises for
  /// it whatever the selection, so exact callers must report it.
  const Distribution* first_error() const;

  /// Provenance: one stamp per search path, parallel to search_paths().
  std::span<const FileStamp> search_path_stamps() const;
  /// Provenance: every metadata file whose content the answer depends on,
  /// with its stamp; empty when watched_digest() is set.
  std::span<const WatchedFile> watched_files() const;
  /// Null when watched_files() carry the stamps (a scan, a complete cache
  /// load).  Else the watched files are watched_names(), and this is the
  /// digest of their stamps at scan time: what a cache load for `full`
  /// validation reads instead of every stamp.
  const WatchedDigest* watched_digest() const;
  /// The watched files by name, in order, when watched_digest() is set;
  /// else empty.
  std::span<const WatchedName> watched_names() const;
  /// Provenance: CLOCK_REALTIME_COARSE (ns) taken before the first stat of
  /// the scan.  A stamp with mtime or ctime >= this may have changed again
  /// within the same clock tick, unseen ("racy"); caches must not trust it.
  std::int64_t scanned_at_ns() const;

  // ---- partial indexes (a cache load of some groups only) -----------------
  // A scan, or a complete cache load, holds every group and distribution.  A
  // partial load (CacheOptions::groups) holds only the entry points of the
  // groups it was asked for, and distributions() only the distributions
  // those entry points belong to (still in discovery order).  first_error()
  // and the search-path stamps are always the global ones.

  /// True when the index holds every group and distribution.
  bool complete() const;
  /// The groups a partial index was loaded for (sorted, distinct; a group
  /// with no entry points is listed too); empty for a complete index.
  std::span<const std::string_view> loaded_groups() const;
  /// True when group(`group`) is the real answer: always in a complete index,
  /// else only for loaded_groups().  An empty group() of a group that was not
  /// loaded says nothing about that group.
  bool has_group(std::string_view group) const;
  /// True when watched_files() (or watched_names()) lists every watched file
  /// (what `full` validation needs).  A partial load under `paths` validation has none,
  /// or only those inside its groups' distributions.
  bool watched_complete() const;

  /// Empty, or why this answer must not be cached: a metadata file could not
  /// be read (an I/O error such as EIO, not its content), so the error it
  /// gives may be gone next time while the file's stamp stays the same.  The
  /// view lives as long as the Index.
  std::string_view not_cacheable() const;

 private:
  friend class IndexBuilder;
  friend struct detail::IndexBuilderHooks;
  struct Data;
  std::unique_ptr<Data> m;
};

/// True when two indexes give the same answer: the same distributions (name,
/// version, metadata directory, error) and the same entry points in the same
/// order.  Provenance is not compared.  On a difference, `why` (if given)
/// describes the first one.
bool same_answer(const Index& a, const Index& b, std::string* why = nullptr);

/// Assembles an Index.  Every string passed in is copied; the builder keeps
/// no reference to caller memory.
class IndexBuilder {
 public:
  IndexBuilder();
  ~IndexBuilder();
  IndexBuilder(const IndexBuilder&) = delete;
  IndexBuilder& operator=(const IndexBuilder&) = delete;

  /// Appends a search path; returns its number.
  std::uint32_t add_search_path(std::string_view path, const FileStamp& stamp);
  /// Appends a distribution (discovery order); returns its number.
  std::uint32_t add_distribution(std::string_view name, std::string_view version,
                                 std::string_view metadata_dir,
                                 std::uint32_t search_path,
                                 std::string_view error = {});
  /// Appends an entry point of distribution `dist` (file order).
  void add_entry_point(std::uint32_t dist, std::string_view group,
                       std::string_view name, std::string_view value);
  /// Records a file the answer depends on.
  void add_watched_file(std::uint32_t search_path, std::string_view rel_path,
                        const FileStamp& stamp);
  void set_scanned_at(std::int64_t ns);
  /// Optional: room for this many more distributions, entry points,
  /// watched files and watched names (fewer reallocations, and fewer fresh
  /// pages touched).
  void reserve(std::size_t dists, std::size_t entry_points, std::size_t watched, std::size_t names = 0);

  /// Marks the index as one that must not be cached (Index::not_cacheable()).
  void set_not_cacheable(std::string_view why);
  /// Finishes: sorts entry points into importlib's order.  The builder is
  /// left empty.
  Index build();

 private:
  friend struct detail::IndexBuilderHooks;
  struct Data;
  std::unique_ptr<Data> m;
};

}  // namespace epload
