// cache_overlap.hpp — open_index() and Catalog::get() with the caller's own
// work overlapping the cache's `full` check.
//
// For the fronts that build on the index at once (the CLI's loader, the
// Python front's entry-point objects): on a cache hit whose `full` check
// runs on the other CPU, `while_validating` is called on the calling thread
// with the Index while that check is still running, so that the caller's
// work overlaps the stat calls.  The call returns that same Index only if
// the check passes; if it does not, it rebuilds and returns another, and
// whatever the callback made from the first must be dropped (compare the
// pointers).  Not called otherwise (a miss, `paths` validation, one CPU, few
// watched files).  A host has no use for it: open_index() is the same
// without the overlap.
#pragma once

#include <functional>  // WhileValidating
#include <memory>      // shared_ptr<const Index>

#include "epload/cache.hpp"
#include "epload/index.hpp"
#include "epload/result.hpp"

namespace epload {

/// A caller's work on an index read from the cache while its `full` check
/// runs on the other CPU.
using WhileValidating = std::function<void(const std::shared_ptr<const Index>&)>;

/// open_index(), calling `while_validating` (if set) as described above.
Result<std::shared_ptr<const Index>> open_index(const CacheOptions& options, CacheReport* report,
                                                const WhileValidating& while_validating);

/// catalog.get(report), calling `while_validating` (if set) as described
/// above, only when the index is read from the cache file with its `full`
/// check running on the other CPU.
Result<std::shared_ptr<const Index>> catalog_get(Catalog& catalog, CacheReport* report,
                                                 const WhileValidating& while_validating);

}  // namespace epload
