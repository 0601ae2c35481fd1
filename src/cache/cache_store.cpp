// cache_store.cpp — open_index(): use the cache when it is safe and valid,
// else scan and store.
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
// Writes happen only after a rebuild: mkdir -p with mode 0700, then
// detail::write_atomic (atomic_file.hpp: a temporary file in the same
// directory, fchmod 0600, rename over the old file).  Readers therefore see
// either the old or the new file, whole, even with many processes
// rebuilding the same key at once; a failed write leaves the old file and
// the answer is served uncached.  No fsync: a file torn by a crash fails to
// parse and is rebuilt.
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
// Pruning (on each write only, never on the read path) removes files of
// each kind (index files and those registered by other owners) unused for
// 30 days and the least recently used beyond 64, and temporary files older
// than an hour (left by killed processes), and only files that are
// epload's by their content: prune_cache_dir() in kept_files.cpp.
#include <fcntl.h>     // open, openat
#include <sys/stat.h>  // fstat, mkdir
#include <unistd.h>    // write, close, geteuid

#include <algorithm>  // equal
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "kept_files.hpp"
#include "cache_internal.hpp"
#include "cache_overlap.hpp"
#include "cache_refresh.hpp"
#include "epload/profile.hpp"
#include "epload/scanner.hpp"
#include "memory.hpp"
#include "stamp.hpp"
#include "index_provenance.hpp"

namespace epload {
namespace detail {

namespace {

/// The index files (cache_file_name()), of every format version: the 64
/// most recently used are kept.
constexpr KeptFiles k_index_files{"index-", ".json", "{\"format\":\"epload-index\",", 64};
[[maybe_unused]] const bool k_index_files_kept = keep_files(k_index_files);

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
  auto index = read_index_fd(fd.fd, path, expect);
  if (!index) return index.error();
  std::string why;
  if (!shipped_still_valid(*index, &why)) return Error{Errc::cache, "stale: " + why};
  return index;
}

/// What reading the cache file found.
struct Lookup {
  std::shared_ptr<const Index> index;  // set on a valid hit
  CacheFileIdentity identity;          // of the file it was read from
  std::string why;                     // else: why not
  bool dir_unsafe = false;             // never write into it
  Refreshed refreshed;                 // stale: the answer refreshed from the file's parts
};

/// The version of the open file `fd` (unknown when fstat fails).
CacheFileIdentity identity_of(int fd) {
  struct stat st;
  profile::count(profile::Counter::stat);
  if (::fstat(fd, &st) != 0) return {};
  return {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
          static_cast<std::uint64_t>(st.st_size),
          static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

/// Checks the open descriptor `fd` of `path` (`what`: "cache directory" or
/// "cache file") before it is used: "" when it may be trusted, else why
/// not; `unsafe` when it is owned by another user or writable by others.
std::string fd_problem(int fd, const std::string& path, const char* what, bool& unsafe) {
  struct stat st;
  profile::count(profile::Counter::stat);
  if (::fstat(fd, &st) != 0) return "fstat " + path + ": " + errno_text();
  std::string why = unsafe_reason(st, what + (" " + path));
  unsafe = !why.empty();
  return why;
}

/// Opens the cache file `name` in `dir` (`path`: the two joined), both
/// checked on the descriptors then used; -1 with `out.why` (and
/// `out.dir_unsafe`) set when not.
int open_cache_file(const std::string& dir, const std::string& name, const std::string& path, Lookup& out) {
  profile::count(profile::Counter::open);
  Fd dfd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (dfd.fd < 0) {
    out.why = errno == ENOENT ? "no cache directory yet" : "cache directory " + dir + ": " + errno_text();
    return -1;
  }
  bool unsafe = false;
  if (out.why = fd_problem(dfd.fd, dir, "cache directory", unsafe); !out.why.empty()) {
    out.dir_unsafe = unsafe;
    return -1;
  }
  profile::count(profile::Counter::open);
  Fd fd(::openat(dfd.fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (fd.fd < 0) {
    if (errno == ENOENT) out.why = "no cache file";
    else if (errno == ELOOP) out.why = "unsafe: cache file " + path + " is a symbolic link";
    else out.why = "cache file " + path + ": " + errno_text();
    return -1;
  }
  if (out.why = fd_problem(fd.fd, path, "cache file", unsafe); !out.why.empty()) return -1;
  return std::exchange(fd.fd, -1);
}

/// Why the index read with `expect` from `fd` is stale, naming the file that
/// changed: `stale` says only that one did when the index has the digest of
/// the stamps, not the stamps (a rescan follows anyway, so reading them
/// again costs little in relative terms).
std::string name_the_change(const Index& index, int fd, const std::string& path, const ReadExpectations& expect,
                            Validation validation, std::string stale) {
  if (watched_digest(index) == nullptr) return stale;
  ReadExpectations stamped = expect;
  stamped.watched_stamps = true;
  stamped.early_check = nullptr;
  std::string named;
  if (auto again = read_index_fd(fd, path, stamped); again && !still_valid(*again, validation, &named)) {
    return named;
  }
  return stale;
}

Lookup look_up(const std::string& dir, const std::string& name, const CacheKey& key,
               const CacheOptions& options, const WhileValidating& while_validating) {
  const Validation validation = options.validation;
  Lookup out;
  const std::string path = join_path(dir, name);
  Fd fd(open_cache_file(dir, name, path, out));
  if (fd.fd < 0) return out;
  ReadExpectations expect;
  expect.key = &key;
  expect.groups = options.groups;
  expect.watched = validation == Validation::full;  // only `full` needs the watched stamps
  expect.map_file = cache_files_mapped();
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
  if (while_validating && early.running()) {
    // The caller's own work runs here while the helper stats (see
    // cache_overlap.hpp); it gets this index only if the check passes.  The
    // names the helper reads must outlive it, whatever happens.
    try {
      while_validating(index);
    } catch (...) {
      early.abandon();
      throw;
    }
  }
  std::string stale;
  WatchedSeen seen;
  if (!still_valid(*index, validation, &stale, &early, &seen)) {
    if (watched_digest(*index) == nullptr) out.why = "stale: " + stale;
    // Refreshed from its parts (cache_refresh.cpp); if that fails, scanned.
    if (auto r = refresh_index(fd.fd, path, key, options, std::move(seen)); r) {
      out.refreshed = std::move(r.value());
      if (out.why.empty()) out.why = "stale: " + stale;
      return out;
    }
    if (out.why.empty()) out.why = "stale: " + name_the_change(*index, fd.fd, path, expect, validation, std::move(stale));
    return out;
  }
  out.index = std::move(index);
  out.identity = identity_of(fd.fd);
  return out;
}

/// Writes the cache file `name` for `key` into `dir` (see store_index()).
Result<void> store(const Index& index, const std::string& dir, const std::string& name,
                   const CacheKey& key) {
  // The directory may have existed already: never write into an unsafe one.
  if (auto r = make_safe_dir(dir); !r) return r;
  WriteOptions wo;
  wo.key = &key;
  auto text = serialize_index(index, wo);
  if (!text) return text.error();
  if (auto r = write_atomic(join_path(dir, name), {text->head, text->body}, 0600); !r) return r;
  prune_cache_dir(dir, name);
  return {};
}

}  // namespace

Result<std::shared_ptr<const Index>> read_groups_of(const CacheOptions& requested, const CacheFileIdentity& file) {
  CacheOptions storage;
  const CacheOptions& options = keyed_options(requested, storage);
  const std::string dir = resolve_cache_dir(options);
  const CacheKey key = make_key(options);
  const std::string name = cache_file_name(key);
  const std::string path = join_path(dir, name);
  Lookup unused;
  Fd fd(open_cache_file(dir, name, path, unused));
  if (fd.fd < 0) return Error{Errc::cache, unused.why};
  if (!file.known() || !(identity_of(fd.fd) == file)) {
    return Error{Errc::cache, "cache file " + path + " was replaced"};
  }
  ReadExpectations expect;
  expect.key = &key;
  expect.groups = options.groups;
  expect.map_file = cache_files_mapped();
  auto read = read_index_fd(fd.fd, path, expect);
  if (!read) return read.error();
  return std::make_shared<const Index>(std::move(read.value()));
}

}  // namespace detail

Result<std::shared_ptr<const Index>> open_index(const CacheOptions& options, CacheReport* report) {
  return open_index(options, report, WhileValidating());
}

Result<std::shared_ptr<const Index>> open_index(const CacheOptions& requested, CacheReport* report,
                                                const WhileValidating& while_validating,
                                                CacheFileIdentity* identity) {
  profile::Span span(profile::Phase::total, "open_index");
  CacheReport local;
  CacheReport& rep = report != nullptr ? *report : local;
  rep = CacheReport{};
  // Cached, a first search path in which importlib finds nothing (the
  // working directory, usually) is left out: the answer is the same
  // (cache_key.cpp).
  CacheOptions storage;
  const CacheOptions& options = requested.use_cache ? detail::keyed_options(requested, storage) : requested;
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
    // Made for the paths asked for, or for those the cache keys (a shipped
    // index made where the working directory was not on the path).
    auto r = detail::open_shipped(shipped, requested);
    if (!r && &options != &requested) {
      if (auto keyed = detail::open_shipped(shipped, options)) r = std::move(keyed);
    }
    if (r) {
      rep.status = CacheStatus::shipped;
      rep.file = shipped;
      return std::make_shared<const Index>(std::move(r.value()));
    }
    rep.shipped_problem = "shipped index " + shipped + " ignored (" + r.error().message + ")";
    prefix = rep.shipped_problem + "; ";
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

  detail::Lookup found = detail::look_up(dir, name, key, options, while_validating);
  if (found.index) {
    rep.status = CacheStatus::hit;
    if (identity != nullptr) *identity = found.identity;
    rep.reason = prefix;
    if (!rep.reason.empty()) rep.reason.resize(rep.reason.size() - 2);  // drop "; "
    return found.index;
  }

  const bool refreshed = found.refreshed.index != nullptr;
  auto index = refreshed ? Result<std::shared_ptr<const Index>>(std::move(found.refreshed.index)) : scan_now();
  if (!index) return index;
  rep.reason = prefix + (refreshed ? found.refreshed.summary + " (" + found.why + ")" : found.why);
  if (const std::string_view why = not_cacheable(**index); !why.empty()) {
    // The answer holds an I/O error that may be gone next time, with the
    // file unchanged: cached, it would be served for good.
    rep.status = CacheStatus::uncached;
    rep.reason += "; not cached, a metadata file could not be read: " + std::string(why);
    return index;
  }
  if (found.dir_unsafe) {
    rep.status = CacheStatus::uncached;
    rep.reason += "; working uncached";
    rep.cache_dir_problem = found.why;
    return index;
  }
  Result<void> stored = detail::store(**index, dir, name, key);
  if (!stored) {
    rep.status = CacheStatus::uncached;
    rep.reason += "; cache directory unusable, working uncached (" + stored.error().message + ")";
    rep.cache_dir_problem = stored.error().message;
    return index;
  }
  rep.status = refreshed ? CacheStatus::refreshed : CacheStatus::rebuilt;
  return index;
}

Result<std::string> store_index(const Index& index, const CacheOptions& requested) {
  // Keyed by the paths `index` was made for: open_index() may have left the
  // first out.
  CacheOptions storage;
  const auto have = index.search_paths();
  const auto& want = requested.search_paths;
  const bool short_one = have.size() + 1 == want.size() && std::equal(have.begin(), have.end(), want.begin() + 1);
  const CacheOptions& options = short_one ? detail::without_head(requested, storage) : requested;
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
  // A shipped index is meant to be read by every user of the environment.
  return detail::write_atomic(path, {text->head, text->body}, relocatable ? 0644 : 0600);
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
  return detail::clear_cache_dir(dir);
}

const char* to_string(CacheStatus status) {
  switch (status) {
    case CacheStatus::hit: return "hit";
    case CacheStatus::rebuilt: return "rebuilt";
    case CacheStatus::refreshed: return "refreshed";
    case CacheStatus::uncached: return "uncached";
    case CacheStatus::shipped: return "shipped";
  }
  return "unknown";
}

}  // namespace epload
