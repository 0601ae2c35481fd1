// crash_log.cpp — see crash_log.hpp.
//
// Line format:
//
//   pid <TAB> time <TAB> dev:ino:size:mtime_ns:ctime_ns <TAB> name <TAB> value
//
// One line per init under way: written at the end of the log before the
// init, cut off after it; the file removed when its holder lets it go empty
// (so that it exists only while an init runs, or after a crash).  Every
// change is made under flock(LOCK_EX | LOCK_NB) on the file, checked to
// still be the one at the path (a holder may have removed it meanwhile).  A
// line whose process no longer exists is a crash.
#include "crash_log.hpp"

#include <fcntl.h>     // open
#include <signal.h>    // kill
#include <sys/file.h>  // flock
#include <sys/stat.h>  // fstat
#include <time.h>      // gmtime_r
#include <unistd.h>    // write, getpid

#include <cerrno>   // errno
#include <cstdio>   // sscanf
#include <cstdlib>  // strtol

#include "kept_files.hpp"  // keep_files

namespace epload::detail {

namespace {

// No magic: a log holds only its lines, so pruning and `index clear` never
// take one (the lines go when their init ends, or when the crashed backend's
// file changes or EPLOAD_ENABLE names it).
constexpr KeptFiles k_log_files{"learned-", ".loading", {}};
[[maybe_unused]] const bool k_log_files_kept = keep_files(k_log_files);

// Tabs and line ends would break a line: they become spaces on both sides
// of a match.
void put_field(std::string& out, std::string_view s) {
  for (char c : s) out.push_back(c == '\t' || c == '\n' || c == '\r' ? ' ' : c);
}

std::string utc_now() {
  const time_t t = ::time(nullptr);
  struct tm tm;
  char buf[32];
  ::gmtime_r(&t, &tm);
  ::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The log, open and locked, the very file at its path; -1 when there is
// none (and `create` is false), another holder has it, or it cannot be had.
int open_locked(const std::string& log, bool create) {
  for (int tries = 0; tries < 16; ++tries) {
    const int fd = ::open(log.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0600);
    if (fd < 0) return -1;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      return -1;  // held: its holder's lines are alive; look again next time
    }
    struct stat held, now;
    if (::fstat(fd, &held) == 0 && ::stat(log.c_str(), &now) == 0 && held.st_dev == now.st_dev &&
        held.st_ino == now.st_ino) {
      return fd;
    }
    ::close(fd);  // removed (or replaced) by its last holder: the path's file now
  }
  return -1;
}

std::string read_all(int fd) {
  std::string text;
  char buf[8192];
  for (ssize_t n; (n = ::pread(fd, buf, sizeof buf, static_cast<off_t>(text.size()))) > 0 && text.size() < (4u << 20);) {
    text.append(buf, static_cast<std::size_t>(n));
  }
  return text;
}

// Leaves `text` as the log's content, or removes the log when it is empty.
// The lock is held; closing `fd` releases it.
void put_back(const std::string& log, int fd, const std::string& text) {
  if (text.empty()) {
    ::unlink(log.c_str());
  } else if (::ftruncate(fd, 0) == 0) {
    (void)!::pwrite(fd, text.data(), text.size(), 0);
  }
  ::close(fd);
}

bool alive(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

std::vector<std::string_view> split_tabs(std::string_view line) {
  std::vector<std::string_view> out;
  for (std::size_t at = 0;;) {
    const std::size_t tab = line.find('\t', at);
    out.push_back(line.substr(at, tab == std::string_view::npos ? std::string_view::npos : tab - at));
    if (tab == std::string_view::npos) return out;
    at = tab + 1;
  }
}

}  // namespace

std::string crash_log_path(const std::string& store_path) {
  std::string log = store_path;
  if (log.ends_with(".txt")) log.resize(log.size() - 4);
  return log + ".loading";
}

HeldLog hold_log(const std::string& log) {
  HeldLog h;
  if (log.empty()) return h;
  h.fd = open_locked(log, true);
  struct stat st;
  if (h.fd >= 0 && ::fstat(h.fd, &st) == 0) {
    h.size = static_cast<std::uint64_t>(st.st_size);
    h.pid = static_cast<long>(::getpid());
  } else if (h.fd >= 0) {
    ::close(h.fd);
    h.fd = -1;
  }
  return h;
}

std::uint64_t mark_begin(HeldLog& held, std::string_view name, std::string_view value, const FileStamp& stamp) {
  const std::uint64_t before = held.size;
  if (!held.held()) return before;
  std::string line = std::to_string(held.pid) + '\t' + utc_now() + '\t' + std::to_string(stamp.dev) + ':' +
                     std::to_string(stamp.ino) + ':' + std::to_string(stamp.size) + ':' +
                     std::to_string(stamp.mtime_ns) + ':' + std::to_string(stamp.ctime_ns) + '\t';
  put_field(line, name);
  line.push_back('\t');
  put_field(line, value);
  line.push_back('\n');
  if (::pwrite(held.fd, line.data(), line.size(), static_cast<off_t>(held.size)) == static_cast<ssize_t>(line.size())) {
    held.size += line.size();  // an init it runs may load another backend: its line goes after
  }
  return before;
}

void mark_end(HeldLog& held, std::uint64_t before) {
  if (!held.held() || held.size == before) return;
  if (::ftruncate(held.fd, static_cast<off_t>(before)) == 0) held.size = before;
}

void release_log(const std::string& log, HeldLog& held) {
  if (!held.held()) return;
  if (held.size == 0) ::unlink(log.c_str());  // under the lock: a next holder opens a new one
  ::close(held.fd);
  held.fd = -1;
}

std::vector<Crash> collect_crashes(const std::string& log) {
  std::vector<Crash> crashes;
  if (log.empty()) return crashes;
  const int fd = open_locked(log, false);
  if (fd < 0) return crashes;  // no init under way anywhere: the common case, one failed open
  const std::string text = read_all(fd);
  std::string kept;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t nl = text.find('\n', at);
    if (nl == std::string::npos) break;  // a torn last line: dropped
    const std::string_view line(text.data() + at, nl - at + 1);
    at = nl + 1;
    const auto f = split_tabs(line.substr(0, line.size() - 1));
    if (f.size() != 5) continue;
    const long pid = std::strtol(std::string(f[0]).c_str(), nullptr, 10);
    if (pid == ::getpid() || alive(pid)) {
      kept.append(line);  // an init under way in a live process
      continue;
    }
    Crash c;
    c.pid = pid;
    c.when.assign(f[1]);
    c.name.assign(f[3]);
    c.value.assign(f[4]);
    unsigned long long v[3] = {};
    long long t[2] = {};
    const std::string st(f[2]);
    if (std::sscanf(st.c_str(), "%llu:%llu:%llu:%lld:%lld", &v[0], &v[1], &v[2], &t[0], &t[1]) != 5) continue;
    c.stamp.dev = v[0];
    c.stamp.ino = v[1];
    c.stamp.size = v[2];
    c.stamp.mtime_ns = t[0];
    c.stamp.ctime_ns = t[1];
    crashes.push_back(std::move(c));
  }
  put_back(log, fd, kept);
  return crashes;
}

std::string crash_message(const Crash& c) {
  return std::string(k_crash_prefix) + c.when + ": process " + std::to_string(c.pid) +
         " died in its init (a crash: a signal such as SIGSEGV, or an abort); lazy loading skips it until its "
         "files change or EPLOAD_ENABLE names it";
}

std::string_view crash_time(std::string_view failure) {
  if (!is_crash(failure)) return {};
  failure.remove_prefix(k_crash_prefix.size());
  return failure.substr(0, failure.find(": "));
}

}  // namespace epload::detail
