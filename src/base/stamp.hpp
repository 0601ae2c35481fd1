// stamp.hpp — FileStamp from stat(2), shared by the scanner and the cache.
#pragma once

#include <fcntl.h>     // AT_FDCWD
#include <sys/stat.h>  // fstatat
#include <time.h>      // clock_gettime

#include <cerrno>  // errno
#include <cstdint>

#include "file_stamp.hpp"

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
/// symlinks as importlib's open() does.  Where it does not exist (ENOENT,
/// ENOTDIR, a dangling link: importlib reads nothing either) the stamp is
/// "absent" (mode 0).  Where it exists but cannot be followed (a symlink
/// loop: importlib raises OSError), it is the stamp of the name itself, so
/// that such a link appearing or going away is a change.
inline FileStamp stamp_at(int dirfd, const char* path) {
  struct stat st;
  if (::fstatat(dirfd, path, &st, 0) == 0) return stamp_of(st);
  if (errno == ENOENT || errno == ENOTDIR) return FileStamp{};
  if (::fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0) return stamp_of(st);
  return FileStamp{};
}

/// CLOCK_REALTIME_COARSE in ns: the clock the kernel stamps files with, so a
/// file changed after this instant has mtime/ctime >= it.
inline std::int64_t coarse_now_ns() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

/// True when a file time `t` may hide a change made after `scanned_at_ns`
/// (git's "racy" rule): the file could change again within the same tick
/// of its file system's clock without its time changing.
///
/// The tick is the kernel's coarse clock (the one coarse_now_ns() reads) on
/// file systems that keep nanoseconds, but some keep less: whole seconds
/// (ext2/ext3 with 128-byte inodes, many NFS servers), two seconds (FAT's
/// mtime), microseconds.  Such a system truncates every time it stores, so a
/// file written 0.3 s after a scan in the same second gets a time *before*
/// the scan, and a same-size rewrite in that second leaves its stamp as it
/// was.  The time itself shows the granularity: a time that is a multiple
/// of 10^k ns is taken to come from a clock that keeps no finer than that
/// (a multiple of 2 s: FAT's), and it is racy if it falls in the scan's own
/// granule.  A file system that keeps nanoseconds produces such a round time
/// rarely (one time in 10^k), and then costs one more rescan at worst.  A
/// time more than an hour past the scan is not racy (see below).
inline bool racy_time(std::int64_t t, std::int64_t scanned_at_ns) {
  constexpr std::int64_t k_second = 1000000000;
  // A time far past the scan was not made by a change in its tick (a change
  // stamps the clock's now): it was set (`touch -d`, an archive's dates) or
  // the clock was stepped back since.  Any later change stamps a different
  // time, so it is not racy; otherwise such a file would make every run
  // rescan until the clock catches up with it.
  if (t > scanned_at_ns + 3600 * k_second) return false;
  if (t >= scanned_at_ns) return true;
  if (t < scanned_at_ns - 2 * k_second) return false;  // the common case: older than any granule
  std::int64_t granule = 1;
  while (granule < k_second && t % (granule * 10) == 0) granule *= 10;
  if (granule == k_second && t % (2 * k_second) == 0) granule = 2 * k_second;
  const std::int64_t into = scanned_at_ns % granule;  // scanned_at_ns > 0
  return t >= scanned_at_ns - into;
}

/// True when a stamp may hide a change made within the same clock tick as
/// the scan that recorded it (racy_time() of its mtime or ctime).
inline bool is_racy(const FileStamp& s, std::int64_t scanned_at_ns) {
  return s.exists() && (racy_time(s.mtime_ns, scanned_at_ns) || racy_time(s.ctime_ns, scanned_at_ns));
}

}  // namespace epload::detail
