// host_options.hpp — the LoaderOptions a command that acts as a host builds
// (`epload load`, `epload profile`): the environment first, then the
// command's --group / --mode, and the learned-devices store beside the index
// cache (none when the cache is off).
#pragma once

#include <string>  // group, mode

#include "epload/cache.hpp"
#include "epload/loader.hpp"
#include "epload/result.hpp"

namespace epload::cli {

/// LoaderOptions for a host run: apply_environment() (TORCH_DEVICE_BACKEND_
/// AUTOLOAD, EPLOAD_MODE, EPLOAD_ENABLE / EPLOAD_DISABLE), then `group`,
/// then `mode_text` when not empty (already validated by the caller with
/// parse_load_mode), and the store settings of `cache` (what
/// resolve_cache_options() filled in).  Fails on a bad EPLOAD_MODE.
Result<LoaderOptions> host_loader_options(const CacheOptions& cache, const std::string& group,
                                          const std::string& mode_text);

}  // namespace epload::cli
