// cache_splice.hpp — a stale cache file refreshed in place of its rows
// (cache_splice.cpp).
#pragma once

#include <optional>
#include <string>

#include "cache_internal.hpp"
#include "cache_refresh.hpp"  // Refreshed
#include "epload/cache.hpp"
#include "epload/index.hpp"

namespace epload::detail {

/// Refreshes the stale cache file open on `fd` (`path`, carrying `key`) by
/// copying its unchanged rows and writing only the changed ones, when the
/// change is one the splice knows (see cache_splice.cpp): the file is then
/// written, and the answer read back from it for `options.groups`.
/// `checked` is the index the `full` check read from the file, `seen` what
/// it found.  Nothing (and nothing written) when the change is another
/// kind, or anything fails: the caller refreshes by recomputing.
std::optional<Refreshed> splice_refresh(int fd, const std::string& path, const CacheKey& key,
                                        const CacheOptions& options, const WatchedSeen& seen,
                                        const Index& checked);

}  // namespace epload::detail
