// cache_read_head.cpp — the reader's JSON values and the head of an index
// file (line 1: the key, the search paths, the first error and the table of
// sections; docs/cache-format.md).  The rest of the reader is in cache.cpp.
//
// Values are read with simdjson On-Demand straight into the IndexBuilder;
// no DOM is built.  Strings without escapes are read in place
// (decode_json_string, json_text.cpp); fields must come in exactly the
// documented order, every index is bounds-checked, every number
// range-checked, every type checked.
#include <cstring>

#include "cache_reader.hpp"
#include "index_builder.hpp"

namespace epload::detail {

namespace {

constexpr std::string_view k_format = "epload-index";

}  // namespace

// ---- values ---------------------------------------------------------------

bool Reader::string(od::value v, std::string_view where, std::string& scratch, std::string_view& out) {
  od::raw_json_string raw;
  if (auto e = v.get_raw_json_string().get(raw)) return fail(e, where);
  return raw_string(raw, where, scratch, out);
}

bool Reader::raw_string(od::raw_json_string raw, std::string_view where, std::string& scratch,
                        std::string_view& out) {
  const char* p = raw.raw();
  const char* end = m_json.data() + m_json.size();
  if (p < m_json.data() || p > end || !decode_json_string(p, end, scratch, out)) {
    return fail("malformed string in " + std::string(where));
  }
  return true;
}

bool Reader::bytes(od::value v, std::string_view where, std::string& scratch, std::string_view& out) {
  // The common case first: a string (INCORRECT_TYPE leaves the value unread).
  od::raw_json_string raw;
  auto e = v.get_raw_json_string().get(raw);
  if (!e) return raw_string(raw, where, scratch, out);
  if (e != simdjson::INCORRECT_TYPE) return fail(e, where);
  return hex_bytes(v, where, scratch, out);
}

/// A byte string that is not UTF-8: {"hex": "<two digits a byte>"}.
bool Reader::hex_bytes(od::value v, std::string_view where, std::string& scratch, std::string_view& out) {
  od::object obj;
  if (v.get_object().get(obj)) return fail(std::string(where) + " is not a string");
  bool seen = false;
  for (auto f : obj) {
    std::string_view name, hex;
    if (auto e = f.unescaped_key().get(name)) return fail(e, where);
    if (seen || name != "hex") return fail(std::string(where) + ": unexpected field in byte string");
    std::string hex_scratch;
    if (!string(f.value(), where, hex_scratch, hex)) return false;
    if (hex.size() % 2 != 0) return fail(std::string(where) + ": odd-length hex string");
    scratch.clear();
    for (std::size_t i = 0; i < hex.size(); i += 2) {
      int hi = 0, lo = 0;
      for (int* d : {&hi, &lo}) {
        const char c = hex[i + (d == &lo)];
        if (c >= '0' && c <= '9') *d = c - '0';
        else if (c >= 'a' && c <= 'f') *d = c - 'a' + 10;
        else return fail(std::string(where) + ": bad hex digit");
      }
      scratch += static_cast<char>(hi * 16 + lo);
    }
    seen = true;
  }
  if (!seen) return fail(std::string(where) + ": empty byte-string object");
  out = scratch;
  return true;
}

bool Reader::kept_bytes(od::value v, std::string_view where, std::string_view& out) {
  if (!bytes(v, where, m_s4, out)) return false;
  if (!out.empty() && out.data() == m_s4.data()) out = m_owned.emplace_back(out);
  return true;
}

bool Reader::u64(od::value v, std::string_view where, std::uint64_t& out) {
  if (auto e = v.get_uint64().get(out)) return fail(e, where);
  return true;
}

bool Reader::i64(od::value v, std::string_view where, std::int64_t& out) {
  if (auto e = v.get_int64().get(out)) return fail(e, where);
  return true;
}

bool Reader::index(od::value v, std::string_view where, std::uint64_t limit, std::uint32_t& out) {
  std::uint64_t n = 0;
  if (!u64(v, where, n)) return false;
  if (n >= limit) return fail(std::string(where) + " " + std::to_string(n) + " is out of range");
  out = static_cast<std::uint32_t>(n);
  return true;
}

/// Field k (0..5) of a stamp: dev, ino, size, mtime_ns, ctime_ns, mode.
bool Reader::stamp_field(od::value v, std::size_t k, std::string_view where, FileStamp& s) {
  std::uint64_t mode = 0;
  switch (k) {
    case 0: return u64(v, where, s.dev);
    case 1: return u64(v, where, s.ino);
    case 2: return u64(v, where, s.size);
    case 3: return i64(v, where, s.mtime_ns);
    case 4: return i64(v, where, s.ctime_ns);
    case 5:
      if (!u64(v, where, mode)) return false;
      if (mode > std::numeric_limits<std::uint32_t>::max()) return fail(std::string(where) + ": mode out of range");
      s.mode = static_cast<std::uint32_t>(mode);
      return true;
    default: return fail(std::string(where) + " has too many fields");
  }
}

/// path when relative.  `out` is valid until the next call.
bool Reader::join_dir(std::uint32_t path, std::string_view dir, std::string_view& out) {
  if (!is_relative(dir)) {
    out = dir;
    return true;
  }
  m_join.assign(m_paths[path]);
  if (!m_join.empty() && m_join.back() != '/') m_join.push_back('/');
  m_join.append(dir);
  out = m_join;
  return true;
}

// ---- the head -------------------------------------------------------------

bool Reader::checksum(od::value v) {
  od::raw_json_string raw;
  if (auto e = v.get_raw_json_string().get(raw)) return fail(e, "\"checksum\"");
  // raw() points just past the opening quote, into the input buffer.
  const char* p = raw.raw();
  const char* end = m_json.data() + m_json.size();
  if (p < m_json.data() || end - p < 17 || p[16] != '"') return fail("malformed \"checksum\"");
  char want[16];
  const std::string_view rest(p + 17, static_cast<std::size_t>(end - (p + 17)));
  put_hex16(want, body_hash(rest));
  if (std::memcmp(want, p, 16) != 0) return fail("checksum mismatch (the file is corrupt or truncated)");
  return true;
}

bool Reader::key(od::value v) {
  od::object obj;
  if (auto e = v.get_object().get(obj)) return fail(e, "\"key\"");
  std::size_t k = 0;
  for (auto f : obj) {
    std::string_view name, s;
    if (auto e = f.unescaped_key().get(name)) return fail(e, "\"key\"");
    static constexpr std::string_view k_names[] = {"interpreter", "cwd"};
    if (k >= 2 || name != k_names[k]) return fail("unexpected field in \"key\"");
    if (!bytes(f.value(), "\"key\"", m_s1, s)) return false;
    (k == 0 ? m_interpreter : m_cwd) = s;
    ++k;
  }
  if (k != 2) return fail("incomplete \"key\"");
  if (m_expect.key != nullptr && (m_interpreter != m_expect.key->interpreter || m_cwd != m_expect.key->cwd)) {
    return fail("written for another key (interpreter or current directory differs)");
  }
  return true;
}

bool Reader::search_path(od::value v) {
  od::object obj;
  if (auto e = v.get_object().get(obj)) return fail(e, "search path");
  std::string_view stored;
  FileStamp stamp;
  std::uint64_t listed = 0;
  std::size_t k = 0;
  for (auto f : obj) {
    std::string_view name;
    if (auto e = f.unescaped_key().get(name)) return fail(e, "search path");
    if (k == 2 && name == "listed") {
      if (!u64(f.value(), "search path listed count", listed)) return false;
      if (listed > 0xffffffffu) return fail("search path listed count out of range");
    } else if (k == 0 && name == "path") {
      if (!bytes(f.value(), "search path", m_s1, stored)) return false;
    } else if (k == 1 && name == "stamp") {
      if (!row(f.value(), "search path stamp", 6, [&](std::size_t n, od::value xv) {
            return stamp_field(xv, n, "search path stamp", stamp);
          })) {
        return false;
      }
    } else {
      return fail("unexpected field in a search path");
    }
    ++k;
  }
  if (k != 3) return fail("incomplete search path");
  Hooks::set_listed_count(m_builder, static_cast<std::uint32_t>(m_paths.size()), static_cast<std::uint32_t>(listed));
  return add_search_path(stored, stamp);
}

/// A search path as stored (relative to the file's directory when the
/// index is relocatable), checked against what the read expects.
bool Reader::add_search_path(std::string_view stored, const FileStamp& stamp) {
  const std::size_t i = m_paths.size();
  std::string path(stored);
  if (m_relocatable) {
    if (!is_relative(path)) return fail("absolute search path in a relocatable index");
    path = normalize_path(join_path(m_expect.base_dir, path));
  }
  if (m_expect.key != nullptr) {
    const auto& want = m_expect.key->search_paths;
    if (i >= want.size() || want[i] != path) {
      return fail("written for another search-path list (path " + std::to_string(i) + " differs)");
    }
  } else if (m_expect.search_paths != nullptr) {
    const auto& want = *m_expect.search_paths;
    const std::string have = is_relative(path) ? path : normalize_path(path);
    if (i >= want.size() || absolute_path(want[i]) != have) {
      return fail("made for another search-path list (path " + std::to_string(i) + ": " + have + ")");
    }
    path = want[i];  // the Index carries the caller's exact strings
  }
  m_builder.add_search_path(path, stamp);
  m_paths.push_back(std::move(path));
  return true;
}

bool Reader::search_paths(od::value v) {
  if (!each(v, "\"search_paths\"", [&](od::value xv) { return search_path(xv); })) return false;
  const std::vector<std::string>* want =
      m_expect.key != nullptr ? &m_expect.key->search_paths : m_expect.search_paths;
  if (want != nullptr && want->size() != m_paths.size()) {
    return fail("written for another search-path list (" + std::to_string(m_paths.size()) +
                " paths, not " + std::to_string(want->size()) + ")");
  }
  return true;
}

bool Reader::first_error(od::value v) {
  bool null = false;
  if (auto e = v.is_null().get(null)) return fail(e, "\"first_error\"");
  if (null) return true;
  od::object obj;
  if (auto e = v.get_object().get(obj)) return fail(e, "\"first_error\"");
  std::size_t k = 0;
  for (auto f : obj) {
    std::string_view name;
    if (auto e = f.unescaped_key().get(name)) return fail(e, "\"first_error\"");
    if (k == 0 && name == "dist") {
      const bool ok = row(f.value(), "\"first_error\" distribution", 5, [&](std::size_t n, od::value xv) {
        std::string_view s;
        switch (n) {
          case 0: return u64(xv, "first error distribution", m_error_dist);
          case 1: return bytes(xv, "first error name", m_s1, s) && (m_error_name = s, true);
          case 2: return bytes(xv, "first error version", m_s1, s) && (m_error_version = s, true);
          case 3: return bytes(xv, "first error dir", m_s1, s) && (m_error_dir = s, true);
          default: return index(xv, "first error search path", m_paths.size(), m_error_path);
        }
      });
      if (!ok) return false;
    } else if (k == 1 && name == "message") {
      std::string_view s;
      if (!bytes(f.value(), "first error message", m_s1, s)) return false;
      if (s.empty()) return fail("empty first error message");
      m_error_message = s;
    } else {
      return fail("unexpected field in \"first_error\"");
    }
    ++k;
  }
  if (k != 2) return fail("incomplete \"first_error\"");
  m_has_error = true;
  return true;
}

bool Reader::section_row(od::value v) {
  Section s;
  const bool ok = row(v, "section row", 5, [&](std::size_t k, od::value xv) {
    switch (k) {
      case 0: return kept_bytes(xv, "section name", s.name);
      case 1: return u64(xv, "section offset", s.offset);
      case 2: return u64(xv, "section length", s.length);
      case 3:
        // Its digits are checked when the section is read (fetch()).
        if (!string(xv, "section hash", m_s1, s.hash)) return false;
        if (s.hash.size() != 16 || s.hash.data() == m_s1.data()) return fail("section hash is not 16 hex digits");
        return true;
      default: return u64(xv, "section count", s.count);
    }
  });
  if (!ok) return false;
  const std::string_view name = s.name;
  if (name.starts_with("group:")) {
    s.kind = Kind::group;
    s.group = name.substr(6);
  } else if (name == "dists") {
    s.kind = Kind::dists;
  } else if (name == "listings") {
    s.kind = Kind::listings;
  } else if (name == "watched") {
    s.kind = Kind::watched;
  } else if (name == "watch_digest") {
    s.kind = Kind::watch_digest;
  } else {
    return fail("unknown section \"" + std::string(s.name) + "\"");
  }
  m_sections.push_back(std::move(s));
  return true;
}

bool Reader::sections(od::value v) {
  m_sections.reserve(m_bytes.head().size() / 40 + 4);  // a row takes 50 bytes or more
  return each(v, "\"sections\"", [&](od::value xv) { return section_row(xv); });
}

/// The table's layout (check_layout() in cache_sections.cpp), then what
/// the head says that depends on it.
bool Reader::check_layout() {
  if (!detail::check_layout(m_sections, m_bytes.head().size(), m_bytes.size(), m_layout, m_problem)) return false;
  m_dist_count = m_layout.dists->count;
  if (m_dist_count > std::numeric_limits<std::uint32_t>::max()) return fail("too many distributions");
  if (m_has_error && m_error_dist >= m_dist_count) return fail("first error distribution out of range");
  return true;
}

/// The sections must follow line 1 without gaps or overlaps, end where the
/// file ends (so a truncated file is caught without reading it), and come in
/// the documented order.
bool Reader::head(od::document& doc) {
  od::object root;
  if (auto e = doc.get_object().get(root)) {
    return fail(e == simdjson::INCORRECT_TYPE ? "not an epload index (not a JSON object)"
                                              : std::string("malformed JSON (") + simdjson::error_message(e) + ")");
  }
  static constexpr std::string_view k_fields[] = {"format",        "version",      "checksum",
                                                  "key",           "relocatable",  "scanned_at_ns",
                                                  "search_paths",  "first_error",  "sections"};
  std::size_t k = 0;
  for (auto f : root) {
    std::string_view name;
    if (auto e = f.unescaped_key().get(name)) return fail(e, "top-level field");
    if (k >= std::size(k_fields) || name != k_fields[k]) {
      return fail(k == 0 ? "not an epload index (no \"format\" field first)"
                         : "unexpected top-level field \"" + std::string(name) + "\"");
    }
    if (!head_field(k, f.value())) return false;
    ++k;
  }
  if (k != std::size(k_fields)) {
    return fail(k == 0 ? "not an epload index (empty object)" : "truncated (missing top-level fields)");
  }
  return true;
}

/// Field k of the head (k_fields[k]).
bool Reader::head_field(std::size_t k, od::value v) {
  switch (k) {
    case 0: {
      std::string_view format;
      std::string scratch;
      if (!string(v, "\"format\"", scratch, format) || format != k_format) {
        m_problem.text.clear();
        return fail("not an epload index");
      }
      return true;
    }
    case 1: {
      std::int64_t version = 0;
      if (!i64(v, "\"version\"", version)) return false;
      if (version != k_cache_format_version) {
        return fail("format version " + std::to_string(version) + ", this build reads " +
                    std::to_string(k_cache_format_version));
      }
      return true;
    }
    case 2: return checksum(v);
    case 3: return key(v);
    case 4:
      if (auto e = v.get_bool().get(m_relocatable)) return fail(e, "\"relocatable\"");
      if (m_relocatable && m_expect.key != nullptr) return fail("a relocatable index is not a cache file");
      if (m_relocatable && m_expect.base_dir.empty()) return fail("relocatable index without a base directory");
      return true;
    case 5: {
      std::int64_t at = 0;
      if (!i64(v, "\"scanned_at_ns\"", at)) return false;
      m_builder.set_scanned_at(at);
      return true;
    }
    case 6: return search_paths(v);
    case 7: return first_error(v);
    default: return sections(v);
  }
}

}  // namespace epload::detail
