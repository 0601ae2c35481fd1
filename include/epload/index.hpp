// epload/index.hpp — the immutable entry-point index.
//
// An Index is importlib.metadata's answer for one ordered list of search
// paths.  It is built once (by the scanner or the cache reader) and never
// changes; every string_view it hands out points into its own arena and
// lives as long as the Index.  Moving an Index keeps all views and pointers
// valid (the storage lives on the heap).  What the cache keeps beside the
// answer to decide whether it still holds (file stamps, the scan's time) is
// not part of this interface.
#pragma once

#include <memory>       // pimpl
#include <span>         // query results
#include <string>       // same_answer
#include <string_view>  // names and paths

#include "epload/entry_point.hpp"

namespace epload {

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

  // ---- partial indexes (a cache load of some groups only) -----------------
  // A scan, or a complete cache load, holds every group and distribution.  A
  // partial load (CacheOptions::groups) holds only the entry points of the
  // groups it was asked for, and distributions() only the distributions
  // those entry points belong to (still in discovery order).  first_error()
  // is always the global one.

  /// True when the index holds every group and distribution.
  bool complete() const;
  /// The groups a partial index was loaded for (sorted, distinct; a group
  /// with no entry points is listed too); empty for a complete index.
  std::span<const std::string_view> loaded_groups() const;
  /// True when group(`group`) is the real answer: always in a complete index,
  /// else only for loaded_groups().  An empty group() of a group that was not
  /// loaded says nothing about that group.
  bool has_group(std::string_view group) const;

 private:
  // The scanner and the cache reader build the storage, and the cache reads
  // its provenance, through this one internal struct (src/index/index.cpp).
  friend struct IndexAccess;
  struct Data;
  std::unique_ptr<Data> m;
};

/// True when two indexes give the same answer: the same distributions (name,
/// version, metadata directory, error) and the same entry points in the same
/// order.  How each was obtained is not compared.  On a difference, `why` (if
/// given) describes the first one.
bool same_answer(const Index& a, const Index& b, std::string* why = nullptr);

}  // namespace epload
