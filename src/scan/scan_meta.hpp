// scan_meta.hpp — the scanner's shared bookkeeping (string pools and the
// files an answer depends on) and Distribution.metadata's read chain.
#pragma once

#include <cstdint>      // slice offsets
#include <string>       // pools
#include <string_view>  // names
#include <vector>       // watches

#include "epload/index.hpp"  // FileStamp
#include "scan_read.hpp"
#include "file_stamp.hpp"

namespace epload::detail {

/// A byte range in one of the scan's string pools.
struct Slice {
  std::uint32_t off = 0, len = 0;
  std::string_view in(const std::string& pool) const { return {pool.data() + off, len}; }
};

/// Appends `s` to `pool`; returns where it landed.
inline Slice append(std::string& pool, std::string_view s) {
  const Slice sp{static_cast<std::uint32_t>(pool.size()), static_cast<std::uint32_t>(s.size())};
  pool.append(s);
  return sp;
}

/// A file the answer depends on, relative to its search path.
struct Watch {
  std::uint32_t path;
  Slice rel;
  FileStamp stamp;
};

/// What METADATA / PKG-INFO / the path itself said (Distribution.metadata).
struct MetaInfo {
  bool read = false;      // the chain was walked
  bool has_name = false;  // a Name header was found
  bool io_failed = false;  // `error` is an OSError (not the content's fault)
  int exhausted = 0;       // errno when a read failed for want of resources (exhausted())
  Slice name, version, error;
};

/// "path/child" as importlib's pathlib.Path(path, child) names it.
void join(std::string& out, std::string_view path, std::string_view child);

/// Reads `rel`, a path inside search path `search_path`: relative to
/// `dirfd` when that is open (>= 0), else by the whole path (built in
/// `scratch`).
FileRead read_in(FileReader& reader, int dirfd, std::string_view search_path, const std::string& rel,
                 std::string& scratch);

/// stamp_at() of `rel` inside `search_path` the same way.
FileStamp stamp_in(int dirfd, std::string_view search_path, const std::string& rel, std::string& scratch);

/// The message for an OSError that importlib.metadata lets propagate.
std::string io_message(std::string_view path, int err);

/// The message of a scan stopped by a failure of the exhausted() kind.
std::string exhausted_message(std::string_view path, int err);

/// Distribution.metadata for the metadata path `child` of search path
/// `search_path` (number `path`, open on `dirfd`, or -1: read by whole paths): METADATA, else PKG-INFO,
/// else the path itself read as a file; the first that reads as non-empty
/// text wins.  Decode and I/O errors are recorded in meta.error, as
/// importlib would raise them.  Every file tried is appended to `watches`;
/// strings go to `pool`; `rel` is scratch.
void read_metadata(int dirfd, std::uint32_t path, std::string_view search_path,
                   std::string_view child, MetaInfo& meta, FileReader& reader, std::string& pool,
                   std::vector<Watch>& watches, std::string& rel);

/// Why importlib.metadata raises when `ep.dist.name` (or `.version`) is read
/// for the distribution whose metadata path is `metadata_dir` (as
/// Distribution::metadata_dir gives it): a METADATA that is not UTF-8, or
/// that cannot be read.  "" when it does not raise (a Name, or none: None).
/// The files are read now, by the chain read_metadata() follows; for the
/// rare distribution an Index names "" (the index keeps no reason).
std::string dist_name_error(std::string_view metadata_dir);

}  // namespace epload::detail
