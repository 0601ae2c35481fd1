// cache_write.cpp — serializes an Index to the sectioned JSON Lines layout
// described at the top of cache.cpp.
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
// becomes {"hex":"..."}.  Distributions and watched files appear twice (in
// their group's sections and in "dists" / "watched"), so their text is
// encoded once and copied.  6,000 distributions make 2.6 MB (1.65x the
// single document of version 1), serialized in ~4 ms: paid once per change
// of the environment, for a hit that reads a tenth of it.
#include <algorithm>  // sort, lower_bound
#include <charconv>   // to_chars
#include <cstring>    // memcpy
#include <limits>
#include <unordered_map>  // watched file -> distribution
#include <vector>

#include "cache_internal.hpp"
#include "epload/metadata.hpp"  // find_invalid_utf8
#include "watch_digest.hpp"

namespace epload::detail {

namespace {

// ---- writing ----------------------------------------------------------------

/// True when one of the 8 bytes at `p` is a control character, '"' or '\\'
/// (the classic "has a byte less than n" / "has a zero byte" word tricks).
inline bool needs_escape(const char* p) {
  std::uint64_t w;
  std::memcpy(&w, p, 8);
  constexpr std::uint64_t k_ones = 0x0101010101010101ULL, k_highs = 0x8080808080808080ULL;
  const std::uint64_t quote = w ^ (k_ones * '"'), backslash = w ^ (k_ones * '\\');
  const std::uint64_t below_space = (w - k_ones * 0x20) & ~w;
  const std::uint64_t zero_quote = (quote - k_ones) & ~quote;
  const std::uint64_t zero_backslash = (backslash - k_ones) & ~backslash;
  return ((below_space | zero_quote | zero_backslash) & k_highs) != 0;
}

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
    std::size_t run = 0;  // start of the pending run of bytes that need no escape
    for (std::size_t i = 0; i < s.size(); ++i) {
      // Eight bytes at a time while none needs an escape (the common case).
      while (i + 8 <= s.size() && !needs_escape(s.data() + i)) i += 8;
      if (i >= s.size()) break;
      const unsigned char c = static_cast<unsigned char>(s[i]);
      if (c >= 0x20 && c != '"' && c != '\\') continue;
      m_out.append(s.data() + run, i - run);
      run = i + 1;
      switch (c) {
        case '"': m_out += "\\\""; break;
        case '\\': m_out += "\\\\"; break;
        case '\n': m_out += "\\n"; break;
        case '\t': m_out += "\\t"; break;
        case '\r': m_out += "\\r"; break;
        case '\b': m_out += "\\b"; break;
        case '\f': m_out += "\\f"; break;
        default: {
          static constexpr char k_hex[] = "0123456789abcdef";
          char u[6] = {'\\', 'u', '0', '0', k_hex[c >> 4], k_hex[c & 0xf]};
          m_out.append(u, sizeof u);
        }
      }
    }
    m_out.append(s.data() + run, s.size() - run);
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

/// Appends the head line (see cache.cpp) with section offsets shifted by
/// `base`; the checksum is filled in by the caller.
std::size_t write_head(std::string& out, const Index& index, const WriteOptions& options,
                       const std::vector<std::string_view>& paths_text, const std::string& first_error,
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
  w.number(index.scanned_at_ns());
  const auto stamps = index.search_path_stamps();
  w.raw(",\"search_paths\":[");
  for (std::size_t i = 0; i < paths_text.size(); ++i) {
    w.raw(i == 0 ? "{\"path\":" : ",{\"path\":");
    w.bytes(paths_text[i]);
    w.raw(",\"stamp\":[");
    w.stamp_numbers(i < stamps.size() ? stamps[i] : FileStamp{});
    w.raw("]}");
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

}  // namespace

Result<SerializedIndex> serialize_index(const Index& index, const WriteOptions& options) {
  const auto paths = index.search_paths();
  const auto dists = index.distributions();
  const auto watched = index.watched_files();
  if (index.watched_digest() != nullptr) {
    return Error{Errc::invalid_argument,
                 "cannot serialize the index: it was loaded without its watched files' stamps"};
  }
  if (const std::string_view why = index.not_cacheable(); !why.empty()) {
    return Error{Errc::io, "not writing an index whose answer depends on a file that could not be read "
                           "(it may read fine next time, unchanged): " + std::string(why)};
  }

  // Search paths as stored (relative to the file in a relocatable index).
  std::vector<std::string> relocated;
  std::vector<std::string_view> paths_text(paths.begin(), paths.end());
  if (options.relocatable) {
    relocated.reserve(paths.size());
    for (std::size_t i = 0; i < paths.size(); ++i) {
      if (is_relative(paths[i])) {
        return Error{Errc::invalid_argument,
                     "cannot write a relocatable index for the relative search path \"" +
                         std::string(paths[i]) + "\": give absolute search paths"};
      }
      relocated.push_back(relative_path(normalize_path(paths[i]), options.base_dir));
    }
    for (std::size_t i = 0; i < paths.size(); ++i) paths_text[i] = relocated[i];
  }
  std::vector<std::string_view> dir_text(dists.size());
  for (std::size_t i = 0; i < dists.size(); ++i) {
    auto dir = stored_dir(dists[i], paths);
    if (!dir) return dir.error();
    dir_text[i] = *dir;
  }

  std::string body;
  body.reserve(256 + dists.size() * 320 + index.entry_points().size() * 80 + watched.size() * 200);
  JsonWriter w(body);
  std::vector<SectionRecord> sections;
  auto begin_section = [&](std::string name, std::size_t count) {
    sections.push_back({std::move(name), body.size(), 0, 0, count});
  };
  auto end_section = [&] {
    w.raw("\n");
    SectionRecord& s = sections.back();
    s.length = body.size() - s.offset;
    s.hash = body_hash(std::string_view(body).substr(s.offset, s.length));
  };
  // A distribution's fields and a watched file's row are written twice (in
  // a group or stamps section, and in "dists" or "watched"): encode each
  // once.
  std::string dist_pool, watched_pool;
  std::vector<std::size_t> dist_at(dists.size() + 1, 0), watched_at(watched.size() + 1, 0);
  {
    dist_pool.reserve(dists.size() * 96);
    JsonWriter pw(dist_pool);
    for (std::size_t gi = 0; gi < dists.size(); ++gi) {
      const Distribution& d = dists[gi];
      pw.bytes(d.name);
      pw.raw(",");
      pw.bytes(d.version);
      pw.raw(",");
      pw.bytes(dir_text[gi]);
      pw.raw(",");
      pw.number(d.search_path);
      dist_at[gi + 1] = dist_pool.size();
    }
    watched_pool.reserve(watched.size() * 112);
    JsonWriter ww(watched_pool);
    for (std::size_t k = 0; k < watched.size(); ++k) {
      watched_row(ww, watched[k]);
      watched_at[k + 1] = watched_pool.size();
    }
  }
  auto dist_fields = [&](std::size_t gi) {
    w.raw(std::string_view(dist_pool).substr(dist_at[gi], dist_at[gi + 1] - dist_at[gi]));
  };
  auto watched_text = [&](std::size_t k) {
    return std::string_view(watched_pool).substr(watched_at[k], watched_at[k + 1] - watched_at[k]);
  };

  // Which distribution each watched file lies in: (search path, directory of
  // the file) against (search path, stored metadata directory).
  std::vector<std::uint32_t> watch_begin(dists.size() + 1, 0), watch_list;
  {
    // (The same directory name can lie in several search paths.)
    std::unordered_multimap<std::string_view, std::uint32_t> by_dir;
    by_dir.reserve(dists.size());
    for (std::size_t gi = 0; gi < dists.size(); ++gi) {
      if (is_relative(dir_text[gi])) by_dir.emplace(dir_text[gi], static_cast<std::uint32_t>(gi));
    }
    std::vector<std::uint32_t> owner(watched.size(), std::numeric_limits<std::uint32_t>::max());
    for (std::size_t k = 0; k < watched.size(); ++k) {
      const std::string_view rel = watched[k].rel_path;
      const std::size_t slash = rel.rfind('/');
      if (slash == std::string_view::npos) continue;
      auto [it, end] = by_dir.equal_range(rel.substr(0, slash));
      while (it != end && dists[it->second].search_path != watched[k].search_path) ++it;
      if (it == end) continue;
      owner[k] = it->second;
      ++watch_begin[it->second + 1];
    }
    for (std::size_t gi = 0; gi < dists.size(); ++gi) watch_begin[gi + 1] += watch_begin[gi];
    watch_list.resize(watch_begin[dists.size()]);
    std::vector<std::uint32_t> fill(watch_begin.begin(), watch_begin.end() - 1);
    for (std::size_t k = 0; k < watched.size(); ++k) {
      if (owner[k] != std::numeric_limits<std::uint32_t>::max()) {
        watch_list[fill[owner[k]]++] = static_cast<std::uint32_t>(k);
      }
    }
  }

  // One section per group (and one of its distributions' watched files).
  std::vector<std::uint32_t> local;  // the group's distributions, global numbers, ascending
  for (std::string_view group : index.groups()) {
    const auto eps = index.group(group);
    local.clear();
    for (const EntryPoint& ep : eps) local.push_back(static_cast<std::uint32_t>(ep.dist - dists.data()));
    std::sort(local.begin(), local.end());
    local.erase(std::unique(local.begin(), local.end()), local.end());

    begin_section("group:" + std::string(group), eps.size());
    w.raw("{\"dists\":[");
    for (std::size_t i = 0; i < local.size(); ++i) {
      w.raw(i == 0 ? "[" : ",[");
      w.number(local[i]);
      w.raw(",");
      dist_fields(local[i]);
      w.raw("]");
    }
    w.raw("],\"entry_points\":[");
    bool first = true;
    for (const EntryPoint& ep : eps) {
      const auto gi = static_cast<std::uint32_t>(ep.dist - dists.data());
      w.raw(first ? "[" : ",[");
      first = false;
      w.number(static_cast<std::size_t>(std::lower_bound(local.begin(), local.end(), gi) - local.begin()));
      w.raw(",");
      w.bytes(ep.name);
      w.raw(",");
      w.bytes(ep.value);
      w.raw("]");
    }
    w.raw("]}");
    end_section();

    std::size_t stamps = 0;
    for (std::uint32_t gi : local) stamps += watch_begin[gi + 1] - watch_begin[gi];
    if (stamps == 0) continue;
    begin_section("stamps:" + std::string(group), stamps);
    w.raw("[");
    first = true;
    for (std::uint32_t gi : local) {
      for (std::uint32_t k = watch_begin[gi]; k < watch_begin[gi + 1]; ++k) {
        if (!first) w.raw(",");
        first = false;
        w.raw(watched_text(watch_list[k]));
      }
    }
    w.raw("]");
    end_section();
  }

  begin_section("dists", dists.size());
  w.raw("[");
  for (std::size_t gi = 0; gi < dists.size(); ++gi) {
    w.raw(gi == 0 ? "[" : ",[");
    dist_fields(gi);
    w.raw(",");
    w.bytes(dists[gi].error);
    w.raw("]");
  }
  w.raw("]");
  end_section();

  begin_section("watched", watched.size());
  w.raw("[");
  for (std::size_t k = 0; k < watched.size(); ++k) {
    if (k != 0) w.raw(",");
    w.raw(watched_text(k));
  }
  w.raw("]");
  end_section();

  // The same files by name only, in runs by search path, with the digest of
  // their stamps: all `full` validation reads (see watch_digest.hpp).
  begin_section("watch_digest", watched.size());
  {
    const WatchedDigest digest = digest_of(watched);
    char hex[32];
    put_hex16(hex, digest.hi);
    put_hex16(hex + 16, digest.lo);
    w.raw("{\"digest\":\"");
    w.raw(std::string_view(hex, 32));
    w.raw("\",\"files\":[");
    for (std::size_t k = 0; k < watched.size(); ++k) {
      if (k == 0 || watched[k].search_path != watched[k - 1].search_path) {
        w.raw(k == 0 ? "[" : "],[");
        w.number(watched[k].search_path);
      }
      w.raw(",");
      w.bytes(watched[k].rel_path);
    }
    w.raw(watched.empty() ? "]}" : "]]}");
  }
  end_section();

  std::string first_error = "null";
  for (std::size_t gi = 0; gi < dists.size(); ++gi) {
    if (dists[gi].error.empty()) continue;
    first_error = "{\"dist\":[";
    JsonWriter fw(first_error);
    fw.number(gi);
    fw.raw(",");
    fw.raw(std::string_view(dist_pool).substr(dist_at[gi], dist_at[gi + 1] - dist_at[gi]));
    fw.raw("],\"message\":");
    fw.bytes(dists[gi].error);
    fw.raw("}");
    break;
  }

  // The head's length depends on the offsets it records, which depend on
  // its length: grow the base until it stops changing.
  std::string out;
  std::size_t base = 0, checksum_at = 0;
  for (;;) {
    out.clear();
    checksum_at = write_head(out, index, options, paths_text, first_error, sections, base);
    if (out.size() == base) break;
    base = out.size();
  }
  const std::size_t after = checksum_at + 17;  // past the digits and the closing quote
  put_hex16(out.data() + checksum_at, body_hash(std::string_view(out).substr(after)));
  return SerializedIndex{std::move(out), std::move(body)};
}

}  // namespace epload::detail
