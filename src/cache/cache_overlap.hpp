// cache_overlap.hpp — open_index() and Catalog::get() as the library's own
// fronts use them: the caller's work overlapping the cache's `full` check,
// and a later group read through an earlier Catalog's checked file.
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

#include <cstdint>     // CacheFileIdentity
#include <functional>  // WhileValidating
#include <memory>      // shared_ptr<const Index>

#include "epload/cache.hpp"
#include "epload/index.hpp"
#include "epload/result.hpp"

namespace epload {

/// A caller's work on an index read from the cache while its `full` check
/// runs on the other CPU.
using WhileValidating = std::function<void(const std::shared_ptr<const Index>&)>;

/// One version of a cache file.  Cache files are replaced whole (a rename),
/// never written in place, so two reads of the same identity read the same
/// bytes.
struct CacheFileIdentity {
  std::uint64_t dev = 0, ino = 0, size = 0;
  std::int64_t mtime_ns = 0;
  /// False for "no file" (an answer not read from a cache file).
  bool known() const { return size != 0; }
  bool operator==(const CacheFileIdentity&) const = default;
};

/// open_index(), calling `while_validating` (if set) as described above;
/// on a hit, `*identity` (if given) is the version of the file read.
Result<std::shared_ptr<const Index>> open_index(const CacheOptions& options, CacheReport* report,
                                                const WhileValidating& while_validating,
                                                CacheFileIdentity* identity = nullptr);

/// A Catalog whose groups may be read through `sibling`, a Catalog of the
/// same options but other groups (or none).  A process asks for one group
/// after another (PyTorch: `torch.backends` during `import torch`,
/// `torch_dynamo_backends` at the first compile); while the sibling holds
/// an index read from the cache file under `full` validation, the new
/// Catalog's groups are read from that same file version without its
/// watched section (0.45 ms at 6,000 distributions: BENCHMARKS.md, "Every
/// entry-point lookup"), and their freshness is the sibling index's `full`
/// check, run on every get().
std::shared_ptr<Catalog> make_catalog(CacheOptions options, std::shared_ptr<Catalog> sibling);

/// True when `catalog` was made with a sibling.
bool has_sibling(const Catalog& catalog);

namespace detail {
/// The groups of `options` read from its cache file without the watched
/// section, provided the file is still the version `file` (whose index the
/// caller has just found valid under `full`): the same bytes, so the same
/// distributions, as of the same stamps.  Else an error.
Result<std::shared_ptr<const Index>> read_groups_of(const CacheOptions& options, const CacheFileIdentity& file);
}  // namespace detail

/// catalog.get(report), calling `while_validating` (if set) as described
/// above, only when the index is read from the cache file with its `full`
/// check running on the other CPU.
Result<std::shared_ptr<const Index>> catalog_get(Catalog& catalog, CacheReport* report,
                                                 const WhileValidating& while_validating);

/// The index `catalog` holds now, checked as `paths` validation checks (its
/// search paths' stamps), not `full`: nullptr when it holds none, another
/// current directory's, or one whose search paths changed.  For answers made
/// from the listings of the search paths alone, never from the files the
/// `full` check watches (a distribution looked up by name: walk.cpp).
/// `*report` (if given) as the get() that made the index left it.
std::shared_ptr<const Index> catalog_listing(Catalog& catalog, CacheReport* report);

}  // namespace epload
