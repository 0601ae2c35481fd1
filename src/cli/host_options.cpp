// host_options.cpp — see host_options.hpp.
#include "cli/host_options.hpp"

#include <algorithm>  // find
#include <cstdio>     // fprintf

#include "cli/cli.hpp"  // target_ext_suffixes
#include "epload/index.hpp"     // the group's backends
#include "epload/switches.hpp"  // apply_environment, unmatched_names

namespace epload::cli {

void warn_switches(const std::vector<std::string>& warnings) {
  static std::vector<std::string> shown;  // the CLI is single-threaded
  for (const std::string& w : warnings) {
    if (std::find(shown.begin(), shown.end(), w) != shown.end()) continue;
    shown.push_back(w);
    std::fprintf(stderr, "epload: warning: %s\n", w.c_str());
  }
}

Result<LoaderOptions> host_loader_options(const CacheOptions& cache, const std::string& group,
                                          const std::string& mode_text) {
  LoaderOptions lo;
  lo.group = group;  // the switches depend on it (TORCH_DEVICE_BACKEND_AUTOLOAD)
  warn_switches(apply_environment(lo).warnings);
  // A name in EPLOAD_DISABLE / EPLOAD_ENABLE that is no backend of the
  // group (a typo) is said, with the close names, as the Python front says it.
  if (const auto& index = opened_index(); index && index->has_group(group)) {
    std::vector<BackendName> names;
    for (const EntryPoint& ep : index->group(group)) names.push_back({ep.name, ep.dist->name});
    warn_switches(unmatched_names(lo.enable, lo.disable, group, names));
  }
  if (!mode_text.empty()) {
    const auto mode = parse_load_mode(mode_text);
    if (!mode) return Error{Errc::invalid_argument, "unknown load mode '" + mode_text + "' (lazy, eager or off)"};
    lo.mode = *mode;  // an explicit --mode wins over the environment, as in `epload load`
  }
  lo.cache_dir = cache.cache_dir;
  lo.use_store = cache.use_cache;
  lo.ext_suffixes = target_ext_suffixes();
  return lo;
}

}  // namespace epload::cli
