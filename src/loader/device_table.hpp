// device_table.hpp — the loader's device name -> entry map, read lock-free.
//
// Open addressing with linear probing over a power-of-two array of atomic
// entry pointers, sized once when the Loader is created (at most half full
// with the devices known then, plus room for the ones backends with unknown
// devices will register).  Readers hash the name (8 bytes per step), probe,
// compare, and read the entry's atomic table pointer: no allocation, no
// lock, no system call — this is the hot path of every device lookup.
// Writers are serialized by the caller (the loader's registry mutex) and only
// ever fill empty buckets, so a reader sees either nothing or a complete
// entry.  Entries are never removed or moved (std::deque) while the table
// lives.  Should a process register more devices than the table has room
// for, the rest go to an overflow list that is searched under the writers'
// mutex: correct, only slower, and never expected in practice.
#pragma once

#include <atomic>       // buckets, table pointers
#include <cstdint>      // hashes
#include <cstring>      // memcpy
#include <deque>        // stable entry storage
#include <memory>       // bucket array
#include <mutex>        // overflow
#include <string_view>  // names
#include <vector>       // overflow

#include "epload/loader.hpp"  // DeviceSource

namespace epload::detail {

inline constexpr std::uint32_t k_no_slot = 0xffffffffu;

/// One device name.  `name` must outlive the table (arena or store buffer).
struct DeviceEntry {
  DeviceEntry(std::string_view n, std::uint64_t h) : name(n), hash(h) {}
  std::string_view name;
  std::uint64_t hash;
  /// Non-null once a backend's init registered it and returned success.
  std::atomic<void*> table{nullptr};
  // Guarded by the writers' mutex:
  std::uint32_t owner = k_no_slot;  ///< the backend slot that provides it
  DeviceSource source = DeviceSource::declared;
};

/// A fast hash for short names: 8-byte words, multiply-xorshift mixing.
inline std::uint64_t hash_device_name(std::string_view s) noexcept {
  std::uint64_t h = 0x9e3779b97f4a7c15ull ^ (s.size() * 0xff51afd7ed558ccdull);
  const char* p = s.data();
  std::size_t n = s.size();
  while (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    std::uint64_t w = 0;
    for (std::size_t i = 0; i < n; ++i) w |= static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
    h = (h ^ w) * 0x94d049bb133111ebull;
    h ^= h >> 29;
  }
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 32);
}

class DeviceTable {
 public:
  /// Room for `expected` names at <= 50% load.
  explicit DeviceTable(std::size_t expected) {
    std::size_t cap = 16;
    while (cap < expected * 2 + 16) cap *= 2;
    m_buckets.reset(new std::atomic<DeviceEntry*>[cap]);
    for (std::size_t i = 0; i < cap; ++i) m_buckets[i].store(nullptr, std::memory_order_relaxed);
    m_mask = cap - 1;
    m_limit = cap - cap / 4;  // 75%: probe sequences stay short
  }

  /// Lock-free lookup; nullptr when the name is unknown.
  const DeviceEntry* find(std::string_view name) const noexcept {
    const std::uint64_t h = hash_device_name(name);
    for (std::size_t i = h & m_mask;; i = (i + 1) & m_mask) {
      const DeviceEntry* e = m_buckets[i].load(std::memory_order_acquire);
      if (e == nullptr) break;
      if (e->hash == h && e->name == name) return e;
    }
    if (m_has_overflow.load(std::memory_order_acquire)) return find_overflow(name, h);
    return nullptr;
  }
  DeviceEntry* find(std::string_view name) noexcept {
    return const_cast<DeviceEntry*>(static_cast<const DeviceTable*>(this)->find(name));
  }

  /// Writers only (serialized by the caller): the entry for `name`, created
  /// if new.  `name` must outlive the table.
  DeviceEntry* insert(std::string_view name) {
    if (DeviceEntry* e = find(name)) return e;
    const std::uint64_t h = hash_device_name(name);
    DeviceEntry* e = &m_entries.emplace_back(name, h);
    if (m_count + 1 > m_limit) {
      std::lock_guard<std::mutex> lock(m_overflow_mutex);
      m_overflow.push_back(e);
      m_has_overflow.store(true, std::memory_order_release);
      return e;
    }
    std::size_t i = h & m_mask;
    while (m_buckets[i].load(std::memory_order_relaxed) != nullptr) i = (i + 1) & m_mask;
    m_buckets[i].store(e, std::memory_order_release);
    ++m_count;
    return e;
  }

  /// Every entry in insertion order (writers' mutex held, or no writers).
  const std::deque<DeviceEntry>& entries() const { return m_entries; }

 private:
  const DeviceEntry* find_overflow(std::string_view name, std::uint64_t h) const {
    std::lock_guard<std::mutex> lock(m_overflow_mutex);
    for (const DeviceEntry* e : m_overflow) {
      if (e->hash == h && e->name == name) return e;
    }
    return nullptr;
  }

  std::unique_ptr<std::atomic<DeviceEntry*>[]> m_buckets;
  std::size_t m_mask = 0;
  std::size_t m_limit = 0;
  std::size_t m_count = 0;
  std::deque<DeviceEntry> m_entries;
  mutable std::mutex m_overflow_mutex;
  std::vector<DeviceEntry*> m_overflow;
  std::atomic<bool> m_has_overflow{false};
};

}  // namespace epload::detail
