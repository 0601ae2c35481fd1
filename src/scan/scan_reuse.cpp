// scan_reuse.cpp — the previous index arranged by place (see scan_reuse.hpp).
//
// Built once per refresh, in time linear in the previous index: a hash of
// (search path, metadata directory name) -> distribution, and per
// distribution the ranges of its watched files and entry points (counting
// sorts, no per-item allocation).  A watched file belongs to the
// distribution whose directory is its first path component (or which it is:
// an egg-info file) under the same search path.
#include "scan_reuse.hpp"

#include <fcntl.h>  // AT_FDCWD

#include "epload/profile.hpp"
#include "stamp.hpp"
#include "index_provenance.hpp"

namespace epload::detail {

namespace {

constexpr std::uint32_t k_none = 0xffffffffu;

/// The first component of a watched file's relative path.
std::string_view first_component(std::string_view rel) {
  const std::size_t slash = rel.find('/');
  return slash == std::string_view::npos ? rel : rel.substr(0, slash);
}

/// Fills `begin` (n + 1 offsets) and `list` from `owner` (k_none: no owner).
void group_by_owner(const std::vector<std::uint32_t>& owner, std::size_t n, std::vector<std::uint32_t>& begin,
                    std::vector<std::uint32_t>& list) {
  begin.assign(n + 1, 0);
  for (const std::uint32_t o : owner) {
    if (o != k_none) ++begin[o + 1];
  }
  for (std::size_t d = 0; d < n; ++d) begin[d + 1] += begin[d];
  list.resize(begin[n]);
  std::vector<std::uint32_t> fill(begin.begin(), begin.end() - 1);
  for (std::uint32_t k = 0; k < owner.size(); ++k) {
    if (owner[k] != k_none) list[fill[owner[k]]++] = k;
  }
}

}  // namespace

PreviousParts::PreviousParts(const ScanReuse& reuse) : m_reuse(reuse) {
  const Index& prev = *reuse.previous;
  const auto dists = prev.distributions();
  m_by_place.reserve(dists.size());
  for (std::uint32_t d = 0; d < dists.size(); ++d) {
    m_by_place.emplace(Key{dists[d].search_path, child_name(dists[d].metadata_dir)}, d);
  }
  const auto watched = watched_files(prev);
  std::vector<std::uint32_t> owner(watched.size(), k_none);
  for (std::uint32_t k = 0; k < watched.size(); ++k) {
    const auto it = m_by_place.find(Key{watched[k].search_path, first_component(watched[k].rel_path)});
    if (it != m_by_place.end()) owner[k] = it->second;
  }
  group_by_owner(owner, dists.size(), m_watch_begin, m_watch_list);
  const auto eps = prev.entry_points();
  owner.assign(eps.size(), k_none);
  for (std::uint32_t k = 0; k < eps.size(); ++k) owner[k] = static_cast<std::uint32_t>(eps[k].dist - dists.data());
  group_by_owner(owner, dists.size(), m_ep_begin, m_ep_list);
}

std::int64_t PreviousParts::find(std::uint32_t path, std::string_view child) const {
  const auto it = m_by_place.find(Key{path, child});
  return it == m_by_place.end() ? -1 : static_cast<std::int64_t>(it->second);
}

bool PreviousParts::unchanged(std::uint32_t d, int dirfd, std::string_view search_path, std::string& scratch) const {
  const Index& prev = *m_reuse.previous;
  const std::uint32_t path = prev.distributions()[d].search_path;
  if (m_reuse.watched_hold) return true;
  if (m_reuse.trust_unchanged_paths && path < m_reuse.path_unchanged.size() && m_reuse.path_unchanged[path]) {
    return true;
  }
  const auto watched = watched_files(prev);
  const bool by_token = !m_reuse.file_holds.empty();
  std::string rel;
  for (const std::uint32_t k : watches(d)) {
    const WatchedFile& w = watched[k];
    if (is_racy(w.stamp, scanned_at_ns(prev))) return false;
    if (by_token) {
      if (!m_reuse.file_holds[k]) return false;
      continue;
    }
    rel.assign(w.rel_path);
    profile::count(profile::Counter::stat);
    if (stamp_in(dirfd, search_path, rel, scratch) != w.stamp) return false;
  }
  return true;
}

}  // namespace epload::detail
