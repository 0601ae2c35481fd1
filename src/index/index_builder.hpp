// index_builder.hpp — IndexBuilder: how the scanner and the cache reader
// assemble an Index, answer and provenance (index_provenance.hpp).  What only
// the cache reader may do beyond this is in index_hooks.hpp.
#pragma once

#include <cstddef>      // reserve
#include <cstdint>      // numbers
#include <memory>       // pimpl
#include <string_view>  // copied in

#include "epload/index.hpp"
#include "index_provenance.hpp"

namespace epload {

namespace detail {
struct IndexBuilderHooks;  // index_hooks.hpp
}  // namespace detail

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

  /// Marks the index as one that must not be cached (not_cacheable()).
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
