// catalog.cpp — Catalog: the current index of one key for a long-lived
// process, re-validated on every get().
//
// A get() validates the index it holds outside the lock (so concurrent
// get()s stat in parallel) and takes the lock only to replace it; a thread
// that finds another already replaced it returns that one.  An answer that
// holds an I/O error (not_cacheable()) is served but not kept, as it is not
// cached on disk either.  A Catalog made with a sibling (make_catalog())
// reads its groups through the sibling's checked file version while it can.
#include <mutex>    // the current index
#include <string>   // the current directory
#include <utility>  // std::move

#include "cache_internal.hpp"
#include "cache_overlap.hpp"
#include "epload/cache.hpp"
#include "index_provenance.hpp"

namespace epload {

struct Catalog::State {
  CacheOptions options;
  std::shared_ptr<Catalog> sibling;  ///< see make_catalog(); may be null
  std::mutex mutex;
  std::shared_ptr<const Index> current;
  /// When `current` was read through the sibling: the sibling's index whose
  /// `full` check vouches for it.
  std::shared_ptr<const Index> voucher;
  CacheReport report;          ///< how `current` was obtained
  CacheFileIdentity identity;  ///< on a hit: the file version `current` was read from
  std::string cwd;             ///< the current directory it was keyed for, if relevant
};

/// The one way in to a Catalog's state from outside the class.
struct CatalogAccess {
  static Catalog::State& of(Catalog& catalog) { return *catalog.m; }
  static const Catalog::State& of(const Catalog& catalog) { return *catalog.m; }
};

Catalog::Catalog(CacheOptions options) : m(std::make_unique<State>()) { m->options = std::move(options); }
Catalog::~Catalog() = default;

std::shared_ptr<Catalog> make_catalog(CacheOptions options, std::shared_ptr<Catalog> sibling) {
  auto catalog = std::make_shared<Catalog>(std::move(options));
  CatalogAccess::of(*catalog).sibling = std::move(sibling);
  return catalog;
}

bool has_sibling(const Catalog& catalog) { return CatalogAccess::of(catalog).sibling != nullptr; }

namespace {

/// The Catalog's groups read through its sibling (see make_catalog()), or
/// nullptr when that cannot be done now.
std::shared_ptr<const Index> through_sibling(Catalog& catalog, const std::string& cwd, CacheReport* report) {
  auto& st = CatalogAccess::of(catalog);
  if (!st.sibling || st.options.groups.empty() || st.options.validation != Validation::full || !st.options.use_cache) {
    return nullptr;
  }
  auto& sib = CatalogAccess::of(*st.sibling);
  std::shared_ptr<const Index> voucher;
  CacheReport how;
  CacheFileIdentity file;
  {
    std::lock_guard<std::mutex> lock(sib.mutex);
    if (sib.voucher || sib.cwd != cwd) return nullptr;
    voucher = sib.current;
    how = sib.report;
    file = sib.identity;
  }
  // Only an index read from the cache file, with its watched files, and
  // still valid now: the same file version then holds this Catalog's groups
  // as of the same stamps.
  if (!voucher || how.status != CacheStatus::hit || !file.known() || !watched_complete(*voucher) ||
      !detail::still_keyed(*voucher, st.options) || !still_valid(*voucher, Validation::full, nullptr)) {
    return nullptr;
  }
  auto part = detail::read_groups_of(st.options, file);
  if (!part) return nullptr;  // replaced or unreadable: open_index() decides
  how.reason.clear();
  std::lock_guard<std::mutex> lock(st.mutex);
  st.current = std::move(part.value());
  st.voucher = std::move(voucher);
  st.report = how;
  st.identity = CacheFileIdentity{};  // not a file version of its own to lend
  st.cwd = cwd;
  if (report != nullptr) *report = how;
  return st.current;
}

}  // namespace

Result<std::shared_ptr<const Index>> Catalog::get(CacheReport* report) {
  return catalog_get(*this, report, WhileValidating());
}

Result<std::shared_ptr<const Index>> catalog_get(Catalog& catalog, CacheReport* report,
                                                 const WhileValidating& while_validating) {
  auto& st = CatalogAccess::of(catalog);
  std::shared_ptr<const Index> current, voucher;
  CacheReport how;
  std::string cwd;
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    current = st.current;
    voucher = st.voucher;
    how = st.report;
    cwd = st.cwd;
  }
  // Validate outside the lock: concurrent get()s stat in parallel.
  const std::string now_cwd = detail::key_cwd(st.options.search_paths);
  if (current && now_cwd == cwd) {
    // An index read through the sibling has no watched files of its own:
    // the sibling's index, read from the same file version, is checked.
    const Index& checked = voucher ? *voucher : *current;
    // Kept without its first search path (cache_key.cpp): only while that
    // entry still holds nothing.
    const bool ok = detail::still_keyed(checked, st.options) &&
                    (how.status == CacheStatus::shipped ? detail::shipped_still_valid(checked, nullptr)
                                                        : still_valid(checked, st.options.validation, nullptr));
    if (ok) {
      if (report != nullptr) {
        *report = how;
        if (how.status == CacheStatus::rebuilt || how.status == CacheStatus::refreshed) {
          report->status = CacheStatus::hit;
        }
        if (report->status == CacheStatus::hit) report->reason.clear();
      }
      return current;
    }
  }
  if (!current) {
    if (auto got = through_sibling(catalog, now_cwd, report)) return got;
  }
  std::lock_guard<std::mutex> lock(st.mutex);
  if (st.current != current && st.current) {
    // Another thread refreshed it while this one was validating.
    if (report != nullptr) *report = st.report;
    return st.current;
  }
  CacheReport fresh;
  CacheFileIdentity identity;
  auto r = open_index(st.options, &fresh, while_validating, &identity);
  if (!r) return r.error();
  st.voucher = nullptr;
  if (!not_cacheable(*r.value()).empty()) {
    // Served, not kept: an answer holding an I/O error is read again next
    // time, as it is not cached on disk (see open_index()).
    st.current = nullptr;
    if (report != nullptr) *report = fresh;
    return r.value();
  }
  st.current = r.value();
  st.report = fresh;
  st.identity = identity;
  st.cwd = now_cwd;
  if (report != nullptr) *report = fresh;
  return st.current;
}

std::shared_ptr<const Index> catalog_listing(Catalog& catalog, CacheReport* report) {
  auto& st = CatalogAccess::of(catalog);
  std::shared_ptr<const Index> current;
  CacheReport how;
  std::string cwd;
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    // An index read through a sibling or shipped has its own rules of
    // freshness (catalog_get()): not taken here.
    if (st.voucher || st.report.status == CacheStatus::shipped) return nullptr;
    current = st.current;
    how = st.report;
    cwd = st.cwd;
  }
  if (!current || detail::key_cwd(st.options.search_paths) != cwd || !detail::still_keyed(*current, st.options) ||
      !still_valid(*current, Validation::paths, nullptr)) {
    return nullptr;
  }
  if (report != nullptr) {
    *report = how;
    if (how.status == CacheStatus::rebuilt || how.status == CacheStatus::refreshed) report->status = CacheStatus::hit;
    if (report->status == CacheStatus::hit) report->reason.clear();
  }
  return current;
}

}  // namespace epload
