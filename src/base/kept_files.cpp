// kept_files.cpp — the files of a cache directory (see kept_files.hpp).
//
// Pruning runs after each index write only, never on a read path.  "Last
// use" is the later of atime and mtime: reads update atime (relatime: at
// most once a day, which is all a 30-day rule needs); with noatime mounts it
// degrades to "last written", so a long-unchanged environment is rescanned
// about once a month.  Temporary files older than an hour were left by
// killed processes.
//
// A cache directory may be shared (EPLOAD_CACHE_DIR set to a project's
// directory, or $HOME): a name like "index-en.json" can be anybody's.  So
// before a file is removed it is opened (O_NOFOLLOW) and must be a regular
// file of this user whose first bytes are its kind's magic, which every
// writer of that kind puts first and no other program writes by accident
// (a temporary one may hold less: a prefix of it).  The check costs an open
// and a read of a few bytes per file removed, or per file of a kind past
// its count bound, and nothing on the read path.
#include "kept_files.hpp"

#include <dirent.h>    // opendir
#include <fcntl.h>     // AT_SYMLINK_NOFOLLOW
#include <sys/stat.h>  // fstatat
#include <unistd.h>    // unlinkat, pread, geteuid

#include <algorithm>  // sort
#include <cerrno>     // errno
#include <cstdint>    // int64_t
#include <cstring>    // strerror
#include <mutex>      // the registry
#include <utility>    // pair
#include <vector>     // prune list

#include "stamp.hpp"  // coarse_now_ns

namespace epload::detail {

namespace {

constexpr std::int64_t k_second_ns = 1000000000;
constexpr std::int64_t k_max_age_ns = 30LL * 24 * 3600 * k_second_ns;
constexpr std::int64_t k_temp_age_ns = 3600LL * k_second_ns;

/// The kinds keep_files() registered.
struct Registry {
  std::mutex mutex;
  std::vector<const KeptFiles*> kinds;
};

Registry& registry() {
  static Registry r;  // built on first use: safe from other files' static initializers
  return r;
}

std::vector<const KeptFiles*> registered() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.kinds;
}

std::int64_t ns_of(const struct timespec& ts) {
  return static_cast<std::int64_t>(ts.tv_sec) * k_second_ns + ts.tv_nsec;
}

bool has_prefix_suffix(std::string_view s, std::string_view prefix, std::string_view suffix) {
  return s.size() > prefix.size() + suffix.size() && s.starts_with(prefix) && s.ends_with(suffix);
}

KeptName kind_among(const std::vector<const KeptFiles*>& kinds, std::string_view name) {
  for (const KeptFiles* k : kinds) {
    if (has_prefix_suffix(name, k->prefix, k->suffix)) return {k, false};
  }
  // A temporary file of one: "." + its name + ".tmp." + what makes it unique.
  if (const std::size_t tmp = name.find(".tmp."); name.starts_with('.') && tmp != std::string_view::npos) {
    const std::string_view base = name.substr(1, tmp - 1);
    for (const KeptFiles* k : kinds) {
      if (has_prefix_suffix(base, k->prefix, k->suffix)) return {k, true};
    }
  }
  return {};
}

/// True when `name` in the directory open on `dfd` is a file of ours of
/// the kind `kind` says (see the top comment).
bool is_ours(int dfd, const char* name, const KeptName& kind) {
  const int fd = ::openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  const std::string_view magic = kind.files->magic;
  char head[64];
  struct stat st;
  bool ours = !magic.empty() && magic.size() <= sizeof head && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
              st.st_uid == ::geteuid();
  if (ours) {
    ssize_t got = 0;
    while (got < static_cast<ssize_t>(magic.size())) {
      const ssize_t n = ::pread(fd, head + got, magic.size() - static_cast<std::size_t>(got), got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += n;
    }
    const std::string_view read(head, static_cast<std::size_t>(std::max<ssize_t>(got, 0)));
    ours = read.size() == magic.size() ? read == magic : kind.temp && magic.starts_with(read);
  }
  ::close(fd);
  return ours;
}

/// Removes `name` if it is ours; true when it was removed.
bool remove_if_ours(int dfd, const char* name, const KeptName& kind) {
  return is_ours(dfd, name, kind) && ::unlinkat(dfd, name, 0) == 0;
}

/// Removes the least recently used of `files` (last use, name) beyond
/// `keep_newest`, with `extra` more counted as the most recent.  Only files
/// of ours count: the others are left out first.
void remove_excess(int dfd, std::vector<std::pair<std::int64_t, std::string>>& files, const KeptFiles* kind,
                   std::size_t extra) {
  if (files.size() + extra <= kind->keep_newest) return;
  const KeptName named{kind, false};
  std::erase_if(files, [&](const auto& f) { return !is_ours(dfd, f.second.c_str(), named); });
  if (files.size() + extra <= kind->keep_newest) return;
  std::sort(files.begin(), files.end());
  const std::size_t excess = files.size() + extra - kind->keep_newest;
  for (std::size_t i = 0; i < excess; ++i) ::unlinkat(dfd, files[i].second.c_str(), 0);
}

}  // namespace

bool keep_files(const KeptFiles& files) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (std::find(r.kinds.begin(), r.kinds.end(), &files) == r.kinds.end()) r.kinds.push_back(&files);
  return true;
}

KeptName kept_file_kind(std::string_view name) { return kind_among(registered(), name); }

void prune_cache_dir(const std::string& dir, std::string_view keep) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  const int dfd = ::dirfd(d);
  const std::int64_t now = coarse_now_ns();
  const std::vector<const KeptFiles*> kinds = registered();
  // Per kind with a limit: (last use, name) of the files that may stay.
  std::vector<std::vector<std::pair<std::int64_t, std::string>>> limited(kinds.size());
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    const KeptName kind = kind_among(kinds, name);
    if (kind.files == nullptr || name == keep) continue;
    struct stat st;
    if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    const std::int64_t mtime = ns_of(st.st_mtim);
    if (kind.temp) {
      if (now - mtime > k_temp_age_ns) remove_if_ours(dfd, e->d_name, kind);
      continue;
    }
    const std::int64_t last_use = std::max(mtime, ns_of(st.st_atim));
    if (now - last_use > k_max_age_ns) {
      remove_if_ours(dfd, e->d_name, kind);
    } else if (kind.files->keep_newest != 0) {
      const std::size_t k = static_cast<std::size_t>(std::find(kinds.begin(), kinds.end(), kind.files) - kinds.begin());
      limited[k].emplace_back(last_use, std::string(name));
    }
  }
  const KeptName kept = kind_among(kinds, keep);
  for (std::size_t k = 0; k < kinds.size(); ++k) {
    if (kinds[k]->keep_newest == 0) continue;
    const bool keep_counts = kept.files == kinds[k] && !kept.temp;
    remove_excess(dfd, limited[k], kinds[k], keep_counts ? 1 : 0);
  }
  ::closedir(d);
}

Result<int> clear_cache_dir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return 0;
    return Error{Errc::io, "cannot open the cache directory " + dir + ": " + std::strerror(errno)};
  }
  const std::vector<const KeptFiles*> kinds = registered();
  int removed = 0;
  while (const dirent* e = ::readdir(d)) {
    const KeptName kind = kind_among(kinds, e->d_name);
    if (kind.files != nullptr && remove_if_ours(::dirfd(d), e->d_name, kind)) ++removed;
  }
  ::closedir(d);
  return removed;
}

}  // namespace epload::detail
