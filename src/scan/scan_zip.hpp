// scan_zip.hpp — does a zip archive on the search path hold distributions?
//
// importlib.metadata (FastPath.children) lists a search path entry that is
// not a directory as a zip archive: the top-level names of its central
// directory are matched like directory entries.  epload does not read
// distributions inside archives; it only needs to know, exactly, whether an
// archive would contribute any (then the scan defers to importlib) or not.
#pragma once

#include <string>  // first matching name

namespace epload::detail {

enum class ZipVerdict {
  not_a_zip,          ///< zipfile.ZipFile would raise: importlib lists nothing
  no_distributions,   ///< a zip, but no top-level name would match
  has_distributions,  ///< some top-level name matches: importlib reads it
};

/// Reads the central directory of the file open on `fd` (read-only, regular
/// file) the way CPython 3.11's zipfile does, checking every structural rule
/// under which zipfile raises (so "not a zip" is exact), and matches each
/// top-level name against importlib's Lookup rules: `*.dist-info`,
/// `*.egg-info` (case-insensitive), or `egg-info` when `base_is_egg`.  On
/// has_distributions, `match` receives the first matching name.
ZipVerdict probe_zip(int fd, bool base_is_egg, std::string& match);

}  // namespace epload::detail
