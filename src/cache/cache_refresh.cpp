// cache_refresh.cpp — a stale cache file is refreshed, not thrown away.
//
// When validation finds a cache file stale (a search path or a watched file
// changed), the file is read whole (every distribution, entry point,
// watched stamp and listing) and the answer is recomputed as a scan would
// compute it, reusing its parts (scan_reuse.hpp):
//   - a search path whose stamp still holds is not listed again: its stored
//     listing stands for its children; a changed one is listed again;
//   - a surviving distribution found at the same place in the old index is
//     reused when its watched files still have their stamps: known from the
//     `full` check that found the file stale (it checks the files even when
//     a search path changed, and records each file's fresh stamp, see
//     still_valid()), so no file is stat'ed twice; else (`paths` validation)
//     stat'ed one by one, on two threads, as the scan reads, only those
//     under a changed search path, the others trusted as `paths` trusts
//     them; any other distribution is read.
// importlib's order and first-wins are then recomputed over the whole list,
// so the answer is the scan's.  Racy stamps (stamp.hpp): the refresh's clock
// is read before its first stat, a path or file whose old stamp was racy at
// the old scan counts as changed, and the new index carries the new clock:
// a stamp reused from the old index is older than the old scan, hence not
// racy at the new one either.
//
// A refresh costs a read of the whole file, the listing of the changed
// paths, the reads of what changed, and the write of the new file (atomic,
// as after any scan), after the check's stats (not repeated).  Anything
// unexpected (the file cannot be read whole) falls back to a scan.
#include "cache_refresh.hpp"

#include <fcntl.h>  // AT_FDCWD

#include "epload/profile.hpp"
#include "index_hooks.hpp"
#include "memory.hpp"
#include "scan_reuse.hpp"
#include "stamp.hpp"
#include "watch_digest.hpp"

namespace epload::detail {

/// "1 of 2 path entries listed again, 1 of 6001 distributions read".
std::string refresh_summary(const RefreshStats& s) {
  auto plural = [](std::size_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  return std::to_string(s.paths_listed) + " of " + plural(s.paths, "path entry", "path entries") +
         " listed again, " + std::to_string(s.dists_read) + " of " +
         plural(s.dists, "distribution", "distributions") + " read";
}


Result<Refreshed> refresh_index(int fd, const std::string& path, const CacheKey& key, const CacheOptions& options,
                                WatchedSeen seen) {
  profile::Span span(profile::Phase::total, "refresh");
  // Before the first stat: the new index's scan time (see above).
  const std::int64_t now = coarse_now_ns();
  ReadExpectations expect;
  expect.key = &key;
  expect.map_file = cache_files_mapped();
  auto previous = read_index_fd(fd, path, expect);
  if (!previous) return previous.error();
  const Index& prev = *previous;
  if (IndexBuilderHooks::listed(prev).empty() && !prev.distributions().empty()) {
    return Error{Errc::cache, "cache file " + path + " has no listings to refresh from"};
  }
  ScanReuse reuse;
  reuse.previous = &prev;
  reuse.trust_unchanged_paths = options.validation == Validation::paths;
  const bool full = options.validation == Validation::full;
  reuse.watched_hold = seen.hold && full;
  // The check's stamps say which watched files changed: positions in the
  // list this read found (the same list, the file is the same).
  const auto watched = watched_files(prev);
  if (full && !seen.hold && seen.stamps.size() == watched.size()) {
    reuse.file_holds.resize(watched.size());
    for (std::size_t k = 0; k < watched.size(); ++k) reuse.file_holds[k] = watched[k].stamp == seen.stamps[k];
  }
  const auto paths = prev.search_paths();
  const auto stamps = search_path_stamps(prev);
  reuse.path_unchanged.resize(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const std::string p(paths[i]);
    FileStamp fresh;
    if (p.find('\0') == std::string::npos) fresh = stamp_at(AT_FDCWD, p.empty() ? "." : p.c_str());
    profile::count(profile::Counter::stat);
    reuse.path_unchanged[i] = fresh == stamps[i] && !is_racy(stamps[i], scanned_at_ns(prev));
  }
  RefreshStats stats;
  auto index = scan_refreshing(options.search_paths, reuse, now, &stats);
  if (!index) return index.error();
  return Refreshed{std::make_shared<const Index>(std::move(index.value())), refresh_summary(stats)};
}

}  // namespace epload::detail
