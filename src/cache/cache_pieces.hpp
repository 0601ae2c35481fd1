// cache_pieces.hpp — a section of a new cache file as pieces: its own bytes
// and ranges of the old file, in order.  The refresh that splices a file
// (cache_splice.cpp) keeps most rows as they were; as ranges they go from
// the old file's buffer straight to writev(), never copied in memory
// (copying ~1.6 MB of kept rows into new strings cost ~0.6 ms of a
// 6,000-distribution refresh, most of it page faults).
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace epload::detail {

class Pieces {
 public:
  /// Pieces whose ranges lie in `old` (the old file, whole).
  explicit Pieces(std::string_view old) : m_old(old) {}

  /// Own bytes.  Bytes equal to the old file's right after the last range
  /// (the ",\t" between two kept rows, the punctuation that closes a run)
  /// extend that range instead: kept rows in a row make one range.
  void put(std::string_view s) {
    m_size += s.size();
    if (!m_list.empty() && m_list.back().old) {
      Piece& last = m_list.back();
      const std::size_t end = last.begin + last.size;
      if (s.size() <= m_old.size() - end && std::memcmp(m_old.data() + end, s.data(), s.size()) == 0) {
        last.size += s.size();
        return;
      }
    }
    if (m_list.empty() || m_list.back().old) m_list.push_back(Piece{false, m_own.size(), 0});
    m_own.append(s);
    m_list.back().size += s.size();
  }

  /// A range of the old file (a view into the `old` given above).
  void copy(std::string_view range) {
    m_size += range.size();
    const auto begin = static_cast<std::size_t>(range.data() - m_old.data());
    if (!m_list.empty() && m_list.back().old && m_list.back().begin + m_list.back().size == begin) {
      m_list.back().size += range.size();
      return;
    }
    m_list.push_back(Piece{true, begin, range.size()});
  }

  /// The own bytes, to patch a few in place (`at` counts own bytes only).
  char* own_at(std::size_t at) { return m_own.data() + at; }

  /// How many bytes in all.
  std::size_t size() const { return m_size; }

  /// The pieces as views, valid while this and the old file live.
  std::vector<std::string_view> views() const {
    std::vector<std::string_view> out;
    out.reserve(m_list.size());
    for (const Piece& p : m_list) out.push_back((p.old ? m_old : std::string_view(m_own)).substr(p.begin, p.size));
    return out;
  }

 private:
  struct Piece {
    bool old;
    std::size_t begin, size;  // into the old file, or into m_own
  };
  std::string_view m_old;
  std::string m_own;
  std::vector<Piece> m_list;
  std::size_t m_size = 0;
};

}  // namespace epload::detail
