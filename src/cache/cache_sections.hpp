// cache_sections.hpp — an index file as sections of bytes: the head's table
// of sections and the rules of its layout, and the bytes of each section,
// read with pread or taken in place from a private mapping.  No JSON here:
// the reader (cache_reader.hpp) parses what these hand it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "memory.hpp"      // BigBuffer
#include "cache_internal.hpp"  // k_json_padding

namespace epload::detail {

/// The bytes simdjson may read past the end of a document.
inline constexpr std::size_t k_pad = k_json_padding;

/// The first problem a read finds; later ones are dropped.
struct ReadProblem {
  std::string text;   ///< empty while there is none
  std::string where;  ///< the section being read, for messages
  /// Records `what` (naming `where`, if set) unless a problem is already
  /// known.  Always false, so that a failing step can `return fail(...)`.
  bool fail(std::string what);
};

/// What a section holds.
enum class Kind { group, dists, listings, watched, watch_digest };

/// One row of the head's "sections".  The views point into the head's
/// buffer (or the reader's copies of escaped strings), which live as long
/// as the reader.
struct Section {
  Kind kind = Kind::group;
  std::string_view name;   // as stored, for messages
  std::string_view group;  // group sections: the group
  std::string_view hash;   // 16 hex digits, decoded when the section is read
  std::uint64_t offset = 0, length = 0, count = 0;
};

/// The sections every file has, as check_layout() found them.
struct Layout {
  const Section* dists = nullptr;
  const Section* listings = nullptr;
  const Section* watched = nullptr;
  const Section* watch_digest = nullptr;
};

/// Checks that `sections` follow line 1 (`head_len` bytes) without gaps or
/// overlaps, end where the file (`size` bytes) does, so that a truncated
/// file is caught without reading it, and come in the documented order;
/// fills `out` with the sections every file has.
bool check_layout(const std::vector<Section>& sections, std::uint64_t head_len, std::uint64_t size, Layout& out,
                  ReadProblem& problem);

/// Another format version's head need not parse as one line (version 1
/// spread one document over many): its opening is recognised as text.
/// True (with the problem recorded) when `head` is of another version.
bool other_version(std::string_view head, ReadProblem& problem);

/// A heap buffer holding bytes [offset, offset + size) of the file, with
/// simdjson's padding after them.
struct ReadBuffer {
  BigBuffer data{nullptr, free_big};
  std::uint64_t offset = 0;
  std::size_t size = 0;
  std::size_t capacity = 0;
  void allocate(std::size_t n);
};

/// The bytes of one open index file: line 1 and a first chunk, then the
/// sections a read needs.  Failures are recorded in the ReadProblem.
class FileBytes {
 public:
  /// `fd` is open on a regular file of `size` bytes; both outlive this.
  FileBytes(int fd, std::uint64_t size, ReadProblem& problem) : m_fd(fd), m_size(size), m_problem(problem) {}

  /// The file's size in bytes.
  std::uint64_t size() const { return m_size; }

  /// Maps the whole file, private and read-only, so that later reads take
  /// their bytes in place; on failure, nothing (the reads then copy).
  void map_whole();
  /// Reads line 1: for a `partial` read a first chunk of the file that
  /// holds the head of most files (read on when it does not), else the
  /// whole file.
  bool read_head(bool partial);
  /// Reads the sections in `needed` (in file order) that the first chunk
  /// does not hold: neighbours less than k_max_gap apart with one pread.
  bool read_sections(const std::vector<const Section*>& needed);
  /// The bytes of section `s`, from the first chunk or a run read by
  /// read_sections(), and how many may be read from `data` (the padding).
  /// Verifies the hash and the closing newline.
  bool fetch(const Section& s, const char*& data, std::size_t& capacity);
  /// The buffer holding section `s`, if read.
  const ReadBuffer* buffer_of(const Section& s) const;
  /// The buffer holding section `s` (already parsed), handed over so that
  /// views into it can live as long as an Index; null when there is none
  /// to hand over (not read, or the mapping, which mapping() keeps whole).
  BigBuffer take_buffer_of(const Section& s);

  /// Line 1, its '\n' included (or all that was read when it has none).
  std::string_view head() const { return {m_head.data.get(), m_head_len}; }
  /// How many bytes may be read from head().data() (the padding).
  std::size_t head_capacity() const { return m_head.capacity; }
  /// Bytes read by read_head(): 0 when the file was empty when read.
  std::size_t first_chunk() const { return m_head.size; }
  /// The mapping of the file (map_whole()), or null.
  const std::shared_ptr<const void>& mapping() const { return m_map_owner; }

 private:
  bool pread_all(char* out, std::size_t n, std::uint64_t at, std::size_t& got);
  void populate(std::uint64_t begin, std::uint64_t end);
  ReadBuffer* find(const Section& s);

  int m_fd;
  std::uint64_t m_size;
  ReadProblem& m_problem;
  ReadBuffer m_head;            // the first chunk (at least line 1); or, mapped, every section it can pad
  std::size_t m_head_len = 0;   // line 1, its '\n' included
  std::vector<ReadBuffer> m_runs;  // sections read after the head
  // map_whole(): the whole file mapped, its length in whole pages (the
  // bytes past the file's end read as zeros).  The Index keeps it.
  std::shared_ptr<const void> m_map_owner;
  char* m_map = nullptr;
  std::size_t m_map_length = 0;
};

}  // namespace epload::detail
