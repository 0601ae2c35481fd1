// index.cpp — storage and queries of the immutable Index.
//
// All strings live in one Arena of fixed-size blocks that never move, so the
// string_views handed out stay valid for the life of the Index (also across
// moves: the Arena sits behind the Index's unique_ptr).  build() performs the
// only non-trivial work: a stable sort of entry points by group, which is
// exactly importlib's `sorted(eps, key=attrgetter('group'))` followed by
// itertools.groupby, and a table of group ranges for O(log groups) lookup.
#include "epload/index.hpp"

#include "index_builder.hpp"
#include "index_provenance.hpp"

#include <algorithm>   // stable_sort, lower_bound
#include <functional>  // less_equal
#include <optional>   // the watched digest
#include <utility>    // std::move
#include <vector>     // tables

#include "arena.hpp"
#include "index_hooks.hpp"
#include "memory.hpp"

namespace epload {

struct Index::Data {
  detail::Arena arena;
  std::vector<std::string_view> search_paths;
  std::vector<FileStamp> search_path_stamps;
  std::vector<Distribution> dists;
  std::vector<EntryPoint> eps;                 // importlib order
  std::vector<std::string_view> groups;        // sorted, distinct
  std::vector<std::uint32_t> group_begin;      // groups.size() + 1 offsets into eps
  std::vector<WatchedFile> watched;
  std::vector<WatchedName> watched_names;     // with a digest: the watched files, by name
  std::vector<std::unique_ptr<char[], void (*)(char*)>> kept;  // bytes some names point into
  std::vector<std::shared_ptr<const void>> kept_alive;          // the same, owned otherwise (a mapping)
  std::int64_t scanned_at_ns = 0;
  // Partial indexes only (see Index::complete()).
  bool complete = true;
  bool watched_complete = true;
  std::optional<WatchedDigest> watched_digest;  // set: watched_names, not watched
  std::vector<WatchedName> listed;               // the listings' candidates (scan_reuse.hpp)
  std::vector<std::uint32_t> listed_count;       // per search path, from a cache file's head
  std::vector<std::string_view> loaded_groups;  // sorted, distinct
  bool has_first_error = false;
  Distribution first_error;  // the global one, when has_first_error
  std::string_view not_cacheable;  // in the arena; empty: cacheable
};

/// The one way in to an Index's storage from outside the class: the
/// builder (below) fills it, the provenance functions read it.
struct IndexAccess {
  static Index::Data& of(Index& index) { return *index.m; }
  static const Index::Data& of(const Index& index) { return *index.m; }
};

namespace {
auto& data(Index& index) { return IndexAccess::of(index); }
const auto& data(const Index& index) { return IndexAccess::of(index); }
}  // namespace

Index::Index() : m(std::make_unique<Data>()) {}
Index::Index(Index&&) noexcept = default;
Index& Index::operator=(Index&&) noexcept = default;
Index::~Index() = default;

std::span<const std::string_view> Index::search_paths() const { return m->search_paths; }
std::span<const Distribution> Index::distributions() const { return m->dists; }
std::span<const EntryPoint> Index::entry_points() const { return m->eps; }
std::span<const std::string_view> Index::groups() const { return m->groups; }

std::span<const EntryPoint> Index::group(std::string_view group) const {
  const auto& g = m->groups;
  auto it = std::lower_bound(g.begin(), g.end(), group);
  if (it == g.end() || *it != group) return {};
  const auto i = static_cast<std::size_t>(it - g.begin());
  const auto* base = m->eps.data();
  return {base + m->group_begin[i], base + m->group_begin[i + 1]};
}

const EntryPoint* Index::find(std::string_view group, std::string_view name) const {
  for (const EntryPoint& ep : this->group(group)) {
    if (ep.name == name) return &ep;
  }
  return nullptr;
}

bool Index::complete() const { return m->complete; }
std::span<const std::string_view> Index::loaded_groups() const { return m->loaded_groups; }

bool Index::has_group(std::string_view group) const {
  if (m->complete) return true;
  return std::binary_search(m->loaded_groups.begin(), m->loaded_groups.end(), group);
}

const Distribution* Index::first_error() const {
  if (m->has_first_error) return &m->first_error;
  for (const Distribution& d : m->dists) {
    if (!d.error.empty()) return &d;
  }
  return nullptr;
}

// ---- provenance (index_provenance.hpp) ------------------------------------

std::span<const FileStamp> search_path_stamps(const Index& index) { return data(index).search_path_stamps; }
std::span<const WatchedFile> watched_files(const Index& index) { return data(index).watched; }
std::int64_t scanned_at_ns(const Index& index) { return data(index).scanned_at_ns; }
const WatchedDigest* watched_digest(const Index& index) {
  const auto& d = data(index);
  return d.watched_digest ? &*d.watched_digest : nullptr;
}
std::span<const WatchedName> watched_names(const Index& index) { return data(index).watched_names; }
bool watched_complete(const Index& index) { return data(index).watched_complete; }
std::string_view not_cacheable(const Index& index) { return data(index).not_cacheable; }

// ---------------------------------------------------------------------------

struct IndexBuilder::Data {
  Index index;
  // Entry points wait in index.eps with a null dist (the distributions may
  // still move); their distribution numbers wait here, parallel to them.
  std::vector<std::uint32_t> pending_dist;
  std::string_view last_group;  // in the arena: consecutive entry points share one copy
  // Bytes the Index will keep (borrow()): strings inside are not copied.
  std::vector<std::pair<const char*, const char*>> borrowed;

  /// `s` itself when it lies in borrowed bytes, else its copy in the arena.
  std::string_view keep(std::string_view s) {
    for (const auto& [begin, end] : borrowed) {
      if (std::less_equal<const char*>()(begin, s.data()) && std::less_equal<const char*>()(s.data() + s.size(), end)) {
        return s;
      }
    }
    return data(index).arena.copy(s);
  }
};

IndexBuilder::IndexBuilder() : m(std::make_unique<Data>()) {}
IndexBuilder::~IndexBuilder() = default;

std::uint32_t IndexBuilder::add_search_path(std::string_view path, const FileStamp& stamp) {
  auto& d = data(m->index);
  d.search_paths.push_back(d.arena.copy(path));
  d.search_path_stamps.push_back(stamp);
  return static_cast<std::uint32_t>(d.search_paths.size() - 1);
}

std::uint32_t IndexBuilder::add_distribution(std::string_view name, std::string_view version,
                                             std::string_view metadata_dir,
                                             std::uint32_t search_path, std::string_view error) {
  auto& d = data(m->index);
  Distribution dist;
  dist.name = m->keep(name);
  dist.version = m->keep(version);
  dist.metadata_dir = d.arena.copy(metadata_dir);
  dist.search_path = search_path;
  dist.error = d.arena.copy(error);
  d.dists.push_back(dist);
  return static_cast<std::uint32_t>(d.dists.size() - 1);
}

void IndexBuilder::add_entry_point(std::uint32_t dist, std::string_view group,
                                   std::string_view name, std::string_view value) {
  auto& d = data(m->index);
  if (group != m->last_group) m->last_group = d.arena.copy(group);
  d.eps.push_back({m->last_group, m->keep(name), m->keep(value), nullptr});
  m->pending_dist.push_back(dist);
}

void IndexBuilder::add_watched_file(std::uint32_t search_path, std::string_view rel_path,
                                    const FileStamp& stamp) {
  auto& d = data(m->index);
  d.watched.push_back({search_path, d.arena.copy(rel_path), stamp});
}

void detail::IndexBuilderHooks::add_watched_name(IndexBuilder& b, std::uint32_t search_path, std::string_view rel_path, bool copy) {
  auto& d = data(b.m->index);
  d.watched_names.push_back({copy ? d.arena.copy(rel_path) : rel_path, search_path});
}

void detail::IndexBuilderHooks::keep_bytes(IndexBuilder& b, std::unique_ptr<char[], void (*)(char*)> bytes) { data(b.m->index).kept.push_back(std::move(bytes)); }

void detail::IndexBuilderHooks::keep_alive(IndexBuilder& b, std::shared_ptr<const void> owner) { data(b.m->index).kept_alive.push_back(std::move(owner)); }

void detail::IndexBuilderHooks::borrow(IndexBuilder& b, const char* bytes, std::size_t n) { b.m->borrowed.emplace_back(bytes, bytes + n); }

void IndexBuilder::set_scanned_at(std::int64_t ns) { data(m->index).scanned_at_ns = ns; }
void detail::IndexBuilderHooks::set_watched_digest(IndexBuilder& b, const WatchedDigest& digest) {
  data(b.m->index).watched_digest = digest;
}
void detail::IndexBuilderHooks::add_listed(IndexBuilder& b, std::uint32_t search_path, std::string_view child) {
  auto& d = data(b.m->index);
  d.listed.push_back({d.arena.copy(child), search_path});
}
std::span<const WatchedName> detail::IndexBuilderHooks::listed(const Index& index) { return data(index).listed; }
void detail::IndexBuilderHooks::set_listed_count(IndexBuilder& b, std::uint32_t path, std::uint32_t count) {
  auto& counts = data(b.m->index).listed_count;
  if (counts.size() <= path) counts.resize(path + 1);
  counts[path] = count;
}
bool detail::IndexBuilderHooks::listed_known(const Index& index) {
  return !data(index).listed_count.empty() || !data(index).listed.empty() || data(index).dists.empty();
}
std::uint32_t detail::IndexBuilderHooks::listed_count(const Index& index, std::uint32_t path) {
  if (path < data(index).listed_count.size()) return data(index).listed_count[path];
  std::uint32_t n = 0;
  for (const WatchedName& c : data(index).listed) n += c.search_path == path;
  return n;
}

void IndexBuilder::reserve(std::size_t dists, std::size_t entry_points, std::size_t watched,
                           std::size_t names) {
  auto& d = data(m->index);
  d.dists.reserve(d.dists.size() + dists);
  m->pending_dist.reserve(m->pending_dist.size() + entry_points);
  d.eps.reserve(d.eps.size() + entry_points);
  d.watched.reserve(d.watched.size() + watched);
  d.watched_names.reserve(d.watched_names.size() + names);
  detail::prefault_capacity(d.dists);
  detail::prefault_capacity(m->pending_dist);
  detail::prefault_capacity(d.eps);
  detail::prefault_capacity(d.watched);
  detail::prefault_capacity(d.watched_names);
}

void detail::IndexBuilderHooks::set_partial(IndexBuilder& b, std::span<const std::string_view> groups) {
  auto& d = data(b.m->index);
  d.complete = false;
  d.loaded_groups.clear();
  for (std::string_view g : groups) d.loaded_groups.push_back(d.arena.copy(g));
  std::sort(d.loaded_groups.begin(), d.loaded_groups.end());
  d.loaded_groups.erase(std::unique(d.loaded_groups.begin(), d.loaded_groups.end()), d.loaded_groups.end());
}

void detail::IndexBuilderHooks::set_watched_complete(IndexBuilder& b, bool complete) { data(b.m->index).watched_complete = complete; }
void IndexBuilder::set_not_cacheable(std::string_view why) {
  auto& d = data(m->index);
  d.not_cacheable = d.arena.copy(why.empty() ? std::string_view("not cacheable") : why);
}

void detail::IndexBuilderHooks::set_first_error(IndexBuilder& b, std::string_view name, std::string_view version,
                                   std::string_view metadata_dir, std::uint32_t search_path,
                                   std::string_view error) {
  auto& d = data(b.m->index);
  d.has_first_error = true;
  d.first_error.name = d.arena.copy(name);
  d.first_error.version = d.arena.copy(version);
  d.first_error.metadata_dir = d.arena.copy(metadata_dir);
  d.first_error.search_path = search_path;
  d.first_error.error = d.arena.copy(error);
}

const Index& detail::IndexBuilderHooks::in_progress(const IndexBuilder& b) { return b.m->index; }

Index IndexBuilder::build() {
  auto& d = data(m->index);
  auto& dist = m->pending_dist;
  auto by_group = [](const EntryPoint& a, const EntryPoint& b) { return a.group < b.group; };
  if (!std::is_sorted(d.eps.begin(), d.eps.end(), by_group)) {
    // Stable: discovery order is kept within a group, as in importlib.  (A
    // cache read adds them in this order already.)
    std::vector<std::uint32_t> order(d.eps.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return d.eps[a].group < d.eps[b].group; });
    std::vector<EntryPoint> eps;
    std::vector<std::uint32_t> dists;
    eps.reserve(order.size());
    dists.reserve(order.size());
    for (std::uint32_t i : order) {
      eps.push_back(d.eps[i]);
      dists.push_back(dist[i]);
    }
    d.eps = std::move(eps);
    dist = std::move(dists);
  }
  for (std::size_t i = 0; i < d.eps.size(); ++i) {
    EntryPoint& ep = d.eps[i];
    ep.dist = &d.dists[dist[i]];
    if (d.groups.empty() || d.groups.back() != ep.group) {
      d.groups.push_back(ep.group);
      d.group_begin.push_back(static_cast<std::uint32_t>(i));
    }
  }
  d.group_begin.push_back(static_cast<std::uint32_t>(d.eps.size()));
  Index out = std::move(m->index);
  m = std::make_unique<Data>();
  return out;
}

}  // namespace epload

namespace epload {

namespace {
std::string describe(const EntryPoint& ep) {
  return std::string(ep.group) + " " + std::string(ep.name) + " = " + std::string(ep.value) + " [" +
         std::string(ep.dist->name) + " " + std::string(ep.dist->version) + "]";
}
}  // namespace

bool same_answer(const Index& a, const Index& b, std::string* why) {
  auto say = [&](std::string text) {
    if (why) *why = std::move(text);
    return false;
  };
  auto da = a.distributions(), db = b.distributions();
  for (std::size_t i = 0; i < da.size() || i < db.size(); ++i) {
    if (i >= da.size()) return say("extra distribution " + std::string(db[i].metadata_dir));
    if (i >= db.size()) return say("missing distribution " + std::string(da[i].metadata_dir));
    const Distribution &x = da[i], &y = db[i];
    if (x.name != y.name || x.version != y.version || x.metadata_dir != y.metadata_dir ||
        x.error != y.error) {
      return say("distribution " + std::to_string(i) + " differs: " + std::string(x.metadata_dir) +
                 " vs " + std::string(y.metadata_dir));
    }
  }
  auto ea = a.entry_points(), eb = b.entry_points();
  for (std::size_t i = 0; i < ea.size() || i < eb.size(); ++i) {
    if (i >= ea.size()) return say("extra entry point " + describe(eb[i]));
    if (i >= eb.size()) return say("missing entry point " + describe(ea[i]));
    const EntryPoint &x = ea[i], &y = eb[i];
    if (x.group != y.group || x.name != y.name || x.value != y.value ||
        x.dist->name != y.dist->name || x.dist->version != y.dist->version) {
      return say("entry point " + std::to_string(i) + " differs: " + describe(x) + " vs " + describe(y));
    }
  }
  return true;
}

}  // namespace epload
