// stamp.hpp — FileStamp from stat(2), shared by the scanner and the cache.
#pragma once

#include <fcntl.h>     // AT_FDCWD
#include <sys/stat.h>  // fstatat
#include <time.h>      // clock_gettime

#include <cstdint>

#include "epload/index.hpp"

namespace epload::detail {

/// The stamp of a stat result.
inline FileStamp stamp_of(const struct stat& st) {
  FileStamp s;
  s.dev = static_cast<std::uint64_t>(st.st_dev);
  s.ino = static_cast<std::uint64_t>(st.st_ino);
  s.size = static_cast<std::uint64_t>(st.st_size);
  s.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  s.ctime_ns = static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  s.mode = static_cast<std::uint32_t>(st.st_mode);
  return s;
}

/// Stamps `path` relative to `dirfd` (AT_FDCWD for plain paths), following
/// symlinks as importlib's open() does.  Any failure gives the "absent"
/// stamp (mode 0).
inline FileStamp stamp_at(int dirfd, const char* path) {
  struct stat st;
  if (::fstatat(dirfd, path, &st, 0) != 0) return FileStamp{};
  return stamp_of(st);
}

/// CLOCK_REALTIME_COARSE in ns: the clock the kernel stamps files with, so a
/// file changed after this instant has mtime/ctime >= it.
inline std::int64_t coarse_now_ns() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

/// True when a stamp may hide a change made within the same clock tick as
/// the scan that recorded it (git's "racy" rule).
inline bool is_racy(const FileStamp& s, std::int64_t scanned_at_ns) {
  return s.exists() && (s.mtime_ns >= scanned_at_ns || s.ctime_ns >= scanned_at_ns);
}

}  // namespace epload::detail
