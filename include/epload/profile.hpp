// epload/profile.hpp — phase timers, system-call counters and Chrome
// trace-event output for start-up profiling.
//
// Off by default and nearly free when off: a Span checks one relaxed atomic
// (enabled()) and does nothing else.  On (profile::enable(), or EPLOAD_TRACE=FILE in the
// environment, read once), each Span records its phase, a subject (a
// backend or file name), start and duration, and the calling thread.  The
// trace is written as Chrome trace-event JSON, which Perfetto and
// chrome://tracing open.
//
// EPLOAD_TRACE=FILE makes any process that uses epload (the CLI, a C++ host,
// a Python program through the epload module) write FILE when it exits.  A
// "%p" in FILE is replaced by the process id, so that a program starting
// other epload processes gets one file each (`epload profile -- CMD` relies
// on it and merges them).  Without "%p", only the process that read the
// variable first writes (a fork()ed child does not overwrite its parent's
// file).
//
// Trace events are complete events ("ph":"X") with "name" (the subject, else
// the phase), "cat" (the phase), "ts"/"dur" in microseconds of
// CLOCK_MONOTONIC (one clock for every process, so traces of several
// processes merge by concatenation), "pid" and "tid".  Every backend load is
// one `load` event named after the backend; its dlopen/init (native) or
// py_import/py_call (Python) events nest inside it on the same thread.
// In a Python process, every module import is an `import` event named after
// the module (the Python layer's import hook), nested as the imports were.
#pragma once

#include <cstdint>      // counters, timestamps
#include <optional>     // parse_phase
#include <string>       // event names
#include <string_view>  // subjects
#include <vector>       // snapshots

#include "epload/result.hpp"

namespace epload::profile {

/// What a span measures.  Keep in step with phase_name().
enum class Phase : std::uint8_t {
  cache_key,  ///< computing the cache key (incl. asking the interpreter)
  stat,       ///< validating stamps
  read,       ///< reading a cache or metadata file
  parse,      ///< parsing a cache file or entry_points.txt
  scan,       ///< a whole cold scan
  resolve,    ///< entry point -> library path
  dlopen,     ///< dlopen of a backend library
  init,       ///< a backend's init function
  py_import,  ///< Python backend: import of its module
  py_call,    ///< Python backend: call of its entry point
  total,      ///< an enclosing span (a command, a step of one)
  load,       ///< one backend's whole load (subject: the backend's name)
  module_import,  ///< "import": one module's import in a traced Python process (subject: the module)
};

/// Number of phases (for tables indexed by phase).
inline constexpr int k_phase_count = static_cast<int>(Phase::module_import) + 1;

/// The phase's name as it appears in tables and traces.
const char* phase_name(Phase phase);
/// The phase named `name` (as phase_name() spells it); nullopt otherwise.
std::optional<Phase> parse_phase(std::string_view name);

/// System-call counters, incremented by the core where it makes the call.
enum class Counter : std::uint8_t { stat, open, read, readdir, count_ };

/// The counter's name ("stat", "open", "read", "readdir").
const char* counter_name(Counter counter);

/// One recorded span.
struct Event {
  Phase phase = Phase::total;
  std::string subject;        ///< backend, file or command; may be empty
  std::int64_t start_ns = 0;  ///< CLOCK_MONOTONIC
  std::int64_t dur_ns = 0;
  std::uint32_t tid = 0;      ///< small per-process thread number
  std::int32_t pid = 0;       ///< 0 for this process's own events (events())
};

/// True when recording.  The first call reads EPLOAD_TRACE; after that it is
/// one relaxed atomic load (out of line: a call costs ~1 ns, and the busiest
/// caller, a counted stat, makes a system call each time).
bool enabled();
/// Starts recording (idempotent).  Called for EPLOAD_TRACE automatically.
void enable();
/// Stops recording and forgets everything recorded.
void reset();

/// Adds `n` to a system-call counter (no-op when disabled).
void count(Counter counter, std::uint64_t n = 1);
/// The current value of a counter.
std::uint64_t counter(Counter counter);

/// Records a span timed by the caller (the Python layer times its imports
/// and calls with the same clock) on the calling thread.  No-op when off.
void record(Phase phase, std::string_view subject, std::int64_t start_ns, std::int64_t dur_ns);
/// The same, for a span timed on another thread, named by the caller's key
/// (e.g. Python's thread ident): each key gets a thread number of its own.
void record_for(std::uint64_t thread_key, Phase phase, std::string_view subject, std::int64_t start_ns,
                std::int64_t dur_ns);

/// A copy of every span recorded so far, in start order.
std::vector<Event> events();

/// Writes the recorded spans as Chrome trace-event JSON to `path` (atomic:
/// temp file + rename).  Returns false and sets `error` on failure.
bool write_trace(const std::string& path, std::string* error = nullptr);

/// Monotonic clock in ns (what spans use).
std::int64_t now_ns();

/// Records the span from construction to destruction when profiling is on.
class Span {
 public:
  explicit Span(Phase phase, std::string_view subject = {}) {
    if (enabled()) begin(phase, subject);
  }
  ~Span() {
    if (m_active) end();
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  void begin(Phase phase, std::string_view subject);
  void end();
  bool m_active = false;
  Phase m_phase = Phase::total;
  std::string m_subject;
  std::int64_t m_start = 0;
};

}  // namespace epload::profile
