// crash_log.hpp — inits that never returned: a line added to a small log
// beside the learned store before a backend's init and removed after it, so
// that the next process finds the line of a process that died in an init (a
// segfault, an abort) and the loader remembers the crash.  The log is held
// (flock) by one thread at a time, across one init or a whole start(); a
// process that finds it held marks nothing: a mark is a hint, never a wait.
#pragma once

#include <cstdint>      // sizes
#include <string>       // paths, messages
#include <string_view>  // names
#include <vector>       // crashes

#include "file_stamp.hpp"

namespace epload::detail {

/// A backend whose init a process began and never finished, that process
/// being gone.
struct Crash {
  std::string name, value;  ///< the backend's entry point
  FileStamp stamp;          ///< its file when the init began
  std::string when;         ///< UTC, "2026-11-29T06:10:03Z"
  long pid = 0;
};

/// The log of store `store_path` ("learned-X.txt" -> "learned-X.loading").
std::string crash_log_path(const std::string& store_path);

/// The log held by one thread: open and locked, its size before this
/// holder's line.  Marks of a holder cost one system call each.
struct HeldLog {
  int fd = -1;
  std::uint64_t size = 0;
  long pid = 0;  ///< this process's, asked once
  bool held() const { return fd >= 0; }
};

/// Takes the log (creating it): not held when another holder has it (its
/// marks are hints, never worth a wait) or it cannot be written.
HeldLog hold_log(const std::string& log);

/// Adds the line of an init of backend (`name`, `value`) whose file has
/// `stamp`, about to run in this process; returns the log's size before it.
std::uint64_t mark_begin(HeldLog& held, std::string_view name, std::string_view value, const FileStamp& stamp);

/// Removes it (and any line after it), once the init returned: `before` is
/// what mark_begin returned.
void mark_end(HeldLog& held, std::uint64_t before);

/// Lets the log go, removing it when it holds no line.
void release_log(const std::string& log, HeldLog& held);

/// The inits under way whose process is gone (their lines removed; those of
/// live processes kept).  No log, the common case, costs one failed open.
std::vector<Crash> collect_crashes(const std::string& log);

/// How a crash is remembered as a backend's last failure (the store keeps
/// it as text, shown by `epload devices`), and how it is recognised there.
std::string crash_message(const Crash& c);
inline constexpr std::string_view k_crash_prefix = "crashed in init at ";
inline bool is_crash(std::string_view failure) { return failure.starts_with(k_crash_prefix); }
/// The time of a crash message ("" if it is none).
std::string_view crash_time(std::string_view failure);

}  // namespace epload::detail
