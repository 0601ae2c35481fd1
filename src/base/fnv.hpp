// fnv.hpp — 64-bit FNV-1a, the one hash of names: the file names of the
// index and learned-store caches (from their keys) and the scanner's set of
// distribution names seen.  Not for the integrity of a file's body
// (json_text.hpp's body_hash, word at a time) nor for anything an attacker
// picks to collide: a collision costs a rebuild or one more probe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace epload::detail {

/// An FNV-1a state; feed it, then read `value`.
struct Fnv1a {
  std::uint64_t value = 0xcbf29ce484222325ULL;

  /// Folds `n` bytes in.
  void bytes(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) value = (value ^ p[i]) * 0x100000001b3ULL;
  }
  /// Folds `v` in as 8 bytes, least significant first.
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i, v >>= 8) value = (value ^ (v & 0xff)) * 0x100000001b3ULL;
  }
  /// Folds `s` in length-prefixed, so ("ab", "c") and ("a", "bc") differ.
  void field(std::string_view s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
};

/// FNV-1a of `s` alone (no length prefix).
inline std::uint64_t fnv1a(std::string_view s) {
  Fnv1a h;
  h.bytes(s.data(), s.size());
  return h.value;
}

}  // namespace epload::detail
