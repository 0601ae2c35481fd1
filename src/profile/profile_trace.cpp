// profile_trace.cpp — trace files: writing (Chrome trace-event JSON),
// reading them back, merging several processes' traces, and the summary
// `epload profile` prints.
//
// The writer emits one complete event ("ph":"X") per span, preceded by
// process_name / thread_name metadata events, and the system-call counters
// under "otherData".  Timestamps stay absolute CLOCK_MONOTONIC microseconds:
// every process on the machine shares that clock, so the traces of a Python
// program and of the epload processes it starts merge by concatenation, and
// Perfetto and chrome://tracing show them on one time axis.
//
// The reader is a small recursive-descent JSON parser (the trace format is
// the only JSON it needs to read, and simdjson stays confined to cache.cpp):
// it accepts any valid JSON, keeps the complete events whose "cat" is a
// phase, and reports the byte offset of the first defect.
//
// summarize() reconstructs the span tree per (pid, tid): sorted by start
// (longest first on ties), a stack of open spans gives each span its direct
// parent, so self time is duration minus the direct children's durations.
// A phase's total counts nested spans of the same phase once (a `total`
// inside a `total` is not double-counted).
#include <fcntl.h>     // open
#include <sys/stat.h>  // fstat
#include <unistd.h>    // read, write, close

#include <algorithm>      // sort
#include <cerrno>         // errno
#include <cmath>          // llround
#include <cstdio>         // snprintf
#include <cstring>        // strerror
#include <map>            // per-thread grouping, per-backend totals
#include <unordered_map>  // backend lookup

#include "atomic_file.hpp"  // write_atomic
#include "epload/profile.hpp"
#include "json_text.hpp"
#include "profile_internal.hpp"
#include "profile_trace.hpp"
#include "utf8.hpp"

namespace epload::profile {

namespace {

constexpr int k_counters = static_cast<int>(Counter::count_);

// ---- a small JSON reader ------------------------------------------------------

struct Json {
  enum Kind : std::uint8_t { null_v, bool_v, number_v, string_v, array_v, object_v } kind = null_v;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  // Special members declared here, the destructor defined below: clang with
  // libstdc++ 12 otherwise instantiates ~vector<pair<string, Json>> while
  // Json is still incomplete, which pair does not allow.
  Json() = default;
  Json(Json&&) noexcept = default;
  Json& operator=(Json&&) noexcept = default;
  ~Json();

  const Json* get(std::string_view key) const;
};

Json::~Json() = default;

const Json* Json::get(std::string_view key) const {
  for (const auto& [k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : m_s(text) {}

  bool parse(Json& out, std::string& error) {
    if (!value(out, 0)) {
      error = m_error + " at byte " + std::to_string(m_at);
      return false;
    }
    skip();
    if (m_at != m_s.size()) {
      error = "unexpected text after the JSON value at byte " + std::to_string(m_at);
      return false;
    }
    return true;
  }

 private:
  void skip() {
    while (m_at < m_s.size() && (m_s[m_at] == ' ' || m_s[m_at] == '\n' || m_s[m_at] == '\r' || m_s[m_at] == '\t')) {
      ++m_at;
    }
  }
  bool fail(const char* what) {
    m_error = what;
    return false;
  }
  bool literal(std::string_view word) {
    if (m_s.substr(m_at, word.size()) != word) return fail("invalid literal");
    m_at += word.size();
    return true;
  }

  bool value(Json& v, int depth) {
    if (depth > 64) return fail("nested too deeply");
    skip();
    if (m_at >= m_s.size()) return fail("unexpected end of file");
    const char c = m_s[m_at];
    if (c == '{') return object(v, depth);
    if (c == '[') return array(v, depth);
    if (c == '"') {
      v.kind = Json::string_v;
      return string(v.text);
    }
    if (c == 't') {
      v.kind = Json::bool_v;
      v.boolean = true;
      return literal("true");
    }
    if (c == 'f') {
      v.kind = Json::bool_v;
      return literal("false");
    }
    if (c == 'n') return literal("null");
    return number(v);
  }

  bool number(Json& v) {
    const std::size_t start = m_at;
    if (m_at < m_s.size() && m_s[m_at] == '-') ++m_at;
    bool digits = false;
    while (m_at < m_s.size() && ((m_s[m_at] >= '0' && m_s[m_at] <= '9') || m_s[m_at] == '.' ||
                                 m_s[m_at] == 'e' || m_s[m_at] == 'E' || m_s[m_at] == '+' ||
                                 m_s[m_at] == '-')) {
      digits = digits || (m_s[m_at] >= '0' && m_s[m_at] <= '9');
      ++m_at;
    }
    if (!digits) {
      m_at = start;
      return fail("expected a value");
    }
    const std::string text(m_s.substr(start, m_at - start));
    char* end = nullptr;
    v.kind = Json::number_v;
    v.number = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) {
      m_at = start;
      return fail("invalid number");
    }
    return true;
  }

  bool hex4(std::uint32_t& cp) {
    if (m_at + 4 > m_s.size()) return fail("truncated \\u escape");
    cp = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = m_s[m_at++];
      cp <<= 4;
      if (h >= '0' && h <= '9') cp |= static_cast<std::uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') cp |= static_cast<std::uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') cp |= static_cast<std::uint32_t>(h - 'A' + 10);
      else return fail("invalid \\u escape");
    }
    return true;
  }

  bool string(std::string& out) {
    ++m_at;  // opening quote
    for (;;) {
      if (m_at >= m_s.size()) return fail("unterminated string");
      const char c = m_s[m_at++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (m_at >= m_s.size()) return fail("unterminated string");
      const char e = m_s[m_at++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          std::uint32_t cp;
          if (!hex4(cp)) return false;
          if (cp >= 0xd800 && cp < 0xdc00 && m_s.substr(m_at, 2) == "\\u") {
            m_at += 2;
            std::uint32_t low;
            if (!hex4(low)) return false;
            if (low < 0xdc00 || low >= 0xe000) return fail("invalid surrogate pair");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          }
          epload::detail::append_utf8(static_cast<char32_t>(cp), out);
          break;
        }
        default: return fail("invalid escape");
      }
    }
  }

  // After a container's opening bracket: true (`close` consumed) when the
  // container is empty.
  bool opens_empty(char close) {
    ++m_at;
    skip();
    if (m_at < m_s.size() && m_s[m_at] == close) {
      ++m_at;
      return true;
    }
    return false;
  }

  // After an item of a container: ',' (another follows: `more`) or `close`
  // (the end) is consumed; anything else is the error `expected`.
  bool next_item(char close, bool& more, const char* unterminated, const char* expected) {
    skip();
    if (m_at >= m_s.size()) return fail(unterminated);
    if (m_s[m_at] != ',' && m_s[m_at] != close) return fail(expected);
    more = m_s[m_at++] == ',';
    return true;
  }

  bool array(Json& v, int depth) {
    v.kind = Json::array_v;
    if (opens_empty(']')) return true;
    for (bool more = true; more;) {
      v.items.emplace_back();
      if (!value(v.items.back(), depth + 1)) return false;
      if (!next_item(']', more, "unterminated array", "expected ',' or ']'")) return false;
    }
    return true;
  }

  bool object(Json& v, int depth) {
    v.kind = Json::object_v;
    if (opens_empty('}')) return true;
    for (bool more = true; more;) {
      skip();
      if (m_at >= m_s.size() || m_s[m_at] != '"') return fail("expected a member name");
      std::string key;
      if (!string(key)) return false;
      skip();
      if (m_at >= m_s.size() || m_s[m_at] != ':') return fail("expected ':'");
      ++m_at;
      v.members.emplace_back(std::move(key), Json());
      if (!value(v.members.back().second, depth + 1)) return false;
      if (!next_item('}', more, "unterminated object", "expected ',' or '}'")) return false;
    }
    return true;
  }

  std::string_view m_s;
  std::size_t m_at = 0;
  std::string m_error;
};

Result<std::string> slurp(const std::string& path) {
  // O_NONBLOCK and a type check: a FIFO in a trace's place must not hang.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Error{Errc::io, "cannot open trace " + path + ": " + std::strerror(errno)};
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error{Errc::io, "trace " + path + " is not a regular file"};
  }
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return Error{Errc::io, "cannot read trace " + path + ": " + std::strerror(err)};
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

std::int64_t us_to_ns(double us) { return static_cast<std::int64_t>(std::llround(us * 1000.0)); }

// Start order, the longest first on ties: a parent before its children.
bool starts_before(const Event& a, const Event& b) {
  return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.dur_ns > b.dur_ns;
}

// What summarize() adds up: self and total time per phase, and per backend
// (a span's subject names it) its resolve, dlopen, init, import, call and
// load times.
class Totals {
 public:
  Totals() {
    for (int k = 0; k < k_phase_count; ++k) m_phases[k].phase = static_cast<Phase>(k);
  }

  // One thread's spans, sorted here into start order: a stack of the open
  // spans gives each its direct parent, so self time is duration minus the
  // direct children's durations.
  void add_thread(std::vector<const Event*>& list) {
    std::stable_sort(list.begin(), list.end(), [](const Event* a, const Event* b) { return starts_before(*a, *b); });
    std::vector<Open> stack;
    for (const Event* e : list) {
      const std::int64_t end = e->start_ns + e->dur_ns;
      while (!stack.empty() && !(e->start_ns >= stack.back().e->start_ns &&
                                 end <= stack.back().e->start_ns + stack.back().e->dur_ns)) {
        close(stack.back());
        stack.pop_back();
      }
      bool same_phase_above = false;
      for (const Open& o : stack) same_phase_above = same_phase_above || o.e->phase == e->phase;
      PhaseTotal& p = m_phases[static_cast<int>(e->phase)];
      ++p.count;
      if (!same_phase_above) p.total_ns += e->dur_ns;
      if (!stack.empty()) stack.back().children += e->dur_ns;
      stack.push_back({e, 0});
      if (!e->subject.empty()) add_backend_span(*e);
    }
    while (!stack.empty()) {
      close(stack.back());
      stack.pop_back();
    }
  }

  // The phases seen and the backends loaded, costliest first, into `s`.
  void finish(Summary& s) {
    for (const PhaseTotal& p : m_phases) {
      if (p.count != 0) s.phases.push_back(p);
    }
    std::stable_sort(s.phases.begin(), s.phases.end(),
                     [](const PhaseTotal& a, const PhaseTotal& b) { return a.self_ns > b.self_ns; });
    for (BackendTotal& b : m_backends) {
      if (b.loads != 0) s.backends.push_back(std::move(b));
    }
    std::stable_sort(s.backends.begin(), s.backends.end(),
                     [](const BackendTotal& a, const BackendTotal& b) { return a.load_ns > b.load_ns; });
  }

 private:
  struct Open {
    const Event* e;
    std::int64_t children = 0;
  };

  void close(const Open& o) {
    PhaseTotal& p = m_phases[static_cast<int>(o.e->phase)];
    p.self_ns += std::max<std::int64_t>(0, o.e->dur_ns - o.children);
  }

  BackendTotal& backend(const std::string& name, std::int64_t start) {
    auto [it, added] = m_backend_at.emplace(name, m_backends.size());
    if (added) {
      m_backends.emplace_back();
      m_backends.back().name = name;
      m_backends.back().first_start_ns = start;
    }
    return m_backends[it->second];
  }

  void add_backend_span(const Event& e) {
    switch (e.phase) {
      case Phase::load: {
        BackendTotal& b = backend(e.subject, e.start_ns);
        ++b.loads;
        b.load_ns += e.dur_ns;
        break;
      }
      case Phase::resolve: backend(e.subject, e.start_ns).resolve_ns += e.dur_ns; break;
      case Phase::dlopen: backend(e.subject, e.start_ns).dlopen_ns += e.dur_ns; break;
      case Phase::init: backend(e.subject, e.start_ns).init_ns += e.dur_ns; break;
      case Phase::py_import: backend(e.subject, e.start_ns).import_ns += e.dur_ns; break;
      case Phase::py_call: backend(e.subject, e.start_ns).call_ns += e.dur_ns; break;
      default: break;
    }
  }

  PhaseTotal m_phases[k_phase_count];
  std::vector<BackendTotal> m_backends;
  std::unordered_map<std::string, std::size_t> m_backend_at;
};

}  // namespace

void detail::sort_events(std::vector<Event>& evs) { std::stable_sort(evs.begin(), evs.end(), starts_before); }

// ---- writing -------------------------------------------------------------------

bool write_trace(const Trace& t, const std::string& path, std::string* error) {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  char buf[256];
  bool first = true;
  auto sep = [&] {
    out += first ? "\n" : ",\n";
    first = false;
  };
  for (std::size_t k = 0; k < t.pids.size(); ++k) {
    sep();
    std::snprintf(buf, sizeof buf, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"",
                  t.pids[k]);
    out += buf;
    epload::detail::append_json_escaped(out, k < t.process_names.size() ? t.process_names[k] : std::string("epload"));
    out += "\"}}";
  }
  std::map<std::pair<std::int32_t, std::uint32_t>, bool> threads;
  for (const Event& e : t.events) threads[{e.pid, e.tid}] = true;
  for (const auto& [key, unused] : threads) {
    sep();
    std::snprintf(buf, sizeof buf,
                  "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":\"thread %u\"}}",
                  key.first, key.second, key.second);
    out += buf;
  }
  for (const Event& e : t.events) {
    sep();
    out += "{\"name\":\"";
    epload::detail::append_json_escaped(out, e.subject.empty() ? std::string_view(phase_name(e.phase)) : std::string_view(e.subject));
    // Microseconds with nanosecond digits: exact, and what viewers expect.
    std::snprintf(buf, sizeof buf,
                  "\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%lld.%03lld,\"dur\":%lld.%03lld,\"pid\":%d,\"tid\":%u,"
                  "\"args\":{\"phase\":\"%s\"}}",
                  phase_name(e.phase), static_cast<long long>(e.start_ns / 1000),
                  static_cast<long long>(e.start_ns % 1000), static_cast<long long>(e.dur_ns / 1000),
                  static_cast<long long>(e.dur_ns % 1000), e.pid, e.tid, phase_name(e.phase));
    out += buf;
  }
  out += "\n],\"otherData\":{\"clock\":\"CLOCK_MONOTONIC\"";
  for (int k = 0; k < k_counters; ++k) {
    std::snprintf(buf, sizeof buf, ",\"%s\":%llu", counter_name(static_cast<Counter>(k)),
                  static_cast<unsigned long long>(t.counters[k]));
    out += buf;
  }
  out += "}}\n";

  if (auto r = epload::detail::write_atomic(path, {out}, 0644); !r) {
    if (error) *error = "cannot write trace " + path + ": " + r.error().message;
    return false;
  }
  return true;
}

// ---- reading ---------------------------------------------------------------------

Result<Trace> read_trace(const std::string& path) {
  auto text = slurp(path);
  if (!text) return text.error();
  Json root;
  std::string why;
  if (!JsonReader(*text).parse(root, why)) {
    return Error{Errc::parse, "trace " + path + " is not valid JSON: " + why};
  }
  const Json* list = root.kind == Json::object_v ? root.get("traceEvents") : &root;  // both forms are valid
  if (list == nullptr || list->kind != Json::array_v) {
    return Error{Errc::parse, "trace " + path + " has no \"traceEvents\" array (not a trace-event file)"};
  }
  Trace t;
  auto note_pid = [&](std::int32_t pid, const std::string* name) {
    auto it = std::find(t.pids.begin(), t.pids.end(), pid);
    if (it == t.pids.end()) {
      t.pids.push_back(pid);
      t.process_names.push_back(name ? *name : std::string());
    } else if (name) {
      t.process_names[static_cast<std::size_t>(it - t.pids.begin())] = *name;
    }
  };
  std::size_t index = 0;
  for (const Json& ev : list->items) {
    ++index;
    if (ev.kind != Json::object_v) {
      return Error{Errc::parse, "trace " + path + ": event " + std::to_string(index) + " is not an object"};
    }
    const Json* ph = ev.get("ph");
    const Json* pid = ev.get("pid");
    if (ph == nullptr || ph->kind != Json::string_v) continue;
    if (ph->text == "M") {
      const Json* name = ev.get("name");
      const Json* args = ev.get("args");
      const Json* label = args ? args->get("name") : nullptr;
      if (name && name->text == "process_name" && pid && pid->kind == Json::number_v && label &&
          label->kind == Json::string_v) {
        note_pid(static_cast<std::int32_t>(pid->number), &label->text);
      }
      continue;
    }
    if (ph->text != "X") continue;
    const Json* name = ev.get("name");
    const Json* cat = ev.get("cat");
    const Json* ts = ev.get("ts");
    const Json* dur = ev.get("dur");
    const Json* tid = ev.get("tid");
    if (!name || name->kind != Json::string_v || !ts || ts->kind != Json::number_v || !dur ||
        dur->kind != Json::number_v || !pid || pid->kind != Json::number_v || !tid || tid->kind != Json::number_v) {
      return Error{Errc::parse, "trace " + path + ": complete event " + std::to_string(index) +
                                    " lacks one of name, ts, dur, pid, tid"};
    }
    if (!cat || cat->kind != Json::string_v) continue;
    const std::optional<Phase> phase = parse_phase(cat->text);
    if (!phase) continue;  // someone else's event
    Event e;
    e.phase = *phase;
    e.subject = name->text == phase_name(*phase) ? std::string() : name->text;
    e.start_ns = us_to_ns(ts->number);
    e.dur_ns = us_to_ns(dur->number);
    e.pid = static_cast<std::int32_t>(pid->number);
    e.tid = static_cast<std::uint32_t>(tid->number);
    note_pid(e.pid, nullptr);
    t.events.push_back(std::move(e));
  }
  if (root.kind == Json::object_v) {
    if (const Json* other = root.get("otherData"); other && other->kind == Json::object_v) {
      for (int k = 0; k < k_counters; ++k) {
        const Json* c = other->get(counter_name(static_cast<Counter>(k)));
        if (c && c->kind == Json::number_v && c->number >= 0) t.counters[k] = static_cast<std::uint64_t>(c->number);
      }
    }
  }
  detail::sort_events(t.events);
  return t;
}

void merge(Trace& into, const Trace& from) {
  into.events.insert(into.events.end(), from.events.begin(), from.events.end());
  detail::sort_events(into.events);
  for (int k = 0; k < k_counters; ++k) into.counters[k] += from.counters[k];
  for (std::size_t k = 0; k < from.pids.size(); ++k) {
    if (std::find(into.pids.begin(), into.pids.end(), from.pids[k]) != into.pids.end()) continue;
    into.pids.push_back(from.pids[k]);
    into.process_names.push_back(k < from.process_names.size() ? from.process_names[k] : std::string());
  }
}

// ---- summary -------------------------------------------------------------------

Summary summarize(const std::vector<Event>& events) {
  Summary s;
  if (events.empty()) return s;
  std::map<std::pair<std::int32_t, std::uint32_t>, std::vector<const Event*>> threads;
  std::int64_t first = events.front().start_ns, last = first;
  for (const Event& e : events) {
    threads[{e.pid, e.tid}].push_back(&e);
    first = std::min(first, e.start_ns);
    last = std::max(last, e.start_ns + e.dur_ns);
  }
  s.wall_ns = last - first;
  Totals totals;
  for (auto& [key, list] : threads) totals.add_thread(list);
  totals.finish(s);
  return s;
}

}  // namespace epload::profile
