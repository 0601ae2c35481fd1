// profile_imports.hpp — the module imports of traced Python processes
// (`import` spans), summarised: each module's self and cumulative time, the
// imports per process, and the imports each backend's load caused
// (profile_imports.cpp).  Like profile_trace.hpp, the CLI's, not public.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "epload/profile.hpp"

namespace epload::profile {

/// One module's import, summed over the processes that imported it.
struct ImportTotal {
  std::string module;
  std::uint64_t count = 0;         ///< `import` spans of it (one per process that imported it)
  std::int64_t self_ns = 0;        ///< minus the imports nested inside it (what -X importtime calls self)
  std::int64_t cumulative_ns = 0;  ///< the whole span
};

/// The imports one process made.
struct ProcessImports {
  std::int32_t pid = 0;
  std::uint64_t modules = 0;  ///< `import` spans
  std::int64_t ns = 0;        ///< outermost imports (inside no other import), summed
};

/// The imports a backend's load caused: those inside its `load` spans.
struct BackendImports {
  std::string backend;
  std::uint64_t modules = 0;        ///< at any depth
  std::int64_t ns = 0;              ///< the outermost ones inside the load, summed
  std::vector<ImportTotal> direct;  ///< those outermost ones, costliest first
};

/// Every `import` span of a set of events, summarised.
struct ImportSummary {
  std::uint64_t modules = 0;              ///< `import` spans
  std::vector<ProcessImports> processes;  ///< processes with imports, in pid order
  std::vector<ImportTotal> by_self;       ///< every module, costliest self time first
  std::vector<ImportTotal> by_cumulative; ///< every module, costliest whole import first
  std::vector<BackendImports> backends;   ///< backends whose loads imported something, costliest first
};

/// Summarises the `import` spans of `events` (several processes and threads):
/// per thread, a span's parent is the innermost span that holds it, so an
/// import's self time is its span minus the imports directly inside it.
ImportSummary summarize_imports(const std::vector<Event>& events);

}  // namespace epload::profile
