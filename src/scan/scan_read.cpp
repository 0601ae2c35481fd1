// scan_read.cpp — one file, four system calls: openat, fstat, read, close.
//
// The buffer is sized from fstat so a regular file arrives in a single
// read(); a short read of a regular file is its end (as for every local file
// system).  Python's open() on a directory succeeds at the system level and
// then raises IsADirectoryError; fstat tells us the same without a read.
// O_NONBLOCK keeps a FIFO named entry_points.txt from hanging the scan
// (Python would block on it forever; here it reads as empty).
#include "scan_read.hpp"

#include <fcntl.h>     // openat
#include <sys/stat.h>  // fstat
#include <unistd.h>    // read, close

#include <cerrno>

#include "epload/profile.hpp"
#include "stamp.hpp"

namespace epload::detail {

namespace {

bool suppressed(int err) {
  return err == ENOENT || err == EISDIR || err == ENOTDIR || err == EACCES || err == EPERM;
}

}  // namespace

FileRead FileReader::read(int dirfd, const char* rel) {
  FileRead r;
  profile::count(profile::Counter::open);
  const int fd = ::openat(dirfd, rel, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    r.error = errno;
    r.status = suppressed(r.error) ? ReadStatus::absent : ReadStatus::failed;
    // The stamp must be what a later fstatat (cache validation) sees: a
    // file that exists but cannot be opened (permissions) still has one.
    if (r.error != ENOENT && r.error != ENOTDIR) r.stamp = stamp_at(dirfd, rel);
    return r;
  }
  struct stat st;
  profile::count(profile::Counter::stat);
  if (::fstat(fd, &st) != 0) {
    r.error = errno;
    r.status = ReadStatus::failed;
    ::close(fd);
    return r;
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    r.error = EISDIR;
    r.stamp = stamp_of(st);  // it exists: a validator must see it unchanged
    return r;                // absent, as IsADirectoryError is suppressed
  }
  const bool regular = S_ISREG(st.st_mode);
  std::size_t want = static_cast<std::size_t>(st.st_size) + 1;
  if (want < 4096) want = 4096;
  if (m_buf.size() < want) m_buf.resize(want);
  std::size_t len = 0;
  for (;;) {
    profile::count(profile::Counter::read);
    const ssize_t n = ::read(fd, m_buf.data() + len, m_buf.size() - len);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;  // an empty FIFO
      r.error = errno;
      r.status = suppressed(r.error) ? ReadStatus::absent : ReadStatus::failed;
      ::close(fd);
      return r;
    }
    if (n == 0) break;
    len += static_cast<std::size_t>(n);
    if (len < m_buf.size()) {
      if (regular) break;  // short read of a regular file: its end
      continue;
    }
    m_buf.resize(m_buf.size() * 2);  // the file grew since fstat
  }
  ::close(fd);
  r.status = ReadStatus::ok;
  r.stamp = stamp_of(st);
  r.text = std::string_view(m_buf.data(), len);
  return r;
}

}  // namespace epload::detail
