// cache.cpp — the reader of the serialized index: the sections of a file,
// and the complete and partial loads built from them.
//
// The format (JSON Lines: a head, then sections whose offsets, lengths and
// hashes the head records) is described in docs/cache-format.md.  The
// reader is three files: cache_sections.cpp gets the bytes (pread, or a
// private mapping for the CLI) and checks the table of sections;
// cache_read_head.cpp parses JSON values and line 1; this file parses the
// sections a request needs and builds the Index.  Each document is parsed
// with simdjson On-Demand over exactly its bytes (the padding simdjson
// reads past the end only has to be readable memory), straight into
// IndexBuilder; no DOM is built, and strings without escapes are read in
// place (json_text.cpp).  Nothing may follow a line's document.  Any defect
// is an Errc::cache error naming the file, the section and the problem; the
// caller rebuilds.  A group section's buffer is handed to the Index
// (IndexBuilderHooks::borrow, then keep_bytes), so its names and values
// stay views into it; only escaped strings are copied into the arena.
//
// Why it is fast: what a query costs is its share of the file, not the number
// of installed distributions.  With 6,000 distributions (1,000 of them in
// torch.backends, 2.6 MB in all) a one-group read under `paths` validation
// reads the head (28 KB: 416 sections) and the group's section (140 KB) and
// parses only those: ~0.2 ms warm, ~0.6 ms as the first read of a process
// (page faults of fresh memory are most of the difference), against ~5 ms to
// read and parse the whole file.  `full` validation adds the names in
// "watch_digest" (~300 KB; ~0.8 ms, against ~1.5 ms for the stamped "watched"
// section), and its ~6,200 stats; the names are read first, kept in their
// buffer (not copied), and stat'ed on the other CPU by a helper created
// before the head was parsed, each chunk as soon as it is written, while
// the rest is parsed (ReadExpectations::early_check).  A one-group read adds
// the group's rows straight to the IndexBuilder; several groups are
// collected and merged in global discovery order.  One simdjson parser
// allocation serves every line read (a parser grows by reallocating, and
// every fresh page costs a fault).
//
// The writer is cache_write.cpp; the hash and the string decoder it shares
// with this reader are in json_text.cpp.
#include <sys/stat.h>  // fstat

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cache_reader.hpp"
#include "index_builder.hpp"
#include "epload/profile.hpp"

namespace epload::detail {

namespace {

// Smaller files name too few watched files to split their check (each
// distribution takes ~500 bytes of an index; the split starts above 500 files).
constexpr std::uint64_t k_prepare_check_min = 128 * 1024;

}  // namespace

// ---- documents ------------------------------------------------------------

template <class F>
bool Reader::parse_doc(const char* data, std::size_t length, std::size_t capacity, F&& on_root) {
  m_json = std::string_view(data, length);
  od::document doc;
  if (auto e = m_parser.iterate(simdjson::padded_string_view(data, length, capacity)).get(doc)) {
    return fail(e, "JSON");
  }
  if (!on_root(doc)) return false;
  // Nothing may follow the document on its line.
  const char* rest = nullptr;
  if (doc.current_location().get(rest) != simdjson::OUT_OF_BOUNDS) return fail("trailing data");
  return true;
}

template <class F>
bool Reader::parse_section(const Section& s, F&& on_root) {
  m_problem.where = s.name;
  const char* data = nullptr;
  std::size_t capacity = 0;
  if (!m_bytes.fetch(s, data, capacity)) return false;
  if (!parse_doc(data, static_cast<std::size_t>(s.length), capacity, on_root)) return false;
  m_problem.where.clear();
  return true;
}

/// Hands the buffer holding section `s` (already parsed) to the Index:
/// views into it (watched names) then live as long as the Index.  Nothing
/// reads that buffer afterwards.
void Reader::keep_buffer_of(const Section& s) {
  if (BigBuffer b = m_bytes.take_buffer_of(s)) Hooks::keep_bytes(m_builder, std::move(b));
}

// ---- sections -------------------------------------------------------------

bool Reader::fields(Element v, std::string_view what, bool keep, std::span<const Field> fields) {
  return row(std::move(v), what, fields.size(), [&](std::size_t k, od::value xv) {
    const Field& f = fields[k];
    if (f.number != nullptr) return index(xv, f.what, f.bound, *f.number);
    return bytes_or_kept(keep, xv, f.what, *f.scratch, *f.text);
  });
}

bool Reader::dists(od::document& doc) {
  od::array arr;
  if (auto e = doc.get_array().get(arr)) return fail(e, "distributions");
  std::uint64_t n = 0;
  // Its own reader, not fields(): the largest section of a complete read,
  // and 6-9% slower through the table (BENCHMARKS.md, "What the speed machinery buys").
  for (auto x : arr) {
    std::string_view name, version, dir, error;
    std::uint32_t path = 0;
    const bool ok = row(x, "distribution", 5, [&](std::size_t k, od::value xv) {
      switch (k) {
        case 0: return bytes(xv, "distribution name", m_s1, name);
        case 1: return bytes(xv, "distribution version", m_s2, version);
        case 2: return bytes(xv, "distribution dir", m_s3, dir);
        case 3: return index(xv, "distribution search path", m_paths.size(), path);
        default: return bytes(xv, "distribution error", m_s4, error);
      }
    });
    if (!ok) return false;
    if (!error.empty() && m_first_error_seen == std::numeric_limits<std::uint64_t>::max()) m_first_error_seen = n;
    std::string_view joined;
    join_dir(path, dir, joined);
    m_builder.add_distribution(name, version, joined, path, error);
    ++n;
  }
  if (n != m_dist_count) {
    return fail("holds " + std::to_string(n) + " distributions, the head says " + std::to_string(m_dist_count));
  }
  return true;
}

/// A group section.  How its rows are used depends on `mode` (see
/// GroupMode): into the builder at once, or collected into `out` as views
/// into the section's buffer (kept alive by the caller) or into m_owned.
bool Reader::group(od::document& doc, GroupData& out, GroupMode mode) {
  od::object root;
  if (auto e = doc.get_object().get(root)) return fail(e, "group");
  if (mode == GroupMode::collect) {
    out.dists.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(out.section->count, m_dist_count)));
    out.eps.reserve(static_cast<std::size_t>(out.section->count));
  }
  m_numbers.clear();  // the rows' global numbers (complete mode)
  std::size_t dist_rows = 0, ep_rows = 0;
  std::uint32_t last = 0;
  std::size_t k = 0;
  for (auto f : root) {
    std::string_view name;
    if (auto e = f.unescaped_key().get(name)) return fail(e, "group");
    od::array arr;
    if (k == 0 && name == "dists") {
      if (auto e = f.value().get_array().get(arr)) return fail(e, "group distributions");
      for (auto x : arr) {
        if (!group_dist(x, out, mode, dist_rows++, last)) return false;
      }
    } else if (k == 1 && name == "entry_points") {
      if (auto e = f.value().get_array().get(arr)) return fail(e, "entry points");
      for (auto x : arr) {
        if (!group_entry(x, out, mode, dist_rows)) return false;
        ++ep_rows;
      }
    } else {
      return fail("unexpected field \"" + std::string(name) + "\"");
    }
    ++k;
  }
  if (k != 2) return fail("incomplete group section");
  if (ep_rows != out.section->count) {
    return fail("holds " + std::to_string(ep_rows) + " entry points, the head says " +
                std::to_string(out.section->count));
  }
  return true;
}

/// Row `rows` of a group section's distributions (see group()).
bool Reader::group_dist(Element v, GroupData& out, GroupMode mode, std::size_t rows, std::uint32_t& last) {
  GroupDist d;
  const Field row_fields[] = {number_field("group distribution number", m_dist_count, d.global),
                              text_field("distribution name", d.name, m_s1),
                              text_field("distribution version", d.version, m_s2),
                              text_field("distribution dir", d.dir, m_s3),
                              number_field("distribution search path", m_paths.size(), d.path)};
  if (!fields(std::move(v), "group distribution", mode == GroupMode::collect, row_fields)) return false;
  if (rows != 0 && last >= d.global) return fail("group distributions out of order");
  last = d.global;
  if (mode == GroupMode::collect) {
    out.dists.push_back(d);
  } else if (mode == GroupMode::direct) {
    std::string_view joined;
    join_dir(d.path, d.dir, joined);
    m_builder.add_distribution(d.name, d.version, joined, d.path);
  } else {
    m_numbers.push_back(d.global);
  }
  return true;
}

/// A row of a group section's entry points, whose distribution is one of
/// the section's `dist_rows` (see group()).
bool Reader::group_entry(Element v, GroupData& out, GroupMode mode, std::size_t dist_rows) {
  GroupEntry ep;
  const Field row_fields[] = {number_field("entry point distribution", dist_rows, ep.dist),
                              text_field("entry point name", ep.name, m_s1),
                              text_field("entry point value", ep.value, m_s2)};
  if (!fields(std::move(v), "entry point", mode == GroupMode::collect, row_fields)) return false;
  if (mode == GroupMode::collect) {
    out.eps.push_back(ep);
  } else {
    // direct: the builder's distributions are this section's rows;
    // complete: they are all distributions, in global order.
    const std::uint32_t dist = mode == GroupMode::direct ? ep.dist : m_numbers[ep.dist];
    m_builder.add_entry_point(dist, out.section->group, ep.name, ep.value);
  }
  return true;
}

/// A stamped row of "watched".
bool Reader::watched_file(od::value v) {
  std::uint32_t path = 0;
  std::string_view rel;
  FileStamp stamp;
  const bool ok = row(v, "watched file", 8, [&](std::size_t k, od::value xv) {
    if (k == 0) return index(xv, "watched file search path", m_paths.size(), path);
    if (k == 1) return bytes(xv, "watched file path", m_s1, rel);
    return stamp_field(xv, k - 2, "watched file stamp", stamp);
  });
  if (!ok) return false;
  m_builder.add_watched_file(path, rel, stamp);
  digest_add(m_stamped_digest, m_stamped_rows++, stamp);
  return true;
}

/// One run [search path, name, name, ...] of "listings" or of
/// "watch_digest"'s files (`what` in messages): on_path(path) for its head,
/// on_name(path, name) for each name after it.
template <class OnPath, class OnName>
bool Reader::path_run(od::value v, const char* what, const char* path_what, const char* name_what,
                      OnPath&& on_path, OnName&& on_name) {
  od::array arr;
  if (auto e = v.get_array().get(arr)) return fail(e, what);
  std::uint32_t path = 0;
  std::size_t k = 0;
  for (auto x : arr) {
    od::value xv;
    if (auto e = x.get(xv)) return fail(e, what);
    if (k++ == 0) {
      if (!index(xv, path_what, m_paths.size(), path) || !on_path(path)) return false;
      continue;
    }
    std::string_view name;
    if (!bytes(xv, name_what, m_s1, name) || !on_name(path, name)) return false;
  }
  if (k < 2) return fail(std::string("empty ") + what);
  return true;
}

/// One run of "listings": [search path, child, child, ...], search paths
/// ascending.
bool Reader::listing_run(od::value v, std::size_t& n, std::size_t count, std::uint32_t& last) {
  auto on_path = [&](std::uint32_t path) {
    if (n != 0 && path <= last) return fail("listings out of order");
    last = path;
    return true;
  };
  auto on_child = [&](std::uint32_t path, std::string_view child) {
    if (child.empty() || child.find('/') != std::string_view::npos) return fail("listed child is not a file name");
    if (n >= count) return fail("holds more listed children than the head says (" + std::to_string(count) + ")");
    Hooks::add_listed(m_builder, path, child);
    ++n;
    return true;
  };
  return path_run(v, "listing", "listing search path", "listed child", on_path, on_child);
}

bool Reader::listings(od::document& doc, std::size_t count) {
  std::size_t n = 0;
  std::uint32_t last = 0;
  if (!each(doc, "listings", [&](od::value xv) { return listing_run(xv, n, count, last); })) return false;
  if (n != count) {
    return fail("holds " + std::to_string(n) + " listed children, the head says " + std::to_string(count));
  }
  return true;
}

/// One run of "watch_digest"'s files: [search path, rel, rel, ...].
bool Reader::watch_run(od::value v, std::size_t& n, std::size_t count, bool add) {
  auto on_rel = [&](std::uint32_t path, std::string_view rel) {
    // Never more names than the head announced: the builder reserved room
    // for exactly those, and an early check reads them where they are.
    if (n >= count) return fail("holds more watched files than the head says (" + std::to_string(count) + ")");
    // A name without escapes is a view into the section's buffer, which the
    // Index keeps (load_partial()): no copy.
    if (add) Hooks::add_watched_name(m_builder, path, rel, /*copy=*/!in_document(rel));
    ++n;
    if (m_publish_to != nullptr && n % EarlyFullCheck::k_chunk == 0) m_publish_to->publish(n);
    return true;
  };
  return path_run(v, "watched run", "watched run search path", "watched file path",
                  [](std::uint32_t) { return true; }, on_rel);
}

/// "watch_digest": {"digest": 32 hex digits, "files": [run, ...]}.  With
/// `add`, the names go into the builder with the digest (a `full` load);
/// else (a complete load, which has the stamps) the digest must equal that
/// of the stamped rows.
bool Reader::watch_digest(od::document& doc, std::size_t count, bool add) {
  od::object root;
  if (auto e = doc.get_object().get(root)) return fail(e, "watch digest");
  WatchedDigest digest;
  std::size_t k = 0, n = 0;
  for (auto field : root) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return fail(e, "watch digest");
    od::value v;
    if (auto e = field.value().get(v)) return fail(e, "watch digest");
    if (k == 0 && key == "digest") {
      std::string_view hex;
      if (!string(v, "watch digest", m_s1, hex)) return false;
      if (hex.size() != 32 || !parse_hex16(hex.substr(0, 16), digest.hi) ||
          !parse_hex16(hex.substr(16), digest.lo)) {
        return fail("watch digest is not 32 hex digits");
      }
    } else if (k == 1 && key == "files") {
      if (!each(v, "watched files", [&](od::value xv) { return watch_run(xv, n, count, add); })) return false;
    } else {
      return fail("unexpected field in the watch digest");
    }
    ++k;
  }
  if (k != 2) return fail("incomplete watch digest");
  if (n != count) {
    return fail("holds " + std::to_string(n) + " watched files, the head says " + std::to_string(count));
  }
  if (add) {
    Hooks::set_watched_digest(m_builder, digest);
  } else if (!(digest == m_stamped_digest)) {
    return fail("the digest disagrees with the stamps of section \"watched\"");
  }
  return true;
}

bool Reader::watched(od::document& doc, std::size_t count) {
  std::size_t n = 0;
  const bool ok = each(doc, "watched files", [&](od::value xv) { return watched_file(xv) && ++n; });
  if (!ok) return false;
  if (n != count) {
    return fail("holds " + std::to_string(n) + " watched files, the head says " + std::to_string(count));
  }
  return true;
}

const Section* Reader::find(Kind kind, std::string_view group) const {
  for (const Section& s : m_sections) {  // a few hundred at most; once per requested group
    if (s.kind == kind && s.group == group) return &s;
  }
  return nullptr;
}

bool Reader::load_complete() {
  // The first chunk is the whole file here: nothing more to read.
  const Layout& at = m_layout;
  m_builder.reserve(static_cast<std::size_t>(m_dist_count), 0, static_cast<std::size_t>(at.watched->count));
  if (!parse_section(*at.dists, [&](od::document& d) { return dists(d); })) return false;
  if (m_has_error ? m_first_error_seen != m_error_dist
                  : m_first_error_seen != std::numeric_limits<std::uint64_t>::max()) {
    return fail("\"first_error\" disagrees with the distributions");
  }
  GroupData g;
  for (const Section& s : m_sections) {
    if (s.kind != Kind::group) continue;
    g.section = &s;
    if (!parse_section(s, [&](od::document& d) { return group(d, g, GroupMode::complete); })) return false;
  }
  if (!parse_section(*at.listings, [&](od::document& d) { return listings(d, at.listings->count); })) return false;
  {
    const Index& so_far = Hooks::in_progress(m_builder);
    std::vector<std::uint32_t> counts(m_paths.size(), 0);
    for (const WatchedName& c : Hooks::listed(so_far)) ++counts[c.search_path];
    for (std::uint32_t i = 0; i < counts.size(); ++i) {
      // (listed_count() answers from the head's counts here.)
      if (Hooks::listed_count(so_far, i) != counts[i]) return fail("search path listed counts disagree with \"listings\"");
    }
  }
  if (!parse_section(*at.watched, [&](od::document& d) { return watched(d, at.watched->count); })) return false;
  return parse_section(*at.watch_digest,
                       [&](od::document& d) { return watch_digest(d, at.watch_digest->count, /*add=*/false); });
}

bool Reader::load_partial() {
  std::vector<std::string_view> wanted(m_expect.groups.begin(), m_expect.groups.end());
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());

  // What to read, in file order: the groups' sections (and the watched
  // names or stamps).  Their bytes stay in their buffers until the Index is
  // built: the rows below are views into them.
  std::vector<const Section*> needed;
  std::size_t eps_total = 0, stamps_total = 0;
  for (std::string_view group : wanted) {
    const Section* s = find(Kind::group, group);
    if (s == nullptr) continue;  // no entry points in this group
    needed.push_back(s);
    eps_total += static_cast<std::size_t>(s->count);
  }
  // `full` validation: the names and their digest, unless every stamp is
  // wanted (a stale cache names the file that changed).
  std::size_t names_total = 0;
  if (m_expect.watched) {
    needed.push_back(m_expect.watched_stamps ? m_layout.watched : m_layout.watch_digest);
    (m_expect.watched_stamps ? stamps_total : names_total) += static_cast<std::size_t>(m_layout.watched->count);
  }
  std::sort(needed.begin(), needed.end());  // pointers into m_sections: file order
  m_builder.reserve(0, 0, 0, names_total);  // first: the early check waits for these
  if (!names_first(names_total, needed)) return false;
  m_builder.reserve(eps_total, eps_total, stamps_total, 0);
  if (!m_bytes.read_sections(needed)) return false;
  std::vector<GroupData> groups;
  if (!load_groups(needed, groups) || !load_stamps(needed)) return false;
  finish_partial(wanted, names_total, groups);
  return true;
}

/// `full` validation by digest: the names are read first, their check is
/// started on the other CPU before they are parsed (ReadExpectations::
/// early_check), and each chunk of names is handed to it as soon as it is
/// written, so its stat calls run while the rest is read and parsed.  The
/// builder holds room for exactly names_total names (reserved by the
/// caller, and watch_run() refuses more), so where the helper reads them
/// stays put.  The digest's section is then no longer `needed`.
bool Reader::names_first(std::size_t names_total, std::vector<const Section*>& needed) {
  const Section* digest = m_layout.watch_digest;
  if (names_total == 0 || m_expect.early_check == nullptr) {
    if (m_expect.early_check != nullptr) m_expect.early_check->abandon();  // prepared by run(), not wanted
    return true;
  }
  if (!m_bytes.read_sections({digest})) return false;
  const Index& so_far = Hooks::in_progress(m_builder);
  const std::span<const WatchedName> names(watched_names(so_far).data(), names_total);
  m_expect.early_check->start(names, so_far.search_paths(), scanned_at_ns(so_far), /*ready=*/0);
  m_publish_to = m_expect.early_check;
  const bool ok =
      parse_section(*digest, [&](od::document& d) { return watch_digest(d, digest->count, /*add=*/true); });
  m_publish_to = nullptr;
  if (!ok) return false;  // the destructor abandons the check
  m_expect.early_check->publish(names_total);
  std::erase(needed, digest);
  return true;
}

/// The group sections among `needed`, parsed into `groups`.  One group (the
/// common query): its rows go straight into the builder, in global
/// discovery order already.  Several: collected, then merged.
bool Reader::load_groups(const std::vector<const Section*>& needed, std::vector<GroupData>& groups) {
  std::size_t group_sections = 0;
  for (const Section* s : needed) group_sections += s->kind == Kind::group;
  const GroupMode mode = group_sections == 1 ? GroupMode::direct : GroupMode::collect;
  groups.reserve(group_sections);
  for (const Section* s : needed) {
    if (s->kind != Kind::group) continue;
    GroupData& g = groups.emplace_back();
    g.section = s;
    // Its names and values stay where they are: the Index keeps the buffer
    // (finish_partial()), so only escaped strings are copied.
    const ReadBuffer* b = m_bytes.buffer_of(*s);
    if (b != nullptr && b->data) Hooks::borrow(m_builder, b->data.get(), b->size);
    if (!parse_section(*s, [&](od::document& d) { return group(d, g, mode); })) return false;
  }
  return mode == GroupMode::direct || merge_groups(groups);
}

/// The distributions of several collected groups, in global discovery
/// order, then their entry points.
bool Reader::merge_groups(const std::vector<GroupData>& groups) {
  std::vector<const GroupDist*> all;
  for (const GroupData& g : groups) {
    for (const GroupDist& d : g.dists) all.push_back(&d);
  }
  std::stable_sort(all.begin(), all.end(), [](const GroupDist* a, const GroupDist* b) { return a->global < b->global; });
  std::vector<std::uint32_t> numbers;  // global numbers of the distributions added, ascending
  numbers.reserve(all.size());
  const GroupDist* prev = nullptr;
  for (const GroupDist* d : all) {
    if (prev != nullptr && prev->global == d->global) {
      if (prev->name != d->name || prev->version != d->version || prev->dir != d->dir || prev->path != d->path) {
        return fail("distribution " + std::to_string(d->global) + " differs between group sections");
      }
      continue;
    }
    prev = d;
    std::string_view joined;
    join_dir(d->path, d->dir, joined);
    m_builder.add_distribution(d->name, d->version, joined, d->path);
    numbers.push_back(d->global);
  }
  for (const GroupData& g : groups) {
    for (const GroupEntry& ep : g.eps) {
      const std::uint32_t global = g.dists[ep.dist].global;
      const auto at = std::lower_bound(numbers.begin(), numbers.end(), global) - numbers.begin();
      m_builder.add_entry_point(static_cast<std::uint32_t>(at), g.section->group, ep.name, ep.value);
    }
  }
  return true;
}

/// The sections among `needed` that are not groups': the watched names
/// with their digest, or every watched file with its stamp.
bool Reader::load_stamps(const std::vector<const Section*>& needed) {
  for (const Section* s : needed) {
    if (s->kind == Kind::group) continue;
    const bool ok =
        s->kind == Kind::watch_digest
            ? parse_section(*s, [&](od::document& d) { return watch_digest(d, s->count, /*add=*/true); })
            : parse_section(*s, [&](od::document& d) { return watched(d, s->count); });
    if (!ok) return false;
  }
  return true;
}

/// What a partial Index records beyond its rows; the buffers its views
/// point into are handed to it.
void Reader::finish_partial(const std::vector<std::string_view>& wanted, std::size_t names_total,
                            const std::vector<GroupData>& groups) {
  if (names_total > 0) keep_buffer_of(*m_layout.watch_digest);
  Hooks::set_watched_complete(m_builder, m_expect.watched);
  Hooks::set_partial(m_builder, wanted);
  if (m_has_error) {
    std::string_view joined;
    join_dir(m_error_path, m_error_dir, joined);
    Hooks::set_first_error(m_builder, m_error_name, m_error_version, joined, m_error_path, m_error_message);
  }
  for (const GroupData& g : groups) keep_buffer_of(*g.section);  // borrowed by load_groups()
}

Result<Index> Reader::run() {
  if (m_expect.map_file) m_bytes.map_whole();
  {
    profile::Span span(profile::Phase::read, m_file);
    if (!m_bytes.read_head(m_partial)) return problem();
  }
  if (m_bytes.first_chunk() == 0) {
    fail("empty");
    return problem();
  }
  {
    profile::Span span(profile::Phase::parse, m_file);
    // One allocation for every document of this read (a parser grows by
    // reallocating, and fresh memory costs a page fault per page touched:
    // the head and the sections then reuse the same pages).
    constexpr std::uint64_t k_max_prealloc = 64ull << 20;
    // `full` validation of a file big enough to hold more names than
    // are worth splitting: the check's helper thread is created now, so
    // that its creation overlaps the parse of the head.
    if (m_partial && m_expect.early_check != nullptr && m_expect.watched && !m_expect.watched_stamps &&
        m_bytes.size() >= k_prepare_check_min) {
      m_expect.early_check->prepare();
    }
    const std::string_view line1 = m_bytes.head();
    if (auto e = m_parser.allocate(static_cast<std::size_t>(std::min(m_bytes.size(), k_max_prealloc)))) {
      fail(e, "JSON parser");
    } else if (other_version(line1, m_problem)) {
      // (reported by other_version)
    } else if (parse_doc(line1.data(), line1.size(), m_bytes.head_capacity(), [&](od::document& d) { return head(d); }) &&
               check_layout()) {
      if (m_partial) load_partial();
      else load_complete();
    }
  }
  if (!m_problem.text.empty()) return problem();
  // Views into the mapping: the head's, the sections'.
  if (m_bytes.mapping()) Hooks::keep_alive(m_builder, m_bytes.mapping());
  Index index = m_builder.build();
  m_built = true;
  return index;
}

Error Reader::problem() const { return Error{Errc::cache, "cache file " + std::string(m_file) + ": " + m_problem.text}; }

namespace {

/// The size of the file `fd`: a regular file, not empty, of sane size.
Result<std::uint64_t> file_size(int fd, std::string_view file) {
  struct stat st;
  profile::count(profile::Counter::stat);
  if (::fstat(fd, &st) != 0) {
    return Error{Errc::cache, "cache file " + std::string(file) + ": fstat: " + std::strerror(errno)};
  }
  constexpr off_t k_max = off_t{1} << 30;  // far above any real index; refuse absurd sizes
  if (!S_ISREG(st.st_mode) || st.st_size > k_max) {
    return Error{Errc::cache, "cache file " + std::string(file) + ": not a regular file of sane size"};
  }
  if (st.st_size == 0) return Error{Errc::cache, "cache file " + std::string(file) + ": empty"};
  return static_cast<std::uint64_t>(st.st_size);
}

}  // namespace

Result<Index> read_index_fd(int fd, std::string_view file, const ReadExpectations& expect) {
  auto size = file_size(fd, file);
  if (!size) {
    if (expect.early_check != nullptr) expect.early_check->abandon();  // a failed read abandons it
    return size.error();
  }
  Reader reader(fd, *size, file, expect);
  return reader.run();
}

}  // namespace epload::detail
