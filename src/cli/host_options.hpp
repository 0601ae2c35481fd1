// host_options.hpp — the LoaderOptions a command that acts as a host builds
// (`epload load`, `epload devices`, `epload profile`): the environment
// switches first (epload/switches.hpp), then the command's --group / --mode,
// and the learned-devices store beside the index cache (none when the cache
// is off); and how the CLI shows a bad switch value.
#pragma once

#include <string>  // group, mode
#include <vector>  // warnings

#include "epload/cache.hpp"
#include "epload/loader.hpp"
#include "epload/result.hpp"

namespace epload::cli {

/// LoaderOptions for a host run of `group`: apply_environment() (its
/// warnings go to stderr, see warn_switches), then `mode_text` when not
/// empty (already validated by the caller with parse_load_mode), and the
/// store settings of `cache` (what resolve_cache_options() filled in).
Result<LoaderOptions> host_loader_options(const CacheOptions& cache, const std::string& group,
                                          const std::string& mode_text);

/// Prints each warning about a bad switch value to stderr
/// ("epload: warning: EPLOAD_MODE='x' is not one of lazy, eager, off: using
/// lazy"), each text once per process.
void warn_switches(const std::vector<std::string>& warnings);

}  // namespace epload::cli
