// cache_splice.cpp — a stale cache file refreshed by splicing its rows.
//
// A refresh that recomputes (cache_refresh.cpp) reads the whole file into an
// Index, lists the changed search path and runs importlib's three phases
// over every distribution, then serializes and writes all of it: at 6,000
// distributions ~13 ms beyond the check, the listing and the write that any
// refresh pays.  The common changes (a distribution installed or removed,
// an entry_points.txt edited) touch a handful of rows, so this refresh
// copies every unchanged row as bytes and writes only the changed ones:
//
//   1. The `full` check already stat'ed every watched file: their fresh
//      stamps, and the digest of those stamps at their old places
//      (WatchedSeen), say which files changed.  A file changed since the
//      scan has a stamp the racy rule flags (its ctime is at least the
//      scan's clock); only those rows' stored stamps are parsed, and the
//      digest, corrected by exactly them, must come out as the stored one,
//      or another file changed unseen and the splice gives up.
//   2. The watched names, in runs by directory, are the distributions in
//      discovery order (one run each).  The splice applies when every
//      search path's listing is exactly its distributions (nothing
//      shadowed, every directory named by its stem): each changed path is
//      listed again (raw order), its children compared with its old runs,
//      and every child added or removed must have a name no other child
//      shares (no shadowing changes, no grouping by Lookup).  importlib's
//      order is then the old one with those children in and out: the new
//      discovery order needs no recomputation.
//   3. The added distributions and the ones whose files changed are read
//      by the scanner itself (scan_places), so their rows are a scan's.
//   4. Each section is rebuilt from row boundaries: the writer puts a tab
//      before every row it splices and before each such array's closing
//      bracket (JSON whitespace that no string can hold), so rows are
//      found 16 bytes at a time.  Kept rows stay ranges of the old file
//      (cache_pieces.hpp).  A group section none of whose distributions
//      was added, read again or removed is copied whole with its hash:
//      the global numbers that moved are in "numbers", which is written
//      anew (at 6,000 distributions, rewriting every group section after
//      an installed distribution cost ~1 ms: its rows, their hashes and
//      ~12,000 pieces for writev).  Every section copied or rewritten is
//      checked against its stored hash first, so a damaged row is never
//      sealed under a new hash.
//   5. The new file is written atomically, as after a scan, and the answer
//      read back from it (the groups asked for), as a hit reads.
//
// Anything else (`paths` validation, shadowing, a `*.egg` path, a path
// gone, more than 64 children changed in one path, a first error that
// moves, a damaged section, an I/O error in a read, a write that fails)
// returns nothing and the caller recomputes: tests compare every refreshed
// file with a fresh scan's.
#include "cache_splice.hpp"

#include <fcntl.h>     // open
#include <sys/stat.h>  // fstat

#include <algorithm>
#include <charconv>  // to_chars
#include <cstring>
#include <string_view>
#include <vector>

#include "cache_pieces.hpp"
#include "cache_rows.hpp"
#include "cache_text.hpp"
#include "epload/profile.hpp"
#include "index_hooks.hpp"
#include "memory.hpp"
#include "scan_list.hpp"
#include "scan_lookup.hpp"
#include "scan_reuse.hpp"
#include "stamp.hpp"
#include "watch_digest.hpp"

namespace epload::detail {

namespace {

/// The first character of both of a child's names (Lookup's key and its
/// stem's), normalized, when its first byte is ASCII; else 0 (unknown: the
/// names are computed whole).
char first_key_char(std::string_view child) {
  const auto c = static_cast<unsigned char>(child.empty() ? 0 : child[0]);
  if (c == 0 || c >= 0x80) return 0;
  if (c == '-' || c == '.' || c == '_') return '_';
  return static_cast<char>(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
}

/// Lookup's key and the stem's name of a child; the stem's is empty when
/// the stem cannot name it.
struct Names {
  std::string lookup, stem;
};
Names names_of(std::string_view child) {
  Names n;
  lookup_key(child, n.lookup);
  if (!stem_key(child, n.stem)) n.stem.clear();
  return n;
}

/// One distribution of the old file: a run of watched names.
struct Run {
  std::uint32_t sp = 0;
  std::string_view child;
  std::uint32_t first = 0, end = 0;  // its watched files
};

/// One distribution of the new file, in discovery order.
struct NewDist {
  std::int64_t old = -1;   // its run in the old file, or -1
  std::int64_t read = -1;  // its place in the fresh scan, or -1 (copied)
  std::uint32_t sp = 0;
  std::string_view child;
};

/// A section of the new file: its record and its bytes.
struct NewSection {
  SectionRecord record;
  Pieces pieces;
  bool hashed = false;  // the record's length and hash known (copied whole)
};

/// `n` in decimal, as JsonWriter::number writes it.
void put_number(Pieces& p, std::uint64_t n) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, n);
  p.put(std::string_view(buf, static_cast<std::size_t>(r.ptr - buf)));
}

class Splice {
 public:
  Splice(const std::string& path, const CacheKey& key, const CacheOptions& options, const WatchedSeen& seen,
         const Index& checked)
      : m_path(path), m_key(key), m_options(options), m_seen(seen), m_checked(checked) {}

  std::optional<Refreshed> run(int fd);

 private:
  bool runs();
  bool changed_paths();
  bool changed_files();
  bool digest_holds();
  bool new_order();
  bool unique_names(std::string_view child);
  bool read_new();
  bool first_error();
  bool group_sections();
  /// Group `group`'s section, from its old one (the `old_at`th group
  /// section, or -1) and the fresh distributions; its members' new
  /// numbers left in m_members.
  bool group_section(const std::string& group, std::int64_t old_at);
  bool dists_section();
  bool listings_section();
  bool watched_sections();
  bool write_and_answer(Refreshed& out);

  /// The old section's text, checked against its hash.
  bool checked_text(const RawSection& s, std::string_view& text) const {
    if (s.offset + s.length > m_raw.bytes.size()) return false;
    text = m_raw.bytes.substr(s.offset, s.length);
    return body_hash(text) == s.hash;
  }
  /// A new section, appended; the reference holds until the next one.
  NewSection& add_section(std::string name, std::size_t count) {
    m_sections.push_back(NewSection{SectionRecord{std::move(name), 0, 0, 0, count}, Pieces(m_raw.bytes)});
    return m_sections.back();
  }
  /// The dir text as stored for a fresh distribution.
  std::string_view dir_text(const Distribution& d) const { return child_name(d.metadata_dir); }

  const std::string& m_path;
  const CacheKey& m_key;
  const CacheOptions& m_options;
  const WatchedSeen& m_seen;
  const Index& m_checked;
  std::int64_t m_now = 0;
  std::int64_t m_old_scan = 0;
  std::span<const WatchedName> m_names;
  std::span<const std::string_view> m_paths;
  std::vector<Run> m_runs;
  std::vector<std::uint32_t> m_kept;  // runs per search path
  std::vector<FileStamp> m_stamps;    // the new head's search-path stamps
  std::vector<std::uint32_t> m_listed;
  std::size_t m_paths_listed = 0;
  std::vector<bool> m_changed;  // per search path: it has or had metadata, and changed
  std::string m_pool;           // the changed paths' children now, NUL-separated
  std::vector<std::vector<std::string_view>> m_children;  // per search path, when changed
  std::vector<bool> m_edited;   // per run: a watched file changed
  std::vector<bool> m_removed;  // per run: its directory is gone
  RawFile m_raw;
  std::string_view m_dists_text, m_listings_text, m_watched_text, m_digest_text;
  std::vector<std::uint32_t> m_dists_tabs, m_listings_tabs, m_watched_tabs, m_digest_tabs;
  std::vector<NewDist> m_new;
  std::vector<std::int64_t> m_new_of_old;  // per run: its new number, -1 when its rows are not kept
  std::vector<WatchedName> m_places;
  Result<Index> m_fresh = Error{Errc::cache, "not read"};
  std::vector<std::uint32_t> m_fresh_watch_begin;  // per fresh distribution, into watched_files(fresh)
  std::string m_first_error = "null";
  std::vector<NewSection> m_sections;
  std::size_t m_old_groups = 0;  // the old file's group sections: the first ones
  std::vector<std::uint32_t> m_old_numbers;  // their "numbers", one after another
  std::vector<std::size_t> m_old_numbers_at;
  std::vector<std::uint64_t> m_members;  // the new numbers of a group section's distributions
  std::string m_numbers_text;            // the new "numbers"
  // The new file's watched names, decoded (what the answer read back
  // carries), and their digest.
  struct NewNames {
    std::string pool;
    std::vector<WatchedName> names;
  };
  std::shared_ptr<NewNames> m_new_names = std::make_shared<NewNames>();
  WatchedDigest m_new_digest;
};

bool Splice::runs() {
  m_names = watched_names(m_checked);
  m_paths = m_checked.search_paths();
  if (m_seen.stamps.size() != m_names.size() || watched_digest(m_checked) == nullptr) return false;
  if (!IndexBuilderHooks::listed_known(m_checked)) return false;
  m_kept.assign(m_paths.size(), 0);
  m_runs.reserve(m_names.size());  // at most one run per name; untouched pages cost nothing
  for (std::uint32_t k = 0; k < m_names.size(); ++k) {
    const WatchedName& w = m_names[k];
    const std::size_t slash = w.rel_path.find('/');
    const std::string_view child = w.rel_path.substr(0, slash);
    if (!m_runs.empty() && m_runs.back().sp == w.search_path && m_runs.back().child == child) {
      m_runs.back().end = k + 1;
      continue;
    }
    // Each run a distribution named by its stem (no METADATA read to name
    // one, before de-duplication or after), in search-path order.
    const StemParts stem = split_stem(child);
    if (!stem.ok || stem.name.empty() || w.search_path >= m_paths.size()) return false;
    if (!m_runs.empty() && m_runs.back().sp > w.search_path) return false;
    m_runs.push_back(Run{w.search_path, child, k, k + 1});
    ++m_kept[w.search_path];
  }
  // Every path's listing is exactly its distributions: nothing shadowed.
  for (std::uint32_t i = 0; i < m_paths.size(); ++i) {
    if (IndexBuilderHooks::listed_count(m_checked, i) != m_kept[i]) return false;
  }
  return true;
}

bool Splice::changed_paths() {
  const auto stamps = search_path_stamps(m_checked);
  if (stamps.size() != m_paths.size()) return false;
  m_stamps.assign(stamps.begin(), stamps.end());
  m_listed.assign(m_kept.begin(), m_kept.end());
  m_changed.assign(m_paths.size(), false);
  std::vector<std::size_t> ends(m_paths.size(), 0);  // each one's children end in m_pool
  for (std::uint32_t i = 0; i < m_paths.size(); ++i) {
    const std::string p(m_paths[i]);
    ends[i] = m_pool.size();
    if (p.find('\0') != std::string::npos) return false;
    const char* os = p.empty() ? "." : p.c_str();
    const FileStamp now = stamp_at(AT_FDCWD, os);
    profile::count(profile::Counter::stat);
    if (now == stamps[i] && !is_racy(stamps[i], m_old_scan)) continue;
    ++m_paths_listed;
    if (m_kept[i] == 0 && lists_no_metadata(os)) {
      m_stamps[i] = now;  // listed again: still nothing (a script's directory)
      continue;
    }
    if (base_is_egg(p)) return false;
    m_changed[i] = true;
    Fd dir(::open(os, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.fd < 0) return false;  // gone, or no longer a directory
    struct stat st;
    if (::fstat(dir.fd, &st) != 0) return false;
    m_stamps[i] = stamp_of(st);
    if (list_infos(dir.fd, m_pool) != 0) return false;
    ends[i] = m_pool.size();
  }
  m_children.assign(m_paths.size(), {});
  std::size_t at = 0;
  for (std::uint32_t i = 0; i < m_paths.size(); ++i) {
    for (; at < ends[i]; ) {
      const std::size_t nul = m_pool.find('\0', at);
      m_children[i].emplace_back(m_pool.data() + at, nul - at);
      at = nul + 1;
    }
  }
  return true;
}

bool Splice::changed_files() {
  m_edited.assign(m_runs.size(), false);
  m_removed.assign(m_runs.size(), false);
  if (m_seen.hold) return true;
  // Files whose fresh stamp the racy rule flags at the old scan: changed
  // since (or racy then), read again.
  std::size_t run = 0;
  for (std::uint32_t k = 0; k < m_names.size(); ++k) {
    if (!is_racy(m_seen.stamps[k], m_old_scan)) continue;
    while (m_runs[run].end <= k) ++run;
    m_edited[run] = true;
  }
  return true;
}

bool Splice::digest_holds() {
  if (m_seen.hold) return true;
  // The stored digest, from the fresh stamps with the stored ones of the
  // files read again or gone: no other file changed.
  WatchedDigest digest = m_seen.digest;
  for (std::size_t r = 0; r < m_runs.size(); ++r) {
    if (!m_edited[r] && !m_removed[r]) continue;
    for (std::uint32_t k = m_runs[r].first; k < m_runs[r].end; ++k) {
      FileStamp stored;
      if (!row_stamp(row_at(m_watched_text, m_watched_tabs, k), stored)) return false;
      const WatchedDigest fresh_share = digest_share(k, m_seen.stamps[k]), stored_share = digest_share(k, stored);
      digest.lo += stored_share.lo - fresh_share.lo;
      digest.hi += stored_share.hi - fresh_share.hi;
    }
  }
  return digest == *watched_digest(m_checked);
}

/// True when no child but `child` itself has its names: among the changed
/// paths' children now (skipping `child` once) and the other paths' runs.
bool Splice::unique_names(std::string_view child) {
  const char first = first_key_char(child);
  if (first == 0) return false;
  const Names mine = names_of(child);
  if (mine.stem.empty() || mine.lookup.empty()) return false;
  auto clashes = [&](std::string_view other) {
    const char f = first_key_char(other);
    if (f != 0 && f != first) return false;
    const Names theirs = names_of(other);
    return theirs.lookup == mine.lookup || (!theirs.stem.empty() && theirs.stem == mine.stem);
  };
  bool self_seen = false;
  for (std::uint32_t i = 0; i < m_paths.size(); ++i) {
    for (std::string_view c : m_children[i]) {
      if (c == child && !self_seen) {
        self_seen = true;
        continue;
      }
      if (clashes(c)) return false;
    }
  }
  for (const Run& r : m_runs) {
    if (!m_changed[r.sp] && clashes(r.child)) return false;
  }
  return true;
}

bool Splice::new_order() {
  m_new.reserve(m_runs.size() + 16);
  m_new_of_old.assign(m_runs.size(), -1);
  auto keep = [&](std::size_t r) {
    if (!m_edited[r]) m_new_of_old[r] = static_cast<std::int64_t>(m_new.size());
    m_new.push_back(NewDist{static_cast<std::int64_t>(r), -1, m_runs[r].sp, m_runs[r].child});
  };
  std::size_t r = 0;
  for (std::uint32_t sp = 0; sp < m_paths.size(); ++sp) {
    const std::size_t old_begin = r;
    while (r < m_runs.size() && m_runs[r].sp == sp) ++r;
    const std::size_t old_end = r;
    if (!m_changed[sp]) {
      for (std::size_t i = old_begin; i < old_end; ++i) keep(i);
      continue;
    }
    // The children that stayed, then what changed between them.
    const std::vector<std::string_view>& children = m_children[sp];
    std::size_t pre = 0;
    const std::size_t old_n = old_end - old_begin, new_n = children.size();
    while (pre < old_n && pre < new_n && m_runs[old_begin + pre].child == children[pre]) ++pre;
    std::size_t post = 0;
    while (post < old_n - pre && post < new_n - pre && m_runs[old_end - 1 - post].child == children[new_n - 1 - post]) {
      ++post;
    }
    constexpr std::size_t k_max_middle = 64;  // more: a big change, recomputed
    const std::size_t old_mid = old_n - pre - post, new_mid = new_n - pre - post;
    if (old_mid > k_max_middle || new_mid > k_max_middle) return false;
    const std::size_t mid_begin = old_begin + pre, mid_end = old_begin + pre + old_mid;
    const auto new_begin = children.begin() + static_cast<std::ptrdiff_t>(pre);
    const auto new_end = new_begin + static_cast<std::ptrdiff_t>(new_mid);
    auto in_new = [&](std::string_view c) { return std::find(new_begin, new_end, c) != new_end; };
    auto old_id = [&](std::string_view c) {
      for (std::size_t id = mid_begin; id < mid_end; ++id) {
        if (m_runs[id].child == c) return static_cast<std::int64_t>(id);
      }
      return std::int64_t{-1};
    };
    // Children that stayed keep their order: the old middle without the
    // removed ones is the new middle without the added ones.
    std::vector<std::string_view> stayed_old, stayed_new;
    for (std::size_t id = mid_begin; id < mid_end; ++id) {
      if (in_new(m_runs[id].child)) {
        stayed_old.push_back(m_runs[id].child);
        continue;
      }
      if (!unique_names(m_runs[id].child)) return false;  // removed: unshadows nothing
      m_removed[id] = true;
    }
    for (auto it = new_begin; it != new_end; ++it) {
      if (old_id(*it) >= 0) stayed_new.push_back(*it);
      else if (!unique_names(*it)) return false;  // added: shadows nothing, groups with nothing
    }
    if (stayed_old != stayed_new) return false;
    for (std::size_t i = old_begin; i < mid_begin; ++i) keep(i);
    for (auto it = new_begin; it != new_end; ++it) {
      const std::int64_t id = old_id(*it);
      if (id >= 0) keep(static_cast<std::size_t>(id));
      else m_new.push_back(NewDist{-1, -1, sp, *it});
    }
    for (std::size_t i = mid_end; i < old_end; ++i) keep(i);
    m_listed[sp] = static_cast<std::uint32_t>(new_n);
  }
  if (r != m_runs.size()) return false;
  // What is read: the added, and the ones whose files changed.
  for (NewDist& d : m_new) {
    if (d.old >= 0 && !m_edited[static_cast<std::size_t>(d.old)]) continue;
    d.read = static_cast<std::int64_t>(m_places.size());
    m_places.push_back(WatchedName{d.child, d.sp});
  }
  return true;
}

bool Splice::read_new() {
  std::vector<std::string> paths(m_options.search_paths.begin(), m_options.search_paths.end());
  if (paths.size() != m_paths.size()) return false;
  m_fresh = scan_places(paths, m_places, m_now);
  if (!m_fresh || !not_cacheable(*m_fresh).empty()) return false;
  const Index& fresh = *m_fresh;
  const auto dists = fresh.distributions();
  if (dists.size() != m_places.size()) return false;
  // Each one's watched files: a run by its directory, in order.
  const auto watched = watched_files(fresh);
  m_fresh_watch_begin.assign(dists.size() + 1, static_cast<std::uint32_t>(watched.size()));
  std::size_t w = 0;
  for (std::size_t i = 0; i < dists.size(); ++i) {
    if (dists[i].search_path != m_places[i].search_path || dir_text(dists[i]) != m_places[i].rel_path) return false;
    m_fresh_watch_begin[i] = static_cast<std::uint32_t>(w);
    while (w < watched.size() && watched[w].search_path == dists[i].search_path &&
           watched[w].rel_path.substr(0, watched[w].rel_path.find('/')) == m_places[i].rel_path) {
      ++w;
    }
    if (w == m_fresh_watch_begin[i]) return false;  // every distribution watches its entry_points.txt
  }
  return w == watched.size();
}

bool Splice::first_error() {
  std::int64_t at = -1;
  if (m_raw.has_error) {
    if (m_raw.error_dist >= m_new_of_old.size()) return false;
    at = m_new_of_old[m_raw.error_dist];
    if (at < 0) return false;  // gone or read again: the next error is unknown without reading every row
  }
  const auto dists = m_fresh->distributions();
  const NewDist* fresh_error = nullptr;
  for (const NewDist& d : m_new) {
    if (d.read >= 0 && !dists[static_cast<std::size_t>(d.read)].error.empty()) {
      fresh_error = &d;
      break;
    }
  }
  const std::int64_t fresh_at = fresh_error != nullptr ? fresh_error - m_new.data() : -1;
  if (fresh_at < 0 && at < 0) return true;
  std::string out = "{\"dist\":[";
  JsonWriter w(out);
  if (fresh_at >= 0 && (at < 0 || fresh_at < at)) {
    const Distribution& d = dists[static_cast<std::size_t>(fresh_error->read)];
    w.number(fresh_at);
    w.raw(",");
    dist_fields(w, d, dir_text(d));
    w.raw("],\"message\":");
    w.bytes(d.error);
  } else {
    w.number(at);
    w.raw(",");
    w.bytes(m_raw.error_name), w.raw(","), w.bytes(m_raw.error_version), w.raw(",");
    w.bytes(m_raw.error_dir), w.raw(","), w.number(m_raw.error_path);
    w.raw("],\"message\":");
    w.bytes(m_raw.error_message);
  }
  w.raw("}");
  m_first_error = std::move(out);
  return true;
}

bool Splice::group_sections() {
  // Every group, old and new, in code-point order (byte order of UTF-8),
  // with its old section's place among the group sections.
  std::vector<std::pair<std::string, std::int64_t>> groups;
  for (std::size_t k = 0; k < m_old_groups; ++k) groups.emplace_back(m_raw.sections[k].group, k);
  for (std::string_view g : m_fresh->groups()) {
    auto it = std::lower_bound(groups.begin(), groups.end(), g,
                               [](const auto& e, std::string_view v) { return std::string_view(e.first) < v; });
    if (it == groups.end() || it->first != g) groups.insert(it, {std::string(g), -1});
  }
  JsonWriter w(m_numbers_text);
  w.raw("[");
  std::size_t written = 0;
  for (const auto& [g, old] : groups) {
    const std::size_t before = m_sections.size();
    if (!group_section(g, old)) return false;
    if (m_sections.size() == before) continue;  // the group is gone
    w.raw(written++ == 0 ? "[" : ",[");
    for (std::size_t i = 0; i < m_members.size(); ++i) {
      if (i != 0) w.raw(",");
      w.number(m_members[i]);
    }
    w.raw("]");
  }
  w.raw("]\n");
  add_section("numbers", written).pieces.put(m_numbers_text);
  return true;
}

bool Splice::group_section(const std::string& group, std::int64_t old_at) {
  const Index& fresh = *m_fresh;
  const auto fresh_dists = fresh.distributions();
  const auto fresh_eps = fresh.group(group);
  const RawSection* old = old_at >= 0 ? &m_raw.sections[static_cast<std::size_t>(old_at)] : nullptr;
  std::span<const std::uint32_t> numbers;
  if (old != nullptr) {
    const auto k = static_cast<std::size_t>(old_at);
    numbers = std::span<const std::uint32_t>(m_old_numbers).subspan(m_old_numbers_at[k],
                                                                     m_old_numbers_at[k + 1] - m_old_numbers_at[k]);
  }
  for (const std::uint32_t d : numbers) {
    if (d >= m_new_of_old.size()) return false;
  }
  m_members.clear();
  // Its rows unchanged (none read again or gone, none new): copied whole,
  // with its hash (checked: a damaged row is never copied); only its
  // numbers move, and they are in "numbers".
  const bool kept = old != nullptr && fresh_eps.empty() &&
                    std::all_of(numbers.begin(), numbers.end(), [&](std::uint32_t d) { return m_new_of_old[d] >= 0; });
  if (kept) {
    for (const std::uint32_t d : numbers) m_members.push_back(static_cast<std::uint64_t>(m_new_of_old[d]));
    if (body_hash(m_raw.bytes.substr(old->offset, old->length)) != old->hash) return false;
    NewSection& s = add_section(old->name, old->count);
    s.record.length = old->length;
    s.record.hash = old->hash;
    s.hashed = true;
    s.pieces.copy(m_raw.bytes.substr(old->offset, old->length));
    return true;
  }
  // The section's old rows, when it has some.
  std::string_view text;
  std::vector<std::uint32_t> tabs;
  std::size_t dist_rows = 0;
  if (old != nullptr) {
    text = m_raw.bytes.substr(old->offset, old->length);
    if (body_hash(text) != old->hash) return false;  // never sealed again
    tabs = tabs_of(text);
    while (dist_rows < tabs.size() && text[tabs[dist_rows] + 1] != ']') ++dist_rows;
    // dists rows, their closing tab, entry point rows, their closing tab.
    if (dist_rows != numbers.size() || tabs.size() != dist_rows + 1 + old->count + 1) return false;
  }
  // The merged distributions, by new number: old rows kept, fresh ones.
  struct Member {
    std::int64_t number;
    std::int64_t old_local = -1;  // row in the old section
    std::int64_t fresh = -1;      // fresh distribution
  };
  std::vector<Member> members;
  for (std::size_t i = 0; i < dist_rows; ++i) {
    const std::int64_t now = m_new_of_old[numbers[i]];
    if (now >= 0) members.push_back(Member{now, static_cast<std::int64_t>(i), -1});
  }
  std::vector<std::int64_t> number_of_fresh(fresh_dists.size(), -1);
  for (std::size_t n = 0; n < m_new.size(); ++n) {
    if (m_new[n].read >= 0) number_of_fresh[static_cast<std::size_t>(m_new[n].read)] = static_cast<std::int64_t>(n);
  }
  for (std::size_t e = 0; e < fresh_eps.size(); ++e) {
    const auto f = static_cast<std::int64_t>(fresh_eps[e].dist - fresh_dists.data());
    if (!members.empty() && members.back().fresh == f) continue;
    bool known = false;
    for (const Member& m : members) known |= m.fresh == f;
    if (!known) members.push_back(Member{number_of_fresh[static_cast<std::size_t>(f)], -1, f});
  }
  std::stable_sort(members.begin(), members.end(),
                   [](const Member& a, const Member& b) { return a.number < b.number; });
  // The old entry point rows, by their row in the old dists.
  std::vector<std::uint32_t> ep_begin(dist_rows + 1, 0);
  const std::size_t ep_first = dist_rows + 1;
  const std::size_t ep_count = old != nullptr ? old->count : 0;
  std::size_t e = 0;
  for (std::size_t i = 0; i < dist_rows; ++i) {
    ep_begin[i] = static_cast<std::uint32_t>(e);
    std::uint64_t k;
    std::size_t after;
    while (e < ep_count && leading_number(row_at(text, tabs, ep_first + e), k, after) && k == i) ++e;
  }
  ep_begin[dist_rows] = static_cast<std::uint32_t>(e);
  if (e != ep_count) return false;  // rows not grouped by distribution, in order
  std::string out;
  out.reserve(text.size() + 256);
  JsonWriter w(out);
  std::size_t count = 0;
  w.raw("{\"dists\":[");
  for (std::size_t m = 0; m < members.size(); ++m) {
    w.raw(m == 0 ? "\t" : ",\t");
    if (members[m].old_local >= 0) {
      w.raw(row_at(text, tabs, static_cast<std::size_t>(members[m].old_local)));  // "[name,version,dir,path]"
    } else {
      const Distribution& d = fresh_dists[static_cast<std::size_t>(members[m].fresh)];
      w.raw("[");
      dist_fields(w, d, dir_text(d));
      w.raw("]");
    }
  }
  w.raw("\t],\"entry_points\":[");
  for (std::size_t m = 0; m < members.size(); ++m) {
    if (members[m].old_local >= 0) {
      const auto i = static_cast<std::size_t>(members[m].old_local);
      for (std::size_t r = ep_begin[i]; r < ep_begin[i + 1]; ++r) {
        std::uint64_t k = 0;
        std::size_t after = 0;
        const std::string_view row = row_at(text, tabs, ep_first + r);
        if (!leading_number(row, k, after)) return false;  // (each was read above)
        w.raw(count == 0 ? "\t[" : ",\t[");
        w.number(m);
        w.raw(row.substr(after));
        ++count;
      }
    } else {
      for (const EntryPoint& ep : fresh_eps) {
        if (ep.dist - fresh_dists.data() != members[m].fresh) continue;
        w.raw(count == 0 ? "\t[" : ",\t[");
        w.number(m);
        w.raw(",");
        w.bytes(ep.name);
        w.raw(",");
        w.bytes(ep.value);
        w.raw("]");
        ++count;
      }
    }
  }
  w.raw("\t]}\n");
  if (count == 0) return true;  // the group is gone
  add_section("group:" + group, count).pieces.put(out);
  for (const Member& m : members) m_members.push_back(static_cast<std::uint64_t>(m.number));
  return true;
}

bool Splice::dists_section() {
  const auto fresh = m_fresh->distributions();
  Pieces& out = add_section("dists", m_new.size()).pieces;
  std::string row;
  out.put("[");
  for (std::size_t n = 0; n < m_new.size(); ++n) {
    out.put(n == 0 ? "\t" : ",\t");
    const NewDist& d = m_new[n];
    if (d.read < 0) {
      out.copy(row_at(m_dists_text, m_dists_tabs, static_cast<std::size_t>(d.old)));
      continue;
    }
    const Distribution& f = fresh[static_cast<std::size_t>(d.read)];
    row.clear();
    JsonWriter w(row);
    w.raw("[");
    dist_fields(w, f, dir_text(f));
    w.raw(",");
    w.bytes(f.error);
    w.raw("]");
    out.put(row);
  }
  out.put("\t]\n");
  return true;
}

bool Splice::listings_section() {
  Pieces& out = add_section("listings", m_new.size()).pieces;
  std::string name;
  out.put("[");
  for (std::size_t n = 0; n < m_new.size(); ++n) {
    const NewDist& d = m_new[n];
    if (n == 0 || d.sp != m_new[n - 1].sp) {
      out.put(n == 0 ? "[" : "],[");
      put_number(out, d.sp);
    }
    out.put(",\t");
    // Listing k is run k's child: every listing is exactly its distributions.
    if (d.old >= 0) {
      out.copy(name_at(m_listings_text, m_listings_tabs, static_cast<std::size_t>(d.old)));
      continue;
    }
    name.clear();
    JsonWriter(name).bytes(d.child);
    out.put(name);
  }
  out.put(m_new.empty() ? "\t]\n" : "]\t]\n");
  return true;
}

bool Splice::watched_sections() {
  const auto fresh_watched = watched_files(*m_fresh);
  // Both sections are counted once written; placeholders until then.
  add_section("watched", 0);
  add_section("watch_digest", 0);
  Pieces& rows = m_sections[m_sections.size() - 2].pieces;
  Pieces& names = m_sections.back().pieces;
  std::string scratch;  // a fresh row or name
  WatchedDigest digest;
  std::size_t i = 0;  // the new file number
  std::int64_t run_sp = -1;
  auto name_run = [&](std::uint32_t sp) {
    if (static_cast<std::int64_t>(sp) == run_sp) return;
    names.put(run_sp < 0 ? "[" : "],[");
    put_number(names, sp);
    run_sp = sp;
  };
  // The names decoded, for the answer: offsets into the pool until it is whole.
  NewNames& known = *m_new_names;
  known.pool.reserve(m_digest_text.size());
  std::vector<std::pair<std::uint32_t, std::uint32_t>> spans;  // (sp, end in the pool)
  spans.reserve(m_names.size() + 16);
  auto know = [&](std::uint32_t sp, std::string_view rel) {
    known.pool.append(rel);
    spans.emplace_back(sp, static_cast<std::uint32_t>(known.pool.size()));
  };
  rows.put("[");
  names.put("{\"digest\":\"00000000000000000000000000000000\",\"files\":[");
  for (const NewDist& d : m_new) {
    if (d.read < 0) {
      const Run& r = m_runs[static_cast<std::size_t>(d.old)];
      // Its rows, whole: from after the first one's tab to the last one's end.
      const std::size_t begin = m_watched_tabs[r.first] + 1;
      std::size_t end = m_watched_tabs[r.end];
      if (m_watched_text[end - 1] == ',') --end;
      rows.put(i == 0 ? "\t" : ",\t");
      rows.copy(m_watched_text.substr(begin, end - begin));
      for (std::uint32_t k = r.first; k < r.end; ++k, ++i) {
        digest_add(digest, i, m_seen.stamps[k]);
        name_run(r.sp);
        names.put(",\t");
        names.copy(name_at(m_digest_text, m_digest_tabs, k));
        know(r.sp, m_names[k].rel_path);
      }
      continue;
    }
    const auto f = static_cast<std::size_t>(d.read);
    for (std::uint32_t k = m_fresh_watch_begin[f]; k < m_fresh_watch_begin[f + 1]; ++k, ++i) {
      rows.put(i == 0 ? "\t" : ",\t");
      scratch.clear();
      JsonWriter sw(scratch);
      watched_row(sw, fresh_watched[k]);
      rows.put(scratch);
      digest_add(digest, i, fresh_watched[k].stamp);
      name_run(fresh_watched[k].search_path);
      names.put(",\t");
      scratch.clear();
      JsonWriter(scratch).bytes(fresh_watched[k].rel_path);
      names.put(scratch);
      know(fresh_watched[k].search_path, fresh_watched[k].rel_path);
    }
  }
  known.names.reserve(spans.size());
  std::uint32_t begin = 0;
  for (const auto& [sp, end] : spans) {
    known.names.push_back(WatchedName{std::string_view(known.pool).substr(begin, end - begin), sp});
    begin = end;
  }
  m_new_digest = digest;
  rows.put("\t]\n");
  names.put(i == 0 ? "\t]}\n" : "]\t]}\n");
  char hex[32];
  put_hex16(hex, digest.hi);
  put_hex16(hex + 16, digest.lo);
  std::memcpy(names.own_at(11), hex, 32);  // after {"digest":", the section's first own bytes
  m_sections[m_sections.size() - 2].record.count = i;
  m_sections.back().record.count = i;
  return true;
}

bool Splice::write_and_answer(Refreshed& out) {
  std::size_t offset = 0;
  std::vector<std::vector<std::string_view>> views;
  views.reserve(m_sections.size());
  for (NewSection& s : m_sections) {
    views.push_back(s.pieces.views());
    if (!s.hashed) {
      s.record.length = s.pieces.size();
      s.record.hash = body_hash(views.back());
    }
    s.record.offset = offset;
    offset += s.record.length;
  }
  std::vector<SectionRecord> records;
  records.reserve(m_sections.size());
  for (const NewSection& s : m_sections) records.push_back(s.record);
  HeadInput in;
  in.key = &m_key;
  in.scanned_at = m_now;
  in.paths = m_paths;
  in.stamps = m_stamps;
  in.listed = m_listed;
  in.first_error = m_first_error;
  const std::string head = head_line(in, records);
  std::vector<std::string_view> parts;
  parts.reserve(m_sections.size() * 2 + 1);
  parts.push_back(head);
  for (const auto& v : views) parts.insert(parts.end(), v.begin(), v.end());
  if (!make_safe_dir(dir_name(m_path))) return false;
  Fd written(-1);
  if (!write_atomic(m_path, parts, 0600, &written.fd)) return false;
  // The answer, read back from what was written, as a hit reads it.
  ReadExpectations expect;
  expect.key = &m_key;
  expect.groups = m_options.groups;
  expect.watched = true;  // as a hit reads it: the index can be checked again later
  expect.known_digest = &m_new_digest;  // the names just written, not parsed again
  expect.known_names = m_new_names->names;
  expect.known_owner = m_new_names;
  auto index = read_index_fd(written.fd, m_path, expect);
  if (!index) return false;
  out.index = std::make_shared<const Index>(std::move(index.value()));
  out.written = true;
  return true;
}

std::optional<Refreshed> Splice::run(int fd) {
  profile::Span span(profile::Phase::total, "refresh by splice");
  m_now = coarse_now_ns();  // before the first stat of this refresh
  m_old_scan = scanned_at_ns(m_checked);
  if (!runs() || !changed_paths()) return std::nullopt;
  ReadExpectations expect;
  expect.key = &m_key;
  expect.raw = &m_raw;
  expect.map_file = cache_files_mapped();
  if (!read_index_fd(fd, m_path, expect)) return std::nullopt;
  // The four sections every file ends with, checked, and their rows found.
  const std::size_t n = m_raw.sections.size();
  if (n < 4) return std::nullopt;
  const RawSection* tail[4] = {&m_raw.sections[n - 4], &m_raw.sections[n - 3], &m_raw.sections[n - 2],
                               &m_raw.sections[n - 1]};
  std::string_view* texts[4] = {&m_dists_text, &m_listings_text, &m_watched_text, &m_digest_text};
  std::vector<std::uint32_t>* tabs[4] = {&m_dists_tabs, &m_listings_tabs, &m_watched_tabs, &m_digest_tabs};
  const char* names[4] = {"dists", "listings", "watched", "watch_digest"};
  for (int s = 0; s < 4; ++s) {
    if (tail[s]->name != names[s] || !checked_text(*tail[s], *texts[s])) return std::nullopt;
    *tabs[s] = tabs_of(*texts[s]);
    if (tabs[s]->size() != tail[s]->count + 1) return std::nullopt;
  }
  if (m_dists_tabs.size() != m_runs.size() + 1 || m_watched_tabs.size() != m_names.size() + 1 ||
      m_digest_tabs.size() != m_names.size() + 1) {
    return std::nullopt;
  }
  // The group sections come first, then their numbers.
  if (n < 5) return std::nullopt;
  m_old_groups = n - 5;
  std::string_view numbers_text;
  if (m_raw.sections[n - 5].name != "numbers" || !checked_text(m_raw.sections[n - 5], numbers_text) ||
      !number_arrays(numbers_text, m_old_numbers, m_old_numbers_at) ||
      m_old_numbers_at.size() != m_old_groups + 1) {
    return std::nullopt;
  }
  for (std::size_t k = 0; k < m_old_groups; ++k) {
    if (m_raw.sections[k].name.rfind("group:", 0) != 0) return std::nullopt;
  }
  if (!changed_files() || !new_order() || !digest_holds() || !read_new() || !first_error() || !group_sections() ||
      !dists_section() || !listings_section() || !watched_sections()) {
    return std::nullopt;
  }
  Refreshed out;
  if (!write_and_answer(out)) return std::nullopt;
  const RefreshStats stats{m_paths.size(), m_paths_listed, m_new.size(), m_places.size()};
  out.summary = refresh_summary(stats) + ", the rest of the file copied";
  return out;
}

}  // namespace

std::optional<Refreshed> splice_refresh(int fd, const std::string& path, const CacheKey& key,
                                        const CacheOptions& options, const WatchedSeen& seen,
                                        const Index& checked) {
  if (options.validation != Validation::full) return std::nullopt;
  Splice s(path, key, options, seen, checked);
  return s.run(fd);
}

}  // namespace epload::detail
