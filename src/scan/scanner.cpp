// scanner.cpp — importlib.metadata.entry_points() discovery, natively.
//
// What importlib does (CPython 3.11; MetadataPathFinder, FastPath, Lookup,
// PathDistribution, unique_everseen):
//
//   for path in sys.path:                         in order
//       children = os.listdir(path or '.')        raw readdir order
//                  or the zip's top-level names   (or nothing)
//       Lookup: *.dist-info / *.egg-info (any case) go to infos[key], where
//               key = normalize(low.rpartition('.')[0].partition('-')[0]);
//               'egg-info' inside a *.egg path goes to eggs
//       yield infos grouped by key in first-seen key order, then eggs
//   for dist in unique_everseen(dists, key=_normalized_name):
//       yield from parse(dist.read_text('entry_points.txt'))
//
// _normalized_name comes from the file name when its extension is exactly
// ".dist-info" / ".egg-info", else from metadata['Name'] (METADATA, else
// PKG-INFO, else the path itself read as a file), which raises TypeError when
// there is no Name.  A shadowed distribution is never read further.
//
// Python 3.12 and 3.13 discover and de-duplicate the same way; their
// entry_points() only stops sorting by group when no selection is given
// (see metadata.cpp).
//
// The scan runs in three phases:
//   1. list every search path (getdents64 on one directory fd per path),
//      classify and group the children, and de-duplicate in discovery order.
//      Only distributions named by their metadata are read here (rare).
//   2. read each surviving distribution's entry_points.txt (and, for those
//      with entry points, METADATA for the name and version)
//      and parse it.  Distributions are independent here, so a large scan
//      shares them, in chunks, between two threads; each chunk keeps its
//      own results.
//   3. hand everything to IndexBuilder in discovery order.
//
// Why it is fast: one openat/fstat/read/close per entry_points.txt, relative
// to an open directory fd (no path walks from /), into a reused buffer; the
// parser returns views, and the only per-entry copies are the IndexBuilder's.
// Distributions without entry points and a `name-version.dist-info` stem
// take name and version from the stem, which the binary distribution format
// (PEP 427/491) guarantees equal to METADATA's up to normalisation, so
// METADATA is not read for them; a stem the format could not have written
// (a '-' or '_' in the version part) is not trusted.
#include "epload/scanner.hpp"

#include <fcntl.h>     // open, O_DIRECTORY
#include <sys/resource.h>  // getrlimit
#include <sys/stat.h>  // fstat
#include <unistd.h>    // close

#include <algorithm>  // std::min
#include <atomic>     // phase 2 chunk counter
#include <cerrno>
#include <cstring>  // strerror
#include <memory>   // the previous index of a refresh
#include <vector>

#include "epload/metadata.hpp"
#include "epload/profile.hpp"
#include "parallel.hpp"
#include "scan_list.hpp"
#include "scan_lookup.hpp"
#include "scan_meta.hpp"
#include "index_hooks.hpp"
#include "scan_read.hpp"
#include "scan_reuse.hpp"
#include "scan_seen.hpp"
#include "scan_zip.hpp"
#include "stamp.hpp"
#include "test_slowdown.hpp"
#include "index_builder.hpp"

namespace epload {

namespace {

using detail::append;
using detail::FileRead;
using detail::FileReader;
using detail::io_message;
using detail::join;
using detail::MetaInfo;
using detail::ReadStatus;
using detail::Slice;
using detail::Watch;

// One distribution that survived de-duplication.
struct Kept {
  std::uint32_t cand;  // index into candidates
  MetaInfo meta;       // filled in phase 1 when the name came from metadata
};

// Phase 2 output of one chunk of distributions.
struct DistOut {
  Slice name, version, error;
  std::uint32_t entries_begin = 0, entries_end = 0;
  std::uint32_t watch_begin = 0, watch_end = 0;
};
struct EntryOut {
  Slice group, name, value;
};
struct WorkerOut {
  std::string pool;
  std::vector<DistOut> dists;
  std::vector<EntryOut> entries;
  std::vector<Watch> watches;
  std::string stop;       // the first read of the chunk that failed for want of resources
  std::string io_failed;  // the first OSError of the chunk (the answer holds it; not cached)
  std::size_t reused = 0;  // distributions taken from a previous index
};

constexpr std::string_view k_entry_points = "/entry_points.txt";

class Scan {
 public:
  explicit Scan(std::span<const std::string> paths, const detail::ScanReuse* reuse = nullptr)
      : m_paths(paths), m_reuse(reuse) {
    if (reuse != nullptr) m_prev = std::make_unique<detail::PreviousParts>(*reuse);
  }
  ~Scan() {
    for (const int fd : m_dirfds) {
      if (fd >= 0) ::close(fd);
    }
  }

  Result<Index> run(std::int64_t scanned_at, detail::RefreshStats* stats = nullptr);

 private:
  Result<void> list_paths();
  void deduplicate();
  void read_metadata(const detail::Candidate& c, MetaInfo& meta, FileReader& reader,
                     std::string& pool, std::vector<Watch>& watches, std::string& rel) const {
    detail::read_metadata(m_dirfds[c.path], c.path, m_paths[c.path], child_of(c), meta, reader,
                          pool, watches, rel);
  }
  void process(std::size_t begin, std::size_t end, WorkerOut& out, FileReader& reader);
  /// Phase 2, one distribution's entry points: reads and parses its
  /// entry_points.txt into `out` (a watch, the entries; a failure in `d` or
  /// `out`).  True when it has entry points.  `rel`, `file` and `parsed` are
  /// buffers reused from one distribution to the next.
  bool read_entries(const detail::Candidate& c, DistOut& d, WorkerOut& out, FileReader& reader,
                    std::string& rel, std::string& file, std::vector<ParsedEntry>& parsed) const;
  /// Phase 2 of a refresh: takes distribution `kept` from the previous index
  /// into `d` and `out` when it is there, unchanged (scan_reuse.hpp).
  bool reuse(const Kept& kept, DistOut& d, WorkerOut& out, std::string& scratch) const;
  /// What a refresh listed and read, into `stats`.
  void count(const std::vector<WorkerOut>& outs, detail::RefreshStats& stats) const {
    stats.paths = m_paths.size();
    stats.paths_listed = 0;
    for (std::size_t i = 0; i < m_paths.size(); ++i) {
      if (m_reuse == nullptr || !m_reuse->path_unchanged[i]) ++stats.paths_listed;
    }
    stats.dists = stats.dists_read = m_kept.size();
    for (const WorkerOut& o : outs) stats.dists_read -= o.reused;
  }
  /// Phase 1 of a refresh: the stored listing of unchanged path `i`.
  void reuse_listing(std::uint32_t i, std::size_t& cursor, std::size_t& kept_fds, std::size_t fd_budget);
  /// Phase 2, one distribution's name and version, into `d`.
  void name_distribution(const Kept& kept, bool has_entries, DistOut& d, WorkerOut& out,
                         FileReader& reader, std::string& rel) const;
  std::string_view child_of(const detail::Candidate& c) const { return m_listing.name(c); }

  std::span<const std::string> m_paths;
  const detail::ScanReuse* m_reuse = nullptr;     // a refresh: what it may reuse
  std::unique_ptr<detail::PreviousParts> m_prev;  // a refresh: the previous index by place
  IndexBuilder m_builder;
  std::vector<int> m_dirfds;  // one per search path; -1: not listed, or read by whole paths
  detail::Listing m_listing;
  std::vector<Kept> m_kept;
  std::string m_meta_pool;  // phase 1 metadata strings (MetaInfo spans)
  std::vector<Watch> m_meta_watches;  // phase 1 metadata files
  std::string m_stop, m_io_failed;    // phase 1's, as WorkerOut's
};

/// Records a metadata read's failure where the scan looks for it.
void note_failure(const MetaInfo& meta, const std::string& pool, std::string& stop, std::string& io_failed) {
  if (meta.exhausted != 0 && stop.empty()) stop = meta.error.in(pool);
  if (meta.io_failed && io_failed.empty()) io_failed = meta.error.in(pool);
}

/// True when METADATA's Name and Version are the ones `stem` spells (names
/// compared normalized: `Jinja2` in `jinja2-3.1.2.dist-info`).
bool agrees_with_stem(std::string_view name, std::string_view version, const detail::StemParts& stem) {
  if (version != stem.version) return false;
  std::string a, b;
  normalize_name(name, a);
  normalize_name(stem.name, b);
  return a == b;
}

/// True when open() of a search path failed for a reason the path's own
/// stamp records (absent, not a directory, permissions: a change to any of
/// them changes the stamp), so "lists nothing" may be cached.
bool answers_about_path(int err) {
  return err == ENOENT || err == ENOTDIR || err == EACCES || err == EPERM || err == ELOOP ||
         err == ENAMETOOLONG;
}

Result<void> Scan::list_paths() {
  std::string zip_match;
  // Directory descriptors held for phase 2: at most a quarter of the
  // process's open-file limit, and no more than 256 (the host has its own).
  std::size_t fd_budget = 256;
  if (struct rlimit lim; ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    fd_budget = std::min<std::size_t>(fd_budget, static_cast<std::size_t>(lim.rlim_cur / 4));
  }
  std::size_t kept_fds = 0;
  std::size_t cursor = 0;  // into the previous index's listings (a refresh)
  for (std::uint32_t i = 0; i < m_paths.size(); ++i) {
    if (m_reuse != nullptr && m_reuse->path_unchanged[i]) {
      reuse_listing(i, cursor, kept_fds, fd_budget);
      continue;
    }
    const std::string& path = m_paths[i];
    const char* p = path.empty() ? "." : path.c_str();
    int fd = -1;
    FileStamp stamp;
    // os.listdir raises ValueError on an embedded NUL; so does zipfile.
    if (path.find('\0') == std::string::npos) {
      profile::count(profile::Counter::open);
      profile::count(profile::Counter::stat);  // the fstat or stat below
      fd = ::open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0 && detail::exhausted(errno)) {
        // Not an answer about the path: the scan cannot be exact.
        return Error{Errc::io, path + ": cannot open the search path: " + std::strerror(errno) + "; " +
                                   detail::exhausted_advice(errno) + "."};
      }
      if (fd < 0 && !answers_about_path(errno) && m_io_failed.empty()) {
        // An EIO, say: the path lists nothing now, with its stamp the same.
        m_io_failed = path + ": cannot open the search path: " + std::strerror(errno);
      }
      struct stat st;
      if (fd >= 0 ? ::fstat(fd, &st) == 0 : ::stat(p, &st) == 0) stamp = detail::stamp_of(st);
    }
    m_builder.add_search_path(path, stamp);
    m_dirfds.push_back(fd);
    const bool egg = detail::base_is_egg(path);
    if (fd < 0) {
      // Not listable: importlib tries it as a zip archive.
      if (!stamp.exists() || S_ISDIR(stamp.mode)) continue;
      const int zfd = ::open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
      if (zfd < 0) continue;
      const detail::ZipVerdict v = detail::probe_zip(zfd, egg, zip_match);
      ::close(zfd);
      if (v == detail::ZipVerdict::has_distributions) {
        return Error{Errc::unsupported,
                     path + ": zip archive on the search path holds distribution metadata ('" +
                         zip_match + "'); the native scanner does not read distributions "
                         "inside zip archives. Use importlib.metadata for this path list, or "
                         "install the distribution unzipped."};
      }
      continue;
    }
    const std::uint32_t before = m_listing.size();
    if (const int err = m_listing.add_directory(i, fd, egg); err != 0) {
      // The path lists nothing, as in importlib (os.listdir raised).  But
      // the failure says nothing about the directory, whose stamp stays
      // the same: that answer must not be cached, and one for want of
      // resources is no answer at all.
      if (detail::exhausted(err)) {
        return Error{Errc::io, path + ": cannot list the search path: " + std::strerror(err) + "; " +
                                   detail::exhausted_advice(err) + "."};
      }
      if (m_io_failed.empty()) m_io_failed = path + ": cannot list the search path: " + std::strerror(err);
    }
    if (m_listing.size() == before || kept_fds >= fd_budget) {
      // Nothing to read here later, or enough descriptors held already: give
      // it back now.  A path list of thousands of directories that each hold
      // a distribution (some build systems lay environments out so) is then
      // read by whole paths past the first fd_budget, instead of running
      // the process out of descriptors.
      ::close(fd);
      m_dirfds.back() = -1;
    } else {
      ++kept_fds;
    }
  }
  return {};
}

void Scan::reuse_listing(std::uint32_t i, std::size_t& cursor, std::size_t& kept_fds, std::size_t fd_budget) {
  // Its stamp was checked (the same, not racy) just before this scan began.
  const Index& prev = m_prev->index();
  m_builder.add_search_path(m_paths[i], search_path_stamps(prev)[i]);
  const auto listed = detail::IndexBuilderHooks::listed(prev);
  while (cursor < listed.size() && listed[cursor].search_path < i) ++cursor;
  const std::size_t begin = cursor;
  while (cursor < listed.size() && listed[cursor].search_path == i) ++cursor;
  // Its distributions' files are stat'ed (and new ones read) relative to a
  // descriptor, as in a scan; without one (none to be had), by whole paths.
  int fd = -1;
  if (cursor != begin && kept_fds < fd_budget) {
    fd = ::open(m_paths[i].empty() ? "." : m_paths[i].c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) ++kept_fds;
  }
  m_dirfds.push_back(fd);
  m_listing.add_stored(i, listed.subspan(begin, cursor - begin), detail::base_is_egg(m_paths[i]));
}

// Phase 1b: unique_everseen over _normalized_name, in discovery order.
void Scan::deduplicate() {
  detail::SeenSet seen;
  seen.reserve(m_listing.size());
  FileReader reader;
  std::string key, scratch;
  m_kept.reserve(m_listing.size());
  for (std::uint32_t ci = 0; ci < m_listing.size(); ++ci) {
    const detail::Candidate& c = m_listing[ci];
    key.clear();
    Kept kept{ci, {}};
    if (!detail::stem_key(child_of(c), key)) {
      read_metadata(c, kept.meta, reader, m_meta_pool, m_meta_watches, scratch);
      note_failure(kept.meta, m_meta_pool, m_stop, m_io_failed);
      if (kept.meta.error.len != 0 || !kept.meta.has_name) {
        if (kept.meta.error.len == 0) {
          join(scratch, m_paths[c.path], child_of(c));
          kept.meta.error = append(
              m_meta_pool, scratch +
                               ": no 'Name' in METADATA, PKG-INFO or the file itself, so "
                               "importlib.metadata cannot name this distribution and raises "
                               "TypeError. Reinstall the distribution or remove this directory.");
        }
        m_kept.push_back(kept);  // carries the error; names nothing
        continue;
      }
      normalize_name(kept.meta.name.in(m_meta_pool), key);
    }
    if (seen.insert(key)) m_kept.push_back(kept);
  }
}

// Phase 2 for kept distributions [begin, end).
void Scan::process(std::size_t begin, std::size_t end, WorkerOut& out, FileReader& reader) {
  std::string rel, file;
  std::vector<ParsedEntry> parsed;
  // Sized for a typical distribution (about 1.5 entry points, 200 bytes of
  // text), so the pools rarely grow and re-copy mid-scan.
  const std::size_t count = end - begin;
  out.dists.reserve(count);
  out.watches.reserve(count + count / 8);
  out.entries.reserve(count * 2);
  out.pool.reserve(count * 256);
  for (std::size_t k = begin; k < end; ++k) {
    const Kept& kept = m_kept[k];
    DistOut d;
    d.entries_begin = d.entries_end = static_cast<std::uint32_t>(out.entries.size());
    d.watch_begin = static_cast<std::uint32_t>(out.watches.size());
    if (kept.meta.error.len != 0) {  // phase 1 already failed: importlib stops there
      d.error = append(out.pool, kept.meta.error.in(m_meta_pool));
      d.watch_end = d.watch_begin;
      out.dists.push_back(d);
      continue;
    }
    if (m_prev && reuse(kept, d, out, file)) {
      d.entries_end = static_cast<std::uint32_t>(out.entries.size());
      d.watch_end = static_cast<std::uint32_t>(out.watches.size());
      out.dists.push_back(d);
      ++out.reused;
      continue;
    }
    const bool has_entries = read_entries(m_listing[kept.cand], d, out, reader, rel, file, parsed);
    d.entries_end = static_cast<std::uint32_t>(out.entries.size());
    name_distribution(kept, has_entries, d, out, reader, rel);
    d.watch_end = static_cast<std::uint32_t>(out.watches.size());
    out.dists.push_back(d);
  }
}

bool Scan::reuse(const Kept& kept, DistOut& d, WorkerOut& out, std::string& scratch) const {
  const detail::Candidate& c = m_listing[kept.cand];
  const std::int64_t found = m_prev->find(c.path, child_of(c));
  if (found < 0) return false;
  const auto p = static_cast<std::uint32_t>(found);
  if (!m_prev->unchanged(p, m_dirfds[c.path], m_paths[c.path], scratch)) return false;
  const Index& prev = m_prev->index();
  const Distribution& dist = prev.distributions()[p];
  if (kept.meta.read) {  // named by METADATA in phase 1, just now
    d.name = append(out.pool, kept.meta.name.in(m_meta_pool));
    d.version = append(out.pool, kept.meta.version.in(m_meta_pool));
  } else {
    d.name = append(out.pool, dist.name);
    d.version = append(out.pool, dist.version);
  }
  if (!dist.error.empty()) d.error = append(out.pool, dist.error);
  const auto eps = prev.entry_points();
  for (const std::uint32_t k : m_prev->entries(p)) {
    // Grouped, not in file order: build() sorts by group stably, and each
    // group keeps this distribution's file order, so the answer is the same.
    out.entries.push_back({append(out.pool, eps[k].group), append(out.pool, eps[k].name), append(out.pool, eps[k].value)});
  }
  auto watches = m_prev->watches(p);
  // A name read in phase 1 was watched there, afresh, before every
  // distribution's own files: only the last (entry_points.txt) is phase 2's.
  if (kept.meta.read && !watches.empty()) watches = watches.last(1);
  const auto watched = watched_files(prev);
  for (const std::uint32_t k : watches) {
    out.watches.push_back({c.path, append(out.pool, watched[k].rel_path), watched[k].stamp});
  }
  return true;
}

bool Scan::read_entries(const detail::Candidate& c, DistOut& d, WorkerOut& out, FileReader& reader,
                        std::string& rel, std::string& file, std::vector<ParsedEntry>& parsed) const {
  const std::string_view child = child_of(c);
  rel.assign(child).append(k_entry_points);
  const int dirfd = m_dirfds[c.path];
  const FileRead r = [&] {
    profile::Span span(profile::Phase::read, rel);
    return detail::read_in(reader, dirfd, m_paths[c.path], rel, file);
  }();
  parsed.clear();
  if (r.status == ReadStatus::absent && r.error == ENOTDIR) {
    // The metadata path is a file (an egg-info file is its own PKG-INFO).
    out.watches.push_back({c.path, append(out.pool, child),
                           detail::stamp_in(dirfd, m_paths[c.path], std::string(child), file)});
  } else {
    out.watches.push_back({c.path, append(out.pool, rel), r.stamp});
  }
  if (r.status == ReadStatus::absent) return false;
  join(file, m_paths[c.path], rel);
  if (r.status == ReadStatus::failed && detail::exhausted(r.error)) {
    if (out.stop.empty()) out.stop = detail::exhausted_message(file, r.error);
    return false;
  }
  if (r.status == ReadStatus::failed) {
    d.error = append(out.pool, io_message(file, r.error));
    if (out.io_failed.empty()) out.io_failed = d.error.in(out.pool);
    return false;
  }
  const std::uint32_t base = static_cast<std::uint32_t>(out.pool.size());
  out.pool.append(r.text);  // entries become spans of this copy
  Result<void> res = [&] {
    profile::Span span(profile::Phase::parse, rel);
    return parse_entry_points(r.text, file, parsed);
  }();
  if (!res) {
    out.pool.resize(base);
    parsed.clear();
    d.error = append(out.pool, res.error().message);
  }
  auto span_of = [&](std::string_view v) {
    return Slice{base + static_cast<std::uint32_t>(v.data() - r.text.data()), static_cast<std::uint32_t>(v.size())};
  };
  for (const ParsedEntry& e : parsed) {
    out.entries.push_back({span_of(e.group), span_of(e.name), span_of(e.value)});
  }
  return !parsed.empty();
}

void Scan::name_distribution(const Kept& kept, bool has_entries, DistOut& d, WorkerOut& out,
                             FileReader& reader, std::string& rel) const {
  // Name and version: with entry points to attribute, the metadata's
  // (`ep.dist.name` is METADATA's Name, spelled as written: `Jinja2` in
  // `jinja2-3.1.2.dist-info`; read in phase 1 already when the stem could
  // not name the distribution); without, the stem's when it is
  // `name-version.dist-info` (nothing shows it but `epload index`), so
  // METADATA is read only for distributions that have entry points.  A
  // metadata failure here is not an error: entry_points() never reads it.
  const detail::Candidate& c = m_listing[kept.cand];
  const detail::StemParts stem = detail::split_stem(child_of(c));
  if (kept.meta.read) {  // phase 1 read it (the name came from it)
    d.name = append(out.pool, kept.meta.name.in(m_meta_pool));
    d.version = append(out.pool, kept.meta.version.in(m_meta_pool));
  } else if (!has_entries && detail::stem_names_the_metadata(stem)) {
    d.name = append(out.pool, stem.name);
    d.version = append(out.pool, stem.version);
  } else if (has_entries) {
    MetaInfo meta;
    const std::size_t watches_before = out.watches.size();
    read_metadata(c, meta, reader, out.pool, out.watches, rel);
    note_failure(meta, out.pool, out.stop, out.io_failed);
    const bool ok = meta.error.len == 0;
    // Where the stem names the distribution and METADATA says the same,
    // METADATA is not watched: `full` validation would stat twice the
    // files, and the Name changes only with a reinstall, which replaces the
    // directory (a change of its search path).  Only an in-place edit of
    // Name is not seen.  A read that disagrees with the stem (no file, a
    // failure, no Name, another name or version: a scan racing a rename or
    // an install may see any of these) keeps its watches, so that neither
    // validation nor a refresh trusts it once the file is there.
    if (ok && meta.has_name && detail::stem_names_the_metadata(stem) &&
        agrees_with_stem(meta.name.in(out.pool), meta.version.in(out.pool), stem)) {
      out.watches.resize(watches_before);
    }
    // importlib's ep.dist.name is METADATA's Name: None without one, an
    // error when the file cannot be read; both are reported as "".
    d.name = ok && meta.has_name ? meta.name : Slice{};
    if (ok) d.version = meta.version;
  } else {
    d.name = append(out.pool, stem.name);
  }
}

Result<Index> Scan::run(std::int64_t scanned_at, detail::RefreshStats* stats) {
  m_builder.set_scanned_at(scanned_at);  // before the first stat
  if (auto r = list_paths(); !r) return r.error();
  deduplicate();
  if (!m_stop.empty()) return Error{Errc::io, m_stop};

  // Phase 2, on two threads when there is enough to share (thread creation
  // costs tens of microseconds, a distribution a few).  The threads take
  // fixed-size chunks from a shared counter rather than halves, so when the
  // other core is busy the calling thread simply does more of the chunks.
  constexpr std::size_t k_chunk = 128;
  const std::size_t n = m_kept.size();
  const std::size_t chunks = (n + k_chunk - 1) / k_chunk;
  std::vector<WorkerOut> outs(chunks);
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    FileReader reader;
    for (std::size_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
      process(c * k_chunk, std::min(n, (c + 1) * k_chunk), outs[c], reader);
    }
  };
  // With one CPU, or no thread to be had, the calling thread does it all.
  if (chunks >= 2) detail::run_on_two_cpus(worker);
  else worker();

  // A read that failed for want of resources is no answer (see exhausted()):
  // the first in discovery order is the error.  The builder's tables are
  // sized once (grown by doubling, they touched and copied about twice the
  // memory: a few hundred page faults at 6,000 distributions).
  std::string io_failed = m_io_failed;
  std::size_t total_entries = 0, total_watches = m_meta_watches.size();
  for (const WorkerOut& o : outs) {
    if (!o.stop.empty()) return Error{Errc::io, o.stop};
    if (io_failed.empty()) io_failed = o.io_failed;
    total_entries += o.entries.size();
    total_watches += o.watches.size();
  }
  if (!io_failed.empty()) m_builder.set_not_cacheable(io_failed);
  m_builder.reserve(n, total_entries, total_watches);

  if (stats != nullptr) count(outs, *stats);

  // Phase 3: into the builder, in discovery order: the listings (what a
  // refresh reuses for the paths that did not change), then the rest.
  for (std::uint32_t ci = 0; ci < m_listing.size(); ++ci) {
    detail::IndexBuilderHooks::add_listed(m_builder, m_listing[ci].path, child_of(m_listing[ci]));
  }
  for (const Watch& w : m_meta_watches) {
    m_builder.add_watched_file(w.path, w.rel.in(m_meta_pool), w.stamp);
  }
  std::string dir;
  for (std::size_t k = 0; k < n; ++k) {
    const WorkerOut& o = outs[k / k_chunk];
    const DistOut& d = o.dists[k % k_chunk];
    const detail::Candidate& c = m_listing[m_kept[k].cand];
    join(dir, m_paths[c.path], child_of(c));
    const std::uint32_t id = m_builder.add_distribution(d.name.in(o.pool), d.version.in(o.pool),
                                                        dir, c.path, d.error.in(o.pool));
    for (std::uint32_t e = d.entries_begin; e < d.entries_end; ++e) {
      const EntryOut& eo = o.entries[e];
      m_builder.add_entry_point(id, eo.group.in(o.pool), eo.name.in(o.pool), eo.value.in(o.pool));
    }
    for (std::uint32_t w = d.watch_begin; w < d.watch_end; ++w) {
      const Watch& wo = o.watches[w];
      m_builder.add_watched_file(wo.path, wo.rel.in(o.pool), wo.stamp);
    }
  }
  return m_builder.build();
}

}  // namespace

Result<Index> scan(std::span<const std::string> search_paths) {
  profile::Span span(profile::Phase::scan);
  profile::test_slowdown(profile::SlowPoint::scan);
  Scan s(search_paths);
  return s.run(detail::coarse_now_ns());
}

namespace detail {

Result<Index> scan_refreshing(std::span<const std::string> search_paths, const ScanReuse& reuse,
                              std::int64_t scanned_at, RefreshStats* stats) {
  profile::Span span(profile::Phase::scan, "refresh");
  Scan s(search_paths, &reuse);
  return s.run(scanned_at, stats);
}

}  // namespace detail

}  // namespace epload
