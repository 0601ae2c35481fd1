// scan_reuse.hpp — what a refresh takes from the previous index instead of
// the file system: the listings of unchanged search paths and the parts of
// distributions whose watched files are unchanged.
//
// A refresh is a scan (scanner.cpp) with the same three phases, so importlib's
// order and first-wins rule are recomputed from the parts, in memory, exactly
// as a cold scan computes them; only the sources differ:
//   phase 1  a search path whose stamp still holds (not racy) is not listed
//            again: its stored candidates (Index listings, in discovery order)
//            stand for its children.  Every other path is listed.
//   phase 2  a surviving distribution that the previous index holds at the
//            same place (search path, metadata directory) takes its name,
//            version, error, entry points and watched files from it when those
//            files still have their stamps (not racy at the previous scan);
//            any other is read.  A shadowed candidate is never read, whatever
//            its source.
// Names that come from METADATA in phase 1 (a stem that cannot name the
// distribution) are read again in every refresh, as they decide first-wins.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "epload/index.hpp"
#include "epload/result.hpp"
#include "scan_meta.hpp"

namespace epload::detail {

/// How a refresh may use the previous index (see scan_refreshing()).
struct ScanReuse {
  /// Complete, with watched stamps and listings; same search paths.
  const Index* previous = nullptr;
  /// Per search path: its stamp still holds, so its stored listing is used.
  std::vector<bool> path_unchanged;
  /// Every watched stamp of `previous` was just checked and holds (a passed
  /// `full` check): reused distributions need no stat of their own.
  bool watched_hold = false;
  /// Else, when known: per watched file of `previous`, whether that check
  /// found it with its stored stamp: a reused distribution's files are
  /// looked up here, not stat'ed again.
  std::vector<bool> file_holds;
  /// `paths` validation: distributions under an unchanged search path are
  /// trusted without a stat; those under a changed one are checked.
  bool trust_unchanged_paths = false;
};

/// What a refresh did, for reports ("1 of 2 path entries, 1 distribution read").
struct RefreshStats {
  std::size_t paths = 0, paths_listed = 0;
  std::size_t dists = 0, dists_read = 0;
};

/// The previous index, arranged for lookups by place.
class PreviousParts {
 public:
  explicit PreviousParts(const ScanReuse& reuse);

  /// The previous distribution at (search path, child), or -1.
  std::int64_t find(std::uint32_t path, std::string_view child) const;
  /// True when distribution `d`'s watched files may be trusted: no stat
  /// needed, or each one stat'ed (relative to `dirfd`, or by whole path)
  /// has its stored stamp, not racy at the previous scan.
  bool unchanged(std::uint32_t d, int dirfd, std::string_view search_path, std::string& scratch) const;
  /// Distribution `d`'s watched files that phase 2 records (all of them, or
  /// with `entries_only` the entry_points.txt one: the phase-1 METADATA
  /// watches are made afresh).
  std::span<const std::uint32_t> watches(std::uint32_t d) const {
    return {m_watch_list.data() + m_watch_begin[d], m_watch_list.data() + m_watch_begin[d + 1]};
  }
  /// Distribution `d`'s entry points, in importlib's order (positions in
  /// previous->entry_points()).
  std::span<const std::uint32_t> entries(std::uint32_t d) const {
    return {m_ep_list.data() + m_ep_begin[d], m_ep_list.data() + m_ep_begin[d + 1]};
  }
  const Index& index() const { return *m_reuse.previous; }

 private:
  struct Key {
    std::uint32_t path;
    std::string_view child;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept {
      return std::hash<std::string_view>()(k.child) * 31 + k.path;
    }
  };
  const ScanReuse& m_reuse;
  std::unordered_map<Key, std::uint32_t, KeyHash> m_by_place;
  std::vector<std::uint32_t> m_watch_begin, m_watch_list, m_ep_begin, m_ep_list;
};

/// A refresh: scan() of `search_paths` (the previous index's) taking what
/// `reuse` allows from the previous index.  `scanned_at` is the clock read
/// before the caller stat'ed the search paths it calls unchanged.
Result<Index> scan_refreshing(std::span<const std::string> search_paths, const ScanReuse& reuse,
                              std::int64_t scanned_at, RefreshStats* stats);

/// The child name of a metadata directory: what follows its last '/'.
inline std::string_view child_name(std::string_view metadata_dir) {
  const std::size_t slash = metadata_dir.rfind('/');
  return slash == std::string_view::npos ? metadata_dir : metadata_dir.substr(slash + 1);
}

}  // namespace epload::detail
