// crash_log.hpp — inits that died of a fatal signal: while a backend's init
// runs, a line describing it is ready in memory; a handler of SIGSEGV,
// SIGBUS, SIGILL, SIGFPE and SIGABRT appends it to a small log beside the
// learned store when the signal arrives in that init's thread, then lets
// the signal do what it would have done without epload (a handler installed
// before, such as faulthandler's, runs; the process dies by the signal).
// Any other end of a process (an exit while a daemon thread is in an init,
// SIGINT, SIGTERM, SIGKILL) leaves nothing.  The next process reads the log
// and the loader remembers the crash.
#pragma once

#include <string>       // paths, messages
#include <string_view>  // names
#include <vector>       // crashes

#include "file_stamp.hpp"

namespace epload::detail {

/// A backend whose init a process began and never finished: that process
/// died of a fatal signal inside it.
struct Crash {
  std::string name, value;  ///< the backend's entry point
  FileStamp stamp;          ///< its file when the init began
  std::string when;         ///< UTC, "2026-11-29T06:10:03Z": when it died
  long pid = 0;
};

/// The log of store `store_path` ("learned-X.txt" -> "learned-X.loading").
std::string crash_log_path(const std::string& store_path);

/// The innermost init under way in this thread, for the fatal-signal
/// handler (installed, once, by the first).  Costs no system call: the line
/// is formatted in memory and reached by the handler through a lock-free
/// table of threads.  An empty `log` marks nothing.
class InitMark {
 public:
  InitMark(const std::string& log, std::string_view name, std::string_view value, const FileStamp& stamp);
  ~InitMark();
  InitMark(const InitMark&) = delete;
  InitMark& operator=(const InitMark&) = delete;

  /// For the handler only (async-signal-safe): appends the line, with this
  /// process's id and the time now.
  void write_crash() noexcept;

 private:
  std::string m_log;                ///< a copy: the handler may run while its owner goes
  std::string m_line;               ///< room for "pid\ttime\t", then the rest
  InitMark* m_outer = nullptr;       ///< the init this one runs inside, if any
  int m_entry = -1;                 ///< this thread's entry in the table
};

/// The crashes in the log (their lines removed; those of live processes,
/// still dying, kept).  No log, the common case, costs one failed open.
std::vector<Crash> collect_crashes(const std::string& log);

/// How a crash is remembered as a backend's last failure (the store keeps
/// it as text, shown by `epload devices`), and how it is recognised there.
std::string crash_message(const Crash& c);
inline constexpr std::string_view k_crash_prefix = "crashed in init at ";
inline bool is_crash(std::string_view failure) { return failure.starts_with(k_crash_prefix); }
/// The time of a crash message ("" if it is none).
std::string_view crash_time(std::string_view failure);

}  // namespace epload::detail
