// index_hooks.hpp — what the cache reader (cache.cpp) may do to an
// IndexBuilder beyond the public interface: keep the bytes it read and
// borrow strings from them, record watched files by name with the digest
// of their stamps, and make the Index partial.  Not part of the public
// surface: only the reader builds such an Index.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "epload/index.hpp"
#include "index_builder.hpp"

namespace epload::detail {

struct IndexBuilderHooks {
  /// Records a watched file by name (an index that carries the digest of
  /// the stamps, set_watched_digest()).  With `copy` false, `rel_path` must
  /// lie in bytes handed over by keep_bytes(): it is kept, not copied.
  static void add_watched_name(IndexBuilder& b, std::uint32_t search_path, std::string_view rel_path,
                               bool copy = true);
  /// Hands over bytes the Index keeps for its lifetime (the cache reader's
  /// buffer of names, which add_watched_name() then need not copy).
  static void keep_bytes(IndexBuilder& b, std::unique_ptr<char[], void (*)(char*)> bytes);
  /// Keeps `owner` (and what it owns: the cache reader's mapping of its
  /// file, which names and borrowed strings then point into) as long as the
  /// Index.
  static void keep_alive(IndexBuilder& b, std::shared_ptr<const void> owner);
  /// The names and versions of distributions and the names and values of
  /// entry points added from now on that lie in [bytes, bytes + n) are kept
  /// as views, not copied.  Those bytes must be handed over with
  /// keep_bytes() before build() (the cache reader's section buffers).
  static void borrow(IndexBuilder& b, const char* bytes, std::size_t n);
  /// Says that the watched files are the names added, and `digest` is the
  /// digest of their stamps (see watched_digest()).
  static void set_watched_digest(IndexBuilder& b, const WatchedDigest& digest);
  /// Records a candidate metadata path of a listing (a child of a search
  /// path that importlib's Lookup takes, in discovery order, shadowed ones
  /// included): what a refresh reuses for a search path that did not change.
  static void add_listed(IndexBuilder& b, std::uint32_t search_path, std::string_view child);
  /// The listings recorded (by a scan, or a complete cache load), in
  /// discovery order; empty for a partial load.
  static std::span<const WatchedName> listed(const Index& index);
  /// Records how many children search path `path` listed (the cache
  /// reader's head, for a partial load, which does not read the listings).
  static void set_listed_count(IndexBuilder& b, std::uint32_t path, std::uint32_t count);
  /// How many children search path `path` listed: the recorded count, else
  /// those among listed().
  static std::uint32_t listed_count(const Index& index, std::uint32_t path);
  /// True when the listings (or their counts) are known: a scan, or a read
  /// of a cache file; not an index assembled without them.
  static bool listed_known(const Index& index);
  /// Makes the index partial: it holds only `groups` (see
  /// Index::complete()).  Without this call the index is complete.
  static void set_partial(IndexBuilder& b, std::span<const std::string_view> groups);
  /// Says whether the watched files added are the complete list (default:
  /// true).
  static void set_watched_complete(IndexBuilder& b, bool complete);
  /// Records the global first error of a partial index: a distribution that
  /// need not be among its distributions().  A complete index finds its first
  /// error among its own distributions instead.
  static void set_first_error(IndexBuilder& b, std::string_view name, std::string_view version,
                              std::string_view metadata_dir, std::uint32_t search_path, std::string_view error);
  /// The Index being assembled, as far as it is: its search paths, watched
  /// names and scan time are final once added (the cache reader starts
  /// checking the names before the entry points are in).
  static const Index& in_progress(const IndexBuilder& b);
};

}  // namespace epload::detail
