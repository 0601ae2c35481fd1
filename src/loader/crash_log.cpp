// crash_log.cpp — see crash_log.hpp.
//
// Line format (one write(2) per mark, O_APPEND, so marks of concurrent
// processes never interleave within a line):
//
//   b|e <TAB> pid <TAB> time <TAB> dev:ino:size:mtime_ns:ctime_ns <TAB> name <TAB> value
//
// A begin without its end, whose process no longer exists, is a crash.  The
// collector renames the log to a name of its own first, so that marks
// written meanwhile go to a new log; begins of live processes are written
// back there (their end may already be in it: marks are matched as a
// multiset, in any order).
#include "crash_log.hpp"

#include <fcntl.h>   // open
#include <signal.h>  // kill
#include <time.h>    // gmtime_r
#include <unistd.h>  // write, getpid

#include <cerrno>  // errno
#include <cstdio>  // sscanf
#include <cstdlib> // strtol
#include <map>     // pending marks

#include "atomic_file.hpp"  // dir_name, make_safe_dir
#include "kept_files.hpp"   // keep_files

namespace epload::detail {

namespace {

constexpr KeptFiles k_log_files{"learned-", ".loading"};
[[maybe_unused]] const bool k_log_files_kept = keep_files(k_log_files);

// Tabs and line ends would break a line: they become spaces on both sides
// of a match.
void put_field(std::string& out, std::string_view s) {
  for (char c : s) out.push_back(c == '\t' || c == '\n' || c == '\r' ? ' ' : c);
}

std::string stamp_text(const FileStamp& st) {
  return std::to_string(st.dev) + ':' + std::to_string(st.ino) + ':' + std::to_string(st.size) + ':' +
         std::to_string(st.mtime_ns) + ':' + std::to_string(st.ctime_ns);
}

std::string utc_now() {
  const time_t t = ::time(nullptr);
  struct tm tm;
  char buf[32];
  ::gmtime_r(&t, &tm);
  ::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool append(const std::string& log, const std::string& line) {
  int fd = ::open(log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 && errno == ENOENT && make_safe_dir(dir_name(log))) {
    fd = ::open(log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  }
  if (fd < 0) return false;
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  return ok;
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

void mark_init(const std::string& log, bool begin, std::string_view name, std::string_view value,
               const FileStamp& stamp) {
  if (log.empty()) return;
  std::string line = begin ? "b\t" : "e\t";
  line += std::to_string(::getpid()) + '\t' + (begin ? utc_now() : std::string("-")) + '\t' + stamp_text(stamp) + '\t';
  put_field(line, name);
  line.push_back('\t');
  put_field(line, value);
  line.push_back('\n');
  (void)append(log, line);
}

std::vector<Crash> collect_crashes(const std::string& log) {
  std::vector<Crash> crashes;
  if (log.empty()) return crashes;
  const std::string taken = log + "." + std::to_string(::getpid());
  if (::rename(log.c_str(), taken.c_str()) != 0) return crashes;  // none: the common case
  std::string text;
  {
    const int fd = ::open(taken.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
      char buf[8192];
      for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0 && text.size() < (4u << 20);) text.append(buf, n);
      ::close(fd);
    }
  }
  ::unlink(taken.c_str());
  // (pid, stamp, name, value) -> begins minus ends, and the begin's line.
  std::map<std::string, std::pair<int, std::string>> pending;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t nl = text.find('\n', at);
    if (nl == std::string::npos) break;  // a torn last line: ignored
    const std::string_view line(text.data() + at, nl - at);
    at = nl + 1;
    const auto f = split_tabs(line);
    if (f.size() != 6 || (f[0] != "b" && f[0] != "e")) continue;
    std::string key(f[1]);
    key.append("\t").append(f[3]).append("\t").append(f[4]).append("\t").append(f[5]);
    auto& p = pending[key];
    if (f[0] == "b") {
      ++p.first;
      p.second.assign(line);
    } else {
      --p.first;
    }
  }
  for (const auto& [key, p] : pending) {
    if (p.first <= 0 || p.second.empty()) continue;
    const auto f = split_tabs(p.second);
    const long pid = std::strtol(std::string(f[1]).c_str(), nullptr, 10);
    if (pid == ::getpid() || alive(pid)) {
      for (int k = 0; k < p.first; ++k) (void)append(log, p.second + "\n");
      continue;
    }
    Crash c;
    c.pid = pid;
    c.when.assign(f[2]);
    c.name.assign(f[4]);
    c.value.assign(f[5]);
    std::uint64_t v[5] = {};
    const std::string st(f[3]);
    if (std::sscanf(st.c_str(), "%lu:%lu:%lu:%lu:%lu", &v[0], &v[1], &v[2], &v[3], &v[4]) != 5) continue;
    c.stamp.dev = v[0];
    c.stamp.ino = v[1];
    c.stamp.size = v[2];
    c.stamp.mtime_ns = static_cast<std::int64_t>(v[3]);
    c.stamp.ctime_ns = static_cast<std::int64_t>(v[4]);
    crashes.push_back(std::move(c));
  }
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
