// cache_files.cpp — the files of a cache directory (see cache_files.hpp).
//
// Pruning runs after each index write only, never on a read path.  "Last
// use" is the later of atime and mtime: reads update atime (relatime: at
// most once a day, which is all a 30-day rule needs); with noatime mounts it
// degrades to "last written", so a long-unchanged environment is rescanned
// about once a month.  Temporary files older than an hour were left by
// killed processes.
#include "cache_files.hpp"

#include <dirent.h>    // opendir
#include <fcntl.h>     // AT_SYMLINK_NOFOLLOW, O_CLOEXEC
#include <stdlib.h>    // mkostemp
#include <sys/stat.h>  // fstatat, mkdir, fchmod
#include <unistd.h>    // write, close, unlink, geteuid

#include <algorithm>  // sort
#include <cerrno>     // errno
#include <cstdint>    // int64_t
#include <cstdio>     // rename
#include <cstring>    // strerror
#include <utility>    // pair
#include <vector>     // prune list

#include "cache_internal.hpp"  // errno_text
#include "stamp.hpp"           // coarse_now_ns

namespace epload::detail {

namespace {

constexpr std::size_t k_keep_index_files = 64;
constexpr std::int64_t k_second_ns = 1000000000;
constexpr std::int64_t k_max_age_ns = 30LL * 24 * 3600 * k_second_ns;
constexpr std::int64_t k_temp_age_ns = 3600LL * k_second_ns;

std::int64_t ns_of(const struct timespec& ts) {
  return static_cast<std::int64_t>(ts.tv_sec) * k_second_ns + ts.tv_nsec;
}

bool has_prefix_suffix(std::string_view s, std::string_view prefix, std::string_view suffix) {
  return s.size() > prefix.size() + suffix.size() && s.starts_with(prefix) && s.ends_with(suffix);
}

}  // namespace

CacheFileKind cache_file_kind(std::string_view name) {
  if (has_prefix_suffix(name, "index-", ".json")) return CacheFileKind::index;
  if (has_prefix_suffix(name, "learned-", ".txt")) return CacheFileKind::learned;
  if (has_prefix_suffix(name, "devices-", ".json")) return CacheFileKind::devices;
  if (has_prefix_suffix(name, "python-", ".txt")) return CacheFileKind::python;
  if ((name.starts_with(".index-") || name.starts_with(".learned-") || name.starts_with(".devices-") ||
       name.starts_with(".python-")) &&
      name.find(".tmp.") != std::string_view::npos) {
    return CacheFileKind::temp;
  }
  return CacheFileKind::other;
}

void prune_cache_dir(const std::string& dir, std::string_view keep) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  const int dfd = ::dirfd(d);
  const std::int64_t now = coarse_now_ns();
  std::vector<std::pair<std::int64_t, std::string>> index_files;  // (last use, name)
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    const CacheFileKind kind = cache_file_kind(name);
    if (kind == CacheFileKind::other || name == keep) continue;
    struct stat st;
    if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    const std::int64_t mtime = ns_of(st.st_mtim);
    if (kind == CacheFileKind::temp) {
      if (now - mtime > k_temp_age_ns) ::unlinkat(dfd, e->d_name, 0);
      continue;
    }
    const std::int64_t last_use = std::max(mtime, ns_of(st.st_atim));
    if (now - last_use > k_max_age_ns) {
      ::unlinkat(dfd, e->d_name, 0);
    } else if (kind == CacheFileKind::index) {
      index_files.emplace_back(last_use, std::string(name));
    }
  }
  // `keep` counts as the most recently used index file.
  if (index_files.size() + 1 > k_keep_index_files) {
    std::sort(index_files.begin(), index_files.end());
    const std::size_t excess = index_files.size() + 1 - k_keep_index_files;
    for (std::size_t i = 0; i < excess; ++i) ::unlinkat(dfd, index_files[i].second.c_str(), 0);
  }
  ::closedir(d);
}

Result<int> clear_cache_dir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return 0;
    return Error{Errc::io, "cannot open the cache directory " + dir + ": " + errno_text()};
  }
  int removed = 0;
  while (const dirent* e = ::readdir(d)) {
    if (cache_file_kind(e->d_name) == CacheFileKind::other) continue;
    if (::unlinkat(::dirfd(d), e->d_name, 0) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

}  // namespace epload::detail
