// cache_store.cpp — open_index(): use the cache when it is safe and valid,
// else scan and store; Catalog; atomic writes; pruning.
//
// The hit path is a handful of system calls before validation: open the
// cache directory (O_PATH) and fstat it, openat the file (O_NOFOLLOW) and
// fstat it, read what the request needs (a complete load: the whole file;
// CacheOptions::groups: the head and those groups' sections, plus the
// watched section under `full` validation), close.  Safety is checked on the descriptors that
// are then read, so a swap between check and use cannot slip a foreign file
// in.  The cache file names dlopen targets: a file or directory owned by
// another user, or writable by group or others, is never trusted (ignored
// with the reason "unsafe"); an unsafe directory is also never written.
//
// Writes happen only after a rebuild: mkdir -p with mode 0700, a temporary
// file in the same directory (mkostemp), fchmod 0600, rename over the old
// file.  Readers therefore see either the old or the new file, whole, even
// with many processes rebuilding the same key at once.  No fsync: a file torn
// by a crash fails to parse and is rebuilt.
//
// A shipped index (`epload index build --output F`, used via $EPLOAD_INDEX or
// CacheOptions::shipped_index) is read-only and travels with its
// environment: its search paths are stored relative to its own directory.
// It is used when its relocated search-path list equals the requested one
// and each search path still exists exactly when it did with the same
// mtime_ns.  dev, ino and ctime are not compared: copying an environment
// (cp -a, tar, a container layer) changes them but keeps mtimes; an install
// into the copy changes the directory's mtime.  It may belong to you or to
// root (installed system-wide), never be writable by group or others.
// Otherwise it is ignored, with the reason, and the user cache is used.
//
// Pruning (on each write only, never on the read path): in the cache
// directory, index files whose last use — the later of atime and mtime — is
// more than 30 days ago are removed; then, if more than 64 remain, the least
// recently used are removed down to 64.  Temporary files older than an hour
// (left by killed processes) are removed too.  With noatime mounts "last use"
// degrades to "last written", so a long-unchanged environment is rescanned
// about once a month.
#include <dirent.h>    // opendir: pruning, clear
#include <fcntl.h>     // open, openat
#include <stdlib.h>    // mkostemp
#include <sys/stat.h>  // fstat, mkdir
#include <unistd.h>    // write, close, geteuid

#include <algorithm>
#include <initializer_list>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "cache_internal.hpp"
#include "epload/profile.hpp"
#include "epload/scanner.hpp"
#include "stamp.hpp"

namespace epload {
namespace detail {

namespace {

constexpr std::size_t k_keep_files = 64;
constexpr std::int64_t k_second_ns = 1000000000;
constexpr std::int64_t k_max_age_ns = 30LL * 24 * 3600 * k_second_ns;
constexpr std::int64_t k_temp_age_ns = 3600LL * k_second_ns;

std::string errno_text() { return std::strerror(errno); }

/// Closes a descriptor at scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

/// Why `st` (of `what`) must not be trusted, or "" when it may.
std::string unsafe_reason(const struct stat& st, const std::string& what, bool root_ok = false) {
  const uid_t me = ::geteuid();
  if (st.st_uid != me && !(root_ok && st.st_uid == 0)) {
    return "unsafe: " + what + " is owned by uid " + std::to_string(st.st_uid) + ", not by uid " +
           std::to_string(me);
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return "unsafe: " + what + " is writable by group or others (mode " +
           std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
           std::to_string(st.st_mode & 7) + ")";
  }
  return {};
}

std::int64_t ns_of(const struct timespec& ts) {
  return static_cast<std::int64_t>(ts.tv_sec) * k_second_ns + ts.tv_nsec;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
bool is_index_file(std::string_view n) { return starts_with(n, "index-") && ends_with(n, ".json"); }
bool is_temp_file(std::string_view n) {
  return starts_with(n, ".index-") && n.find(".tmp.") != std::string_view::npos;
}

/// mkdir -p, creating missing components with mode 0700.
Result<void> make_dirs(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return {};
    return Error{Errc::io, dir + " is not a directory"};
  }
  const std::string parent = dir_name(dir);
  if (parent != dir && parent != "." && parent != "/") {
    if (auto r = make_dirs(parent); !r) return r;
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Error{Errc::io, "mkdir " + dir + ": " + errno_text()};
  }
  return {};
}

/// Writes `parts`, one after the other, to `path` through a temporary file
/// in the same directory and rename(); the file gets exactly `mode`.
Result<void> write_atomic(const std::string& path, std::initializer_list<std::string_view> parts, mode_t mode,
                          std::string_view temp_prefix) {
  const std::string dir = dir_name(path);
  std::string tmp = join_path(dir, std::string(temp_prefix) + ".tmp.XXXXXX");
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return Error{Errc::io, "cannot create a temporary file in " + dir + ": " + errno_text()};
  auto fail = [&](const std::string& what) -> Result<void> {
    const std::string text = what + " " + tmp + ": " + errno_text();
    ::close(fd);
    ::unlink(tmp.c_str());
    return Error{Errc::io, text};
  };
  for (std::string_view data : parts) {
    std::size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail("write");
      done += static_cast<std::size_t>(n);
    }
  }
  if (::fchmod(fd, mode) != 0) return fail("fchmod");
  if (::close(fd) != 0) {
    const std::string text = "close " + tmp + ": " + errno_text();
    ::unlink(tmp.c_str());
    return Error{Errc::io, text};
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string text = "rename " + tmp + " to " + path + ": " + errno_text();
    ::unlink(tmp.c_str());
    return Error{Errc::io, text};
  }
  return {};
}

/// Removes old index and temporary files from the cache directory (see the
/// rule at the top of this file); `keep` is the file just written.
void prune(const std::string& dir, std::string_view keep) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  const int dfd = ::dirfd(d);
  const std::int64_t now = coarse_now_ns();
  std::vector<std::pair<std::int64_t, std::string>> files;  // (last use, name)
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    const bool index = is_index_file(name);
    if ((!index && !is_temp_file(name)) || name == keep) continue;
    struct stat st;
    if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    const std::int64_t mtime = ns_of(st.st_mtim);
    if (!index) {
      if (now - mtime > k_temp_age_ns) ::unlinkat(dfd, e->d_name, 0);
      continue;
    }
    const std::int64_t last_use = std::max(mtime, ns_of(st.st_atim));
    if (now - last_use > k_max_age_ns) {
      ::unlinkat(dfd, e->d_name, 0);
    } else {
      files.emplace_back(last_use, std::string(name));
    }
  }
  if (files.size() + 1 > k_keep_files) {
    std::sort(files.begin(), files.end());
    const std::size_t excess = files.size() + 1 - k_keep_files;
    for (std::size_t i = 0; i < excess; ++i) ::unlinkat(dfd, files[i].second.c_str(), 0);
  }
  ::closedir(d);
}

/// The shipped index at `path`, if it is safe, made for `search_paths`, and
/// its search paths still hold.
Result<Index> open_shipped(const std::string& path, const CacheOptions& options) {
  const std::vector<std::string>& search_paths = options.search_paths;
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.fd < 0) return Error{Errc::cache, "cannot open " + path + ": " + errno_text()};
  struct stat st;
  if (::fstat(fd.fd, &st) != 0) return Error{Errc::cache, "fstat " + path + ": " + errno_text()};
  // A shipped index may belong to root (installed system-wide) or to you.
  if (std::string why = unsafe_reason(st, path, /*root_ok=*/true); !why.empty()) {
    return Error{Errc::cache, why};
  }
  ReadExpectations expect;
  expect.search_paths = &search_paths;
  expect.base_dir = dir_name(absolute_path(path));
  // Only the search-path stamps are checked for a shipped index: the watched
  // list is never needed.
  expect.groups = options.groups;
  expect.group_stamps = options.group_stamps;
  auto index = read_index_fd(fd.fd, path, expect);
  if (!index) return index.error();
  std::string why;
  if (!shipped_still_valid(*index, &why)) return Error{Errc::cache, "stale: " + why};
  return index;
}

/// What reading the cache file found.
struct Lookup {
  std::shared_ptr<const Index> index;  // set on a valid hit
  std::string why;                     // else: why not
  bool dir_unsafe = false;             // never write into it
};

Lookup look_up(const std::string& dir, const std::string& name, const CacheKey& key,
               const CacheOptions& options) {
  const Validation validation = options.validation;
  Lookup out;
  const std::string path = join_path(dir, name);
  profile::count(profile::Counter::open);
  Fd dfd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (dfd.fd < 0) {
    out.why = errno == ENOENT ? "no cache directory yet" : "cache directory " + dir + ": " + errno_text();
    return out;
  }
  struct stat st;
  profile::count(profile::Counter::stat);
  if (::fstat(dfd.fd, &st) != 0) {
    out.why = "fstat " + dir + ": " + errno_text();
    return out;
  }
  if (std::string why = unsafe_reason(st, "cache directory " + dir); !why.empty()) {
    out.why = why;
    out.dir_unsafe = true;
    return out;
  }
  profile::count(profile::Counter::open);
  Fd fd(::openat(dfd.fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (fd.fd < 0) {
    if (errno == ENOENT) out.why = "no cache file";
    else if (errno == ELOOP) out.why = "unsafe: cache file " + path + " is a symbolic link";
    else out.why = "cache file " + path + ": " + errno_text();
    return out;
  }
  profile::count(profile::Counter::stat);
  if (::fstat(fd.fd, &st) != 0) {
    out.why = "fstat " + path + ": " + errno_text();
    return out;
  }
  if (std::string why = unsafe_reason(st, "cache file " + path); !why.empty()) {
    out.why = why;
    return out;
  }
  ReadExpectations expect;
  expect.key = &key;
  expect.groups = options.groups;
  expect.watched = validation == Validation::full;  // only `full` needs the watched stamps
  expect.group_stamps = options.group_stamps;
  // Under `full`, the stat calls start on the other CPU as soon as the
  // names are read, while the groups are parsed.
  EarlyFullCheck early;
  if (expect.watched) expect.early_check = &early;
  auto read = read_index_fd(fd.fd, path, expect);
  if (!read) {
    out.why = read.error().message;
    return out;
  }
  auto index = std::make_shared<const Index>(std::move(read.value()));
  if (options.while_validating && early.running()) {
    // The caller's own work runs here while the helper stats (see
    // CacheOptions::while_validating); it gets this index only if the check
    // passes.  The names the helper reads must outlive it, whatever happens.
    try {
      options.while_validating(index);
    } catch (...) {
      early.abandon();
      throw;
    }
  }
  std::string stale;
  if (!still_valid(*index, validation, &stale, &early)) {
    if (index->watched_digest() != nullptr) {
      // The digest says that a file changed, not which: read the stamps to
      // name it (a rescan follows anyway, so this costs little in relative
      // terms).
      ReadExpectations stamped = expect;
      stamped.watched_stamps = true;
      stamped.early_check = nullptr;
      std::string named;
      if (auto again = read_index_fd(fd.fd, path, stamped); again && !still_valid(*again, validation, &named)) {
        stale = std::move(named);
      }
    }
    out.why = "stale: " + stale;
    return out;
  }
  out.index = std::move(index);
  return out;
}

/// Writes the cache file `name` for `key` into `dir` (see store_index()).
Result<void> store(const Index& index, const std::string& dir, const std::string& name,
                   const CacheKey& key) {
  if (auto r = make_dirs(dir); !r) return r;
  // The directory may have existed already: never write into an unsafe one.
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return Error{Errc::io, "stat " + dir + ": " + errno_text()};
  if (std::string unsafe = unsafe_reason(st, "cache directory " + dir); !unsafe.empty()) {
    return Error{Errc::cache, unsafe};
  }
  WriteOptions wo;
  wo.key = &key;
  auto text = serialize_index(index, wo);
  if (!text) return text.error();
  const std::string temp_prefix = "." + name.substr(0, name.size() - 5);  // ".index-<hash>"
  if (auto r = write_atomic(join_path(dir, name), {text->head, text->body}, 0600, temp_prefix); !r) return r;
  prune(dir, name);
  return {};
}

}  // namespace
}  // namespace detail

Result<std::shared_ptr<const Index>> open_index(const CacheOptions& options, CacheReport* report) {
  profile::Span span(profile::Phase::total, "open_index");
  CacheReport local;
  CacheReport& rep = report != nullptr ? *report : local;
  rep = CacheReport{};
  auto scan_now = [&]() -> Result<std::shared_ptr<const Index>> {
    auto r = scan(options.search_paths);
    if (!r) return r.error();
    return std::make_shared<const Index>(std::move(r.value()));
  };

  if (!options.use_cache) {
    rep.status = CacheStatus::uncached;
    rep.reason = "cache disabled";
    return scan_now();
  }

  std::string prefix;  // why a shipped index was not used
  std::string shipped = options.shipped_index;
  if (shipped.empty()) {
    if (const char* e = std::getenv("EPLOAD_INDEX"); e != nullptr) shipped = e;
  }
  if (!shipped.empty()) {
    auto r = detail::open_shipped(shipped, options);
    if (r) {
      rep.status = CacheStatus::shipped;
      rep.file = shipped;
      return std::make_shared<const Index>(std::move(r.value()));
    }
    prefix = "shipped index " + shipped + " ignored (" + r.error().message + "); ";
  }

  const std::string dir = resolve_cache_dir(options);
  if (dir.empty()) {
    rep.status = CacheStatus::uncached;
    rep.reason = prefix + "no cache directory (set EPLOAD_CACHE_DIR or HOME)";
    return scan_now();
  }
  const detail::CacheKey key = detail::make_key(options);
  const std::string name = detail::cache_file_name(key);
  rep.file = detail::join_path(dir, name);

  detail::Lookup found = detail::look_up(dir, name, key, options);
  if (found.index) {
    rep.status = CacheStatus::hit;
    rep.reason = prefix;
    if (!rep.reason.empty()) rep.reason.resize(rep.reason.size() - 2);  // drop "; "
    return found.index;
  }

  auto index = scan_now();
  if (!index) return index;
  rep.reason = prefix + found.why;
  if (found.dir_unsafe) {
    rep.status = CacheStatus::uncached;
    rep.reason += "; working uncached";
    return index;
  }
  Result<void> stored = detail::store(**index, dir, name, key);
  if (!stored) {
    rep.status = CacheStatus::uncached;
    rep.reason += "; cache directory unusable, working uncached (" + stored.error().message + ")";
    return index;
  }
  rep.status = CacheStatus::rebuilt;
  return index;
}

Result<std::string> store_index(const Index& index, const CacheOptions& options) {
  const std::string dir = resolve_cache_dir(options);
  if (dir.empty()) {
    return Error{Errc::io, "no cache directory: set EPLOAD_CACHE_DIR or HOME, or pass --cache-dir"};
  }
  const detail::CacheKey key = detail::make_key(options);
  const std::string name = detail::cache_file_name(key);
  if (auto r = detail::store(index, dir, name, key); !r) return r.error();
  return detail::join_path(dir, name);
}

Result<void> write_index(const Index& index, const std::string& path, bool relocatable) {
  detail::WriteOptions wo;
  wo.relocatable = relocatable;
  if (relocatable) wo.base_dir = detail::dir_name(detail::absolute_path(path));
  auto text = detail::serialize_index(index, wo);
  if (!text) return text.error();
  std::string base = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  // A shipped index is meant to be read by every user of the environment.
  return detail::write_atomic(path, {text->head, text->body}, relocatable ? 0644 : 0600, "." + base);
}

Result<Index> read_index(const std::string& path, const std::vector<std::string>& groups) {
  detail::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.fd < 0) return Error{Errc::cache, "cannot open " + path + ": " + detail::errno_text()};
  detail::ReadExpectations expect;
  expect.base_dir = detail::dir_name(detail::absolute_path(path));
  expect.groups = groups;
  return detail::read_index_fd(fd.fd, path, expect);
}

Result<int> clear_cache(const CacheOptions& options) {
  const std::string dir = resolve_cache_dir(options);
  if (dir.empty()) return 0;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return 0;
    return Error{Errc::io, "cannot open the cache directory " + dir + ": " + detail::errno_text()};
  }
  int removed = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (!detail::is_index_file(name) && !detail::is_temp_file(name)) continue;
    if (::unlinkat(::dirfd(d), e->d_name, 0) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

// ---------------------------------------------------------------------------

Catalog::Catalog(CacheOptions options) : m_options(std::move(options)) {}

Result<std::shared_ptr<const Index>> Catalog::get(CacheReport* report) {
  std::shared_ptr<const Index> current;
  CacheReport how;
  std::string cwd;
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    current = m_current;
    how = m_report;
    cwd = m_cwd;
  }
  // Validate outside the lock: concurrent get()s stat in parallel.
  const std::string now_cwd = detail::key_cwd(m_options.search_paths);
  if (current && now_cwd == cwd) {
    const bool ok = how.status == CacheStatus::shipped
                        ? detail::shipped_still_valid(*current, nullptr)
                        : still_valid(*current, m_options.validation, nullptr);
    if (ok) {
      if (report != nullptr) {
        *report = how;
        if (how.status == CacheStatus::rebuilt) report->status = CacheStatus::hit;
        if (report->status == CacheStatus::hit) report->reason.clear();
      }
      return current;
    }
  }
  std::lock_guard<std::mutex> lock(m_mutex);
  if (m_current != current && m_current) {
    // Another thread refreshed it while this one was validating.
    if (report != nullptr) *report = m_report;
    return m_current;
  }
  CacheReport fresh;
  auto r = open_index(m_options, &fresh);
  if (!r) return r.error();
  m_current = r.value();
  m_report = fresh;
  m_cwd = now_cwd;
  if (report != nullptr) *report = fresh;
  return m_current;
}

}  // namespace epload
