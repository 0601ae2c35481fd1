// learned.cpp — the learned-devices store file.
//
// Format (text, one record per line, fields separated by TAB; '\\', TAB, LF
// and CR inside a field are escaped as \\ \t \n \r):
//
//   epload-learned 5
//   <search path #> <metadata_dir> <name> <value> <kind> <library> <dev>:<ino>:<size>:<mtime_ns>:<ctime_ns>:<mode> <abi> <learned> <devices> <failure>
//   ...
//   end <record count>
//
// <metadata_dir> and <library> are relative to the search path unless
// absolute; <kind> is n (native library) or p (Python module: <library> is its file),
// <abi> is the declared ABI tag or -1 (no section), <learned> 0 or 1,
// A library's kind is what its file is (resolve.hpp: an extension module
// exporting PyInit_<module> is p), the same for every front; version 3 had
// the Python front record p for every backend it imported.
// <devices> space-separated "d:<name>" / "l:<name>" / "l:<name>=<kind>" (device
// names and kinds never need escaping: they are validated), <failure> the
// message of the backend's last failed load (empty: none since; shown by
// `epload devices`, never used to decide a load).  Every front (the
// CLI, C++ hosts, the Python package) reads and writes this one file.  The trailer makes truncation detectable.
//
// Why this shape: a warm start reads this one file instead of opening every
// backend library (1,000 libraries would cost thousands of system calls), so
// the read must be cheap: one open, one fstat, one read into memory mapped
// and populated at once, then an in-place parse whose records are views into
// that memory (no allocation per record).
// Any defect makes the whole file "absent": it is a cache of facts the
// loader can recompute (and re-checks against the library's stamp before
// trusting a learned fact at load time), never an authority.  Like the index
// cache, a file another user owns or can write is ignored: its paths would
// be handed to dlopen.
#include "learned.hpp"

#include <fcntl.h>     // open
#include <sys/mman.h>  // mmap
#include <sys/stat.h>  // fstat
#include <unistd.h>    // close, geteuid, pread

#include <bit>      // endian
#include <cerrno>   // errno
#include <cstring>  // strerror, memchr


#include "atomic_file.hpp"  // dir_name, make_safe_dir, write_atomic
#include "fnv.hpp"          // the file name
#include "kept_files.hpp"   // keep_files
#include "memory.hpp"       // big_alloc
#include "pread_full.hpp"

namespace epload::detail {

namespace {

// Version 5: version 4 stores may hold a PrivateUse1 name learned from a
// registration epload itself made ahead of a load (any declared device was
// taken for one), which the version-5 probe never records.
constexpr std::string_view k_magic = "epload-learned 5";

/// The store files (learned_file_path()) of every version, cleared and
/// pruned with the cache's files.
constexpr KeptFiles k_store_files{"learned-", ".txt", "epload-learned "};
[[maybe_unused]] const bool k_store_files_kept = keep_files(k_store_files);
constexpr std::size_t k_max_file = 64u << 20;

void append_escaped(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      default: out.push_back(c);
    }
  }
}

// Unescapes [p, end) in place; returns the new view or false on a bad escape.
bool unescape(char* p, char* end, std::string_view& out) {
  char* w = p;
  for (char* r = p; r < end; ++r) {
    if (*r != '\\') {
      *w++ = *r;
      continue;
    }
    if (++r == end) return false;
    switch (*r) {
      case '\\': *w++ = '\\'; break;
      case 't': *w++ = '\t'; break;
      case 'n': *w++ = '\n'; break;
      case 'r': *w++ = '\r'; break;
      default: return false;
    }
  }
  out = {p, static_cast<std::size_t>(w - p)};
  return true;
}

// Eight ASCII digits in `w` (the bytes at p, little-endian)?  A byte below
// '0' borrows or one above '9' carries into its top bit.
bool eight_digits(std::uint64_t w) {
  return (((w + 0x4646464646464646ull) | (w - 0x3030303030303030ull)) & 0x8080808080808080ull) == 0;
}

// Their value: three multiply-and-shift steps instead of eight dependent
// multiply-adds (pairs, then quads, then the eight).
std::uint64_t eight_digits_value(std::uint64_t w) {
  w -= 0x3030303030303030ull;
  w = w * 10 + (w >> 8);
  constexpr std::uint64_t mask = 0x000000FF000000FFull;
  constexpr std::uint64_t mul1 = 100 + (1000000ull << 32), mul2 = 1 + (10000ull << 32);
  return (((w & mask) * mul1 + ((w >> 16) & mask) * mul2) >> 32) & 0xffffffffu;
}

// Decimal digits only, without overflow: exactly what std::to_string wrote.
// Reads from p while there are digits and leaves p after them; false (p
// then undefined) when there is none or the number passes 64 bits.  Up to
// 19 digits cannot overflow, so only a 20th needs the check (a division per
// digit had made this a fifth of a 1,000-record read).  The first 16 digits
// are taken eight at a time where eight are there: a stamp is mostly two
// 19-digit nanosecond times, and a digit at a time made this a tenth of
// creating a 1,000-backend loader.
bool take_u64(const char*& p, const char* end, std::uint64_t& v) {
  const char* const first = p;
  std::uint64_t u = 0;
  for (int k = 0; std::endian::native == std::endian::little && k < 2 && end - p >= 8; ++k) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    if (!eight_digits(w)) break;
    u = u * 100000000u + eight_digits_value(w);
    p += 8;
  }
  for (; p < end; ++p) {
    const auto d = static_cast<unsigned char>(*p - '0');
    if (d > 9) break;
    if (p - first >= 19 && (p - first > 19 || u > (~std::uint64_t{0} - d) / 10)) return false;
    u = u * 10 + d;
  }
  if (p == first) return false;
  v = u;
  return true;
}

bool take_i64(const char*& p, const char* end, std::int64_t& v) {
  const bool neg = p < end && *p == '-';
  if (neg) ++p;
  std::uint64_t u = 0;
  // Up to 2^63 - 1, or 2^63 after '-' (negated in unsigned arithmetic: no
  // signed overflow).
  if (!take_u64(p, end, u) || u > (std::uint64_t{1} << 63) - (neg ? 0 : 1)) return false;
  v = static_cast<std::int64_t>(neg ? 0 - u : u);
  return true;
}

bool parse_i64(std::string_view s, std::int64_t& v) {
  const char* p = s.data();
  return take_i64(p, p + s.size(), v) && p == s.data() + s.size();
}

// dev, ino and size are unsigned 64-bit and mode 32-bit, as the writer
// wrote them: a negative or larger number is corrupt.  One pass: each
// number is read where the previous one's ':' ends (a search for the
// colons, then a parse of each field, read every byte twice).
bool parse_stamp(std::string_view s, FileStamp& st) {
  const char* p = s.data();
  const char* const end = p + s.size();
  auto colon = [&] { return p < end && *p++ == ':'; };
  std::uint64_t mode = 0;
  if (!take_u64(p, end, st.dev) || !colon() || !take_u64(p, end, st.ino) || !colon() ||
      !take_u64(p, end, st.size) || !colon() || !take_i64(p, end, st.mtime_ns) || !colon() ||
      !take_i64(p, end, st.ctime_ns) || !colon() || !take_u64(p, end, mode) || p != end ||
      mode > 0xffffffffu) {
    return false;
  }
  st.mode = static_cast<std::uint32_t>(mode);
  return true;
}

bool valid_devices_field(std::string_view s) {
  // "d:x l:y"; names are checked loosely here (no control bytes) and
  // strictly (valid_device_name) when the loader uses them.
  while (!s.empty()) {
    std::size_t end = s.find(' ');
    std::string_view item = s.substr(0, end);
    if (item.size() < 3 || (item[0] != 'd' && item[0] != 'l') || item[1] != ':') return false;
    for (unsigned char c : item) {
      if (c < 0x20 || c == 0x7f) return false;
    }
    if (end == std::string_view::npos) break;
    s.remove_prefix(end + 1);
    if (s.empty()) return false;  // trailing space
  }
  return true;
}

constexpr int k_fields = 11;

enum class Split { ok, no_line_end, wrong_fields };

/// Finds the end of the record at `line` (its LF, the first before
/// `buf_end`: *le), splits it at its tabs into exactly k_fields fields, and
/// says whether it holds a backslash anywhere (then each text field is
/// checked for escapes).  One pass over the bytes: a search call per field
/// and per escape check had been a third of a 1,000-record read.
Split split_record(char* line, char* buf_end, char*& le, char* (&begin)[k_fields], char* (&end)[k_fields],
                   bool& backslash) {
  int n = 0;
  bool too_many = false;  // decided once the LF is found (none: truncated)
  begin[0] = line;
  backslash = false;
  auto tab_at = [&](char* t) {
    if (n + 1 == k_fields) {
      too_many = true;
      return;
    }
    end[n] = t;
    begin[++n] = t + 1;
  };
  auto lf_at = [&](char* t) {
    le = t;
    end[n] = t;
    return n + 1 == k_fields && !too_many ? Split::ok : Split::wrong_fields;
  };
  for (char* p = line; p < buf_end; ++p) {
    if (*p == '\n') return lf_at(p);
    if (*p == '\t') tab_at(p);
    backslash |= *p == '\\';
  }
  return Split::no_line_end;
}

}  // namespace

std::string learned_file_path(const std::string& cache_dir, std::string_view group,
                              std::span<const std::string_view> search_paths) {
  Fnv1a fnv;
  fnv.field(k_magic);
  fnv.field(group);
  for (std::string_view p : search_paths) fnv.field(p);
  const std::uint64_t h = fnv.value;
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string name = "learned-";
  for (int shift = 60; shift >= 0; shift -= 4) name += k_hex[(h >> shift) & 0xf];
  name += ".txt";
  if (cache_dir.empty()) return name;
  return cache_dir.back() == '/' ? cache_dir + name : cache_dir + '/' + name;
}

LearnedFile LearnedFile::open(const std::string& path, std::string* why, bool map_file) {
  LearnedFile out;
  auto fail = [&](const std::string& reason) {
    if (why) *why = path + ": " + reason;
    out.m_next = out.m_end = nullptr;  // next() yields nothing (the memory goes with the mapping)
    out.m_map = Mapping{};
    return std::move(out);
  };
  // O_NONBLOCK: a FIFO in its place must not hang the open (fstat rejects it).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return fail(std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail("not a regular file");
  }
  if (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    ::close(fd);
    return fail("ignored: owned by another user or writable by group/others");
  }
  if (static_cast<std::uint64_t>(st.st_size) > k_max_file) {
    ::close(fd);
    return fail("implausibly large");
  }
  const std::size_t size = static_cast<std::size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return fail("empty");
  }
  // Anonymous memory, populated in one call, then the file read into it:
  // the records' views must outlive anything done to the file (a private
  // mapping of the file itself loses even its copied pages when the file is
  // truncated, and the next read of a view is SIGBUS).  MAP_POPULATE
  // allocates the pages in one system call instead of a fault each.
  // Or, asked to (map_file), a private mapping of the file: its pages come
  // from the page cache in one call (populate_read: MAP_POPULATE would copy
  // every page of a writable mapping), and only a page whose escapes are
  // undone is copied.
  void* map = map_file ? ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0) : MAP_FAILED;
  const bool mapped_file = map != MAP_FAILED;
  if (mapped_file) {
    populate_read(map, size);
  } else {
    map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  }
  if (map == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    return fail(std::string("mmap: ") + std::strerror(err));
  }
  out.m_map.data = map;
  out.m_map.size = size;
  const ssize_t got = mapped_file ? static_cast<ssize_t>(size) : pread_full(fd, map, size, 0);
  const int err = errno;
  ::close(fd);
  if (got != static_cast<ssize_t>(size)) {
    return fail(got >= 0 ? "truncated while being read" : std::string("read: ") + std::strerror(err));
  }
  out.m_next = static_cast<char*>(map);
  out.m_end = out.m_next + size;
  char* le = nullptr;
  char* line = out.next_line(le);
  if (line == nullptr || std::string_view(line, static_cast<std::size_t>(le - line)) != k_magic) {
    return fail("not a learned-devices file of this version");
  }
  out.m_path = path;
  return out;
}

/// The next line, without its LF (at *line_end); nullptr when no whole line is left.
char* LearnedFile::next_line(char*& line_end) {
  if (m_next >= m_end) return nullptr;
  char* start = m_next;
  char* nl = static_cast<char*>(std::memchr(m_next, '\n', static_cast<std::size_t>(m_end - m_next)));
  if (nl == nullptr) return nullptr;
  line_end = nl;
  m_next = nl + 1;
  return start;
}

bool LearnedFile::next(LearnedRecord& r, std::string* why) {
  if (m_next == nullptr) return false;  // no file, the end, or damage
  auto fail = [&](const char* reason) {
    if (why) *why = m_path + ": " + reason;
    m_next = m_end = nullptr;
    m_damaged = true;
    return false;
  };
  // Lines end in LF (the trailer too); a record is split at its tabs in
  // the same pass that finds its LF, and a field is unescaped only when it
  // holds a backslash: the common record is scanned about once.
  char* line = m_next;
  if (m_end - line >= 4 && std::memcmp(line, "end ", 4) == 0) {
    char* le = nullptr;
    if (next_line(le) == nullptr) return fail("truncated (no trailer)");
    std::int64_t n = -1;
    if (!parse_i64(std::string_view(line + 4, static_cast<std::size_t>(le - line - 4)), n) ||
        n != static_cast<std::int64_t>(m_count) || m_next != m_end) {
      return fail("bad trailer");
    }
    m_next = m_end = nullptr;
    m_ended = true;
    return false;
  }
  char* fields[k_fields];
  char* fields_end[k_fields];
  bool backslash = false;
  char* le = nullptr;
  switch (split_record(line, m_end, le, fields, fields_end, backslash)) {
    case Split::ok: break;
    case Split::no_line_end: return fail("truncated (no trailer)");
    case Split::wrong_fields: return fail("wrong number of fields");
  }
  m_next = le + 1;
  auto view = [&](int i) { return std::string_view(fields[i], static_cast<std::size_t>(fields_end[i] - fields[i])); };
  r = LearnedRecord{};
  const std::string_view kind = view(4);
  if (kind != "n" && kind != "p") return fail("unknown backend kind");
  r.kind = kind[0];
  std::int64_t sp = -1;
  if (!parse_i64(view(0), sp) || sp < 0 || sp > 0xffffff) return fail("bad search path number");
  r.search_path = static_cast<std::uint32_t>(sp);
  std::string_view* text_fields[] = {nullptr, &r.metadata_dir, &r.name, &r.value, nullptr, &r.library,
                                     nullptr,  nullptr,         nullptr, nullptr,  &r.failure};
  for (int i = 1; i < k_fields; ++i) {
    if (text_fields[i] == nullptr) continue;
    const std::size_t n = static_cast<std::size_t>(fields_end[i] - fields[i]);
    if (!backslash || std::memchr(fields[i], '\\', n) == nullptr) {
      *text_fields[i] = std::string_view(fields[i], n);
    } else if (!unescape(fields[i], fields_end[i], *text_fields[i])) {
      return fail("bad escape");
    }
  }
  std::int64_t learned = 0;
  if (!parse_stamp(view(6), r.stamp) || !parse_i64(view(7), r.abi) || r.abi < -1 ||
      !parse_i64(view(8), learned) || (learned != 0 && learned != 1) || !valid_devices_field(view(9))) {
    return fail("malformed record");
  }
  r.learned = learned == 1;
  r.devices = view(9);
  if (r.library.empty() || r.metadata_dir.empty()) return fail("empty path");
  ++m_count;
  return true;
}

LearnedFile LearnedFile::read(const std::string& path, std::string* why) {
  LearnedFile out = open(path, why);
  if (out.m_map.data == nullptr) return out;
  out.m_records.reserve(out.m_map.size / 96 + 1);
  LearnedRecord r;
  while (out.next(r, why)) out.m_records.push_back(r);
  if (out.m_damaged) {
    out.m_records.clear();
    out.m_map = Mapping{};  // next() already points nowhere
  }
  return out;
}

LearnedFile::Mapping& LearnedFile::Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    if (data != nullptr) ::munmap(data, size);
    data = o.data;
    size = o.size;
    o.data = nullptr;
  }
  return *this;
}

LearnedFile::Mapping::~Mapping() {
  if (data != nullptr) ::munmap(data, size);
}

Result<void> write_learned(const std::string& path, std::span<const LearnedRecord> records) {
  std::string text;
  text.reserve(64 + records.size() * 200);
  text.append(k_magic).push_back('\n');
  for (const LearnedRecord& r : records) {
    text += std::to_string(r.search_path);
    text.push_back('\t');
    append_escaped(text, r.metadata_dir);
    text.push_back('\t');
    append_escaped(text, r.name);
    text.push_back('\t');
    append_escaped(text, r.value);
    text.push_back('\t');
    text.push_back(r.kind == 'p' ? 'p' : 'n');
    text.push_back('\t');
    append_escaped(text, r.library);
    text.push_back('\t');
    text += std::to_string(r.stamp.dev) + ':' + std::to_string(r.stamp.ino) + ':' +
            std::to_string(r.stamp.size) + ':' + std::to_string(r.stamp.mtime_ns) + ':' +
            std::to_string(r.stamp.ctime_ns) + ':' + std::to_string(r.stamp.mode);
    text.push_back('\t');
    text += std::to_string(r.abi);
    text += r.learned ? "\t1\t" : "\t0\t";
    text.append(r.devices);
    text.push_back('\t');
    append_escaped(text, r.failure);
    text.push_back('\n');
  }
  text += "end " + std::to_string(records.size()) + "\n";

  Result<void> r = make_safe_dir(dir_name(path));
  if (r) r = write_atomic(path, {text}, 0600);
  if (!r) return Error{Errc::io, "cannot write the learned-devices store: " + r.error().message};
  return {};
}

}  // namespace epload::detail
