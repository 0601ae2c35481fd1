// host_options.cpp — see host_options.hpp.
#include "cli/host_options.hpp"

#include "cli/cli.hpp"  // target_ext_suffixes

namespace epload::cli {

Result<LoaderOptions> host_loader_options(const CacheOptions& cache, const std::string& group,
                                          const std::string& mode_text) {
  LoaderOptions lo;
  if (auto env = apply_environment(lo); !env) return env.error();
  if (!mode_text.empty()) {
    const auto mode = parse_load_mode(mode_text);
    if (!mode) return Error{Errc::invalid_argument, "unknown load mode '" + mode_text + "' (lazy, eager or off)"};
    lo.mode = *mode;  // an explicit --mode wins over the environment, as in `epload load`
  }
  lo.group = group;
  lo.cache_dir = cache.cache_dir;
  lo.use_store = cache.use_cache;
  lo.ext_suffixes = target_ext_suffixes();
  return lo;
}

}  // namespace epload::cli
