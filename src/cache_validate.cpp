// cache_validate.cpp — is a cached answer still the answer?  (still_valid)
//
// An Index carries the stamps (dev, ino, size, mtime_ns, ctime_ns, mode) of
// every search path and of every metadata file its answer was read from.
// Validation re-stats them and compares whole stamps:
//
//   paths  one stat() per search path.  Installing, removing or upgrading a
//          distribution adds or removes a directory entry, which changes the
//          search path's mtime/ctime.  An edit inside an existing dist-info
//          is not seen: that is the documented trade-off of this level.
//   full   additionally one fstatat() per watched file, relative to an
//          O_PATH descriptor of its search path: the kernel then resolves
//          only the last components, ~1.8 µs a call here against ~2.5 µs
//          for absolute paths.  ctime catches rewrites whose mtime and size
//          were restored.
//
// Racy stamps (git's rule): a file changed in the same clock tick as the
// scan could change again without its stamp changing.  Such a stamp is
// treated as changed, so the next use rescans once; the new scan's clock is
// then past the change and its stamps become trustworthy.
//
// Speed: at 6,000 distributions the full check is ~6,000 fstatat calls.  They
// are independent, so above k_parallel_threshold the list is split over two
// threads (the target machines have two cores); both stop at the first
// mismatch.  Nothing is allocated per file.
#include <fcntl.h>   // open, O_PATH
#include <limits.h>  // PATH_MAX
#include <unistd.h>  // close

#include <atomic>
#include <cstring>
#include <limits>
#include <system_error>
#include <thread>
#include <vector>

#include "cache_internal.hpp"
#include "epload/profile.hpp"
#include "stamp.hpp"

namespace epload {
namespace detail {

namespace {

constexpr std::size_t k_parallel_threshold = 500;
constexpr std::size_t k_none = std::numeric_limits<std::size_t>::max();

/// A search path as stat() wants it: "" on sys.path is the current directory.
std::string os_path(std::string_view p) { return p.empty() ? std::string(".") : std::string(p); }

/// The stamp of a search path, as the scanner takes it: a path with an
/// embedded NUL cannot name a file (importlib raises ValueError), so it is
/// absent rather than its prefix before the NUL.
FileStamp path_stamp(const std::string& p) {
  if (p.find('\0') != std::string::npos) return FileStamp{};
  return stamp_at(AT_FDCWD, p.c_str());
}

std::string describe(const FileStamp& was, const FileStamp& now, bool racy, const std::string& path) {
  if (racy) return "changed within the clock tick of the scan (racy): " + path;
  if (!was.exists() && now.exists()) return "appeared: " + path;
  if (was.exists() && !now.exists()) return "removed: " + path;
  return "changed: " + path;
}

/// Checks watched files [begin, end); records the first bad index in `bad`.
void check_range(std::span<const WatchedFile> watched, std::size_t begin, std::size_t end,
                 const std::vector<int>& fds, std::int64_t scanned_at, std::atomic<bool>& stop,
                 std::size_t& bad) {
  char buf[PATH_MAX + 1];
  std::size_t i = begin;
  // The profiler's stat count, added once per range, not once per call.
  struct Tally {
    const std::size_t& at;
    std::size_t from;
    ~Tally() { profile::count(profile::Counter::stat, at - from); }
  } tally{i, begin};
  for (; i < end; ++i) {
    if ((i & 31) == 0 && stop.load(std::memory_order_relaxed)) return;
    const WatchedFile& f = watched[i];
    FileStamp now;
    const int fd = f.search_path < fds.size() ? fds[f.search_path] : -1;
    if (fd >= 0 && f.rel_path.size() <= PATH_MAX &&
        std::memchr(f.rel_path.data(), '\0', f.rel_path.size()) == nullptr) {
      std::memcpy(buf, f.rel_path.data(), f.rel_path.size());
      buf[f.rel_path.size()] = '\0';
      now = stamp_at(fd, buf);
    }
    if (now != f.stamp || is_racy(f.stamp, scanned_at)) {
      bad = i++;  // i counts the stats made
      stop.store(true, std::memory_order_relaxed);
      return;
    }
  }
}

}  // namespace

bool shipped_still_valid(const Index& index, std::string* why) {
  const auto paths = index.search_paths();
  const auto stamps = index.search_path_stamps();
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const FileStamp was = i < stamps.size() ? stamps[i] : FileStamp{};
    const FileStamp now = path_stamp(os_path(paths[i]));
    const bool racy = was.exists() && was.mtime_ns >= index.scanned_at_ns();
    if (was.exists() != now.exists() || was.mtime_ns != now.mtime_ns || racy) {
      if (why) *why = "search path " + describe(was, now, racy, std::string(paths[i]));
      return false;
    }
  }
  return true;
}

}  // namespace detail

bool still_valid(const Index& index, Validation validation, std::string* why) {
  using detail::describe;
  profile::Span span(profile::Phase::stat, validation == Validation::full ? "validate full" : "validate paths");
  profile::test_slowdown(profile::SlowPoint::validate);  // test-only; one relaxed load when unset
  const auto paths = index.search_paths();
  const auto stamps = index.search_path_stamps();
  const std::int64_t scanned_at = index.scanned_at_ns();
  if (validation == Validation::full && !index.watched_complete()) {
    // A partial load under `paths` validation left the watched stamps on
    // disk: "nothing to check" must not read as "nothing changed".
    if (why) *why = "the index was loaded without its watched files; it cannot be validated fully";
    return false;
  }
  if (stamps.size() != paths.size()) {
    if (why) *why = "index has no stamps for its search paths";
    return false;
  }
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const FileStamp now = detail::path_stamp(detail::os_path(paths[i]));
    profile::count(profile::Counter::stat);
    const bool racy = detail::is_racy(stamps[i], scanned_at);
    if (now != stamps[i] || racy) {
      if (why) *why = "search path " + describe(stamps[i], now, racy, std::string(paths[i]));
      return false;
    }
  }
  if (validation == Validation::paths) return true;

  const auto watched = index.watched_files();
  if (watched.empty()) return true;

  // One O_PATH descriptor per search path that has watched files.
  std::vector<bool> needed(paths.size(), false);
  for (const WatchedFile& f : watched) {
    if (f.search_path < needed.size()) needed[f.search_path] = true;
  }
  auto open_fds = [&] {
    std::vector<int> fds(paths.size(), -1);
    for (std::size_t i = 0; i < paths.size(); ++i) {
      if (!needed[i]) continue;
      const std::string p = detail::os_path(paths[i]);
      if (p.find('\0') != std::string::npos) continue;
      fds[i] = ::open(p.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    }
    return fds;
  };
  auto close_fds = [](const std::vector<int>& fds) {
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
  };
  const std::vector<int> fds = open_fds();

  std::atomic<bool> stop{false};
  std::size_t bad_a = detail::k_none, bad_b = detail::k_none;
  const std::size_t n = watched.size();
  bool split = false;
  static const bool k_two_cores = std::thread::hardware_concurrency() > 1;
  if (n > detail::k_parallel_threshold && k_two_cores) {
    const std::size_t mid = n / 2;
    // The second thread gets descriptors of its own (separate opens, not
    // dup): in a multi-threaded process every fstatat takes a reference on
    // its directory's struct file, and two threads sharing one file bounce
    // its counter between the cores until the split gains nothing.
    const std::vector<int> fds_b = open_fds();
    try {
      std::thread helper(detail::check_range, watched, mid, n, std::cref(fds_b), scanned_at,
                         std::ref(stop), std::ref(bad_b));
      detail::check_range(watched, 0, mid, fds, scanned_at, stop, bad_a);
      helper.join();
      split = true;
    } catch (const std::system_error&) {
      // No thread available: fall through to the serial check.
    }
    close_fds(fds_b);
  }
  if (!split) detail::check_range(watched, 0, n, fds, scanned_at, stop, bad_a);
  close_fds(fds);

  const std::size_t bad = bad_a < bad_b ? bad_a : bad_b;
  if (bad == detail::k_none) return true;
  if (why) {
    const WatchedFile& f = watched[bad];
    const std::string full =
        f.search_path < paths.size() ? detail::join_path(paths[f.search_path], f.rel_path)
                                     : std::string(f.rel_path);
    // Re-stat for the message only (the mismatch itself is already decided).
    const FileStamp now = detail::stamp_at(AT_FDCWD, full.empty() ? "." : full.c_str());
    *why = describe(f.stamp, now, detail::is_racy(f.stamp, scanned_at), full);
  }
  return false;
}

}  // namespace epload
