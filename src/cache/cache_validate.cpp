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
//          were restored.  An index read from the cache for this check
//          carries the files' names and the digest of their stamps, not
//          the stamps (see watch_digest.hpp): the fresh stamps are folded
//          into a digest and compared with it.
//
// Racy stamps (git's rule): a file changed in the same clock tick as the
// scan could change again without its stamp changing.  Such a stamp is
// treated as changed, so the next use rescans once; the new scan's clock is
// then past the change and its stamps become trustworthy.
//
// Speed: at 6,000 distributions the full check is ~6,000 fstatat calls.  They
// are independent, so above k_parallel_threshold two threads (the target
// machines have two cores; see parallel.hpp)
// take them in chunks from a shared counter; both stop at the first
// mismatch either finds, except by digest, where they go on and record each
// file's stamp (FullCheck::stamps) for the refresh that follows a mismatch:
// it then knows which files changed without a second stat.  Nothing is
// allocated per file.  A cache read for
// `full` validation has the helper created before the head is parsed
// (EarlyFullCheck::prepare) and hands it the names as it writes them
// (publish): the helper stats while the reader parses the rest, and
// still_valid() takes the remaining chunks and joins it.  What the early start
// buys: BENCHMARKS.md, "What the speed machinery buys", early full check.
#include <fcntl.h>   // open, O_PATH
#include <limits.h>  // PATH_MAX
#include <sched.h>   // sched_yield
#include <time.h>    // nanosleep
#include <unistd.h>  // close

#include <algorithm>  // fill_n, min
#include <atomic>
#include <cstring>
#include <limits>

#include "cache_internal.hpp"
#include "epload/profile.hpp"
#include "index_hooks.hpp"
#include "scan_list.hpp"
#include "parallel.hpp"
#include "stamp.hpp"
#include "watch_digest.hpp"
#include "test_slowdown.hpp"

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

/// What both threads of a `full` check share.  Files are taken in chunks
/// from `next`, so a thread that runs slower (its core busy) does fewer.
struct FullCheck {
  std::span<const WatchedFile> watched;  // with their stamps, or
  std::span<const WatchedName> names;    // by name (by_digest)
  std::span<const std::string_view> paths;
  std::int64_t scanned_at = 0;
  bool by_digest = false;  // the files carry names only: fold their stamps
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> digest_lo{0}, digest_hi{0};  // the threads' shares, added
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> bad{k_none};  // the lowest mismatching index seen
  // How many files from the start are there to be read: all of them, except
  // while the cache reader is still parsing the names of an early check
  // (EarlyFullCheck::publish).  Released by the writer, acquired here.
  std::atomic<std::size_t> ready{k_none};
  // By digest, when set: room for each file's fresh stamp, which a refresh
  // compares with the stored ones instead of a second stat.  Allocated by
  // the thread that sets the check up (no allocation here).
  FileStamp* stamps = nullptr;

  /// Waits until files [0, end) are there or the check is stopped; false
  /// when stopped.
  bool wait_ready(std::size_t end);

  std::size_t size() const { return by_digest ? names.size() : watched.size(); }
  /// File i's search path and relative path, whichever list holds it.
  WatchedName file(std::size_t i) const {
    return by_digest ? names[i] : WatchedName{watched[i].rel_path, watched[i].search_path};
  }
  void run();
  void operator()() { run(); }
};

constexpr std::size_t k_chunk = EarlyFullCheck::k_chunk;  // see there

/// Writes "dir/rel" (`rel` alone for the current directory, "", and `dir`
/// alone for an empty `rel`) into `buf` as a C string; false if it holds a
/// NUL or does not fit PATH_MAX.
bool join_into(std::string_view dir, std::string_view rel, char* buf) {
  // An empty view may have a null data(): memchr and memcpy must not see it.
  auto has_nul = [](std::string_view s) { return !s.empty() && std::memchr(s.data(), '\0', s.size()) != nullptr; };
  const std::size_t sep = dir.empty() || rel.empty() || dir.back() == '/' ? 0 : 1;
  const std::size_t len = dir.size() + sep + rel.size();
  if (len > PATH_MAX || has_nul(dir) || has_nul(rel)) return false;
  if (!dir.empty()) std::memcpy(buf, dir.data(), dir.size());
  if (sep != 0) buf[dir.size()] = '/';
  if (!rel.empty()) std::memcpy(buf + dir.size() + sep, rel.data(), rel.size());
  buf[len] = '\0';
  return true;
}

/// An O_PATH descriptor of search path `p` ("" is the current directory),
/// or -1 (no such directory, a NUL in the name, too long, no descriptor to
/// be had).  `buf` is scratch room of PATH_MAX + 1 bytes; nothing is
/// allocated.
int open_search_path(std::string_view p, char* buf) {
  if (!join_into(p.empty() ? std::string_view(".") : p, {}, buf)) return -1;
  return ::open(buf, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

/// One thread's share.  Each thread opens its own O_PATH descriptors: in a
/// multi-threaded process every fstatat takes a reference on its directory's
/// struct file, and two threads sharing one would bounce its counter between
/// the cores.
void FullCheck::run() {
  // A file is stat'ed relative to a descriptor of its search path (the
  // kernel then walks only the last components), for the first
  // k_max_fds search paths; past them, or when no descriptor can be had (the
  // process is at its open-file limit), by its whole path: slower, the same
  // stamp.  So a path list of thousands of directories (one per
  // distribution, as some build systems lay them out) never runs this
  // process out of descriptors.  No heap allocation either: on the helper
  // thread the first one would set up a thread heap (with mimalloc, the
  // CLI's allocator: a 32 MB segment reserved and its first pages touched,
  // ~10 system calls and page faults) for a few bytes.
  constexpr std::size_t k_max_fds = 64;
  constexpr int k_unopened = -2;  // -1: use the whole path
  int fds[k_max_fds];
  const std::size_t npaths = paths.size();
  std::fill_n(fds, std::min(npaths, k_max_fds), k_unopened);
  std::size_t stats = 0;
  WatchedDigest digest;
  char buf[PATH_MAX + 1];
  const std::size_t n = size();
  for (std::size_t c; !stop.load(std::memory_order_relaxed) &&
                      (c = next.fetch_add(k_chunk, std::memory_order_relaxed)) < n;) {
    const std::size_t end = c + k_chunk < n ? c + k_chunk : n;
    if (ready.load(std::memory_order_acquire) < end && !wait_ready(end)) break;
    for (std::size_t i = c; i < end; ++i) {
      const auto [rel, sp] = file(i);
      FileStamp now;
      if (sp < npaths) {
        int fd = -1;
        if (sp < k_max_fds) {
          if (fds[sp] == k_unopened) fds[sp] = open_search_path(paths[sp], buf);
          fd = fds[sp];
        }
        const bool named = fd >= 0 ? join_into({}, rel, buf) : join_into(paths[sp], rel, buf);
        if (named) {
          now = stamp_at(fd >= 0 ? fd : AT_FDCWD, buf);
          ++stats;
        }
      }
      if (by_digest) {
        const WatchedDigest share = digest_share(i, now);
        digest.lo += share.lo;
        digest.hi += share.hi;
        if (stamps != nullptr) stamps[i] = now;
      }
      // By digest, an unchanged racy stamp is racy now; a changed one changes
      // the digest.
      if (by_digest ? is_racy(now, scanned_at) : (now != watched[i].stamp || is_racy(watched[i].stamp, scanned_at))) {
        std::size_t seen = bad.load(std::memory_order_relaxed);
        while (i < seen && !bad.compare_exchange_weak(seen, i, std::memory_order_relaxed)) {
        }
        // With stamps the check goes on: the refresh that follows wants
        // every file's stamp, and a file changed since the scan (racy by
        // its time) is no reason to stat the others twice.
        if (stamps != nullptr) continue;
        stop.store(true, std::memory_order_relaxed);
        break;
      }
    }
  }
  for (std::size_t sp = 0; sp < std::min(npaths, k_max_fds); ++sp) {
    if (fds[sp] >= 0) ::close(fds[sp]);
  }
  digest_lo.fetch_add(digest.lo, std::memory_order_relaxed);
  digest_hi.fetch_add(digest.hi, std::memory_order_relaxed);
  profile::count(profile::Counter::stat, stats);
}

/// One turn of a spin-wait: tells the CPU this thread is waiting (x86
/// `pause`), nothing elsewhere.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/// Waits until `done()` holds (true) or `stop` is set (false).  What the
/// helper waits for is the reader's work on the other CPU, tens to hundreds
/// of microseconds: it spins briefly, then gives its CPU away at each turn
/// (it may share the reader's CPU, when it could not be placed elsewhere),
/// and past ~1 ms (a slow file system under the reader) sleeps 50 us at a
/// time instead of keeping a CPU busy.
template <class Done>
bool wait_for(Done done, const std::atomic<bool>& stop) {
  constexpr unsigned k_spins = 2000, k_yields = 1000;
  for (unsigned turn = 0; !done(); ++turn) {
    if (stop.load(std::memory_order_relaxed)) return false;
    if (turn < k_spins) {
      cpu_relax();
    } else if (turn < k_spins + k_yields) {
      ::sched_yield();
    } else {
      const struct timespec nap{0, 50 * 1000};
      ::nanosleep(&nap, nullptr);
      turn = k_spins + k_yields;  // no overflow however long the wait
    }
  }
  return true;
}

bool FullCheck::wait_ready(std::size_t end) {
  return wait_for([&] { return ready.load(std::memory_order_acquire) >= end; }, stop);
}

}  // namespace

struct EarlyFullCheck::State {
  FullCheck check;
  std::vector<FileStamp> stamps;  // check.stamps points here
  std::thread helper;
  // A prepared helper waits for `armed` (release: the check's names, paths
  // and clock are set) before it runs the check.
  bool prepared = false;
  std::atomic<bool> armed{false};

  ~State() {
    if (helper.joinable()) {  // never left running: it reads the check's names
      check.stop.store(true, std::memory_order_relaxed);
      armed.store(true, std::memory_order_release);
      helper.join();
    }
  }

  void wait_then_run() {
    if (wait_for([&] { return armed.load(std::memory_order_acquire); }, check.stop)) check.run();
  }
};

EarlyFullCheck::EarlyFullCheck() = default;
EarlyFullCheck::~EarlyFullCheck() { abandon(); }

void EarlyFullCheck::prepare() {
  if (m) return;
  m = std::make_unique<State>();
  m->prepared = true;
  if (!start_helper(m->helper, [](void* p) { static_cast<State*>(p)->wait_then_run(); }, m.get())) m.reset();
}

void EarlyFullCheck::start(std::span<const WatchedName> names, std::span<const std::string_view> paths,
                           std::int64_t scanned_at, std::size_t ready) {
  if (names.size() <= k_parallel_threshold) {
    abandon();  // a prepared helper is not wanted: the check runs whole in still_valid
    return;
  }
  if (m && (!m->prepared || m->armed.load(std::memory_order_relaxed))) return;  // started already
  const bool prepared = m != nullptr;
  if (!prepared) m = std::make_unique<State>();
  m->check.names = names;
  m->check.paths = paths;
  m->check.scanned_at = scanned_at;
  m->check.by_digest = true;
  m->stamps.resize(names.size());
  m->check.stamps = m->stamps.data();
  m->check.ready.store(std::min(ready, names.size()), std::memory_order_relaxed);
  if (prepared) {
    m->armed.store(true, std::memory_order_release);
  } else if (!start_helper(m->helper, [](void* p) { static_cast<FullCheck*>(p)->run(); }, &m->check)) {
    m.reset();
  }
}

void EarlyFullCheck::publish(std::size_t ready) {
  if (m) m->check.ready.store(std::min(ready, m->check.names.size()), std::memory_order_release);
}

void EarlyFullCheck::abandon() {
  if (!m) return;
  m->check.stop.store(true, std::memory_order_relaxed);
  if (m->helper.joinable()) m->helper.join();
  m.reset();
}

bool shipped_still_valid(const Index& index, std::string* why) {
  const auto paths = index.search_paths();
  const auto stamps = search_path_stamps(index);
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const FileStamp was = i < stamps.size() ? stamps[i] : FileStamp{};
    const FileStamp now = path_stamp(os_path(paths[i]));
    const bool racy = was.exists() && racy_time(was.mtime_ns, scanned_at_ns(index));
    if (was.exists() != now.exists() || was.mtime_ns != now.mtime_ns || racy) {
      if (why) *why = "search path " + describe(was, now, racy, std::string(paths[i]));
      return false;
    }
  }
  return true;
}

}  // namespace detail

bool still_valid(const Index& index, Validation validation, std::string* why) {
  return detail::still_valid(index, validation, why, nullptr);
}

namespace detail {

namespace {

/// True when `check`, started early, is on this index's watched names, so
/// that still_valid() can join it.
bool joinable_check(const Index& index, Validation validation, const FullCheck& check) {
  return validation == Validation::full && watched_digest(index) != nullptr &&
         check.names.data() == watched_names(index).data() && check.names.size() == watched_names(index).size();
}

/// The search paths' stamps: one stat each (all `paths` validation does).
bool paths_unchanged(const Index& index, Validation validation, std::string* why) {
  const auto paths = index.search_paths();
  const auto stamps = search_path_stamps(index);
  if (validation == Validation::full && !watched_complete(index)) {
    // A partial load under `paths` validation left the watched stamps on
    // disk: "nothing to check" must not read as "nothing changed".
    if (why) *why = "the index was loaded without its watched files; it cannot be validated fully";
    return false;
  }
  if (stamps.size() != paths.size()) {
    if (why) *why = "index has no stamps for its search paths";
    return false;
  }
  const bool listed_known = IndexBuilderHooks::listed_known(index);
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const FileStamp now = detail::path_stamp(detail::os_path(paths[i]));
    profile::count(profile::Counter::stat);
    const bool racy = detail::is_racy(stamps[i], scanned_at_ns(index));
    if ((now != stamps[i] || racy) && listed_known && IndexBuilderHooks::listed_count(index, i) == 0 &&
        paths[i].find('\0') == std::string_view::npos && lists_no_metadata(detail::os_path(paths[i]).c_str())) {
      // An entry that listed no metadata and lists none now (a script's
      // directory that gained a log file) contributes nothing still: listed
      // again on each check, not a reason to refresh.
      continue;
    }
    if (now != stamps[i] || racy) {
      if (why) *why = "search path " + describe(stamps[i], now, racy, std::string(paths[i]));
      return false;
    }
  }
  return true;
}

/// What a finished `full` check of `count` files says: against the digest,
/// or the file it stopped at.
bool check_answer(const Index& index, const FullCheck& check, std::size_t count, std::string* why) {
  const WatchedDigest* digest = watched_digest(index);
  // A mismatch stops both threads, so another file with a lower index may go
  // unchecked: the one reported is a changed file, not always the first.
  const std::size_t bad = check.bad.load();
  if (digest != nullptr && bad == detail::k_none) {
    const WatchedDigest now{check.digest_lo.load(), check.digest_hi.load()};
    if (now == *digest) return true;
    if (why) {
      *why = "one of the " + std::to_string(count) +
             " watched metadata files changed (their stamps' digest differs)";
    }
    return false;
  }
  if (bad == detail::k_none) return true;
  if (why) {
    const auto paths = index.search_paths();
    const auto watched = watched_files(index);
    const auto [rel, sp] = check.file(bad);
    const std::string full = sp < paths.size() ? detail::join_path(paths[sp], rel) : std::string(rel);
    // Re-stat for the message only (the mismatch itself is already decided).
    const FileStamp now = detail::stamp_at(AT_FDCWD, full.empty() ? "." : full.c_str());
    // By digest, a file stops the check only for being racy now.
    *why = digest != nullptr
               ? describe(now, now, true, full)
               : describe(watched[bad].stamp, now, detail::is_racy(watched[bad].stamp, scanned_at_ns(index)), full);
  }
  return false;
}

}  // namespace

bool still_valid(const Index& index, Validation validation, std::string* why, EarlyFullCheck* early,
                 WatchedSeen* seen) {
  // A check started on other names than this index's (never, in the reader's
  // use) or not wanted is stopped first; a started one is otherwise joined
  // below, and every return path leaves it finished.
  FullCheck* started = nullptr;
  if (early != nullptr && early->m && joinable_check(index, validation, early->m->check)) {
    started = &early->m->check;
  } else if (early != nullptr) {
    early->abandon();
  }
  struct Finish {
    EarlyFullCheck* early;
    ~Finish() {
      if (early != nullptr) early->abandon();  // joins; stops it first if still running
    }
  } finish{started != nullptr ? early : nullptr};
  profile::Span span(profile::Phase::stat, validation == Validation::full ? "validate full" : "validate paths");
  profile::test_slowdown(profile::SlowPoint::validate);  // test builds only
  const bool paths_ok = paths_unchanged(index, validation, why);
  // A changed search path need not end the check: a refresh wants to know
  // whether the watched files still hold, and the stats are under way.
  const bool files_too = seen != nullptr && validation == Validation::full && watched_complete(index) &&
                         search_path_stamps(index).size() == index.search_paths().size();
  if (!paths_ok && !files_too) return false;
  if (validation == Validation::paths) return true;

  FullCheck local;
  FullCheck& check = started != nullptr ? *started : local;
  std::vector<FileStamp> local_stamps;
  if (started == nullptr) {
    check.watched = watched_files(index);
    check.names = watched_names(index);
    check.paths = index.search_paths();
    check.scanned_at = scanned_at_ns(index);
    check.by_digest = watched_digest(index) != nullptr;
    if (check.by_digest && seen != nullptr) {
      local_stamps.resize(check.names.size());
      check.stamps = local_stamps.data();
    }
  }
  const std::size_t count = check.size();
  if (count == 0) {
    if (seen != nullptr) seen->hold = true;
    return paths_ok;
  }
  if (started != nullptr) {
    // The helper has been at it since the names were read: take the rest
    // of the chunks here, then wait for its last one.
    check.run();
    if (early->m->helper.joinable()) early->m->helper.join();
  } else if (count > k_parallel_threshold) {
    run_on_two_cpus(check);
  } else {
    check.run();
  }
  const bool files_ok = check_answer(index, check, count, paths_ok ? why : nullptr);
  if (seen != nullptr) {
    seen->hold = files_ok;
    // Every file stat'ed (a check with stamps does not stop at a racy
    // one): their stamps tell the refresh which ones changed.
    if (!files_ok && check.stamps != nullptr) {
      seen->stamps = started != nullptr ? std::move(early->m->stamps) : std::move(local_stamps);
    }
  }
  return paths_ok && files_ok;
}

}  // namespace detail

}  // namespace epload
