// cache_refresh.hpp — a stale cache file refreshed from its parts
// (cache_refresh.cpp).
#pragma once

#include <memory>
#include <string>

#include "cache_internal.hpp"
#include "epload/cache.hpp"
#include "epload/index.hpp"
#include "epload/result.hpp"
#include "scan_reuse.hpp"  // RefreshStats

namespace epload::detail {

/// A refreshed index and what the refresh did ("1 of 2 path entries listed
/// again, 1 of 6001 distributions read").
struct Refreshed {
  std::shared_ptr<const Index> index;
  std::string summary;
};

/// "1 of 2 path entries listed again, 1 of 6001 distributions read": what a
/// refresh says it did (CacheReport::reason, EPLOAD_DEBUG).
std::string refresh_summary(const RefreshStats& stats);

/// Recomputes the answer of the stale cache file open on `fd` (`path`,
/// carrying `key`), reusing what did not change: see cache_refresh.cpp.
/// `seen`: what the `full` check that found the file stale saw of its
/// watched files (all hold, or each one's fresh stamp), so that none is
/// stat'ed again.  An error (the file cannot be read whole, or the scan
/// fails) means "scan".
Result<Refreshed> refresh_index(int fd, const std::string& path, const CacheKey& key, const CacheOptions& options,
                                WatchedSeen seen);

}  // namespace epload::detail
