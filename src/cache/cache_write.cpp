// cache_write.cpp — serializes an Index to the sectioned JSON Lines layout
// described in docs/cache-format.md.
//
// simdjson 3.0 has no writer, and none is needed: the layout is fixed, so
// each section is appended to one reserved std::string in a single pass, its
// hash taken over its finished bytes, and the head written last, when every
// section's offset, length and hash are known.  The head records absolute
// file offsets, which depend on the head's own length; the head is therefore
// built until its length stops changing (its length is a non-decreasing
// function of the offset base, so this takes two or three rounds).  Byte
// strings that are valid UTF-8 become JSON strings with ", \ and control
// characters escaped (so no line ever holds a raw newline); any other
// becomes {"hex":"..."}.  Distributions appear twice (in their groups'
// sections and in "dists"), so their text is encoded once and copied.  6,000 distributions make 2.6 MB (1.65x the
// single document of version 1), serialized in ~4 ms: paid once per change
// of the environment, for a hit that reads a tenth of it.
#include <algorithm>  // sort, lower_bound
#include <charconv>   // to_chars
#include <limits>
#include <vector>

#include "cache_internal.hpp"
#include "epload/metadata.hpp"  // find_invalid_utf8
#include "index_hooks.hpp"       // the listings
#include "watch_digest.hpp"

namespace epload::detail {

namespace {

// ---- writing ----------------------------------------------------------------

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : m_out(out) {}

  void raw(std::string_view s) { m_out += s; }

  /// A byte string: a JSON string when valid UTF-8, else {"hex":"..."}.
  void bytes(std::string_view s) {
    if (find_invalid_utf8(s) != std::string_view::npos) {
      static constexpr char k_hex[] = "0123456789abcdef";
      m_out += R"({"hex":")";
      for (unsigned char c : s) {
        m_out += k_hex[c >> 4];
        m_out += k_hex[c & 0xf];
      }
      m_out += "\"}";
      return;
    }
    m_out += '"';
    append_json_escaped(m_out, s);
    m_out += '"';
  }

  template <class Int>
  void number(Int v) {
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    m_out.append(buf, r.ptr);
  }

  void stamp_numbers(const FileStamp& s) {
    number(s.dev), raw(","), number(s.ino), raw(","), number(s.size), raw(",");
    number(s.mtime_ns), raw(","), number(s.ctime_ns), raw(","), number(s.mode);
  }

 private:
  std::string& m_out;
};

/// A section's place in the file body, for the head.
struct SectionRecord {
  std::string name;
  std::size_t offset = 0;  // relative to the end of the head until written
  std::size_t length = 0;
  std::uint64_t hash = 0;
  std::size_t count = 0;
};

/// The text of a distribution's metadata directory as stored: relative to
/// its search path when join_path(search path, tail) gives it back, else
/// whole (absolute).  Fails for a relative directory outside its search
/// path, which has no representation.
Result<std::string_view> stored_dir(const Distribution& d, std::span<const std::string_view> paths) {
  std::string_view dir = d.metadata_dir;
  const std::string_view sp = d.search_path < paths.size() ? paths[d.search_path] : "";
  std::string_view tail;
  if (!sp.empty() && dir.size() > sp.size() && dir.substr(0, sp.size()) == sp) {
    if (sp.back() == '/') tail = dir.substr(sp.size());
    else if (dir[sp.size()] == '/') tail = dir.substr(sp.size() + 1);
  }
  if (!tail.empty() && tail.front() != '/') return tail;
  if (is_relative(dir) && !sp.empty()) {
    return Error{Errc::invalid_argument, "cannot serialize the index: metadata directory \"" +
                                             std::string(dir) + "\" is neither absolute nor inside its search path"};
  }
  return dir;
}

void watched_row(JsonWriter& w, const WatchedFile& f) {
  w.raw("[");
  w.number(f.search_path);
  w.raw(",");
  w.bytes(f.rel_path);
  w.raw(",");
  w.stamp_numbers(f.stamp);
  w.raw("]");
}

/// Appends the head line (docs/cache-format.md) with section offsets shifted by
/// `base`; the checksum is filled in by the caller.
std::size_t write_head(std::string& out, const Index& index, const WriteOptions& options,
                       const std::vector<std::string_view>& paths_text, const std::vector<std::uint32_t>& listed,
                       const std::string& first_error,
                       const std::vector<SectionRecord>& sections, std::size_t base) {
  JsonWriter w(out);
  w.raw("{\"format\":\"epload-index\",\"version\":");
  w.number(k_cache_format_version);
  w.raw(",\"checksum\":\"");
  const std::size_t checksum_at = out.size();
  w.raw("0000000000000000\",\"key\":{\"interpreter\":");
  w.bytes(options.key != nullptr ? std::string_view(options.key->interpreter) : "");
  w.raw(",\"cwd\":");
  w.bytes(options.key != nullptr ? std::string_view(options.key->cwd) : "");
  w.raw(options.relocatable ? "},\"relocatable\":true" : "},\"relocatable\":false");
  w.raw(",\"scanned_at_ns\":");
  w.number(scanned_at_ns(index));
  const auto stamps = search_path_stamps(index);
  w.raw(",\"search_paths\":[");
  for (std::size_t i = 0; i < paths_text.size(); ++i) {
    w.raw(i == 0 ? "{\"path\":" : ",{\"path\":");
    w.bytes(paths_text[i]);
    w.raw(",\"stamp\":[");
    w.stamp_numbers(i < stamps.size() ? stamps[i] : FileStamp{});
    w.raw("],\"listed\":");
    w.number(i < listed.size() ? listed[i] : 0);
    w.raw("}");
  }
  w.raw("],\"first_error\":");
  w.raw(first_error);
  w.raw(",\"sections\":[");
  for (std::size_t i = 0; i < sections.size(); ++i) {
    const SectionRecord& s = sections[i];
    w.raw(i == 0 ? "[" : ",[");
    w.bytes(s.name);
    w.raw(",");
    w.number(base + s.offset);
    w.raw(",");
    w.number(s.length);
    w.raw(",\"");
    char hex[16];
    put_hex16(hex, s.hash);
    w.raw(std::string_view(hex, 16));
    w.raw("\",");
    w.number(s.count);
    w.raw("]");
  }
  w.raw("]}\n");
  return checksum_at;
}

/// The sections of a serialized index, appended in file order to one
/// string, with their records for the head.  A distribution's fields are
/// written in each of its groups' sections and in "dists", so they are
/// encoded once (the pool) and copied.
class BodyWriter {
 public:
  BodyWriter(const Index& index, std::span<const std::string_view> dir_text)
      : m_index(index), m_dists(index.distributions()), m_watched(watched_files(index)),
        m_dir_text(dir_text), m_w(body) {
    body.reserve(256 + m_dists.size() * 320 + index.entry_points().size() * 80 + m_watched.size() * 200);
    encode_pools();
  }

  std::string body;
  std::vector<SectionRecord> sections;

  /// One "group:G" section per group.
  void groups();
  void dists();
  /// The children of each search path that importlib's Lookup takes, in
  /// discovery order (shadowed ones included), in runs by search path: what
  /// a refresh reuses for a search path that did not change.
  void listings();
  void watched();
  /// The watched files by name only, in runs by search path, with the
  /// digest of their stamps: all `full` validation reads (watch_digest.hpp).
  void watch_digest();
  /// The head's "first_error" value: "null", or the first distribution with
  /// an error.
  std::string first_error() const;

 private:
  void begin(std::string name, std::size_t count) { sections.push_back({std::move(name), body.size(), 0, 0, count}); }
  void end() {
    m_w.raw("\n");
    SectionRecord& s = sections.back();
    s.length = body.size() - s.offset;
    s.hash = body_hash(std::string_view(body).substr(s.offset, s.length));
  }
  /// A section that is one JSON array of `count` items, item(i) writing each.
  template <class F>
  void array_section(std::string name, std::size_t count, F&& item) {
    begin(std::move(name), count);
    m_w.raw("[");
    for (std::size_t i = 0; i < count; ++i) {
      if (i != 0) m_w.raw(",");
      item(i);
    }
    m_w.raw("]");
    end();
  }
  /// `rows` (each with a search path and a name) as a JSON array of runs,
  /// one per stretch of rows with the same search path: [[0,"a","b"],[1,"c"]].
  template <class Row>
  void path_runs(std::span<const Row> rows) {
    m_w.raw("[");
    for (std::size_t k = 0; k < rows.size(); ++k) {
      if (k == 0 || rows[k].search_path != rows[k - 1].search_path) {
        m_w.raw(k == 0 ? "[" : "],[");
        m_w.number(rows[k].search_path);
      }
      m_w.raw(",");
      m_w.bytes(rows[k].rel_path);
    }
    m_w.raw(rows.empty() ? "]" : "]]");
  }
  std::string_view dist_fields(std::size_t gi) const {
    return std::string_view(m_dist_pool).substr(m_dist_at[gi], m_dist_at[gi + 1] - m_dist_at[gi]);
  }
  void encode_pools();
  void group(std::string_view group);

  const Index& m_index;
  std::span<const Distribution> m_dists;
  std::span<const WatchedFile> m_watched;
  std::span<const std::string_view> m_dir_text;
  JsonWriter m_w;
  std::string m_dist_pool;
  std::vector<std::size_t> m_dist_at;
  std::vector<std::uint32_t> m_local;  // scratch: a group's distributions, ascending
};

void BodyWriter::encode_pools() {
  m_dist_at.assign(m_dists.size() + 1, 0);
  m_dist_pool.reserve(m_dists.size() * 96);
  JsonWriter pw(m_dist_pool);
  for (std::size_t gi = 0; gi < m_dists.size(); ++gi) {
    const Distribution& d = m_dists[gi];
    pw.bytes(d.name);
    pw.raw(",");
    pw.bytes(d.version);
    pw.raw(",");
    pw.bytes(m_dir_text[gi]);
    pw.raw(",");
    pw.number(d.search_path);
    m_dist_at[gi + 1] = m_dist_pool.size();
  }
}

void BodyWriter::groups() {
  for (std::string_view g : m_index.groups()) group(g);
}

void BodyWriter::group(std::string_view group) {
  const auto eps = m_index.group(group);
  m_local.clear();
  for (const EntryPoint& ep : eps) m_local.push_back(static_cast<std::uint32_t>(ep.dist - m_dists.data()));
  std::sort(m_local.begin(), m_local.end());
  m_local.erase(std::unique(m_local.begin(), m_local.end()), m_local.end());

  begin("group:" + std::string(group), eps.size());
  m_w.raw("{\"dists\":[");
  for (std::size_t i = 0; i < m_local.size(); ++i) {
    m_w.raw(i == 0 ? "[" : ",[");
    m_w.number(m_local[i]);
    m_w.raw(",");
    m_w.raw(dist_fields(m_local[i]));
    m_w.raw("]");
  }
  m_w.raw("],\"entry_points\":[");
  bool first = true;
  for (const EntryPoint& ep : eps) {
    const auto gi = static_cast<std::uint32_t>(ep.dist - m_dists.data());
    m_w.raw(first ? "[" : ",[");
    first = false;
    m_w.number(static_cast<std::size_t>(std::lower_bound(m_local.begin(), m_local.end(), gi) - m_local.begin()));
    m_w.raw(",");
    m_w.bytes(ep.name);
    m_w.raw(",");
    m_w.bytes(ep.value);
    m_w.raw("]");
  }
  m_w.raw("]}");
  end();
}

void BodyWriter::dists() {
  array_section("dists", m_dists.size(), [&](std::size_t gi) {
    m_w.raw("[");
    m_w.raw(dist_fields(gi));
    m_w.raw(",");
    m_w.bytes(m_dists[gi].error);
    m_w.raw("]");
  });
}

void BodyWriter::listings() {
  const auto listed = IndexBuilderHooks::listed(m_index);
  begin("listings", listed.size());
  path_runs(listed);
  end();
}

void BodyWriter::watched() {
  array_section("watched", m_watched.size(), [&](std::size_t k) { watched_row(m_w, m_watched[k]); });
}

void BodyWriter::watch_digest() {
  begin("watch_digest", m_watched.size());
  const WatchedDigest digest = digest_of(m_watched);
  char hex[32];
  put_hex16(hex, digest.hi);
  put_hex16(hex + 16, digest.lo);
  m_w.raw("{\"digest\":\"");
  m_w.raw(std::string_view(hex, 32));
  m_w.raw("\",\"files\":");
  path_runs(m_watched);
  m_w.raw("}");
  end();
}

std::string BodyWriter::first_error() const {
  for (std::size_t gi = 0; gi < m_dists.size(); ++gi) {
    if (m_dists[gi].error.empty()) continue;
    std::string out = "{\"dist\":[";
    JsonWriter fw(out);
    fw.number(gi);
    fw.raw(",");
    fw.raw(dist_fields(gi));
    fw.raw("],\"message\":");
    fw.bytes(m_dists[gi].error);
    fw.raw("}");
    return out;
  }
  return "null";
}

/// The search paths as stored: relative to the file's directory in a
/// relocatable index (`relocated` holds those strings), else as they are.
Result<std::vector<std::string_view>> stored_paths(std::span<const std::string_view> paths,
                                                   const WriteOptions& options, std::vector<std::string>& relocated) {
  std::vector<std::string_view> text(paths.begin(), paths.end());
  if (!options.relocatable) return text;
  relocated.reserve(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    if (is_relative(paths[i])) {
      return Error{Errc::invalid_argument, "cannot write a relocatable index for the relative search path \"" +
                                               std::string(paths[i]) + "\": give absolute search paths"};
    }
    relocated.push_back(relative_path(normalize_path(paths[i]), options.base_dir));
  }
  for (std::size_t i = 0; i < paths.size(); ++i) text[i] = relocated[i];
  return text;
}

}  // namespace

Result<SerializedIndex> serialize_index(const Index& index, const WriteOptions& options) {
  const auto paths = index.search_paths();
  const auto dists = index.distributions();
  if (watched_digest(index) != nullptr) {
    return Error{Errc::invalid_argument,
                 "cannot serialize the index: it was loaded without its watched files' stamps"};
  }
  if (const std::string_view why = not_cacheable(index); !why.empty()) {
    return Error{Errc::io, "not writing an index whose answer depends on a file that could not be read "
                           "(it may read fine next time, unchanged): " + std::string(why)};
  }
  std::vector<std::string> relocated;
  auto paths_text = stored_paths(paths, options, relocated);
  if (!paths_text) return paths_text.error();
  std::vector<std::string_view> dir_text(dists.size());
  for (std::size_t i = 0; i < dists.size(); ++i) {
    auto dir = stored_dir(dists[i], paths);
    if (!dir) return dir.error();
    dir_text[i] = *dir;
  }

  BodyWriter body(index, dir_text);
  body.groups();
  body.dists();
  body.listings();
  body.watched();
  body.watch_digest();
  const std::string first_error = body.first_error();
  // How many children each search path listed: what a partial load checks
  // a changed path against (an entry that listed none and lists none now
  // contributes nothing still).
  std::vector<std::uint32_t> listed(paths.size(), 0);
  for (const WatchedName& c : IndexBuilderHooks::listed(index)) {
    if (c.search_path < listed.size()) ++listed[c.search_path];
  }

  // The head's length depends on the offsets it records, which depend on
  // its length: grow the base until it stops changing.
  std::string out;
  std::size_t base = 0, checksum_at = 0;
  for (;;) {
    out.clear();
    checksum_at = write_head(out, index, options, *paths_text, listed, first_error, body.sections, base);
    if (out.size() == base) break;
    base = out.size();
  }
  const std::size_t after = checksum_at + 17;  // past the digits and the closing quote
  put_hex16(out.data() + checksum_at, body_hash(std::string_view(out).substr(after)));
  return SerializedIndex{std::move(out), std::move(body.body)};
}

}  // namespace epload::detail
