// epload/scanner.hpp — find distributions on search paths and read their
// entry points, exactly as importlib.metadata.entry_points() does.
//
// The scanner knows nothing of caches: it turns a list of search paths into an
// Index (answer + provenance stamps).  See ARCHITECTURE.md for the discovery
// rules it reproduces.
#pragma once

#include <span>    // search paths in
#include <string>  // search paths

#include "epload/index.hpp"
#include "epload/result.hpp"

namespace epload {

/// Scans `search_paths` in order (an empty string means the current
/// directory, as on sys.path).
///
/// Errors that importlib would raise for one distribution (malformed
/// entry_points.txt, invalid UTF-8, a distribution whose name cannot be
/// determined) do not fail the scan: they are recorded on that distribution
/// (Distribution::error, Index::first_error()).  The scan itself fails only
/// when it cannot answer exactly, e.g. for a zip archive on the path that
/// holds distributions (Errc::unsupported: use importlib for that path).
Result<Index> scan(std::span<const std::string> search_paths);

}  // namespace epload
