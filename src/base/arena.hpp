// arena.hpp — append-only string storage whose bytes never move.
//
// LIFETIME: a view returned by copy() is valid until the Arena is destroyed.
// Blocks are never reallocated, so growing the arena does not invalidate
// earlier views (a std::string buffer would).
#pragma once

#include <cstddef>      // std::size_t
#include <cstring>      // std::memcpy
#include <memory>       // blocks
#include <string_view>  // views out
#include <vector>       // block list

#include "memory.hpp"

namespace epload::detail {

class Arena {
 public:
  /// Copies `s` into the arena and returns a view of the copy.
  std::string_view copy(std::string_view s) {
    if (s.empty()) return {};
    char* p = allocate(s.size());
    std::memcpy(p, s.data(), s.size());
    return {p, s.size()};
  }

  /// Returns `n` uninitialised bytes that live as long as the arena.
  char* allocate(std::size_t n) {
    if (n > m_left) {
      const std::size_t size = n > k_block / 4 ? n : k_block;
      m_blocks.emplace_back(new char[size]);  // not zeroed: every byte is written
      if (size != k_block) {  // oversized: own block, written whole at once
        prefault(m_blocks.back().get(), size);
        return m_blocks.back().get();
      }
      m_next = m_blocks.back().get();
      m_left = size;
      m_unbacked = m_next + k_first_part;
    }
    // A block is backed in one call (memory.hpp) once it is used past its
    // first page, not when it is opened: an arena that only ever holds a
    // few short strings (a cached index's search paths, copied while the
    // `full` check's helper waits for its first names) backs one page, by
    // its fault, instead of sixteen.
    if (m_unbacked != nullptr && n > static_cast<std::size_t>(m_unbacked - m_next)) {
      prefault(m_unbacked, m_left - static_cast<std::size_t>(m_unbacked - m_next));
      m_unbacked = nullptr;
    }
    char* p = m_next;
    m_next += n;
    m_left -= n;
    return p;
  }

 private:
  static constexpr std::size_t k_block = 64 * 1024;
  static constexpr std::size_t k_first_part = 4096;
  std::vector<std::unique_ptr<char[]>> m_blocks;
  char* m_next = nullptr;
  std::size_t m_left = 0;
  char* m_unbacked = nullptr;  // where the current block's unbacked part begins; null: backed
};

}  // namespace epload::detail
