// cache_test_util.hpp — temp trees, distributions and index comparison for
// the cache tests.
#pragma once

#include <fcntl.h>
#include <linux/filter.h>   // seccomp's BPF program
#include <linux/seccomp.h>  // SECCOMP_RET_ERRNO
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>  // PR_SET_SECCOMP
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>  // __NR_getdents64
#include <sys/wait.h>
#include <sched.h>   // sched_getaffinity
#include <unistd.h>

#include <cstddef>  // offsetof
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "epload/cache.hpp"
#include "epload/index.hpp"
#include "epload/scanner.hpp"
#include "index_hooks.hpp"
#include "stamp.hpp"
#include "index_builder.hpp"

namespace epload::test {

/// Waits until the coarse clock (the scanner's scanned_at clock) has passed
/// the precise time of the call, so every change made before the call has a
/// stamp older than the next scan's clock and is not "racy".  File times may
/// be fine-grained (multigrain timestamps) and ahead of the coarse clock by
/// up to a tick or two.  A condition on the clock, not a timing assertion:
/// it only makes the following steps deterministic.
inline void next_tick() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  const std::int64_t fine = static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  while (detail::coarse_now_ns() <= fine) ::usleep(200);
}

/// Runs `body` in a child process in which system call `nr` fails with
/// `err` every time (a seccomp filter: the kernel's own error path, for
/// failures no directory can be made to produce, such as EIO from
/// getdents64).  Returns body's return value (the child's exit status), or
/// -1 when the child could not run it.  With `flag_arg` >= 0, only calls
/// whose argument number `flag_arg` has a bit of `flags` set fail (openat's
/// O_DIRECTORY, say).  The child writes its diagnostics to stderr; `body`
/// must not use GoogleTest's assertions.
inline int with_failing_syscall(long nr, int err, const std::function<int()>& body, int flag_arg = -1,
                                std::uint32_t flags = 0) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::uint32_t fail = SECCOMP_RET_ERRNO | (static_cast<std::uint32_t>(err) & SECCOMP_RET_DATA);
    const std::uint32_t arg =
        static_cast<std::uint32_t>(offsetof(struct seccomp_data, args) + 8 * (flag_arg < 0 ? 0 : flag_arg));
    // nr == `nr` && (flag_arg < 0 || args[flag_arg] & flags) ? fail : allow
    std::vector<struct sock_filter> filter = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(nr), 0,
                 static_cast<std::uint8_t>(flag_arg < 0 ? 1 : 3)),
    };
    if (flag_arg >= 0) {
      filter.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, arg));  // the low 32 bits (little-endian)
      filter.push_back(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, flags, 0, 1));
    }
    filter.push_back(BPF_STMT(BPF_RET | BPF_K, fail));
    filter.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    struct sock_fprog prog = {static_cast<unsigned short>(filter.size()), filter.data()};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
      ::_exit(120);
    }
    ::_exit(body());
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

/// Lowers the soft open-file limit to `headroom` descriptors above those
/// open now (the lowest free descriptor), for the life of the object.
class FdLimit {
 public:
  explicit FdLimit(int headroom) {
    ::getrlimit(RLIMIT_NOFILE, &m_old);
    const int lowest = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (lowest >= 0) ::close(lowest);
    struct rlimit low = m_old;
    low.rlim_cur = static_cast<rlim_t>(lowest + headroom);
    m_ok = ::setrlimit(RLIMIT_NOFILE, &low) == 0;
  }
  ~FdLimit() { ::setrlimit(RLIMIT_NOFILE, &m_old); }
  bool ok() const { return m_ok; }

 private:
  struct rlimit m_old;
  bool m_ok = false;
};

/// True when this process may run on two CPUs (a `full` check then has a
/// helper thread).
inline bool two_cpus_allowed() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  return ::sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) >= 2;
}

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/epload-cache-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    m_path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    // Restore permissions a test may have taken away, then remove.
    std::filesystem::permissions(m_path, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(m_path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return m_path; }
  std::string operator/(const std::string& rel) const { return m_path + "/" + rel; }

 private:
  std::string m_path;
};

inline void write_file(const std::string& path, const std::string& content) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Writes `<site>/<name>-<version>.dist-info/{METADATA,entry_points.txt}`;
/// no entry_points.txt when `entry_points` is empty.  Returns the dist-info.
inline std::string make_dist(const std::string& site, const std::string& name,
                             const std::string& version, const std::string& entry_points) {
  const std::string dir = site + "/" + name + "-" + version + ".dist-info";
  write_file(dir + "/METADATA",
             "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n\n");
  if (!entry_points.empty()) write_file(dir + "/entry_points.txt", entry_points);
  return dir;
}

/// A stamp with every field set to something distinctive.
inline FileStamp fake_stamp(std::uint64_t seed) {
  FileStamp s;
  s.dev = 0xfd00000000000000ULL + seed;
  s.ino = 18446744073709551615ULL - seed;  // the full uint64 range must survive
  s.size = 4096 + seed;
  s.mtime_ns = 1700000000123456789LL + static_cast<std::int64_t>(seed);
  s.ctime_ns = -1000000007LL - static_cast<std::int64_t>(seed);  // before 1970 too
  s.mode = 040755;
  return s;
}

/// True when two indexes are identical in every field, provenance included.
inline bool identical(const Index& a, const Index& b, std::string* why = nullptr) {
  auto say = [&](std::string w) {
    if (why) *why = std::move(w);
    return false;
  };
  if (scanned_at_ns(a) != scanned_at_ns(b)) return say("scanned_at_ns");
  if (a.search_paths().size() != b.search_paths().size()) return say("search path count");
  for (std::size_t i = 0; i < a.search_paths().size(); ++i) {
    if (a.search_paths()[i] != b.search_paths()[i]) return say("search path " + std::to_string(i));
    if (!(search_path_stamps(a)[i] == search_path_stamps(b)[i])) return say("stamp " + std::to_string(i));
  }
  if (a.distributions().size() != b.distributions().size()) return say("dist count");
  for (std::size_t i = 0; i < a.distributions().size(); ++i) {
    const Distribution &x = a.distributions()[i], &y = b.distributions()[i];
    if (x.name != y.name || x.version != y.version || x.metadata_dir != y.metadata_dir ||
        x.search_path != y.search_path || x.error != y.error) {
      return say("dist " + std::to_string(i));
    }
  }
  if (a.entry_points().size() != b.entry_points().size()) return say("entry point count");
  for (std::size_t i = 0; i < a.entry_points().size(); ++i) {
    const EntryPoint &x = a.entry_points()[i], &y = b.entry_points()[i];
    if (x.group != y.group || x.name != y.name || x.value != y.value ||
        (x.dist - a.distributions().data()) != (y.dist - b.distributions().data())) {
      return say("entry point " + std::to_string(i));
    }
  }
  if (a.groups().size() != b.groups().size()) return say("group count");
  if (watched_files(a).size() != watched_files(b).size()) return say("watched count");
  for (std::size_t i = 0; i < watched_files(a).size(); ++i) {
    const WatchedFile &x = watched_files(a)[i], &y = watched_files(b)[i];
    if (x.search_path != y.search_path || x.rel_path != y.rel_path || !(x.stamp == y.stamp)) {
      return say("watched " + std::to_string(i));
    }
  }
  return true;
}

/// The answer only: distributions and entry points, in order.
/// The watched files of `index` with their stamps, one per line.
inline std::string provenance_text(const Index& index) {
  std::string out;
  for (const WatchedFile& w : watched_files(index)) {
    out += std::to_string(w.search_path) + " " + std::string(w.rel_path) + " " + std::to_string(w.stamp.ino) + " " +
           std::to_string(w.stamp.size) + " " + std::to_string(w.stamp.mtime_ns) + " " +
           std::to_string(w.stamp.ctime_ns) + " " + std::to_string(w.stamp.mode) + "\n";
  }
  return out;
}

inline std::string answer_text(const Index& index) {
  std::string out;
  for (const Distribution& d : index.distributions()) {
    out += "dist " + std::string(d.name) + " " + std::string(d.version) + " " +
           std::string(d.metadata_dir) + " " + std::string(d.error) + "\n";
  }
  for (const EntryPoint& ep : index.entry_points()) {
    out += "ep " + std::string(ep.group) + " " + std::string(ep.name) + " = " +
           std::string(ep.value) + " [" + std::string(ep.dist->name) + "]\n";
  }
  return out;
}

/// Every file name in `dir`.
inline std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    out.push_back(e.path().filename().string());
  }
  return out;
}

/// Runs `fn` in a forked child whose files may not grow beyond `bytes`
/// (RLIMIT_FSIZE, SIGXFSZ ignored: a write past the limit fails with EFBIG,
/// as a full disk fails with ENOSPC).  Returns fn's result as the child's
/// exit status, or -1 if the child did not exit normally.  `fn` must not
/// use gtest assertions (they would be lost in the child): it returns 0 for
/// success and a distinct code for each failed check.
inline int in_child_with_file_size_limit(rlim_t bytes, const std::function<int()>& fn) {
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const struct rlimit lim = {bytes, bytes};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(100);
    ::_exit(fn());
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

/// Changes applied while copying an index (to construct racy or stale cases).
struct IndexEdit {
  std::optional<std::int64_t> scanned_at;
  std::function<void(std::uint32_t path, FileStamp&)> path_stamp;
  std::function<void(std::string_view rel, FileStamp&)> watched_stamp;
};

/// A field-by-field copy of `src` through IndexBuilder, with `edit` applied.
inline Index copy_index(const Index& src, const IndexEdit& edit = {}) {
  IndexBuilder b;
  for (std::uint32_t i = 0; i < src.search_paths().size(); ++i) {
    FileStamp s = search_path_stamps(src)[i];
    if (edit.path_stamp) edit.path_stamp(i, s);
    b.add_search_path(src.search_paths()[i], s);
  }
  for (const Distribution& d : src.distributions()) {
    b.add_distribution(d.name, d.version, d.metadata_dir, d.search_path, d.error);
  }
  for (const EntryPoint& ep : src.entry_points()) {
    b.add_entry_point(static_cast<std::uint32_t>(ep.dist - src.distributions().data()), ep.group,
                      ep.name, ep.value);
  }
  for (const WatchedFile& f : watched_files(src)) {
    FileStamp s = f.stamp;
    if (edit.watched_stamp) edit.watched_stamp(f.rel_path, s);
    b.add_watched_file(f.search_path, f.rel_path, s);
  }
  for (const WatchedName& c : detail::IndexBuilderHooks::listed(src)) {
    detail::IndexBuilderHooks::add_listed(b, c.search_path, c.rel_path);
  }
  b.set_scanned_at(edit.scanned_at ? *edit.scanned_at : scanned_at_ns(src));
  return b.build();
}

/// open_index(), whose answer must equal a fresh scan's.
/// Everything an index file holds but the scan's time, as text: the answer,
/// the watched files with their stamps, the search paths' stamps and the
/// children each one listed.
inline std::string stored_text(const Index& index) {
  std::string out = answer_text(index) + provenance_text(index);
  const auto stamps = search_path_stamps(index);
  for (std::size_t i = 0; i < stamps.size(); ++i) {
    out += "path " + std::string(index.search_paths()[i]) + " " + std::to_string(stamps[i].ino) + " " +
           std::to_string(stamps[i].mtime_ns) + " " + std::to_string(stamps[i].ctime_ns) + "\n";
  }
  for (const WatchedName& c : detail::IndexBuilderHooks::listed(index)) {
    out += "listed " + std::to_string(c.search_path) + " " + std::string(c.rel_path) + "\n";
  }
  return out;
}

inline CacheReport open_checked(const CacheOptions& options) {
  CacheReport report;
  auto got = open_index(options, &report);
  EXPECT_TRUE(got) << got.error().message;
  auto fresh = scan(options.search_paths);
  EXPECT_TRUE(fresh) << fresh.error().message;
  if (got && fresh) {
    if (options.groups.empty()) {
      EXPECT_EQ(answer_text(**got), answer_text(*fresh)) << report.reason;
    } else {
      auto group_text = [](const Index& index, const std::string& g) {
        std::string out;
        for (const EntryPoint& ep : index.group(g)) {
          out += std::string(ep.name) + "=" + std::string(ep.value) + " [" + std::string(ep.dist->name) + "]\n";
        }
        return out;
      };
      for (const std::string& g : options.groups) {
        EXPECT_EQ(group_text(**got, g), group_text(*fresh, g)) << report.reason;
      }
    }
    if (report.status == CacheStatus::refreshed || report.status == CacheStatus::rebuilt) {
      // The file written holds what a scan holds: the same answer, watched
      // files with the same stamps in the same order (the next check relies
      // on them), listings and search-path stamps.
      // A first search path that holds no metadata is not in the file
      // (cache_key.cpp): it is compared with a scan of the others.
      auto stored = read_index(cache_file_path(options));
      EXPECT_TRUE(stored) << stored.error().message;
      if (stored) {
        std::vector<std::string> kept = options.search_paths;
        if (stored->search_paths().size() + 1 == kept.size()) kept.erase(kept.begin());
        auto same_paths = scan(kept);
        EXPECT_TRUE(same_paths) << same_paths.error().message;
        if (same_paths) {
          EXPECT_EQ(stored_text(*stored), stored_text(*same_paths)) << report.reason;
        }
      }
    }
  }
  return report;
}

}  // namespace epload::test
