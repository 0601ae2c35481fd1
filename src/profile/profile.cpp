// profile.cpp — recording spans and counters, EPLOAD_TRACE.  (Reading, merging, writing and summarising traces:
// profile_trace.cpp.)
//
// Spans are appended to one vector under a mutex: profiling runs record
// hundreds to a few tens of thousands of spans, so contention is
// irrelevant, while the off path (the only one that matters for speed) never
// reaches this file beyond the inline enabled() check: one relaxed atomic
// load.  Timestamps are CLOCK_MONOTONIC nanoseconds, the clock Python's
// time.monotonic_ns() reads too, so spans timed by the Python layer and by
// other processes line up with the native ones.
//
// EPLOAD_TRACE is read once, at the first enabled() check.  The trace is
// written by an atexit handler (the Recorder is never destroyed, so spans
// that end during exit are still safe to record).  fork() is handled so
// that a child neither inherits its parent's events nor, unless the file
// name holds "%p", overwrites the parent's file.
#include "epload/profile.hpp"

#include <pthread.h>  // pthread_atfork
#include <time.h>     // clock_gettime
#include <unistd.h>   // getpid

#include <atomic>     // the on/off switch, counters
#include <iterator>   // size
#include <map>        // record_for thread keys
#include <cerrno>     // program_invocation_short_name
#include <cstdio>     // fprintf
#include <cstdlib>    // getenv, atexit, strtoll
#include <mutex>      // recording lock

#include "enum_names.hpp"
#include "profile_internal.hpp"
#include "profile_trace.hpp"  // write_trace of this process's spans

namespace epload::profile {

namespace {
std::atomic<int> g_state{-1};  // -1 not yet decided, 0 off, 1 on
}  // namespace

namespace {

constexpr int k_counters = static_cast<int>(Counter::count_);

struct Recorder {
  std::mutex mutex;
  std::vector<Event> events;
  std::atomic<std::uint64_t> counters[k_counters] = {};
  std::string trace_path;  // EPLOAD_TRACE, "%p" not yet replaced
  pid_t owner = 0;         // the process that read EPLOAD_TRACE
  std::atomic<std::uint32_t> next_tid{0};
  std::map<std::uint64_t, std::uint32_t> keyed_tids;  // record_for's keys (under mutex)
};

Recorder& recorder() {
  static Recorder* r = new Recorder;  // never destroyed: spans may end during exit
  return *r;
}

// Per-process thread numbers; a fork()ed child starts again at 1 (its only
// thread is the one that forked), so the generation is part of the key.
std::atomic<std::uint32_t> g_generation{0};

std::uint32_t thread_number() {
  thread_local std::uint32_t tid = 0;
  thread_local std::uint32_t generation = 0;
  const std::uint32_t g = g_generation.load(std::memory_order_relaxed);
  if (tid == 0 || generation != g) {
    tid = recorder().next_tid.fetch_add(1) + 1;
    generation = g;
  }
  return tid;
}

void at_fork_prepare() { recorder().mutex.lock(); }
void at_fork_parent() { recorder().mutex.unlock(); }
void at_fork_child() {
  Recorder& r = recorder();
  r.mutex.unlock();
  r.events.clear();  // the child records its own story
  for (auto& c : r.counters) c.store(0);
  r.next_tid.store(0);
  r.keyed_tids.clear();
  g_generation.fetch_add(1);
}

void install_fork_handlers() {
  static std::once_flag once;
  std::call_once(once, [] { ::pthread_atfork(at_fork_prepare, at_fork_parent, at_fork_child); });
}

void write_trace_at_exit() {
  Recorder& r = recorder();
  if (r.trace_path.empty()) return;
  const bool per_process = r.trace_path.find("%p") != std::string::npos;
  if (!per_process && ::getpid() != r.owner) return;  // a fork()ed child: the parent's file
  std::string error;
  if (!write_trace(detail::expand_trace_path(r.trace_path, ::getpid()), &error)) {
    // The one place the library reports on its own: nobody is left to ask.
    std::fprintf(stderr, "epload: EPLOAD_TRACE: %s\n", error.c_str());
  }
}

}  // namespace

namespace {

// Reads EPLOAD_TRACE once.
bool decide() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* path = std::getenv("EPLOAD_TRACE");
    if (path && *path) {
      Recorder& r = recorder();
      r.trace_path = path;
      r.owner = ::getpid();
      install_fork_handlers();
      std::atexit(write_trace_at_exit);
      g_state.store(1);
    } else {
      int expected = -1;
      g_state.compare_exchange_strong(expected, 0);
    }
  });
  return g_state.load(std::memory_order_relaxed) > 0;
}

}  // namespace

bool enabled() {
  const int s = g_state.load(std::memory_order_relaxed);
  return s > 0 || (s < 0 && decide());
}

std::string detail::expand_trace_path(const std::string& path, long pid) {
  std::string out;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%' && i + 1 < path.size() && path[i + 1] == 'p') {
      out += std::to_string(pid);
      ++i;
    } else {
      out.push_back(path[i]);
    }
  }
  return out;
}

const char* detail::process_label() { return program_invocation_short_name; }

namespace {
// Names by enum value, in the order profile.hpp declares Phase and Counter:
// one list for naming, parsing, trace files and reports.
constexpr const char* k_phase_names[] = {"cache_key", "stat",    "read",      "parse",   "scan",  "resolve",
                                         "dlopen",    "init",    "py_import", "py_call", "total", "load",
                                         "import"};
static_assert(std::size(k_phase_names) == k_phase_count, "a name for every Phase");
constexpr const char* k_counter_names[] = {"stat", "open", "read", "readdir"};
static_assert(std::size(k_counter_names) == static_cast<std::size_t>(Counter::count_), "a name for every Counter");
}  // namespace

const char* phase_name(Phase phase) { return epload::detail::enum_name(phase, k_phase_names); }

std::optional<Phase> parse_phase(std::string_view name) {
  return epload::detail::parse_enum<Phase>(name, k_phase_names);
}

const char* counter_name(Counter c) { return epload::detail::enum_name(c, k_counter_names); }

void enable() {
  recorder();
  install_fork_handlers();
  g_state.store(1);
}

void reset() {
  g_state.store(0);
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  r.events.clear();
  for (auto& c : r.counters) c.store(0);
}

void count(Counter c, std::uint64_t n) {
  if (enabled() && c < Counter::count_) recorder().counters[static_cast<int>(c)].fetch_add(n, std::memory_order_relaxed);
}

std::uint64_t counter(Counter c) {
  return c < Counter::count_ ? recorder().counters[static_cast<int>(c)].load() : 0;
}

void record(Phase phase, std::string_view subject, std::int64_t start_ns, std::int64_t dur_ns) {
  if (!enabled()) return;
  Event e{phase, std::string(subject), start_ns, dur_ns < 0 ? 0 : dur_ns, thread_number(), 0};
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  r.events.push_back(std::move(e));
}

void record_for(std::uint64_t thread_key, Phase phase, std::string_view subject, std::int64_t start_ns,
                std::int64_t dur_ns) {
  if (!enabled()) return;
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  auto [it, added] = r.keyed_tids.emplace(thread_key, 0);
  if (added) it->second = r.next_tid.fetch_add(1) + 1;
  r.events.push_back(Event{phase, std::string(subject), start_ns, dur_ns < 0 ? 0 : dur_ns, it->second, 0});
}

std::vector<Event> events() {
  Recorder& r = recorder();
  std::vector<Event> out;
  {
    std::lock_guard lock(r.mutex);
    out = r.events;
  }
  detail::sort_events(out);
  return out;
}

std::int64_t now_ns() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void Span::begin(Phase phase, std::string_view subject) {
  m_active = true;
  m_phase = phase;
  m_subject.assign(subject);
  m_start = now_ns();
}

void Span::end() {
  const std::int64_t end = now_ns();
  Recorder& r = recorder();
  Event e{m_phase, std::move(m_subject), m_start, end - m_start, thread_number(), 0};
  std::lock_guard lock(r.mutex);
  r.events.push_back(std::move(e));
}

bool write_trace(const std::string& path, std::string* error) {
  Trace t;
  const std::int32_t pid = static_cast<std::int32_t>(::getpid());
  t.events = events();
  for (Event& e : t.events) e.pid = pid;
  for (int k = 0; k < k_counters; ++k) t.counters[k] = counter(static_cast<Counter>(k));
  t.pids.push_back(pid);
  t.process_names.push_back(detail::process_label());
  return write_trace(t, path, error);
}

}  // namespace epload::profile
