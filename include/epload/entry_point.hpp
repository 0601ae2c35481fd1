// epload/entry_point.hpp — an entry point and the distribution that declares it.
//
// Both are plain views: every string_view points into the arena of the Index
// that produced them and lives exactly as long as that Index.
#pragma once

#include <cstdint>      // std::uint32_t
#include <optional>     // split_value
#include <string_view>  // views into the Index arena
#include <vector>       // EntryPointParts::extras

namespace epload {

/// One installed distribution, as importlib.metadata sees it after first-wins
/// de-duplication.
struct Distribution {
  std::string_view name;          ///< what ep.dist.name gives (see ARCHITECTURE.md)
  std::string_view version;       ///< what ep.dist.version gives, "" if unknown
  std::string_view metadata_dir;  ///< the *.dist-info / *.egg-info / EGG-INFO path
  std::uint32_t search_path = 0;  ///< index into Index::search_paths()
  /// Non-empty when importlib would raise while reading this distribution
  /// (malformed entry_points.txt, invalid UTF-8, ...).  The message names the
  /// file and line.  Such a distribution contributes no entry points.
  std::string_view error;
};

/// One entry point: `name = value` in section `[group]` of entry_points.txt.
struct EntryPoint {
  std::string_view group;
  std::string_view name;
  std::string_view value;          ///< raw, exactly as importlib keeps it
  const Distribution* dist = nullptr;  ///< never null inside an Index
};

/// The parts of a value `module:attr.sub [extra1, extra2]`.
struct EntryPointParts {
  std::string_view module;
  std::string_view attr;  ///< "" when the value names a module only
  std::vector<std::string_view> extras;
};

/// Splits a value with importlib.metadata's pattern
/// `(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$`.
/// Returns nullopt where importlib's `ep.module` would fail to match.
/// The views point into `value`.
std::optional<EntryPointParts> split_value(std::string_view value);

}  // namespace epload
