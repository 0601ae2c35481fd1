// cache_text.hpp — the text of an index file's rows and head
// (docs/cache-format.md), shared by the writer (cache_write.cpp) and the
// refresh that splices a file (cache_splice.cpp), so that both write every
// row byte for byte alike.
#pragma once

#include <charconv>  // to_chars
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache_internal.hpp"

namespace epload::detail {

/// Appends JSON text to a string.
class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : m_out(out) {}

  void raw(std::string_view s) { m_out += s; }
  /// A byte string: a JSON string when valid UTF-8, else {"hex":"..."}.
  void bytes(std::string_view s);
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
  std::size_t offset = 0;  // from the end of the head
  std::size_t length = 0;
  std::uint64_t hash = 0;
  std::size_t count = 0;
};

/// The text of a distribution's metadata directory as stored: relative to
/// its search path when join_path(search path, tail) gives it back, else
/// whole (absolute).  Fails for a relative directory outside its search
/// path, which has no representation.
Result<std::string_view> stored_dir(const Distribution& d, std::span<const std::string_view> paths);

/// `name,version,dir,path`: a distribution's fields in the rows of
/// "dists" and of its groups' sections.
void dist_fields(JsonWriter& w, const Distribution& d, std::string_view dir_text);

/// A row of "watched": `[path,rel,dev,ino,size,mtime_ns,ctime_ns,mode]`.
void watched_row(JsonWriter& w, const WatchedFile& f);

/// What line 1 says besides the sections.
struct HeadInput {
  const CacheKey* key = nullptr;  ///< null: an empty key
  bool relocatable = false;
  std::int64_t scanned_at = 0;
  std::span<const std::string_view> paths;  ///< as stored
  std::span<const FileStamp> stamps;
  std::span<const std::uint32_t> listed;
  std::string_view first_error;  ///< "null" or its object
};

/// Line 1 for `sections` (offsets from the end of the line), its checksum
/// filled in.
std::string head_line(const HeadInput& in, std::span<const SectionRecord> sections);

}  // namespace epload::detail
