// scan_seen.hpp — the set of normalized names already discovered
// (unique_everseen's `seen`), for first-wins de-duplication.
#pragma once

#include <cstdint>      // hash
#include <string_view>  // keys
#include <utility>      // std::move
#include <vector>       // slots

#include "arena.hpp"
#include "fnv.hpp"

namespace epload::detail {

// A set of strings for first-wins de-duplication: open addressing over views
// into an arena, so inserting 6,000 names costs no per-name allocation.
class SeenSet {
 public:
  /// Adds `key` (copied); returns false when it was already there.
  bool insert(std::string_view key) {
    if ((m_count + 1) * 2 > m_slots.size()) grow();
    const std::size_t i = find(key);
    if (m_used[i]) return false;
    m_slots[i] = m_arena.copy(key);
    m_used[i] = true;
    ++m_count;
    return true;
  }

  /// Makes room for `n` keys without rehashing (one allocation of the
  /// final size, not every size on the way).
  void reserve(std::size_t n) {
    std::size_t size = 1024;
    while (size < 2 * n + 2) size *= 2;
    if (size > m_slots.size()) grow(size);
  }

 private:
  static std::size_t hash(std::string_view s) { return static_cast<std::size_t>(fnv1a(s)); }
  std::size_t find(std::string_view key) const {
    const std::size_t mask = m_slots.size() - 1;
    for (std::size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      if (!m_used[i] || m_slots[i] == key) return i;
    }
  }
  void grow(std::size_t n = 0) {
    std::vector<std::string_view> old = std::move(m_slots);
    std::vector<bool> old_used = std::move(m_used);
    if (n == 0) n = old.empty() ? 1024 : old.size() * 2;
    m_slots.assign(n, {});
    m_used.assign(n, false);
    for (std::size_t i = 0; i < old.size(); ++i) {
      if (old_used[i]) {
        const std::size_t j = find(old[i]);
        m_slots[j] = old[i];
        m_used[j] = true;
      }
    }
  }
  detail::Arena m_arena;
  std::vector<std::string_view> m_slots;
  std::vector<bool> m_used;
  std::size_t m_count = 0;
};

}  // namespace epload::detail
