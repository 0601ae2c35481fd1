// file_stamp.hpp — FileStamp: what a cache compares to decide whether a file
// changed.  Plain data, shared by the index's provenance, the scanner, the
// cache and the loader's store (stamp.hpp takes it from stat(2)).
#pragma once

#include <cstdint>

namespace epload {

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

}  // namespace epload
