// epload/switches.hpp — the environment switches, read in one place for every
// front (the CLI, C++ hosts and the Python package), so that they all obey
// the same rules.
//
//   EPLOAD_MODE=lazy|eager|off       when backends load (default lazy)
//   TORCH_DEVICE_BACKEND_AUTOLOAD    PyTorch's switch, for group torch.backends
//                                    only: unset or exactly "1" enables, any
//                                    other value turns autoload off
//   EPLOAD_AUTOLOAD                  an on/off switch (below) for every group:
//                                    unset or on enables, off disables
//   EPLOAD_ENABLE=a,b                only these backends may load
//   EPLOAD_DISABLE=a,b               these backends never load
//   EPLOAD_VALIDATE=full|paths       how the index cache is validated (default full)
//
// epload's on/off switches (EPLOAD_AUTOLOAD, EPLOAD_DEBUG, EPLOAD_NO_CACHE,
// EPLOAD_IMPORTLIB) share one truth table, case-insensitive: 1, true, yes,
// on are on; 0, false, no, off and the empty string are off; unset is the
// switch's default; any other value is a warning and the default applies.
// (TORCH_DEVICE_BACKEND_AUTOLOAD keeps PyTorch's own rule, as PyTorch reads it.)
//
// A backend is named in EPLOAD_ENABLE / EPLOAD_DISABLE by its entry-point
// name or by its distribution's name (compared as importlib normalizes
// names: case-insensitive, runs of "-_." equal).  A bad value never fails:
// it is a warning that names the variable and the accepted values, and the
// default applies.
#pragma once

#include <string>       // warnings
#include <string_view>  // group, names
#include <vector>       // lists

#include "epload/cache.hpp"   // Validation
#include "epload/loader.hpp"  // LoadMode, LoaderOptions

namespace epload {

/// What the environment says, for one autoload group.
struct Switches {
  LoadMode mode = LoadMode::lazy;  ///< EPLOAD_MODE (default lazy)
  /// Non-empty: the variable that turns autoload off for the group
  /// ("TORCH_DEVICE_BACKEND_AUTOLOAD" or "EPLOAD_AUTOLOAD"); then nothing loads.
  std::string off_by;
  std::vector<std::string> enable;   ///< EPLOAD_ENABLE's names; empty: no restriction
  std::vector<std::string> disable;  ///< EPLOAD_DISABLE's names
  /// One line per bad value: "EPLOAD_MODE='lazzy' is not one of lazy, eager,
  /// off: using lazy".  The fronts show them (CLI: stderr; Python: a warning).
  std::vector<std::string> warnings;
};

/// Reads the switches for autoload group `options.group` (set it first) and
/// applies them to `options`: EPLOAD_MODE, then mode off when
/// TORCH_DEVICE_BACKEND_AUTOLOAD (torch.backends) or EPLOAD_AUTOLOAD turns
/// autoload off, EPLOAD_ENABLE / EPLOAD_DISABLE.  The one way every front
/// (CLI, C++ host, Python package) reads them.  Never fails: returns what it
/// read, with one warning per bad value (the default was used) for the
/// caller to show.
Switches apply_environment(LoaderOptions& options);

/// EPLOAD_VALIDATE (the index's switch, read by every command and query
/// that opens the index); a bad value appends a warning to `*warnings`.
Validation read_validation(std::vector<std::string>* warnings);

/// An on/off switch by the table above: `otherwise` when `variable` is
/// unset or its value is not in the table (then a warning naming the
/// variable and the accepted values is appended to `*warnings`).
bool read_flag(const char* variable, bool otherwise, std::vector<std::string>* warnings);

/// One backend of a group, as EPLOAD_ENABLE / EPLOAD_DISABLE may name it.
struct BackendName {
  std::string_view name;  ///< entry-point name
  std::string_view dist;  ///< its distribution's name
};

/// One warning per name of `enable` / `disable` that matches none of
/// `backends` (the group's): "EPLOAD_DISABLE names 'torch_fo', which is no
/// backend of group 'torch.backends' (close: torch_foo)", with the close
/// names as Python's difflib.get_close_matches finds them (ratio >= 0.6, at
/// most three, closest first).
std::vector<std::string> unmatched_names(const std::vector<std::string>& enable,
                                         const std::vector<std::string>& disable, std::string_view group,
                                         const std::vector<BackendName>& backends);

/// Up to `n` of `candidates` closest to `word` with a similarity ratio of at
/// least `cutoff`, best first (difflib.get_close_matches' rule: ratio
/// 2*M/T over the Ratcliff-Obershelp matching blocks; equal ratios in
/// descending name order, as difflib orders them).
std::vector<std::string> close_matches(std::string_view word, const std::vector<std::string>& candidates,
                                       std::size_t n = 3, double cutoff = 0.6);

/// The variable that keeps a backend from loading ("EPLOAD_DISABLE" or
/// "EPLOAD_ENABLE"), or nullptr: `name` is its entry-point name, `dist` its
/// distribution's name.
const char* disabled_by(const std::vector<std::string>& enable, const std::vector<std::string>& disable,
                        std::string_view name, std::string_view dist);

}  // namespace epload
