// index_provenance.hpp — what an Index carries beside the answer: the file
// stamps and names that let the cache decide cheaply whether the answer still
// holds, the scan's time, and whether it may be cached at all.
//
// Written by the scanner and the cache reader (index_builder.hpp), read by
// the cache (validation, writing) and `epload index`.  Hosts never need it,
// so it is not on the public Index; these free functions read it.
#pragma once

#include <cstdint>      // stamps, times
#include <span>         // lists
#include <string_view>  // names

#include "epload/index.hpp"
#include "file_stamp.hpp"

namespace epload {

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
/// watched_digest()).
struct WatchedDigest {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  bool operator==(const WatchedDigest&) const = default;
};

/// One stamp per search path, parallel to index.search_paths() (always the
/// global ones, also in a partial index).
std::span<const FileStamp> search_path_stamps(const Index& index);
/// Every metadata file whose content the answer depends on, with its stamp;
/// empty when watched_digest() is set.
std::span<const WatchedFile> watched_files(const Index& index);
/// Null when watched_files() carry the stamps (a scan, a complete cache
/// load).  Else the watched files are watched_names(), and this is the
/// digest of their stamps at scan time: what a cache load for `full`
/// validation reads instead of every stamp.
const WatchedDigest* watched_digest(const Index& index);
/// The watched files by name, in order, when watched_digest() is set; else
/// empty.
std::span<const WatchedName> watched_names(const Index& index);
/// CLOCK_REALTIME_COARSE (ns) taken before the first stat of the scan.  A
/// stamp with mtime or ctime >= this may have changed again within the same
/// clock tick, unseen ("racy"); caches must not trust it.
std::int64_t scanned_at_ns(const Index& index);
/// True when watched_files() (or watched_names()) lists every watched file
/// (what `full` validation needs).  A partial load under `paths` validation
/// has none, or only those inside its groups' distributions.
bool watched_complete(const Index& index);
/// Empty, or why this answer must not be cached: a metadata file could not
/// be read (an I/O error such as EIO, not its content), so the error it gives
/// may be gone next time while the file's stamp stays the same.  The view
/// lives as long as the Index.
std::string_view not_cacheable(const Index& index);

}  // namespace epload
