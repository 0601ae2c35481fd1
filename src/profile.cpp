// profile.cpp — recording spans and counters, and writing Chrome traces.
//
// Spans are appended to one vector under a mutex: profiling runs record
// hundreds to a few thousand spans, so contention is irrelevant, while the
// off path (the only one that matters for speed) never reaches this file
// beyond the inline enabled() check.  Timestamps are CLOCK_MONOTONIC; the
// trace converts them to microseconds relative to the first span, as the
// trace-event format expects ("ts"/"dur" in µs, complete events "ph":"X").
#include "epload/profile.hpp"

#include <fcntl.h>   // open
#include <time.h>    // clock_gettime
#include <unistd.h>  // write, close, getpid

#include <algorithm>  // sort
#include <cstdio>     // snprintf, rename
#include <cstdlib>    // getenv, atexit
#include <cstring>    // strerror
#include <mutex>      // recording lock

namespace epload::profile {

namespace detail {
std::atomic<int> g_state{-1};
}  // namespace detail

namespace {

struct Recorder {
  std::mutex mutex;
  std::vector<Event> events;
  std::atomic<std::uint64_t> counters[static_cast<int>(Counter::count_)] = {};
  std::string trace_path;  // EPLOAD_TRACE
  std::atomic<std::uint32_t> next_tid{0};
};

Recorder& recorder() {
  static Recorder* r = new Recorder;  // never destroyed: spans may end during exit
  return *r;
}

std::uint32_t thread_number() {
  thread_local std::uint32_t tid = recorder().next_tid.fetch_add(1) + 1;
  return tid;
}

void write_trace_at_exit() {
  std::string error;
  const std::string& path = recorder().trace_path;
  if (!path.empty() && !write_trace(path, &error)) {
    // The one place the library reports on its own: nobody is left to ask.
    std::fprintf(stderr, "epload: EPLOAD_TRACE: %s\n", error.c_str());
  }
}

void append_escaped(std::string& out, std::string_view s) {
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
}

}  // namespace

bool detail::decide() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* path = std::getenv("EPLOAD_TRACE");
    if (path && *path) {
      recorder().trace_path = path;
      std::atexit(write_trace_at_exit);
      g_state.store(1);
    } else {
      int expected = -1;
      g_state.compare_exchange_strong(expected, 0);
    }
  });
  return g_state.load(std::memory_order_relaxed) > 0;
}

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::cache_key: return "cache_key";
    case Phase::stat: return "stat";
    case Phase::read: return "read";
    case Phase::parse: return "parse";
    case Phase::scan: return "scan";
    case Phase::resolve: return "resolve";
    case Phase::dlopen: return "dlopen";
    case Phase::init: return "init";
    case Phase::py_import: return "py_import";
    case Phase::py_call: return "py_call";
    case Phase::total: return "total";
  }
  return "?";
}

void enable() {
  recorder();
  detail::g_state.store(1);
}

void reset() {
  detail::g_state.store(0);
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  r.events.clear();
  for (auto& c : r.counters) c.store(0);
}

void count(Counter c, std::uint64_t n) {
  if (enabled()) recorder().counters[static_cast<int>(c)].fetch_add(n, std::memory_order_relaxed);
}

std::uint64_t counter(Counter c) { return recorder().counters[static_cast<int>(c)].load(); }

std::vector<Event> events() {
  Recorder& r = recorder();
  std::vector<Event> out;
  {
    std::lock_guard lock(r.mutex);
    out = r.events;
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Event& a, const Event& b) { return a.start_ns < b.start_ns; });
  return out;
}

std::int64_t now_ns() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void Span::begin(Phase phase, std::string_view detail) {
  m_active = true;
  m_phase = phase;
  m_detail.assign(detail);
  m_start = now_ns();
}

void Span::end() {
  const std::int64_t end = now_ns();
  Recorder& r = recorder();
  Event e{m_phase, std::move(m_detail), m_start, end - m_start, thread_number()};
  std::lock_guard lock(r.mutex);
  r.events.push_back(std::move(e));
}

bool write_trace(const std::string& path, std::string* error) {
  std::vector<Event> evs = events();
  const std::int64_t origin = evs.empty() ? 0 : evs.front().start_ns;
  const int pid = static_cast<int>(::getpid());
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                "\"args\":{\"name\":\"epload\"}}",
                pid);
  out += buf;
  for (const Event& e : evs) {
    out += ",\n{\"name\":\"";
    append_escaped(out, e.detail.empty() ? std::string_view(phase_name(e.phase)) : e.detail);
    std::snprintf(buf, sizeof buf,
                  "\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%u,"
                  "\"args\":{\"phase\":\"%s\"}}",
                  phase_name(e.phase), static_cast<double>(e.start_ns - origin) / 1000.0,
                  static_cast<double>(e.dur_ns) / 1000.0, pid, e.tid, phase_name(e.phase));
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "\n],\"otherData\":{\"stat\":%llu,\"open\":%llu,\"read\":%llu}}\n",
                static_cast<unsigned long long>(counter(Counter::stat)),
                static_cast<unsigned long long>(counter(Counter::open)),
                static_cast<unsigned long long>(counter(Counter::read)));
  out += buf;

  const std::string tmp = path + ".tmp." + std::to_string(pid);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (error) *error = "cannot write trace " + tmp + ": " + std::strerror(errno);
    return false;
  }
  std::size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::write(fd, out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (error) *error = "cannot write trace " + tmp + ": " + std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    if (error) *error = "cannot rename trace to " + path + ": " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace epload::profile
