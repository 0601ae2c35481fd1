// scan_read.hpp — read one metadata file the way PathDistribution.read_text
// does, with its stamp, into a reused buffer.
#pragma once

#include <cerrno>       // exhausted()
#include <string>       // buffer
#include <string_view>  // text out

#include "epload/index.hpp"  // FileStamp
#include "file_stamp.hpp"

namespace epload::detail {

/// The outcome of one read_text().
enum class ReadStatus {
  ok,      ///< `text` holds the bytes (not yet decoded)
  absent,  ///< an error read_text suppresses: FileNotFoundError,
           ///< IsADirectoryError, NotADirectoryError, PermissionError
  failed,  ///< any other OSError, which importlib lets propagate
};

/// True for an errno that says nothing about the file, only about this
/// process or machine at this moment (out of file descriptors or memory).
/// Such a failure is not an answer: a scan that meets one fails as a whole,
/// and nothing is cached (read again, the same file reads fine).
inline bool exhausted(int err) {
  return err == EMFILE || err == ENFILE || err == ENOMEM || err == ENOBUFS;
}

/// What to do about an exhausted() errno, for messages.
inline const char* exhausted_advice(int err) {
  return err == EMFILE || err == ENFILE ? "raise the open-file limit (ulimit -n) and retry"
                                        : "free some memory and retry";
}

struct FileRead {
  ReadStatus status = ReadStatus::absent;
  int error = 0;          ///< errno for absent / failed
  FileStamp stamp;        ///< what fstatat(dirfd, rel) gives: zero only when
                          ///< the path does not exist (ENOENT, ENOTDIR)
  std::string_view text;  ///< LIFETIME: valid until the next read() on this reader
};

/// Reads whole files relative to a directory fd: openat, fstat, one read into
/// a buffer that is reused (grown, never shrunk), close.  One per thread.
class FileReader {
 public:
  /// Reads `rel` (relative to `dirfd`, following symlinks as open() does).
  FileRead read(int dirfd, const char* rel);

 private:
  std::string m_buf;
};

}  // namespace epload::detail
