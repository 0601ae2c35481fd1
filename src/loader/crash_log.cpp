// crash_log.cpp — see crash_log.hpp.
//
// Line format:
//
//   pid <TAB> time <TAB> dev:ino:size:mtime_ns:ctime_ns <TAB> name <TAB> value
//
// One line per init that died of a fatal signal, appended by the dying
// process's handler (O_APPEND, under flock when it can be had, the file
// checked to be the one at the path).  The next process takes every line
// whose process is gone (under flock(LOCK_EX | LOCK_NB); a line of a
// process still dying stays for the one after) and removes the file when
// none is left.  Versions that wrote a line before each init and cut it
// off after wrote the same format: their lines read the same way.
#include "crash_log.hpp"

#include <fcntl.h>     // open
#include <pthread.h>   // pthread_self
#include <signal.h>    // sigaction, kill
#include <sys/file.h>  // flock
#include <sys/stat.h>  // fstat
#include <time.h>      // clock_gettime, nanosleep
#include <unistd.h>    // write, getpid

#include <atomic>   // the table of threads
#include <bit>      // bit_cast
#include <cerrno>   // errno
#include <cstdint>  // uintptr_t
#include <cstdio>   // sscanf
#include <cstdlib>  // strtol
#include <cstring>  // memcpy
#include <mutex>    // once_flag

#include "kept_files.hpp"  // keep_files

namespace epload::detail {

namespace {

// No magic: a log holds only its lines, so pruning and `index clear` never
// take one (its lines go when the next process with a store there reads
// them into the store).
constexpr KeptFiles k_log_files{"learned-", ".loading", {}};
[[maybe_unused]] const bool k_log_files_kept = keep_files(k_log_files);

// Tabs and line ends would break a line: they become spaces on both sides
// of a match.
void put_field(std::string& out, std::string_view s) {
  for (char c : s) out.push_back(c == '\t' || c == '\n' || c == '\r' ? ' ' : c);
}

// The log, open and locked, the very file at its path; -1 when there is
// none, another holder has it, or it cannot be had.
int open_locked(const std::string& log) {
  for (int tries = 0; tries < 16; ++tries) {
    const int fd = ::open(log.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
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

// ---- the fatal-signal handler ---------------------------------------------------
// Everything it touches is async-signal-safe: lock-free atomics, memory
// written before the init, and system calls.

constexpr int k_fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
constexpr int k_count = sizeof k_fatal / sizeof k_fatal[0];
struct sigaction g_previous[k_count];  // zero (SIG_DFL) until saved
std::once_flag g_installed;

// The threads inside an init, each with its innermost one: an entry is
// claimed by its thread at its outermost init and freed after it.  More
// threads in inits at once than entries: the others are not marked.
constexpr int k_entries = 64;
struct Entry {
  std::atomic<std::uintptr_t> thread{0};
  std::atomic<InitMark*> mark{nullptr};
};
Entry g_entries[k_entries];
static_assert(std::atomic<std::uintptr_t>::is_always_lock_free && std::atomic<InitMark*>::is_always_lock_free);
thread_local int t_entry = -1;  // this thread's entry (never read by the handler)

std::uintptr_t this_thread() noexcept {
  static_assert(sizeof(pthread_t) == sizeof(std::uintptr_t));
  return std::bit_cast<std::uintptr_t>(::pthread_self());
}

// Room before a line for "pid\ttime\t", filled in by the handler.
constexpr std::size_t k_head = 40;

// `v` in decimal, ending at `end`; returns its start.
char* put_number(char* end, unsigned long long v) noexcept {
  do {
    *--end = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  return end;
}

// `v` in exactly `width` digits at `at`; returns the end.
char* put_digits(char* at, unsigned long long v, int width) noexcept {
  for (int i = width - 1; i >= 0; --i, v /= 10) at[i] = static_cast<char>('0' + v % 10);
  return at + width;
}

// "2026-11-29T06:10:03Z" for `secs` since the epoch, into 20 bytes at `at`
// (the civil calendar from days, without gmtime: not async-signal-safe).
void put_utc(char* at, long long secs) noexcept {
  long long days = secs / 86400, rem = secs % 86400;
  if (rem < 0) rem += 86400, --days;
  const long long z = days + 719468;
  const long long era = (z >= 0 ? z : z - 146096) / 146097;
  const long long doe = z - era * 146097;
  const long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const long long mp = (5 * doy + 2) / 153;
  const long long d = doy - (153 * mp + 2) / 5 + 1;
  const long long m = mp < 10 ? mp + 3 : mp - 9;
  const long long y = yoe + era * 400 + (m <= 2 ? 1 : 0);
  at = put_digits(at, static_cast<unsigned long long>(y), 4);
  *at++ = '-';
  at = put_digits(at, static_cast<unsigned long long>(m), 2);
  *at++ = '-';
  at = put_digits(at, static_cast<unsigned long long>(d), 2);
  *at++ = 'T';
  at = put_digits(at, static_cast<unsigned long long>(rem / 3600), 2);
  *at++ = ':';
  at = put_digits(at, static_cast<unsigned long long>(rem / 60 % 60), 2);
  *at++ = ':';
  at = put_digits(at, static_cast<unsigned long long>(rem % 60), 2);
  *at = 'Z';
}

// Appends `data` to `log`, under its lock when it can be had soon (a
// reader holds it for one read and rewrite), to the very file at the path.
void append_line(const char* log, const char* data, std::size_t size) noexcept {
  for (int tries = 0; tries < 8; ++tries) {
    const int fd = ::open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return;
    for (int waits = 0; waits < 100 && ::flock(fd, LOCK_EX | LOCK_NB) != 0; ++waits) {
      const struct timespec ms = {0, 1000000};
      ::nanosleep(&ms, nullptr);
    }
    struct stat held, now;
    if (::fstat(fd, &held) != 0 || ::stat(log, &now) != 0 || held.st_dev != now.st_dev || held.st_ino != now.st_ino) {
      ::close(fd);  // removed by a reader that emptied it: the path's file now
      continue;
    }
    for (std::size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd, data + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
    return;
  }
}

// The line of the init under way in this thread, if any, appended; then
// the signal handed on as if this handler had never been installed: the
// previous action restored and, for a signal sent (abort(), raise, kill),
// sent again (delivered once this returns); a fault raises itself again
// when the faulting instruction runs again, with its own details.
void on_fatal(int sig, siginfo_t* info, void*) {
  const int saved_errno = errno;
  const std::uintptr_t self = this_thread();
  for (Entry& e : g_entries) {
    if (e.thread.load(std::memory_order_acquire) != self) continue;
    if (InitMark* m = e.mark.load(std::memory_order_acquire)) m->write_crash();
    break;
  }
  for (int i = 0; i < k_count; ++i) {
    if (k_fatal[i] == sig) (void)::sigaction(sig, &g_previous[i], nullptr);
  }
  if (info == nullptr || info->si_code <= 0) (void)::raise(sig);
  errno = saved_errno;
}

// A forked child has only the thread that forked: the others' entries
// would otherwise stay claimed, and match a new thread given the same id.
void forget_other_threads() {
  const std::uintptr_t self = this_thread();
  for (Entry& e : g_entries) {
    if (e.thread.load(std::memory_order_relaxed) == self) continue;
    e.mark.store(nullptr, std::memory_order_relaxed);
    e.thread.store(0, std::memory_order_release);
  }
}

void install_handlers() {
  (void)::pthread_atfork(nullptr, nullptr, forget_other_threads);
  for (int i = 0; i < k_count; ++i) {
    struct sigaction sa {};
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;  // the signal blocked while it runs: a fault inside ends the process
    sigemptyset(&sa.sa_mask);
    (void)::sigaction(k_fatal[i], &sa, &g_previous[i]);
  }
}

}  // namespace

InitMark::InitMark(const std::string& log, std::string_view name, std::string_view value, const FileStamp& stamp) {
  if (log.empty()) return;
  std::call_once(g_installed, install_handlers);
  m_log = log;
  m_line.assign(k_head, ' ');
  m_line += std::to_string(stamp.dev) + ':' + std::to_string(stamp.ino) + ':' + std::to_string(stamp.size) + ':' +
            std::to_string(stamp.mtime_ns) + ':' + std::to_string(stamp.ctime_ns) + '\t';
  put_field(m_line, name);
  m_line.push_back('\t');
  put_field(m_line, value);
  m_line.push_back('\n');
  if (t_entry >= 0) {  // inside another init of this thread: this one is the innermost
    m_entry = t_entry;
    m_outer = g_entries[m_entry].mark.load(std::memory_order_relaxed);
    g_entries[m_entry].mark.store(this, std::memory_order_release);
    return;
  }
  const std::uintptr_t self = this_thread();
  for (int i = 0; i < k_entries; ++i) {
    std::uintptr_t free = 0;
    if (g_entries[i].thread.load(std::memory_order_relaxed) == 0 &&
        g_entries[i].thread.compare_exchange_strong(free, self, std::memory_order_acq_rel)) {
      g_entries[i].mark.store(this, std::memory_order_release);
      m_entry = t_entry = i;
      return;
    }
  }
}

InitMark::~InitMark() {
  if (m_entry < 0) return;
  Entry& e = g_entries[m_entry];
  if (m_outer != nullptr) {
    e.mark.store(m_outer, std::memory_order_release);
    return;
  }
  e.mark.store(nullptr, std::memory_order_release);
  e.thread.store(0, std::memory_order_release);
  t_entry = -1;
}

void InitMark::write_crash() noexcept {
  // "pid\ttime\t" right-aligned in the room before the rest.
  char* const rest = m_line.data() + k_head;
  char* at = rest;
  *--at = '\t';
  at -= 20;
  struct timespec now {};
  (void)::clock_gettime(CLOCK_REALTIME, &now);
  put_utc(at, static_cast<long long>(now.tv_sec));
  *--at = '\t';
  at = put_number(at, static_cast<unsigned long long>(::getpid()));
  append_line(m_log.c_str(), at, m_line.size() - static_cast<std::size_t>(at - m_line.data()));
}

std::string crash_log_path(const std::string& store_path) {
  std::string log = store_path;
  if (log.ends_with(".txt")) log.resize(log.size() - 4);
  return log + ".loading";
}

std::vector<Crash> collect_crashes(const std::string& log) {
  std::vector<Crash> crashes;
  if (log.empty()) return crashes;
  const int fd = open_locked(log);
  if (fd < 0) return crashes;  // no crash: the common case, one failed open
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
         " died in its init (a fatal signal: SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT); lazy loading skips it "
         "until its files change or EPLOAD_ENABLE names it";
}

std::string_view crash_time(std::string_view failure) {
  if (!is_crash(failure)) return {};
  failure.remove_prefix(k_crash_prefix.size());
  return failure.substr(0, failure.find(": "));
}

}  // namespace epload::detail
