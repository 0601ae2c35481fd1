// cache.cpp — the serialized index: JSON written by hand, read with simdjson.
//
// This is the only translation unit that includes simdjson (its header costs
// seconds to compile).  The layout, one value per line so a person can read
// and diff it:
//
//   {"format":"epload-index","version":1,"checksum":"<16 hex digits>",
//   "key":{"interpreter":S,"cwd":S},
//   "relocatable":false,
//   "scanned_at_ns":N,
//   "search_paths":[{"path":S,"stamp":[dev,ino,size,mtime_ns,ctime_ns,mode]},...],
//   "dists":[[name,version,dir,path,error],...],
//   "entry_points":[[dist,group,name,value],...],
//   "watched":[[path,rel,dev,ino,size,mtime_ns,ctime_ns,mode],...]}
//
// Strings (S) are byte strings: names come from UTF-8 text, but paths on
// Linux are arbitrary bytes.  A string that is valid UTF-8 is written as a
// JSON string (", \ and control characters escaped); any other is written as
// {"hex":"2f746d70ff"}, which decodes back to the exact bytes.  Entry points
// are written in the Index's order (group by group, discovery order within a
// group); IndexBuilder's stable sort by group therefore reproduces it exactly.
// A distribution's "dir" is stored relative to its search path when it is
// inside it (the scanner's dirs always are), which keeps the file ~12%
// smaller; one that starts with '/' is stored whole.  In a relocatable file
// (an index shipped with an environment) the search paths are relative to
// the file's directory, so the whole file moves with the environment.
//
// The checksum is a 64-bit hash of every byte after the checksum's closing
// quote to the end of the file.  Without it a flipped byte inside a string
// (a disk error, a stray editor) would parse into a plausible, wrong answer;
// with it, any change confined to one aligned 8-byte word is always detected
// (each step of the hash is a bijection of its state) and any other change
// with probability 1 - 2^-64.  It costs ~0.25 ms per MB.
//
// Reading is strict and single-pass: the fields must come in exactly this
// order, every index is bounds-checked, every number range-checked, every
// type checked, nothing may follow the root object.  Any defect is an
// Errc::cache error naming the file and the problem; the caller rebuilds.
// simdjson's On-Demand API parses straight into IndexBuilder, whose arena
// copies the strings; no DOM is built, and strings without escapes are read
// in place (cache_text.cpp).  The 1.5 MB file of 6,000 distributions parses
// into an Index in ~3 ms, a third of it page faults for fresh memory.
//
// The writer is cache_write.cpp; the hash and the string decoder it shares
// with this reader are in cache_text.cpp.
#include <unistd.h>  // read

#include <simdjson.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>  // read buffer

#include "cache_internal.hpp"
#include "epload/profile.hpp"
#include "stamp.hpp"

namespace epload::detail {

namespace {

namespace od = simdjson::ondemand;

constexpr std::string_view k_format = "epload-index";

// ---- reading ----------------------------------------------------------------




/// Parses one document into an IndexBuilder; the first problem wins.
class Parser {
 public:
  Parser(std::string_view file, const ReadExpectations& expect) : m_file(file), m_expect(expect) {}

  /// Parses `json` (the whole file).

  Result<Index> run(simdjson::padded_string_view json);

 private:
  bool fail(std::string what) {
    if (m_problem.empty()) m_problem = std::move(what);
    return false;
  }
  bool fail(simdjson::error_code e, std::string_view where) {
    return fail("malformed " + std::string(where) + " (" + simdjson::error_message(e) + ")");
  }

  bool string(od::value v, std::string_view where, std::string& scratch, std::string_view& out);
  bool bytes(od::value v, std::string_view where, std::string& scratch, std::string_view& out);
  bool u64(od::value v, std::string_view where, std::uint64_t& out);
  bool i64(od::value v, std::string_view where, std::int64_t& out);
  bool index(od::value v, std::string_view where, std::size_t limit, std::uint32_t& out);
  bool stamp_field(od::value v, std::size_t k, std::string_view where, FileStamp& s);

  bool header(od::object root);
  bool checksum(od::value v);
  bool key(od::value v);
  bool search_paths(od::value v);
  bool search_path(od::value v);
  bool dists(od::value v);
  bool dist(od::value v);
  bool entry_points(od::value v);
  bool entry_point(od::value v);
  bool watched(od::value v);
  bool watched_file(od::value v);

  std::string_view m_file;
  std::string_view m_json;  // the whole input, for the checksum
  const ReadExpectations& m_expect;
  std::string m_problem;
  IndexBuilder m_builder;
  bool m_relocatable = false;
  std::string m_interpreter, m_cwd;
  std::vector<std::string> m_paths;  // as they go into the Index
  std::size_t m_dist_count = 0;
  std::string m_s1, m_s2, m_s3, m_s4;  // scratch for decoded strings
  std::string m_join;                  // scratch: search path + dir
};

bool Parser::string(od::value v, std::string_view where, std::string& scratch,
                    std::string_view& out) {
  od::raw_json_string raw;
  if (auto e = v.get_raw_json_string().get(raw)) return fail(e, where);
  const char* p = raw.raw();
  const char* end = m_json.data() + m_json.size();
  if (p < m_json.data() || p > end || !decode_json_string(p, end, scratch, out)) {
    return fail("malformed string in " + std::string(where));
  }
  return true;
}

bool Parser::bytes(od::value v, std::string_view where, std::string& scratch,
                   std::string_view& out) {
  od::json_type type;
  if (auto e = v.type().get(type)) return fail(e, where);
  if (type == od::json_type::string) return string(v, where, scratch, out);
  if (type != od::json_type::object) return fail(std::string(where) + " is not a string");
  od::object obj;
  if (auto e = v.get_object().get(obj)) return fail(e, where);
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

bool Parser::u64(od::value v, std::string_view where, std::uint64_t& out) {
  if (auto e = v.get_uint64().get(out)) return fail(e, where);
  return true;
}

bool Parser::i64(od::value v, std::string_view where, std::int64_t& out) {
  if (auto e = v.get_int64().get(out)) return fail(e, where);
  return true;
}

bool Parser::index(od::value v, std::string_view where, std::size_t limit, std::uint32_t& out) {
  std::uint64_t n = 0;
  if (!u64(v, where, n)) return false;
  if (n >= limit) return fail(std::string(where) + " " + std::to_string(n) + " is out of range");
  out = static_cast<std::uint32_t>(n);
  return true;
}

/// Field k (0..5) of a stamp: dev, ino, size, mtime_ns, ctime_ns, mode.
bool Parser::stamp_field(od::value v, std::size_t k, std::string_view where, FileStamp& s) {
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

bool Parser::checksum(od::value v) {
  od::raw_json_string raw;
  if (auto e = v.get_raw_json_string().get(raw)) return fail(e, "\"checksum\"");
  // raw() points just past the opening quote, into the input buffer.
  const char* p = raw.raw();
  const char* end = m_json.data() + m_json.size();
  if (p < m_json.data() || end - p < 17 || p[16] != '"') return fail("malformed \"checksum\"");
  char want[16];
  const std::string_view body(p + 17, static_cast<std::size_t>(end - (p + 17)));
  put_hex16(want, body_hash(body));
  if (std::memcmp(want, p, 16) != 0) return fail("checksum mismatch (the file is corrupt or truncated)");
  return true;
}

bool Parser::key(od::value v) {
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
  if (m_expect.key != nullptr &&
      (m_interpreter != m_expect.key->interpreter || m_cwd != m_expect.key->cwd)) {
    return fail("written for another key (interpreter or current directory differs)");
  }
  return true;
}

bool Parser::search_path(od::value v) {
  od::object obj;
  if (auto e = v.get_object().get(obj)) return fail(e, "search path");
  std::string_view stored;
  FileStamp stamp;
  std::size_t k = 0;
  for (auto f : obj) {
    std::string_view name;
    if (auto e = f.unescaped_key().get(name)) return fail(e, "search path");
    if (k == 0 && name == "path") {
      if (!bytes(f.value(), "search path", m_s1, stored)) return false;
    } else if (k == 1 && name == "stamp") {
      od::array arr;
      if (auto e = f.value().get_array().get(arr)) return fail(e, "search path stamp");
      std::size_t n = 0;
      for (auto x : arr) {
        od::value xv;
        if (auto e = x.get(xv)) return fail(e, "search path stamp");
        if (!stamp_field(xv, n++, "search path stamp", stamp)) return false;
      }
      if (n != 6) return fail("search path stamp has " + std::to_string(n) + " fields, not 6");
    } else {
      return fail("unexpected field in a search path");
    }
    ++k;
  }
  if (k != 2) return fail("incomplete search path");

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

bool Parser::search_paths(od::value v) {
  od::array arr;
  if (auto e = v.get_array().get(arr)) return fail(e, "\"search_paths\"");
  for (auto x : arr) {
    od::value xv;
    if (auto e = x.get(xv)) return fail(e, "\"search_paths\"");
    if (!search_path(xv)) return false;
  }
  const std::vector<std::string>* want =
      m_expect.key != nullptr ? &m_expect.key->search_paths : m_expect.search_paths;
  if (want != nullptr && want->size() != m_paths.size()) {
    return fail("written for another search-path list (" + std::to_string(m_paths.size()) +
                " paths, not " + std::to_string(want->size()) + ")");
  }
  return true;
}

bool Parser::dist(od::value v) {
  od::array arr;
  if (auto e = v.get_array().get(arr)) return fail(e, "distribution");
  std::string_view name, version, dir, error;
  std::uint32_t path = 0;
  std::size_t k = 0;
  for (auto x : arr) {
    od::value xv;
    if (auto e = x.get(xv)) return fail(e, "distribution");
    bool ok = true;
    switch (k) {
      case 0: ok = bytes(xv, "distribution name", m_s1, name); break;
      case 1: ok = bytes(xv, "distribution version", m_s2, version); break;
      case 2: ok = bytes(xv, "distribution dir", m_s3, dir); break;
      case 3: ok = index(xv, "distribution search path", m_paths.size(), path); break;
      case 4: ok = bytes(xv, "distribution error", m_s4, error); break;
      default: return fail("distribution has more than 5 fields");
    }
    if (!ok) return false;
    ++k;
  }
  if (k != 5) return fail("distribution has " + std::to_string(k) + " fields, not 5");
  if (is_relative(dir)) {
    m_join.assign(m_paths[path]);
    if (!m_join.empty() && m_join.back() != '/') m_join.push_back('/');
    m_join.append(dir);
    m_builder.add_distribution(name, version, m_join, path, error);
  } else {
    m_builder.add_distribution(name, version, dir, path, error);
  }
  ++m_dist_count;
  return true;
}

bool Parser::dists(od::value v) {
  od::array arr;
  if (auto e = v.get_array().get(arr)) return fail(e, "\"dists\"");
  for (auto x : arr) {
    od::value xv;
    if (auto e = x.get(xv)) return fail(e, "\"dists\"");
    if (!dist(xv)) return false;
  }
  return true;
}

bool Parser::entry_point(od::value v) {
  od::array arr;
  if (auto e = v.get_array().get(arr)) return fail(e, "entry point");
  std::uint32_t dist = 0;
  std::string_view group, name, value;
  std::size_t k = 0;
  for (auto x : arr) {
    od::value xv;
    if (auto e = x.get(xv)) return fail(e, "entry point");
    bool ok = true;
    switch (k) {
      case 0: ok = index(xv, "entry point distribution", m_dist_count, dist); break;
      case 1: ok = bytes(xv, "entry point group", m_s1, group); break;
      case 2: ok = bytes(xv, "entry point name", m_s2, name); break;
      case 3: ok = bytes(xv, "entry point value", m_s3, value); break;
      default: return fail("entry point has more than 4 fields");
    }
    if (!ok) return false;
    ++k;
  }
  if (k != 4) return fail("entry point has " + std::to_string(k) + " fields, not 4");
  m_builder.add_entry_point(dist, group, name, value);
  return true;
}

bool Parser::entry_points(od::value v) {
  od::array arr;
  if (auto e = v.get_array().get(arr)) return fail(e, "\"entry_points\"");
  for (auto x : arr) {
    od::value xv;
    if (auto e = x.get(xv)) return fail(e, "\"entry_points\"");
    if (!entry_point(xv)) return false;
  }
  return true;
}

bool Parser::watched_file(od::value v) {
  od::array arr;
  if (auto e = v.get_array().get(arr)) return fail(e, "watched file");
  std::uint32_t path = 0;
  std::string_view rel;
  FileStamp stamp;
  std::size_t k = 0;
  for (auto x : arr) {
    od::value xv;
    if (auto e = x.get(xv)) return fail(e, "watched file");
    bool ok = true;
    if (k == 0) ok = index(xv, "watched file search path", m_paths.size(), path);
    else if (k == 1) ok = bytes(xv, "watched file path", m_s1, rel);
    else ok = stamp_field(xv, k - 2, "watched file stamp", stamp);
    if (!ok) return false;
    ++k;
  }
  if (k != 8) return fail("watched file has " + std::to_string(k) + " fields, not 8");
  m_builder.add_watched_file(path, rel, stamp);
  return true;
}

bool Parser::watched(od::value v) {
  od::array arr;
  if (auto e = v.get_array().get(arr)) return fail(e, "\"watched\"");
  for (auto x : arr) {
    od::value xv;
    if (auto e = x.get(xv)) return fail(e, "\"watched\"");
    if (!watched_file(xv)) return false;
  }
  return true;
}

bool Parser::header(od::object root) {
  static constexpr std::string_view k_fields[] = {
      "format", "version", "checksum", "key", "relocatable", "scanned_at_ns",
      "search_paths", "dists", "entry_points", "watched"};
  std::size_t k = 0;
  for (auto f : root) {
    std::string_view name;
    if (auto e = f.unescaped_key().get(name)) return fail(e, "top-level field");
    if (k >= std::size(k_fields) || name != k_fields[k]) {
      return fail(k == 0 ? "not an epload index (no \"format\" field first)"
                         : "unexpected top-level field \"" + std::string(name) + "\"");
    }
    od::value v = f.value();
    switch (k) {
      case 0: {
        std::string_view format;
        std::string scratch;
        if (!string(v, "\"format\"", scratch, format) || format != k_format) {
          m_problem.clear();
          return fail("not an epload index");
        }
        break;
      }
      case 1: {
        std::int64_t version = 0;
        if (!i64(v, "\"version\"", version)) return false;
        if (version != k_cache_format_version) {
          return fail("format version " + std::to_string(version) + ", this build reads " +
                      std::to_string(k_cache_format_version));
        }
        break;
      }
      case 2:
        if (!checksum(v)) return false;
        break;
      case 3:
        if (!key(v)) return false;
        break;
      case 4:
        if (auto e = v.get_bool().get(m_relocatable)) return fail(e, "\"relocatable\"");
        if (m_relocatable && m_expect.key != nullptr) return fail("a relocatable index is not a cache file");
        if (m_relocatable && m_expect.base_dir.empty()) return fail("relocatable index without a base directory");
        break;
      case 5: {
        std::int64_t at = 0;
        if (!i64(v, "\"scanned_at_ns\"", at)) return false;
        m_builder.set_scanned_at(at);
        break;
      }
      case 6:
        if (!search_paths(v)) return false;
        break;
      case 7:
        if (!dists(v)) return false;
        break;
      case 8:
        if (!entry_points(v)) return false;
        break;
      case 9:
        if (!watched(v)) return false;
        break;
    }
    ++k;
  }
  if (k != std::size(k_fields)) {
    return fail(k == 0 ? "not an epload index (empty object)" : "truncated (missing top-level fields)");
  }
  return true;
}

Result<Index> Parser::run(simdjson::padded_string_view json) {
  m_json = json;
  od::parser parser;
  od::document doc;
  od::object root;
  if (auto e = parser.iterate(json).get(doc)) {
    fail(e, "JSON");
  } else if (auto e2 = doc.get_object().get(root)) {
    fail(e2 == simdjson::INCORRECT_TYPE ? "not an epload index (not a JSON object)"
                                       : std::string("malformed JSON (") + simdjson::error_message(e2) + ")");
  } else if (header(root)) {
    // Nothing may follow the root object.
    const char* rest = nullptr;
    if (doc.current_location().get(rest) != simdjson::OUT_OF_BOUNDS) fail("trailing data after the index");
  }
  if (!m_problem.empty()) {
    return Error{Errc::cache, "cache file " + std::string(m_file) + ": " + m_problem};
  }
  return m_builder.build();
}

}  // namespace

Result<Index> read_index_fd(int fd, std::string_view file, const ReadExpectations& expect) {
  struct stat st;
  profile::count(profile::Counter::stat);
  if (::fstat(fd, &st) != 0) {
    return Error{Errc::cache, "cache file " + std::string(file) + ": fstat: " + std::strerror(errno)};
  }
  constexpr off_t k_max = off_t{1} << 30;  // far above any real index; refuse absurd sizes
  if (!S_ISREG(st.st_mode) || st.st_size > k_max) {
    return Error{Errc::cache, "cache file " + std::string(file) + ": not a regular file of sane size"};
  }
  const std::size_t size = static_cast<std::size_t>(st.st_size);
  std::unique_ptr<char[]> buf(new char[size + simdjson::SIMDJSON_PADDING]);
  std::size_t got = 0;
  {
    profile::Span span(profile::Phase::read, file);
    while (got < size) {
      profile::count(profile::Counter::read);
      const ssize_t n = ::read(fd, buf.get() + got, size - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        return Error{Errc::cache, "cache file " + std::string(file) + ": read: " + std::strerror(errno)};
      }
      if (n == 0) break;  // shrank under us: parse what is there (it will fail)
      got += static_cast<std::size_t>(n);
    }
  }
  std::memset(buf.get() + got, 0, simdjson::SIMDJSON_PADDING);
  if (got == 0) return Error{Errc::cache, "cache file " + std::string(file) + ": empty"};
  profile::Span span(profile::Phase::parse, file);
  Parser parser(file, expect);
  return parser.run(simdjson::padded_string_view(buf.get(), got, got + simdjson::SIMDJSON_PADDING));
}

}  // namespace epload::detail
