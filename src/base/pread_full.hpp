// pread_full.hpp — pread(2) until done: the loop every whole-range read needs.
#pragma once

#include <sys/types.h>  // ssize_t, off_t
#include <unistd.h>     // pread

#include <cerrno>   // errno, EINTR
#include <cstddef>  // size_t
#include <cstdint>  // uint64_t

namespace epload::detail {

/// Reads `n` bytes at offset `at` into `out`, retrying after EINTR and
/// short reads.  Returns the bytes read, fewer than `n` only when the file
/// ends first, or -1 with errno set by the failed pread.
inline ssize_t pread_full(int fd, void* out, std::size_t n, std::uint64_t at) {
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, static_cast<char*>(out) + got, n - got, static_cast<off_t>(at + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return static_cast<ssize_t>(got);
}

}  // namespace epload::detail
