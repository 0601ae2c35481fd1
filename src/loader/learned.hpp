// learned.hpp — the learned-devices store: what the loader knows about each
// backend without loading it, remembered across processes.
#pragma once

#include <cstdint>      // abi
#include <memory>       // buffer
#include <span>         // records
#include <string>       // paths
#include <string_view>  // fields
#include <vector>       // records

#include "epload/index.hpp"   // FileStamp
#include "epload/result.hpp"  // Result
#include "file_stamp.hpp"

namespace epload::detail {

/// One backend as the store remembers it.  Every view points into the
/// LearnedFile that produced it (or, when writing, into the caller's memory).
struct LearnedRecord {
  // The key: the backend's entry point (its distribution's metadata
  // directory, the entry point's name and raw value).  metadata_dir and
  // library are relative to search path number `search_path` unless they
  // start with '/' (relative keeps the file small, so cheap to read).
  std::uint32_t search_path = 0;
  std::string_view metadata_dir, name, value;
  char kind = 'n';           ///< 'n': native library; 'p': Python module
  std::string_view library;  ///< the resolved shared library (or module file)
  FileStamp stamp;           ///< of `library` when this was recorded
  std::int64_t abi = -1;     ///< the declared ABI tag; -1: no epload_devices section
  bool learned = false;      ///< the backend was loaded with this stamp: 'l' devices are complete
  /// Space-separated "d:<name>" (declared in the library's ELF section) and
  /// "l:<name>" or "l:<name>=<kind>" (learned; the kind says how the backend
  /// provided it, e.g. "attr": an attribute of the Python host module,
  /// "privateuse1": PyTorch's PrivateUse1 name) entries.
  std::string_view devices;
  /// The message of the backend's last failed load ("" when none, or when
  /// it loaded since): for display (`epload devices`), never used to skip a
  /// load.
  std::string_view failure;
};

/// The store file of one (group, search paths) pair: "learned-<hash>.txt" in
/// the cache directory.
std::string learned_file_path(const std::string& cache_dir, std::string_view group,
                              std::span<const std::string_view> search_paths);

/// A parsed store file.  Views in records() live as long as this object.
class LearnedFile {
 public:
  LearnedFile() = default;
  /// Reads `path`.  Missing, unsafe (another owner, group/other-writable),
  /// truncated or corrupt files give an empty store, with the reason in
  /// `*why` when given: the store is a cache, never an authority.
  static LearnedFile read(const std::string& path, std::string* why = nullptr);

  /// Reads `path` like read(), checks its first line, and parses nothing
  /// more: next() then yields the records one at a time, in file order, so
  /// that a reader in index order needs no table of them (1,000 records:
  /// 160 KB of fresh memory).  Whatever next() gave must be dropped if a
  /// later call reports damage (damaged()): the file is then "absent".
  /// With `map_file`, the bytes are a private mapping of the file (pages
  /// from the page cache, copied only where an escape is undone) instead of
  /// a copy in fresh memory: see memory.hpp for the price.
  static LearnedFile open(const std::string& path, std::string* why = nullptr, bool map_file = false);
  /// The next record (views into the file's memory; escapes are undone in
  /// place, so each record is parsed once).  False at the end, after the
  /// trailer checked out (ended()), or on damage (damaged(), the reason in
  /// `*why`), and on a file open() could not read.
  bool next(LearnedRecord& r, std::string* why = nullptr);
  bool ended() const { return m_ended; }
  bool damaged() const { return m_damaged; }

  /// What read() parsed (empty after open()).
  std::span<const LearnedRecord> records() const { return m_records; }

 private:
  /// The file's bytes in anonymous memory of their own (unescaped in place;
  /// records view it): what happens to the file later (truncation) must not
  /// reach the views.  Or, when open() was asked to, a private mapping of
  /// the file itself.
  struct Mapping {
    void* data = nullptr;
    std::size_t size = 0;
    Mapping() = default;
    Mapping(Mapping&& o) noexcept : data(o.data), size(o.size) { o.data = nullptr; }
    Mapping& operator=(Mapping&& o) noexcept;
    ~Mapping();
  };
  char* next_line(char*& line_end);

  Mapping m_map;
  std::vector<LearnedRecord> m_records;
  std::string m_path;                  // for next()'s messages
  char* m_next = nullptr;              // the cursor; null: nothing more to parse
  char* m_end = nullptr;
  std::size_t m_count = 0;             // records next() has returned
  bool m_ended = false, m_damaged = false;
};

/// Serializes `records` (line format, see learned.cpp) and writes them to
/// `path` atomically (temporary file in the same directory, then rename),
/// mode 0600, creating the directory (0700) if needed.
Result<void> write_learned(const std::string& path, std::span<const LearnedRecord> records);

/// Calls `fn(name, tag, kind)` for each entry of a device list: tag 'd'
/// (the ELF section declares it), 'm' (the distribution declares it in its
/// epload.devices entry points; never stored: read from the index) or 'l'
/// (learned); `kind` is what follows '=' ("" when nothing does).
template <class Fn>
void for_each_device_entry(std::string_view devices, Fn&& fn) {
  while (!devices.empty()) {
    std::size_t end = devices.find(' ');
    std::string_view item = devices.substr(0, end);
    if (item.size() > 2) {
      std::string_view name = item.substr(2), kind;
      if (const std::size_t eq = name.find('='); eq != std::string_view::npos) {
        kind = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      fn(name, item[0], kind);
    }
    if (end == std::string_view::npos) break;
    devices.remove_prefix(end + 1);
  }
}

/// Calls `fn(name, declared)` for each entry of a device list (declared:
/// in the ELF section or the epload.devices entry points).
template <class Fn>
void for_each_device(std::string_view devices, Fn&& fn) {
  for_each_device_entry(devices, [&](std::string_view name, char tag, std::string_view) { fn(name, tag != 'l'); });
}

}  // namespace epload::detail
