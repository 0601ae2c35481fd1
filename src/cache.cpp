// cache.cpp — the serialized index: JSON Lines written by hand, read with
// simdjson, one section at a time.
//
// This is the only translation unit that includes simdjson (its header costs
// seconds to compile).
//
// The format (JSON Lines: a head, then sections whose offsets, lengths and
// hashes the head records) is described in docs/cache-format.md.
//
// Reading is strict: the head is found by pread of a first 32 KB chunk (more
// if line 1 is longer; a complete read reads the whole file at once), its
// checksum verified, and it is parsed with simdjson On-Demand over exactly
// the bytes of line 1 (the padding simdjson reads past the end only has to
// be readable memory).  Then the needed sections are pread at their
// recorded offsets (neighbours in one read; nothing for those inside the
// first chunk), each hash verified, and each parsed the same way.  Or, with
// ReadExpectations::map_file (the CLI), the file is mapped private and
// read-only, each range needed backed from the page cache in one madvise,
// and the head and sections are parsed in place (a fresh page, filled by
// pread, costs ~10 times more on the machines measured); only a last
// section too close to a page's end for the padding is pread.  Fields must
// come in exactly the documented order, every index is bounds-checked, every
// number range-checked, every type checked, nothing may follow a line's
// document.
// Any defect is an Errc::cache error naming the file, the section and the
// problem; the caller rebuilds.  simdjson's On-Demand API parses straight
// into IndexBuilder; no DOM is built, and strings without escapes are read
// in place (cache_text.cpp).  A group section's buffer is handed to the
// Index (IndexBuilderHooks::borrow, then keep_bytes), so its names and values
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
// the rest is parsed (ReadExpectations::early_check).  A one-group read adds the group's rows
// straight to the IndexBuilder; several groups are collected and merged in
// global discovery order.  One simdjson parser allocation serves every line
// read (a parser grows by reallocating, and every fresh page costs a fault).
//
// The writer is cache_write.cpp; the hash and the string decoder it shares
// with this reader are in cache_text.cpp.
#include <sys/mman.h>  // mmap, madvise
#include <sys/stat.h>  // fstat
#include <unistd.h>    // sysconf

#include <simdjson.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>  // std::less_equal: pointer comparison across buffers
#include <limits>
#include <memory>  // read buffers

#include "cache_internal.hpp"
#include "index_hooks.hpp"
#include "epload/profile.hpp"
#include "big_buffer.hpp"
#include "prefault.hpp"
#include "pread_full.hpp"
#include "stamp.hpp"
#include "watch_digest.hpp"

namespace epload::detail {

namespace {

namespace od = simdjson::ondemand;
using Hooks = IndexBuilderHooks;  // the reader's access to IndexBuilder (index_hooks.hpp)

constexpr std::string_view k_format = "epload-index";
// The first read of a partial load: the head and, for a small file, all of
// it.  A head grows with the groups (~140 bytes each), not with the file,
// but the two go together: 595 bytes in a 0.5 MB index of one group, 28 KB
// in a 2.9 MB one of 207.  So 1/64 of the file, between 8 and 32 KB: a
// head that does not fit is read on (read_head), and 32 KB populated for a
// 600-byte head cost ~15 us on the path of a `full` check before its stat
// calls could start.
constexpr std::size_t k_first_chunk_min = 8 * 1024;
constexpr std::size_t k_first_chunk_max = 32 * 1024;
// Smaller files name too few watched files to split their check (each
// distribution takes ~500 bytes of an index; the split starts above 500 files).
constexpr std::uint64_t k_prepare_check_min = 128 * 1024;
constexpr std::uint64_t k_max_gap = 32 * 1024;    // sections closer than this are read together
constexpr std::size_t k_pad = simdjson::SIMDJSON_PADDING;
static_assert(k_pad == k_json_padding);

/// What a section holds.
enum class Kind { group, stamps, dists, watched, watch_digest };

/// One row of the head's "sections".  The views point into the head's
/// buffer (or Reader::m_owned), which live as long as the Reader.
struct Section {
  Kind kind = Kind::group;
  std::string_view name;   // as stored, for messages
  std::string_view group;  // group and stamps sections: the group
  std::string_view hash;   // 16 hex digits, decoded when the section is read
  std::uint64_t offset = 0, length = 0, count = 0;
};

/// A distribution row of a group section; views into a live buffer (or into
/// Reader::m_owned for strings that had escapes).
struct GroupDist {
  std::uint32_t global = 0;
  std::string_view name, version, dir;
  std::uint32_t path = 0;
};

struct GroupEntry {
  std::uint32_t dist = 0;  // position in the section's dists
  std::string_view name, value;
};

/// One parsed group section.
struct GroupData {
  const Section* section = nullptr;
  std::vector<GroupDist> dists;
  std::vector<GroupEntry> eps;
};

/// What Reader::group() does with a group section's rows.
enum class GroupMode {
  complete,  // entry points into the builder, whose distributions are all of them
  direct,    // distributions and entry points into the builder (a one-group read)
  collect,   // into GroupData, merged afterwards (a several-group read)
};

/// A heap buffer holding bytes [offset, offset + size) of the file, with
/// simdjson's padding after them.
struct Buffer {
  BigBuffer data{nullptr, free_big};
  std::uint64_t offset = 0;
  std::size_t size = 0;
  std::size_t capacity = 0;
  void allocate(std::size_t n) {
    data = big_alloc(n + k_pad);  // not zeroed: every byte up to n is read into
    capacity = n + k_pad;
    std::memset(data.get() + n, 0, k_pad);
  }
};

/// Reads one index file; the first problem wins.
class Reader {
 public:
  Reader(int fd, std::string_view file, const ReadExpectations& expect)
      : m_fd(fd), m_file(file), m_expect(expect), m_partial(!expect.groups.empty()) {}
  // A check started on names this reader holds must not outlive them: on
  // success they move into the Index (built in run()), else it is stopped.
  ~Reader() {
    if (m_expect.early_check != nullptr && !m_built) m_expect.early_check->abandon();
  }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  Result<Index> run();

 private:
  bool fail(std::string what) {
    if (m_problem.empty()) {
      m_problem = m_where.empty() ? std::move(what) : "section \"" + m_where + "\": " + what;
    }
    return false;
  }
  bool fail(simdjson::error_code e, std::string_view where) {
    return fail("malformed " + std::string(where) + " (" + simdjson::error_message(e) + ")");
  }

  // ---- bytes ----
  bool pread_all(char* out, std::size_t n, std::uint64_t at, std::size_t& got);
  void map_file();
  void populate(std::uint64_t begin, std::uint64_t end);
  bool read_head();
  bool read_sections(const std::vector<const Section*>& needed);
  bool fetch(const Section& s, const char*& data, std::size_t& capacity);
  void keep_buffer_of(const Section& s);
  Buffer* buffer_of(const Section& s);
  /// True when `v` lies in the bytes of the document being parsed.
  bool in_document(std::string_view v) const {
    return v.empty() || (std::less_equal<const char*>()(m_json.data(), v.data()) &&
                         std::less_equal<const char*>()(v.data() + v.size(), m_json.data() + m_json.size()));
  }
  template <class F>
  bool parse_doc(const char* data, std::size_t length, std::size_t capacity, F&& on_root);
  template <class F>
  bool parse_section(const Section& s, F&& on_root);

  // ---- values ----
  bool raw_string(od::raw_json_string raw, std::string_view where, std::string& scratch, std::string_view& out);
  bool string(od::value v, std::string_view where, std::string& scratch, std::string_view& out);
  bool bytes(od::value v, std::string_view where, std::string& scratch, std::string_view& out);
  /// bytes(), kept alive until the Index is built (escaped strings are copied).
  bool kept_bytes(od::value v, std::string_view where, std::string_view& out);
  bool u64(od::value v, std::string_view where, std::uint64_t& out);
  bool i64(od::value v, std::string_view where, std::int64_t& out);
  bool index(od::value v, std::string_view where, std::uint64_t limit, std::uint32_t& out);
  bool stamp_field(od::value v, std::size_t k, std::string_view where, FileStamp& s);
  /// An array of exactly `count` values, each handed to field(k, value);
  /// `what` names the row in messages.
  template <class V, class F>
  bool row(V&& v, std::string_view what, std::size_t count, F&& field);
  bool join_dir(std::uint32_t path, std::string_view dir, std::string_view& out);

  // ---- the head ----
  bool other_version();
  bool head(od::document& doc);
  bool checksum(od::value v);
  bool key(od::value v);
  bool search_paths(od::value v);
  bool search_path(od::value v);
  bool first_error(od::value v);
  bool sections(od::value v);
  bool section_row(od::value v);
  bool check_layout();

  // ---- sections ----
  bool dists(od::document& doc);
  bool group(od::document& doc, GroupData& out, GroupMode mode);
  bool watched(od::document& doc, std::size_t count, bool stamped_only = false);
  bool watched_file(od::value v, bool stamped_only);
  bool watch_digest(od::document& doc, std::size_t count, bool add);
  bool watch_run(od::value v, std::size_t& n, std::size_t count, bool add);
  bool load_complete();
  bool load_partial();
  const Section* find(Kind kind, std::string_view group) const;

  int m_fd;
  bool m_built = false;  // the Index was built (and owns the watched names)
  std::string_view m_file;
  const ReadExpectations& m_expect;
  const bool m_partial;
  std::string m_problem;
  std::string m_where;  // the section being read, for messages
  std::uint64_t m_size = 0;
  Buffer m_head;                // the first chunk (at least line 1); or, mapped, every section it can pad
  // ReadExpectations::map_file: the whole file mapped, its length in whole
  // pages (the bytes past the file's end read as zeros).  The Index keeps it.
  std::shared_ptr<const void> m_map_owner;
  char* m_map = nullptr;
  std::size_t m_map_length = 0;
  std::size_t m_head_len = 0;   // line 1, its '\n' included
  std::vector<Buffer> m_runs;   // sections read after the head
  std::string_view m_json;      // the document being parsed
  od::parser m_parser;
  IndexBuilder m_builder;
  bool m_relocatable = false;
  std::string m_interpreter, m_cwd;
  std::vector<std::string> m_paths;  // as they go into the Index
  std::vector<Section> m_sections;
  const Section* m_dists = nullptr;
  const Section* m_watched = nullptr;
  const Section* m_watch_digest = nullptr;
  // Set while the names of an early check are parsed: each chunk of names
  // added is published to its helper as soon as it is written.
  EarlyFullCheck* m_publish_to = nullptr;
  WatchedDigest m_stamped_digest;  // of the stamped rows read ("watched")
  std::size_t m_stamped_rows = 0;
  // The head's first_error.
  bool m_has_error = false;
  std::uint64_t m_error_dist = 0;
  std::string m_error_name, m_error_version, m_error_dir, m_error_message;
  std::uint32_t m_error_path = 0;
  std::uint64_t m_first_error_seen = std::numeric_limits<std::uint64_t>::max();  // from "dists"
  std::uint64_t m_dist_count = 0;
  std::string m_s1, m_s2, m_s3, m_s4;  // scratch for decoded strings
  std::string m_join;                  // scratch: search path + dir
  std::vector<std::uint32_t> m_numbers;  // scratch: a group section's distribution numbers
  std::deque<std::string> m_owned;     // decoded strings that views must outlive
};

// ---- bytes ----------------------------------------------------------------

bool Reader::pread_all(char* out, std::size_t n, std::uint64_t at, std::size_t& got) {
  profile::count(profile::Counter::read);
  const ssize_t r = detail::pread_full(m_fd, out, n, at);
  if (r < 0) return fail(std::string("read: ") + std::strerror(errno));
  got = static_cast<std::size_t>(r);  // short if the file shrank under us: it will fail to parse
  return true;
}

bool Reader::read_head() {
  profile::Span span(profile::Phase::read, m_file);
  // A complete read needs every byte.  A partial one starts with a chunk
  // that holds the head of most files.
  const std::uint64_t first = std::clamp<std::uint64_t>(m_size / 64, k_first_chunk_min, k_first_chunk_max);
  if (m_map != nullptr) {
    // Line 1 and every section that ends at least k_pad bytes before the
    // mapping does (simdjson reads that far past a document) are read in
    // place: m_head covers them.  The rest (a file whose end leaves no
    // room for the padding) is read into buffers as without a mapping.
    const std::size_t in_place = m_map_length - m_size >= k_pad ? static_cast<std::size_t>(m_size) : m_map_length - k_pad;
    populate(0, m_partial ? std::min<std::uint64_t>(m_size, first) : m_size);
    // A complete read parses every section from m_head: the whole file must be in place.
    const void* nl = m_partial || in_place == m_size ? std::memchr(m_map, '\n', in_place) : nullptr;
    if (nl != nullptr || in_place == m_size) {
      m_head.data = BigBuffer(m_map, [](char*) {});  // a view: the mapping is m_map_owner's
      m_head.size = in_place;
      m_head.capacity = m_map_length;
      m_head_len = nl != nullptr ? static_cast<std::size_t>(static_cast<const char*>(nl) - m_map) + 1 : in_place;
      return true;
    }
    // Line 1 runs into the unpadded tail (or a complete read would): read
    // as without a mapping.
    m_map = nullptr;
    m_map_owner.reset();
  }
  std::size_t want = static_cast<std::size_t>(m_partial ? std::min<std::uint64_t>(m_size, first) : m_size);
  m_head.allocate(want);
  std::size_t got = 0;
  if (!pread_all(m_head.data.get(), want, 0, got)) return false;
  m_head.size = got;
  std::size_t searched = 0;
  for (;;) {
    const void* nl = std::memchr(m_head.data.get() + searched, '\n', m_head.size - searched);
    if (nl != nullptr) {
      m_head_len = static_cast<std::size_t>(static_cast<const char*>(nl) - m_head.data.get()) + 1;
      return true;
    }
    if (m_head.size < want || m_head.size >= m_size) break;  // no more to read
    // Line 1 is longer than what was read: read up to 4 times as much.
    searched = m_head.size;
    want = static_cast<std::size_t>(std::min<std::uint64_t>(m_size, std::uint64_t{m_head.size} * 4));
    Buffer bigger;
    bigger.allocate(want);
    std::memcpy(bigger.data.get(), m_head.data.get(), m_head.size);
    if (!pread_all(bigger.data.get() + m_head.size, want - m_head.size, m_head.size, got)) return false;
    bigger.size = m_head.size + got;
    m_head = std::move(bigger);
  }
  m_head_len = m_head.size;  // no newline: a foreign or truncated file; parsing says which
  return true;
}

/// Maps the whole file, private and read-only; on failure, nothing (the
/// reads then copy, as without map_file).
void Reader::map_file() {
  static const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t length = (static_cast<std::size_t>(m_size) + page - 1) / page * page;
  void* p = ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE, m_fd, 0);
  if (p == MAP_FAILED) return;
  m_map = static_cast<char*>(p);
  m_map_length = length;
  m_map_owner = std::shared_ptr<const void>(p, [length](const void* q) { ::munmap(const_cast<void*>(q), length); });
}

/// Backs the mapped pages of [begin, end) from the page cache in one call
/// instead of a fault each (populate_read).
void Reader::populate(std::uint64_t begin, std::uint64_t end) {
  end = std::min<std::uint64_t>(end, m_map_length);
  if (end > begin) populate_read(m_map + begin, static_cast<std::size_t>(end - begin));
}

/// Reads the sections in `needed` (in file order) that the first chunk
/// does not hold: neighbours less than k_max_gap apart with one pread.
bool Reader::read_sections(const std::vector<const Section*>& needed) {
  std::size_t i = 0;
  while (i < needed.size()) {
    if (needed[i]->offset + needed[i]->length <= m_head.size) {
      if (m_map != nullptr) populate(needed[i]->offset, needed[i]->offset + needed[i]->length + k_pad);
      ++i;
      continue;
    }
    const std::uint64_t begin = needed[i]->offset;
    std::uint64_t end = begin + needed[i]->length;
    std::size_t j = i + 1;
    for (; j < needed.size() && needed[j]->offset <= end + k_max_gap; ++j) {
      end = needed[j]->offset + needed[j]->length;
    }
    Buffer& run = m_runs.emplace_back();
    run.offset = begin;
    run.allocate(static_cast<std::size_t>(end - begin));
    std::size_t got = 0;
    if (!pread_all(run.data.get(), static_cast<std::size_t>(end - begin), begin, got)) return false;
    run.size = got;  // shorter if the file shrank: fetch() says so
    i = j;
  }
  return true;
}

/// The bytes of section `s`, from the first chunk or a run read by
/// read_sections().  Verifies the hash and the closing newline.
bool Reader::fetch(const Section& s, const char*& data, std::size_t& capacity) {
  const std::size_t length = static_cast<std::size_t>(s.length);
  const Buffer* from = nullptr;
  if (s.offset + s.length <= m_head.size) from = &m_head;
  for (const Buffer& run : m_runs) {
    if (from == nullptr && s.offset >= run.offset && s.offset + s.length <= run.offset + run.size) from = &run;
  }
  if (from == nullptr) return fail("truncated (the file ends inside it)");
  const std::size_t at = static_cast<std::size_t>(s.offset - from->offset);
  data = from->data.get() + at;
  capacity = from->capacity - at;
  if (data[length - 1] != '\n') return fail("does not end with a newline");
  std::uint64_t want = 0;
  if (!parse_hex16(s.hash, want)) return fail("hash is not 16 hex digits");
  if (body_hash(std::string_view(data, length)) != want) return fail("hash mismatch (the file is corrupt)");
  return true;
}

/// Hands the buffer holding section `s` (already parsed) to the Index:
/// views into it (watched names) then live as long as the Index.  Nothing
/// reads that buffer afterwards.
void Reader::keep_buffer_of(const Section& s) {
  Buffer* from = buffer_of(s);
  if (from == &m_head && m_map != nullptr) return;  // the mapping is kept whole (run())
  if (from != nullptr && from->data) Hooks::keep_bytes(m_builder, std::move(from->data));
}

/// The buffer holding section `s` (the first chunk or a run), if read.
Buffer* Reader::buffer_of(const Section& s) {
  Buffer* from = s.offset + s.length <= m_head.size ? &m_head : nullptr;
  for (Buffer& run : m_runs) {
    if (from == nullptr && s.offset >= run.offset && s.offset + s.length <= run.offset + run.size) from = &run;
  }
  return from;
}

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
  m_where = s.name;
  const char* data = nullptr;
  std::size_t capacity = 0;
  if (!fetch(s, data, capacity)) return false;
  if (!parse_doc(data, static_cast<std::size_t>(s.length), capacity, on_root)) return false;
  m_where.clear();
  return true;
}

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

template <class V, class F>
bool Reader::row(V&& v, std::string_view what, std::size_t count, F&& field) {
  od::array arr;
  if (auto e = std::forward<V>(v).get_array().get(arr)) return fail(e, what);
  std::size_t k = 0;
  for (auto x : arr) {
    od::value xv;
    if (auto e = x.get(xv)) return fail(e, what);
    if (k == count) return fail(std::string(what) + " has more than " + std::to_string(count) + " fields");
    if (!field(k, xv)) return false;
    ++k;
  }
  if (k != count) {
    return fail(std::string(what) + " has " + std::to_string(k) + " fields, not " + std::to_string(count));
  }
  return true;
}

/// A stored metadata directory as the Index holds it: joined to its search
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
  std::size_t k = 0;
  for (auto f : obj) {
    std::string_view name;
    if (auto e = f.unescaped_key().get(name)) return fail(e, "search path");
    if (k == 0 && name == "path") {
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

bool Reader::search_paths(od::value v) {
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
  } else if (name.starts_with("stamps:")) {
    s.kind = Kind::stamps;
    s.group = name.substr(7);
  } else if (name == "dists") {
    s.kind = Kind::dists;
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
  m_sections.reserve(m_head_len / 40 + 4);  // a row takes 50 bytes or more
  od::array arr;
  if (auto e = v.get_array().get(arr)) return fail(e, "\"sections\"");
  for (auto x : arr) {
    od::value xv;
    if (auto e = x.get(xv)) return fail(e, "\"sections\"");
    if (!section_row(xv)) return false;
  }
  return true;
}

/// The sections must follow line 1 without gaps or overlaps, end where the
/// file ends (so a truncated file is caught without reading it), and come in
/// the documented order.
bool Reader::check_layout() {
  std::uint64_t at = m_head_len;
  const Section* last_group = nullptr;
  for (std::size_t i = 0; i < m_sections.size(); ++i) {
    const Section& s = m_sections[i];
    if (s.offset != at) {
      return fail("section \"" + std::string(s.name) + "\" starts at byte " + std::to_string(s.offset) + ", not " +
                  std::to_string(at) + " (sections overlap or leave a gap)");
    }
    if (s.length < 2) return fail("section \"" + std::string(s.name) + "\" is too short");
    if (s.length > m_size || s.offset > m_size - s.length) {
      return fail("section \"" + std::string(s.name) + "\" lies past the end of the file (" + std::to_string(m_size) +
                  " bytes): truncated");
    }
    // Each item (entry point, distribution, file) takes 3 bytes or more of
    // its section (a watched name: two quotes and a comma): a larger count
    // is corrupt, and would have the reader reserve room for that many.
    if (s.count > s.length / 3) {
      return fail("section \"" + std::string(s.name) + "\" claims " + std::to_string(s.count) + " items in " +
                  std::to_string(s.length) + " bytes");
    }
    at = s.offset + s.length;
    const bool tail = m_dists != nullptr;  // past the group sections
    switch (s.kind) {
      case Kind::group:
        if (tail || (last_group != nullptr && !(last_group->group < s.group))) {
          return fail("section \"" + std::string(s.name) + "\" is out of order");
        }
        last_group = &s;
        break;
      case Kind::stamps:
        if (tail || i == 0 || m_sections[i - 1].kind != Kind::group || m_sections[i - 1].group != s.group) {
          return fail("section \"" + std::string(s.name) + "\" does not follow its group's section");
        }
        break;
      case Kind::dists:
        if (tail) return fail("two \"dists\" sections");
        m_dists = &s;
        break;
      case Kind::watched:
        if (m_dists == nullptr || m_watched != nullptr || i + 2 < m_sections.size()) {
          return fail("section \"watched\" is out of order");
        }
        m_watched = &s;
        break;
      case Kind::watch_digest:
        if (m_watched == nullptr || m_watch_digest != nullptr || i + 1 != m_sections.size()) {
          return fail("section \"watch_digest\" is out of order");
        }
        if (s.count != m_watched->count) return fail("\"watch_digest\" and \"watched\" disagree on the number of files");
        m_watch_digest = &s;
        break;
    }
  }
  if (m_dists == nullptr || m_watched == nullptr || m_watch_digest == nullptr) {
    return fail("missing \"dists\", \"watched\" or \"watch_digest\" section");
  }
  if (at != m_size) return fail("trailing data after the last section");
  m_dist_count = m_dists->count;
  if (m_dist_count > std::numeric_limits<std::uint32_t>::max()) return fail("too many distributions");
  if (m_has_error && m_error_dist >= m_dist_count) return fail("first error distribution out of range");
  return true;
}

/// Another format version's head need not parse as one line (version 1
/// spread one document over many): its opening is recognised as text.
bool Reader::other_version() {
  constexpr std::string_view k_opening = "{\"format\":\"epload-index\",\"version\":";
  const std::string_view head(m_head.data.get(), m_head_len);
  if (!head.starts_with(k_opening)) return false;
  std::int64_t version = 0;
  std::size_t i = k_opening.size();
  for (; i < head.size() && i < k_opening.size() + 9 && head[i] >= '0' && head[i] <= '9'; ++i) {
    version = version * 10 + (head[i] - '0');
  }
  if (i == k_opening.size() || i >= head.size() || head[i] != ',' || version == k_cache_format_version) return false;
  fail("format version " + std::to_string(version) + ", this build reads " + std::to_string(k_cache_format_version));
  return true;
}

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
        if (!first_error(v)) return false;
        break;
      case 8:
        if (!sections(v)) return false;
        break;
    }
    ++k;
  }
  if (k != std::size(k_fields)) {
    return fail(k == 0 ? "not an epload index (empty object)" : "truncated (missing top-level fields)");
  }
  return true;
}

// ---- sections -------------------------------------------------------------

bool Reader::dists(od::document& doc) {
  od::array arr;
  if (auto e = doc.get_array().get(arr)) return fail(e, "distributions");
  std::uint64_t n = 0;
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
  const bool collect = mode == GroupMode::collect;
  const std::string_view group_name = out.section->group;
  if (collect) {
    out.dists.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(out.section->count, m_dist_count)));
    out.eps.reserve(static_cast<std::size_t>(out.section->count));
  }
  std::vector<std::uint32_t>& numbers = m_numbers;  // the rows' global numbers (complete mode)
  numbers.clear();
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
        GroupDist d;
        const bool ok = row(x, "group distribution", 5, [&](std::size_t n, od::value xv) {
          switch (n) {
            case 0: return index(xv, "group distribution number", m_dist_count, d.global);
            case 1: return collect ? kept_bytes(xv, "distribution name", d.name) : bytes(xv, "distribution name", m_s1, d.name);
            case 2: return collect ? kept_bytes(xv, "distribution version", d.version) : bytes(xv, "distribution version", m_s2, d.version);
            case 3: return collect ? kept_bytes(xv, "distribution dir", d.dir) : bytes(xv, "distribution dir", m_s3, d.dir);
            default: return index(xv, "distribution search path", m_paths.size(), d.path);
          }
        });
        if (!ok) return false;
        if (dist_rows != 0 && last >= d.global) return fail("group distributions out of order");
        last = d.global;
        ++dist_rows;
        if (mode == GroupMode::collect) {
          out.dists.push_back(d);
        } else if (mode == GroupMode::direct) {
          std::string_view joined;
          join_dir(d.path, d.dir, joined);
          m_builder.add_distribution(d.name, d.version, joined, d.path);
        } else {
          numbers.push_back(d.global);
        }
      }
    } else if (k == 1 && name == "entry_points") {
      if (auto e = f.value().get_array().get(arr)) return fail(e, "entry points");
      for (auto x : arr) {
        GroupEntry ep;
        const bool ok = row(x, "entry point", 3, [&](std::size_t n, od::value xv) {
          switch (n) {
            case 0: return index(xv, "entry point distribution", dist_rows, ep.dist);
            case 1: return collect ? kept_bytes(xv, "entry point name", ep.name) : bytes(xv, "entry point name", m_s1, ep.name);
            default: return collect ? kept_bytes(xv, "entry point value", ep.value) : bytes(xv, "entry point value", m_s2, ep.value);
          }
        });
        if (!ok) return false;
        ++ep_rows;
        if (mode == GroupMode::collect) {
          out.eps.push_back(ep);
        } else {
          // direct: the builder's distributions are this section's rows;
          // complete: they are all distributions, in global order.
          const std::uint32_t dist = mode == GroupMode::direct ? ep.dist : numbers[ep.dist];
          m_builder.add_entry_point(dist, group_name, ep.name, ep.value);
        }
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

/// A stamped row; with `stamped_only`, for stamped_files() alone (the
/// watched list is the digest's names).
bool Reader::watched_file(od::value v, bool stamped_only) {
  std::uint32_t path = 0;
  std::string_view rel;
  FileStamp stamp;
  const bool ok = row(v, "watched file", 8, [&](std::size_t k, od::value xv) {
    if (k == 0) return index(xv, "watched file search path", m_paths.size(), path);
    if (k == 1) return bytes(xv, "watched file path", m_s1, rel);
    return stamp_field(xv, k - 2, "watched file stamp", stamp);
  });
  if (!ok) return false;
  if (stamped_only) {
    Hooks::add_stamped_file(m_builder, path, rel, stamp);
    return true;
  }
  m_builder.add_watched_file(path, rel, stamp);
  digest_add(m_stamped_digest, m_stamped_rows++, stamp);
  return true;
}

/// One run of "watch_digest"'s files: [search path, rel, rel, ...].
bool Reader::watch_run(od::value v, std::size_t& n, std::size_t count, bool add) {
  od::array arr;
  if (auto e = v.get_array().get(arr)) return fail(e, "watched run");
  std::uint32_t path = 0;
  std::size_t k = 0;
  for (auto x : arr) {
    od::value xv;
    if (auto e = x.get(xv)) return fail(e, "watched run");
    if (k++ == 0) {
      if (!index(xv, "watched run search path", m_paths.size(), path)) return false;
      continue;
    }
    std::string_view rel;
    if (!bytes(xv, "watched file path", m_s1, rel)) return false;
    // Never more names than the head announced: the builder reserved room
    // for exactly those, and an early check reads them where they are.
    if (n >= count) return fail("holds more watched files than the head says (" + std::to_string(count) + ")");
    // A name without escapes is a view into the section's buffer, which the
    // Index keeps (load_partial()): no copy.
    if (add) Hooks::add_watched_name(m_builder, path, rel, /*copy=*/!in_document(rel));
    ++n;
    if (m_publish_to != nullptr && n % EarlyFullCheck::k_chunk == 0) m_publish_to->publish(n);
  }
  if (k < 2) return fail("empty watched run");
  return true;
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
      od::array arr;
      if (auto e = v.get_array().get(arr)) return fail(e, "watched files");
      for (auto x : arr) {
        od::value xv;
        if (auto e = x.get(xv)) return fail(e, "watched files");
        if (!watch_run(xv, n, count, add)) return false;
      }
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

bool Reader::watched(od::document& doc, std::size_t count, bool stamped_only) {
  od::array arr;
  if (auto e = doc.get_array().get(arr)) return fail(e, "watched files");
  std::size_t n = 0;
  for (auto x : arr) {
    od::value xv;
    if (auto e = x.get(xv)) return fail(e, "watched files");
    if (!watched_file(xv, stamped_only)) return false;
    ++n;
  }
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
  m_builder.reserve(static_cast<std::size_t>(m_dist_count), 0, static_cast<std::size_t>(m_watched->count));
  if (!parse_section(*m_dists, [&](od::document& d) { return dists(d); })) return false;
  if (m_has_error ? m_first_error_seen != m_error_dist
                  : m_first_error_seen != std::numeric_limits<std::uint64_t>::max()) {
    return fail("\"first_error\" disagrees with the distributions");
  }
  GroupData g;
  for (const Section& s : m_sections) {
    if (s.kind == Kind::stamps) {
      // Not needed (the watched section has every stamp), but a complete
      // read vouches for every byte of the file.
      const char* data = nullptr;
      std::size_t capacity = 0;
      m_where = s.name;
      if (!fetch(s, data, capacity)) return false;
      m_where.clear();
    }
    if (s.kind != Kind::group) continue;
    g.section = &s;
    if (!parse_section(s, [&](od::document& d) { return group(d, g, GroupMode::complete); })) return false;
  }
  if (!parse_section(*m_watched, [&](od::document& d) { return watched(d, m_watched->count); })) return false;
  return parse_section(*m_watch_digest,
                       [&](od::document& d) { return watch_digest(d, m_watch_digest->count, /*add=*/false); });
}

bool Reader::load_partial() {
  std::vector<std::string_view> wanted(m_expect.groups.begin(), m_expect.groups.end());
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());

  // What to read, in file order: the groups' sections (and their stamps
  // sections, or the watched section).  Their bytes stay in their buffers
  // until the Index is built: the rows below are views into them.
  std::vector<const Section*> needed;
  std::size_t eps_total = 0, stamps_total = 0;
  for (std::string_view group : wanted) {
    const Section* s = find(Kind::group, group);
    if (s == nullptr) continue;  // no entry points in this group
    needed.push_back(s);
    eps_total += static_cast<std::size_t>(s->count);
    const Section* stamps = s + 1;  // check_layout(): a stamps section follows its group's
    if (m_expect.group_stamps && !m_expect.watched_stamps && stamps != m_sections.data() + m_sections.size() &&
        stamps->kind == Kind::stamps) {
      needed.push_back(stamps);
      stamps_total += static_cast<std::size_t>(stamps->count);
    }
  }
  // `full` validation: the names and their digest (the groups' stamps, if
  // wanted, come from their own sections), unless every stamp is wanted (a
  // stale cache names the file that changed).
  std::size_t names_total = 0;
  if (m_expect.watched) {
    needed.push_back(m_expect.watched_stamps ? m_watched : m_watch_digest);
    (m_expect.watched_stamps ? stamps_total : names_total) += static_cast<std::size_t>(m_watched->count);
  }
  std::sort(needed.begin(), needed.end());  // pointers into m_sections: file order
  // A group's stamps beside the digest's names go to stamped_files() only.
  const bool stamped_only = m_expect.watched && !m_expect.watched_stamps;
  m_builder.reserve(0, 0, 0, names_total);  // first: the early check waits for these

  // `full` validation by digest: the names are read first, their check is
  // started on the other CPU before they are parsed (ReadExpectations::
  // early_check), and each chunk of names is handed to it as soon as it is
  // written, so its stat calls run while the rest is read and parsed.  The
  // builder holds room for exactly names_total names (reserved above, and
  // watch_run() refuses more), so where the helper reads them stays put.
  const bool names_first = names_total > 0 && m_expect.early_check != nullptr;
  if (names_first) {
    if (!read_sections({m_watch_digest})) return false;
    const Index& so_far = Hooks::in_progress(m_builder);
    const std::span<const WatchedName> names(so_far.watched_names().data(), names_total);
    m_expect.early_check->start(names, so_far.search_paths(), so_far.scanned_at_ns(), /*ready=*/0);
    m_publish_to = m_expect.early_check;
    const bool ok = parse_section(
        *m_watch_digest, [&](od::document& d) { return watch_digest(d, m_watch_digest->count, /*add=*/true); });
    m_publish_to = nullptr;
    if (!ok) return false;  // the destructor abandons the check
    m_expect.early_check->publish(names_total);
    std::erase(needed, m_watch_digest);
  } else if (m_expect.early_check != nullptr) {
    m_expect.early_check->abandon();  // prepared by run(), not wanted
  }
  m_builder.reserve(eps_total, eps_total, stamped_only ? 0 : stamps_total, 0, stamped_only ? stamps_total : 0);
  if (!read_sections(needed)) return false;

  std::size_t group_sections = 0;
  for (const Section* s : needed) group_sections += s->kind == Kind::group;
  // One group (the common query): its rows go straight into the builder,
  // in global discovery order already.  Several: collected, then merged.
  const GroupMode mode = group_sections == 1 ? GroupMode::direct : GroupMode::collect;
  std::vector<GroupData> groups;
  groups.reserve(group_sections);
  for (const Section* s : needed) {
    if (s->kind != Kind::group) continue;
    GroupData& g = groups.emplace_back();
    g.section = s;
    // Its names and values stay where they are: the Index keeps the buffer
    // (below), so only escaped strings are copied.
    if (Buffer* b = buffer_of(*s); b != nullptr && b->data) Hooks::borrow(m_builder, b->data.get(), b->size);
    if (!parse_section(*s, [&](od::document& d) { return group(d, g, mode); })) return false;
  }

  // The distributions of all loaded groups, in global discovery order.
  std::vector<std::uint32_t> numbers;  // global numbers of the distributions added, ascending
  if (mode == GroupMode::collect) {
    std::vector<const GroupDist*> all;
    for (const GroupData& g : groups) {
      for (const GroupDist& d : g.dists) all.push_back(&d);
    }
    std::stable_sort(all.begin(), all.end(),
                     [](const GroupDist* a, const GroupDist* b) { return a->global < b->global; });
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
  }

  for (const Section* s : needed) {
    if (s->kind == Kind::group) continue;
    const bool ok =
        s->kind == Kind::watch_digest
            ? parse_section(*s, [&](od::document& d) { return watch_digest(d, s->count, /*add=*/true); })
            : parse_section(*s, [&](od::document& d) { return watched(d, s->count, stamped_only && s->kind == Kind::stamps); });
    if (!ok) return false;
  }
  if (names_total > 0) keep_buffer_of(*m_watch_digest);
  Hooks::set_watched_complete(m_builder, m_expect.watched);
  Hooks::set_partial(m_builder, wanted);
  if (m_has_error) {
    std::string_view joined;
    join_dir(m_error_path, m_error_dir, joined);
    Hooks::set_first_error(m_builder, m_error_name, m_error_version, joined, m_error_path, m_error_message);
  }
  for (const GroupData& g : groups) keep_buffer_of(*g.section);  // borrowed above
  return true;
}

Result<Index> Reader::run() {
  struct stat st;
  profile::count(profile::Counter::stat);
  if (::fstat(m_fd, &st) != 0) {
    return Error{Errc::cache, "cache file " + std::string(m_file) + ": fstat: " + std::strerror(errno)};
  }
  constexpr off_t k_max = off_t{1} << 30;  // far above any real index; refuse absurd sizes
  if (!S_ISREG(st.st_mode) || st.st_size > k_max) {
    return Error{Errc::cache, "cache file " + std::string(m_file) + ": not a regular file of sane size"};
  }
  m_size = static_cast<std::uint64_t>(st.st_size);
  if (m_size == 0) return Error{Errc::cache, "cache file " + std::string(m_file) + ": empty"};
  if (m_expect.map_file) map_file();
  if (read_head()) {
    if (m_head.size == 0) {
      fail("empty");
    } else {
      profile::Span span(profile::Phase::parse, m_file);
      // One allocation for every document of this read (a parser grows by
      // reallocating, and fresh memory costs a page fault per page touched:
      // the head and the sections then reuse the same pages).
      constexpr std::uint64_t k_max_prealloc = 64ull << 20;
      // `full` validation of a file big enough to hold more names than
      // are worth splitting: the check's helper thread is created now, so
      // that its creation overlaps the parse of the head.
      if (m_partial && m_expect.early_check != nullptr && m_expect.watched && !m_expect.watched_stamps &&
          m_size >= k_prepare_check_min) {
        m_expect.early_check->prepare();
      }
      if (auto e = m_parser.allocate(static_cast<std::size_t>(std::min(m_size, k_max_prealloc)))) {
        fail(e, "JSON parser");
      } else if (other_version()) {
        // (reported by other_version)
      } else if (parse_doc(m_head.data.get(), m_head_len, m_head.capacity, [&](od::document& d) { return head(d); }) &&
          check_layout()) {
        if (m_partial) load_partial();
        else load_complete();
      }
    }
  }
  if (!m_problem.empty()) {
    return Error{Errc::cache, "cache file " + std::string(m_file) + ": " + m_problem};
  }
  if (m_map_owner) Hooks::keep_alive(m_builder, m_map_owner);  // views into it: the head's, the sections'
  Index index = m_builder.build();
  m_built = true;
  return index;
}

}  // namespace

Result<Index> read_index_fd(int fd, std::string_view file, const ReadExpectations& expect) {
  Reader reader(fd, file, expect);
  return reader.run();
}

}  // namespace epload::detail
