// profile_internal.hpp — what profile.cpp and profile_trace.cpp share.
#pragma once

#include <string>
#include <vector>

#include "epload/profile.hpp"

namespace epload::profile::detail {

/// `path` with every "%p" replaced by `pid` (EPLOAD_TRACE=trace-%p.json).
std::string expand_trace_path(const std::string& path, long pid);

/// This process's short name for the trace ("epload", "python3", ...).
const char* process_label();

/// Parents before their children: by start, the longest first on ties (stable).
void sort_events(std::vector<Event>& evs);

}  // namespace epload::profile::detail
