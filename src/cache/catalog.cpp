// catalog.cpp — Catalog: the current index of one key for a long-lived
// process, re-validated on every get().
//
// A get() validates the index it holds outside the lock (so concurrent
// get()s stat in parallel) and takes the lock only to replace it; a thread
// that finds another already replaced it returns that one.  An answer that
// holds an I/O error (not_cacheable()) is served but not kept, as it is not
// cached on disk either.
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
  std::mutex mutex;
  std::shared_ptr<const Index> current;
  CacheReport report;  ///< how `current` was obtained
  std::string cwd;     ///< the current directory it was keyed for, if relevant
};

/// The one way in to a Catalog's state from outside the class.
struct CatalogAccess {
  static Catalog::State& of(Catalog& catalog) { return *catalog.m; }
};

Catalog::Catalog(CacheOptions options) : m(std::make_unique<State>()) { m->options = std::move(options); }
Catalog::~Catalog() = default;

Result<std::shared_ptr<const Index>> Catalog::get(CacheReport* report) {
  return catalog_get(*this, report, WhileValidating());
}

Result<std::shared_ptr<const Index>> catalog_get(Catalog& catalog, CacheReport* report,
                                                 const WhileValidating& while_validating) {
  auto& st = CatalogAccess::of(catalog);
  std::shared_ptr<const Index> current;
  CacheReport how;
  std::string cwd;
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    current = st.current;
    how = st.report;
    cwd = st.cwd;
  }
  // Validate outside the lock: concurrent get()s stat in parallel.
  const std::string now_cwd = detail::key_cwd(st.options.search_paths);
  if (current && now_cwd == cwd) {
    const bool ok = how.status == CacheStatus::shipped
                        ? detail::shipped_still_valid(*current, nullptr)
                        : still_valid(*current, st.options.validation, nullptr);
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
  std::lock_guard<std::mutex> lock(st.mutex);
  if (st.current != current && st.current) {
    // Another thread refreshed it while this one was validating.
    if (report != nullptr) *report = st.report;
    return st.current;
  }
  CacheReport fresh;
  auto r = open_index(st.options, &fresh, while_validating);
  if (!r) return r.error();
  if (!not_cacheable(*r.value()).empty()) {
    // Served, not kept: an answer holding an I/O error is read again next
    // time, as it is not cached on disk (see open_index()).
    st.current = nullptr;
    if (report != nullptr) *report = fresh;
    return r.value();
  }
  st.current = r.value();
  st.report = fresh;
  st.cwd = now_cwd;
  if (report != nullptr) *report = fresh;
  return st.current;
}

}  // namespace epload
