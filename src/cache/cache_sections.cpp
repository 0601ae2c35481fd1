// cache_sections.cpp — an index file's bytes and the layout of its sections
// (see cache_sections.hpp; the format: docs/cache-format.md).
//
// The head is found by pread of a first chunk (more if line 1 is longer; a
// complete read reads the whole file at once).  Then the needed sections
// are pread at their recorded offsets (neighbours in one read; nothing for
// those inside the first chunk), each hash verified before it is parsed.
// Or, mapped (ReadExpectations::map_file, the CLI), each range needed is
// backed from the page cache in one madvise and read in place (a fresh
// page, filled by pread, costs ~10 times more on the machines measured);
// only a last section too close to a page's end for the padding is pread.
#include "cache_sections.hpp"

#include <sys/mman.h>  // mmap, munmap
#include <unistd.h>    // sysconf

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "epload/profile.hpp"
#include "memory.hpp"
#include "pread_full.hpp"

namespace epload::detail {

namespace {

// The first read of a partial load: the head and, for a small file, all of
// it.  A head grows with the groups (~140 bytes each), not with the file,
// but the two go together: 595 bytes in a 0.5 MB index of one group, 28 KB
// in a 2.9 MB one of 207.  So 1/64 of the file, between 8 and 32 KB: a
// head that does not fit is read on (read_head), and 32 KB populated for a
// 600-byte head cost ~15 us on the path of a `full` check before its stat
// calls could start.
constexpr std::size_t k_first_chunk_min = 8 * 1024;
constexpr std::size_t k_first_chunk_max = 32 * 1024;
constexpr std::uint64_t k_max_gap = 32 * 1024;  // sections closer than this are read together

/// "section \"<name>\" <what>", for the layout's messages.
bool fail_section(ReadProblem& problem, const Section& s, const std::string& what) {
  return problem.fail("section \"" + std::string(s.name) + "\" " + what);
}

/// The size checks of one section that starts at `at`.
bool check_extent(const Section& s, std::uint64_t at, std::uint64_t size, ReadProblem& problem) {
  if (s.offset != at) {
    return fail_section(problem, s, "starts at byte " + std::to_string(s.offset) + ", not " + std::to_string(at) +
                                        " (sections overlap or leave a gap)");
  }
  if (s.length < 2) return fail_section(problem, s, "is too short");
  if (s.length > size || s.offset > size - s.length) {
    return fail_section(problem, s, "lies past the end of the file (" + std::to_string(size) + " bytes): truncated");
  }
  // Each item (entry point, distribution, file) takes 3 bytes or more of
  // its section (a watched name: two quotes and a comma): a larger count
  // is corrupt, and would have the reader reserve room for that many.
  if (s.count > s.length / 3) {
    return fail_section(problem, s,
                        "claims " + std::to_string(s.count) + " items in " + std::to_string(s.length) + " bytes");
  }
  return true;
}

}  // namespace

bool ReadProblem::fail(std::string what) {
  if (text.empty()) text = where.empty() ? std::move(what) : "section \"" + where + "\": " + what;
  return false;
}

bool check_layout(const std::vector<Section>& sections, std::uint64_t head_len, std::uint64_t size, Layout& out,
                  ReadProblem& problem) {
  std::uint64_t at = head_len;
  const Section* last_group = nullptr;
  for (std::size_t i = 0; i < sections.size(); ++i) {
    const Section& s = sections[i];
    if (!check_extent(s, at, size, problem)) return false;
    at = s.offset + s.length;
    const bool tail = out.dists != nullptr;  // past the group sections
    switch (s.kind) {
      case Kind::group:
        if (tail || (last_group != nullptr && !(last_group->group < s.group))) {
          return fail_section(problem, s, "is out of order");
        }
        last_group = &s;
        break;
      case Kind::dists:
        if (tail) return problem.fail("two \"dists\" sections");
        out.dists = &s;
        break;
      case Kind::listings:
        if (out.dists == nullptr || out.listings != nullptr || out.watched != nullptr) {
          return problem.fail("section \"listings\" is out of order");
        }
        out.listings = &s;
        break;
      case Kind::watched:
        if (out.listings == nullptr || out.watched != nullptr || i + 2 < sections.size()) {
          return problem.fail("section \"watched\" is out of order");
        }
        out.watched = &s;
        break;
      case Kind::watch_digest:
        if (out.watched == nullptr || out.watch_digest != nullptr || i + 1 != sections.size()) {
          return problem.fail("section \"watch_digest\" is out of order");
        }
        if (s.count != out.watched->count) {
          return problem.fail("\"watch_digest\" and \"watched\" disagree on the number of files");
        }
        out.watch_digest = &s;
        break;
    }
  }
  if (out.dists == nullptr || out.listings == nullptr || out.watched == nullptr || out.watch_digest == nullptr) {
    return problem.fail("missing \"dists\", \"listings\", \"watched\" or \"watch_digest\" section");
  }
  if (at != size) return problem.fail("trailing data after the last section");
  return true;
}

bool other_version(std::string_view head, ReadProblem& problem) {
  constexpr std::string_view k_opening = "{\"format\":\"epload-index\",\"version\":";
  if (!head.starts_with(k_opening)) return false;
  std::int64_t version = 0;
  std::size_t i = k_opening.size();
  for (; i < head.size() && i < k_opening.size() + 9 && head[i] >= '0' && head[i] <= '9'; ++i) {
    version = version * 10 + (head[i] - '0');
  }
  if (i == k_opening.size() || i >= head.size() || head[i] != ',' || version == k_cache_format_version) return false;
  problem.fail("format version " + std::to_string(version) + ", this build reads " +
               std::to_string(k_cache_format_version));
  return true;
}

void ReadBuffer::allocate(std::size_t n) {
  data = big_alloc(n + k_pad);  // not zeroed: every byte up to n is read into
  capacity = n + k_pad;
  std::memset(data.get() + n, 0, k_pad);
}

// ---- bytes ----------------------------------------------------------------

bool FileBytes::pread_all(char* out, std::size_t n, std::uint64_t at, std::size_t& got) {
  profile::count(profile::Counter::read);
  const ssize_t r = detail::pread_full(m_fd, out, n, at);
  if (r < 0) return m_problem.fail(std::string("read: ") + std::strerror(errno));
  got = static_cast<std::size_t>(r);  // short if the file shrank under us: it will fail to parse
  return true;
}

bool FileBytes::read_head(bool partial) {
  // A complete read needs every byte.  A partial one starts with a chunk
  // that holds the head of most files.
  const std::uint64_t first = std::clamp<std::uint64_t>(m_size / 64, k_first_chunk_min, k_first_chunk_max);
  if (m_map != nullptr) {
    // Line 1 and every section that ends at least k_pad bytes before the
    // mapping does (simdjson reads that far past a document) are read in
    // place: m_head covers them.  The rest (a file whose end leaves no
    // room for the padding) is read into buffers as without a mapping.
    const std::size_t in_place = m_map_length - m_size >= k_pad ? static_cast<std::size_t>(m_size) : m_map_length - k_pad;
    populate(0, partial ? std::min<std::uint64_t>(m_size, first) : m_size);
    // A complete read parses every section from m_head: the whole file must be in place.
    const void* nl = partial || in_place == m_size ? std::memchr(m_map, '\n', in_place) : nullptr;
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
  std::size_t want = static_cast<std::size_t>(partial ? std::min<std::uint64_t>(m_size, first) : m_size);
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
    ReadBuffer bigger;
    bigger.allocate(want);
    std::memcpy(bigger.data.get(), m_head.data.get(), m_head.size);
    if (!pread_all(bigger.data.get() + m_head.size, want - m_head.size, m_head.size, got)) return false;
    bigger.size = m_head.size + got;
    m_head = std::move(bigger);
  }
  m_head_len = m_head.size;  // no newline: a foreign or truncated file; parsing says which
  return true;
}

void FileBytes::map_whole() {
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
void FileBytes::populate(std::uint64_t begin, std::uint64_t end) {
  end = std::min<std::uint64_t>(end, m_map_length);
  if (end > begin) populate_read(m_map + begin, static_cast<std::size_t>(end - begin));
}

bool FileBytes::read_sections(const std::vector<const Section*>& needed) {
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
    ReadBuffer& run = m_runs.emplace_back();
    run.offset = begin;
    run.allocate(static_cast<std::size_t>(end - begin));
    std::size_t got = 0;
    if (!pread_all(run.data.get(), static_cast<std::size_t>(end - begin), begin, got)) return false;
    run.size = got;  // shorter if the file shrank: fetch() says so
    i = j;
  }
  return true;
}

bool FileBytes::fetch(const Section& s, const char*& data, std::size_t& capacity) {
  const std::size_t length = static_cast<std::size_t>(s.length);
  const ReadBuffer* from = buffer_of(s);
  if (from == nullptr) return m_problem.fail("truncated (the file ends inside it)");
  const std::size_t at = static_cast<std::size_t>(s.offset - from->offset);
  data = from->data.get() + at;
  capacity = from->capacity - at;
  if (data[length - 1] != '\n') return m_problem.fail("does not end with a newline");
  std::uint64_t want = 0;
  if (!parse_hex16(s.hash, want)) return m_problem.fail("hash is not 16 hex digits");
  if (body_hash(std::string_view(data, length)) != want) return m_problem.fail("hash mismatch (the file is corrupt)");
  return true;
}

BigBuffer FileBytes::take_buffer_of(const Section& s) {
  ReadBuffer* from = find(s);
  if (from == nullptr || (from == &m_head && m_map != nullptr)) return BigBuffer(nullptr, free_big);
  return std::move(from->data);
}

const ReadBuffer* FileBytes::buffer_of(const Section& s) const {
  return const_cast<FileBytes*>(this)->find(s);
}

/// The buffer holding section `s` (the first chunk or a run), if read.
ReadBuffer* FileBytes::find(const Section& s) {
  if (s.offset + s.length <= m_head.size) return &m_head;
  for (ReadBuffer& run : m_runs) {
    if (s.offset >= run.offset && s.offset + s.length <= run.offset + run.size) return &run;
  }
  return nullptr;
}

}  // namespace epload::detail
