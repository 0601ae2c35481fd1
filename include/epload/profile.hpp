// epload/profile.hpp — phase timers, system-call counters and Chrome
// trace-event output for start-up profiling.
//
// Off by default and nearly free when off: a Span checks one relaxed atomic
// and does nothing else.  On (profile::enable(), or EPLOAD_TRACE=FILE in the
// environment, read once), each Span records its phase, a detail string (a
// backend or file name), start and duration, and the calling thread.  The
// trace is written as Chrome trace-event JSON, which Perfetto and
// chrome://tracing open.
#pragma once

#include <atomic>       // the on/off switch, read on every Span
#include <cstdint>      // counters, timestamps
#include <string>       // event names
#include <string_view>  // details
#include <vector>       // snapshots

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
  total,      ///< an enclosing span (a command, a whole load)
};

/// The phase's name as it appears in tables and traces.
const char* phase_name(Phase phase);

/// System-call counters, incremented by the core where it makes the call.
enum class Counter : std::uint8_t { stat, open, read, count_ };

/// One recorded span.
struct Event {
  Phase phase;
  std::string detail;  ///< backend, file or command; may be empty
  std::int64_t start_ns = 0;  ///< CLOCK_MONOTONIC
  std::int64_t dur_ns = 0;
  std::uint32_t tid = 0;      ///< small per-process thread number
};

namespace detail {
extern std::atomic<int> g_state;  ///< -1 not yet decided, 0 off, 1 on
bool decide();                    ///< reads EPLOAD_TRACE once
}  // namespace detail

/// True when recording.  The first call reads EPLOAD_TRACE; after that it is
/// one relaxed atomic load.
inline bool enabled() {
  const int s = detail::g_state.load(std::memory_order_relaxed);
  return s > 0 || (s < 0 && detail::decide());
}
/// Starts recording (idempotent).  Called for EPLOAD_TRACE automatically.
void enable();
/// Stops recording and forgets everything recorded.
void reset();

/// Adds `n` to a system-call counter (no-op when disabled).
void count(Counter counter, std::uint64_t n = 1);
/// The current value of a counter.
std::uint64_t counter(Counter counter);

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
  explicit Span(Phase phase, std::string_view detail = {}) {
    if (enabled()) begin(phase, detail);
  }
  ~Span() {
    if (m_active) end();
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  void begin(Phase phase, std::string_view detail);
  void end();
  bool m_active = false;
  Phase m_phase = Phase::total;
  std::string m_detail;
  std::int64_t m_start = 0;
};

}  // namespace epload::profile
