// atomic_file.hpp — writing a file so that readers see the old one or the
// new one, whole; and the check of a directory before anything is written
// into it.  Every file epload writes goes through here: the index cache,
// the learned-device store, trace files.
#pragma once

#include <sys/stat.h>   // struct stat
#include <sys/types.h>  // mode_t

#include <initializer_list>  // write_atomic parts
#include <string>            // paths
#include <string_view>       // parts

#include "epload/result.hpp"  // Result

namespace epload::detail {

/// The directory part of `path`: "." for a bare name, "/" for "/x".
std::string dir_name(std::string_view path);

/// mkdir -p; the levels it creates get mode 0700.
Result<void> make_dirs(const std::string& dir);

/// Why the file or directory `st` describes (`what` names it in the
/// message) must not be trusted, or "" when it may: owned by another user
/// (root is accepted when `root_ok`), or writable by group or others.  A
/// cache's paths are handed to dlopen, so whoever could write it could run
/// code in this process.
std::string unsafe_reason(const struct stat& st, const std::string& what, bool root_ok = false);

/// make_dirs(dir), then the directory refused when it is unsafe
/// (unsafe_reason): the check every writer into a cache directory makes.
Result<void> make_safe_dir(const std::string& dir);

/// Writes `parts`, one after the other, to `path` through a temporary file
/// "." + <file name> + ".tmp.XXXXXX" in the same directory, then rename():
/// readers see the old file or the new one, whole.  The file gets exactly
/// `mode`.  On any failure (a full disk, a file-size limit, a read-only
/// directory) the temporary file is removed and `path` is left as it was;
/// the error names the system call, the file and the cause ("write
/// <temporary file>: No space left on device"), and callers add what was
/// being written.
Result<void> write_atomic(const std::string& path, std::initializer_list<std::string_view> parts,
                          mode_t mode);

}  // namespace epload::detail
