// profile_trace.hpp — trace files read back, merged and summarised: what
// `epload profile` prints (profile_trace.cpp).  Not part of the public
// surface: a host writes traces (epload/profile.hpp); reading them is the
// CLI's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "epload/profile.hpp"
#include "epload/result.hpp"

namespace epload::profile {

/// A trace file as read back: its complete events (with their pid) and the
/// system-call counters its process wrote.
struct Trace {
  std::vector<Event> events;  ///< by start time; `pid` set
  /// System calls counted, summed over its processes.
  std::uint64_t counters[static_cast<int>(Counter::count_)] = {};
  std::vector<std::int32_t> pids;          ///< its processes, in order of first appearance
  std::vector<std::string> process_names;  ///< parallel to pids ("epload", "python3", ...)
};

/// Appends `from` to `into` (events re-sorted by start, counters added).
void merge(Trace& into, const Trace& from);

/// Reads a trace written by write_trace() (or several merged by merge()).  Events whose "cat" is not a phase are skipped.  Fails
/// (Errc::io, Errc::parse) naming the file and what is wrong with it.
Result<Trace> read_trace(const std::string& path);

/// Writes `trace` (events of possibly several processes) as trace-event JSON.
bool write_trace(const Trace& trace, const std::string& path, std::string* error = nullptr);

/// Per-phase figures of a set of events.
struct PhaseTotal {
  Phase phase = Phase::total;
  std::uint64_t count = 0;
  std::int64_t total_ns = 0;  ///< sum of durations (nested spans of one phase counted once)
  std::int64_t self_ns = 0;   ///< minus the time in nested spans of other phases
};

/// Per-backend figures: the spans whose subject is the backend's name.
struct BackendTotal {
  std::string name;
  std::uint64_t loads = 0;      ///< `load` spans (attempts)
  std::int64_t load_ns = 0;     ///< whole loads
  std::int64_t resolve_ns = 0;  ///< entry point -> library
  std::int64_t dlopen_ns = 0;
  std::int64_t init_ns = 0;
  std::int64_t import_ns = 0;   ///< Python: module import
  std::int64_t call_ns = 0;     ///< Python: entry point call
  std::int64_t first_start_ns = 0;
};

/// What `epload profile` prints: phases by self time (descending), loaded
/// backends by load time (descending), and the wall-clock extent.
struct Summary {
  std::vector<PhaseTotal> phases;      ///< phases that occurred, costliest first
  std::vector<BackendTotal> backends;  ///< backends with a `load` span, costliest first
  std::int64_t wall_ns = 0;            ///< first start to last end
};

/// Summarises `events` (of one or several processes and threads).  Self time
/// subtracts, per thread, the time covered by directly nested spans.
Summary summarize(const std::vector<Event>& events);

}  // namespace epload::profile
