// scan_list.hpp — list search-path directories into importlib's discovery
// order (Lookup.search with no name).
#pragma once

#include <cstdint>      // indices
#include <span>         // stored listings
#include <string>       // name pool
#include <string_view>  // names out
#include <vector>       // candidates

#include "epload/index.hpp"  // WatchedName
#include "scan_lookup.hpp"
#include "index_provenance.hpp"

namespace epload::detail {

/// What search path `path` holds for importlib's Lookup now.
enum class MetadataIn {
  missing,  ///< nothing at that path
  none,     ///< a directory none of whose children Lookup takes
  maybe,    ///< a child that is metadata, a file (maybe a zip), a failed listing
};
MetadataIn metadata_in(const char* path);

/// True when search path `path` contributes no metadata path now: it does
/// not exist, or it is a directory none of whose children importlib's
/// Lookup takes.  False otherwise (a file, which may be a zip archive; a
/// listing that fails; a child that is metadata).
inline bool lists_no_metadata(const char* path) { return metadata_in(path) != MetadataIn::maybe; }

/// One metadata path in discovery order, before de-duplication.
struct Candidate {
  std::uint32_t path = 0;      ///< search path index
  std::uint32_t name_off = 0;  ///< child name in the Listing's pool (NUL-terminated)
  std::uint32_t name_len = 0;
  ChildKind kind = ChildKind::none;
};

/// All candidates of all search paths, in importlib's order: per path, the
/// infos grouped by Lookup key in first-seen key order, then the eggs.
class Listing {
 public:
  /// Lists the directory open on `fd` (search path `path`) with getdents64,
  /// in raw order, and appends its candidates.  Returns 0, or the errno of
  /// a failed getdents64: then nothing of the directory is appended (what
  /// importlib does when os.listdir raises, even after a partial listing).
  int add_directory(std::uint32_t path, int fd, bool base_is_egg);

  /// Appends the candidates of search path `path` as a previous listing
  /// recorded them (children in discovery order), without listing it.
  void add_stored(std::uint32_t path, std::span<const WatchedName> children, bool base_is_egg);

  std::uint32_t size() const { return static_cast<std::uint32_t>(m_cands.size()); }
  const Candidate& operator[](std::uint32_t i) const { return m_cands[i]; }
  /// The child's name; LIFETIME: until the next add_directory().  The view is
  /// followed by a NUL, so data() is usable as a C string.
  std::string_view name(const Candidate& c) const { return {m_pool.data() + c.name_off, c.name_len}; }

 private:
  std::string m_pool;  // child names, NUL-terminated
  std::vector<Candidate> m_cands;
  // Reused per directory: this directory's infos, their keys and an order.
  std::vector<Candidate> m_infos, m_eggs;
  std::string m_keys;
  std::vector<std::uint32_t> m_key_off, m_order, m_rank;
};

}  // namespace epload::detail
