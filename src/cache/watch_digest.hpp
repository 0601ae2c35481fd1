// watch_digest.hpp — the digest of the watched files' stamps (format 3).
//
// `full` validation compares ~6,000 stamps.  Reading them back from the cache
// file (six integers each, two of them 19 digits) cost more than half as
// much as the stat calls themselves, so the cache also stores the names
// alone plus this digest, and validation folds the fresh stamps into a
// digest and compares that.
//
// Each file contributes a 128-bit mix of its position and its stamp; the
// contributions are added (mod 2^64, per half).  Addition makes the digest
// independent of which thread folded which file, so both threads of the
// check fold their own share and add the sums.  The mix of one file is a
// bijection of each field for fixed others, so a change to one field of one
// stamp always changes the digest, and any other change leaves it equal only
// by a ~2^-128 accident; the position keeps two files that swap stamps
// (renames) from cancelling out.  Not a defence against an adversary: anyone who can
// write the watched files can change the answer anyway.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "epload/index.hpp"
#include "index_provenance.hpp"

namespace epload::detail {

/// splitmix64's finalizer: a bijection of 64-bit words with full avalanche.
inline std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

/// File number `i`'s share of the digest: what digest_add() adds.
inline WatchedDigest digest_share(std::size_t i, const FileStamp& s) {
  const std::uint64_t fields[] = {s.dev, s.ino, s.size, static_cast<std::uint64_t>(s.mtime_ns),
                                  static_cast<std::uint64_t>(s.ctime_ns), s.mode};
  std::uint64_t a = mix64(static_cast<std::uint64_t>(i) ^ 0x6a09e667f3bcc908ULL);
  std::uint64_t b = mix64(static_cast<std::uint64_t>(i) ^ 0xbb67ae8584caa73bULL);
  for (std::uint64_t f : fields) {
    a = mix64(a ^ f);
    b = mix64(b + f);
  }
  return WatchedDigest{a, b};
}

/// Adds file number `i`'s stamp to `d`.
inline void digest_add(WatchedDigest& d, std::size_t i, const FileStamp& s) {
  const WatchedDigest share = digest_share(i, s);
  d.lo += share.lo;
  d.hi += share.hi;
}

/// Adds `other` (another thread's share) to `d`.
inline void digest_merge(WatchedDigest& d, const WatchedDigest& other) {
  d.lo += other.lo;
  d.hi += other.hi;
}

/// The digest of a list of watched files with their stamps.
inline WatchedDigest digest_of(std::span<const WatchedFile> watched) {
  WatchedDigest d;
  for (std::size_t i = 0; i < watched.size(); ++i) digest_add(d, i, watched[i].stamp);
  return d;
}

}  // namespace epload::detail
