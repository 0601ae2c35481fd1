// cache_rows.hpp — the rows of a section found by their tabs
// (docs/cache-format.md, "Row marks"), and the arrays of "numbers", without
// parsing them: what the refresh that splices a file (cache_splice.cpp)
// copies and renumbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>  // tabs_of
#endif

#include "file_stamp.hpp"

namespace epload::detail {

/// The tabs of one section: the boundaries of its rows.  Sixteen bytes at
/// a time where SSE2 is there (every x86-64): rows are 30-100 bytes, and a
/// memchr() call per row cost ~0.3 ms of a 6,000-distribution refresh.
inline std::vector<std::uint32_t> tabs_of(std::string_view text) {
  std::vector<std::uint32_t> out;
  out.reserve(text.size() / 32);
  const char* p = text.data();
  const std::size_t n = text.size();
  std::size_t i = 0;
#if defined(__SSE2__)
  const __m128i tab = _mm_set1_epi8('\t');
  for (; i + 16 <= n; i += 16) {
    auto bits = static_cast<unsigned>(
        _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)), tab)));
    for (; bits != 0; bits &= bits - 1) out.push_back(static_cast<std::uint32_t>(i + __builtin_ctz(bits)));
  }
#endif
  for (; i < n; ++i) {
    if (p[i] == '\t') out.push_back(static_cast<std::uint32_t>(i));
  }
  return out;
}

/// Row k of an array of rows marked by `tabs` (the last tab closes it): the
/// bytes from after its tab to before the comma that ends it.
inline std::string_view row_at(std::string_view text, const std::vector<std::uint32_t>& tabs, std::size_t k) {
  const std::size_t begin = tabs[k] + 1;
  std::size_t end = tabs[k + 1];
  if (text[end - 1] == ',') --end;
  return text.substr(begin, end - begin);
}

/// Item k of a section of path runs (listings, watch_digest): the string
/// (or hex object) after its tab, without the run's punctuation after it.
inline std::string_view name_at(std::string_view text, const std::vector<std::uint32_t>& tabs, std::size_t k) {
  const std::size_t begin = tabs[k] + 1;
  std::size_t end = tabs[k + 1];
  while (end > begin && text[end - 1] != '"' && text[end - 1] != '}') --end;
  return text.substr(begin, end - begin);
}

/// The leading unsigned number of a row "[N,...": false when there is none.
inline bool leading_number(std::string_view row, std::uint64_t& n, std::size_t& after) {
  if (row.size() < 3 || row[0] != '[') return false;
  std::size_t i = 1;
  n = 0;
  while (i < row.size() && row[i] >= '0' && row[i] <= '9' && i < 20) n = n * 10 + static_cast<unsigned>(row[i++] - '0');
  if (i == 1 || i >= row.size() || row[i] != ',') return false;
  after = i;  // at the comma
  return true;
}

/// The arrays of unsigned numbers of a "numbers" section, "[[0,4],[2]]\n":
/// all of them in `flat`, where each array starts in `at` (and the end
/// last).  False on anything else.
inline bool number_arrays(std::string_view text, std::vector<std::uint32_t>& flat, std::vector<std::size_t>& at) {
  flat.clear();
  at.assign(1, 0);
  if (text.size() < 3 || text.substr(text.size() - 2) != "]\n" || text[0] != '[') return false;
  std::size_t i = 1;
  const std::size_t end = text.size() - 2;
  while (i < end) {
    if (at.size() > 1 && text[i++] != ',') return false;
    if (i >= end || text[i++] != '[') return false;
    for (;;) {
      std::uint64_t n = 0;
      const std::size_t first = i;
      while (i < end && text[i] >= '0' && text[i] <= '9' && i - first < 10) n = n * 10 + static_cast<unsigned>(text[i++] - '0');
      if (i == first || n > UINT32_MAX || i >= end) return false;
      flat.push_back(static_cast<std::uint32_t>(n));
      if (text[i] == ']') break;
      if (text[i++] != ',') return false;
    }
    ++i;  // the array's ']'
    at.push_back(flat.size());
  }
  return i == end;
}

/// The six stamp numbers that end a watched row "[...,dev,ino,size,mtime,ctime,mode]".
inline bool row_stamp(std::string_view row, FileStamp& s) {
  if (row.empty() || row.back() != ']') return false;
  std::int64_t v[6];
  std::size_t end = row.size() - 1;
  for (int f = 5; f >= 0; --f) {
    std::size_t i = end;
    std::uint64_t mag = 0, scale = 1;
    int digits = 0;
    while (i > 0 && row[i - 1] >= '0' && row[i - 1] <= '9' && digits < 20) {
      mag += static_cast<std::uint64_t>(row[i - 1] - '0') * scale;
      scale *= 10;
      --i;
      ++digits;
    }
    if (digits == 0 || i == 0) return false;
    bool negative = false;
    if (row[i - 1] == '-') {
      negative = true;
      --i;
    }
    if (i == 0 || row[i - 1] != ',') return false;
    v[f] = negative ? -static_cast<std::int64_t>(mag) : static_cast<std::int64_t>(mag);
    end = i - 1;
  }
  s.dev = static_cast<std::uint64_t>(v[0]);
  s.ino = static_cast<std::uint64_t>(v[1]);
  s.size = static_cast<std::uint64_t>(v[2]);
  s.mtime_ns = v[3];
  s.ctime_ns = v[4];
  s.mode = static_cast<std::uint32_t>(v[5]);
  return true;
}

}  // namespace epload::detail
